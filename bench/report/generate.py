"""scripts/bench-report: every benchmark's results (JSON, bench/report/README.md) into one
report, BENCHMARKS.md, and its plots, benchmarks/*.svg, in one output directory.

    scripts/bench-report                                   # docs/benchmarks/results -> docs/
    scripts/bench-report --results DIR --out DIR
    scripts/bench-report --results bench/report/sample --out bench/report/sample/out --check

--check rebuilds into a temporary directory and fails unless every file there is
byte-identical to the one in --out (and no file is missing or extra). A note.md beside the
results (what the run's command cannot say: the machine's load, a short run) opens the report.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

import markdown  # noqa: E402
import plots  # noqa: E402
from results import ResultsError, gather  # noqa: E402

REPORT = "BENCHMARKS.md"
PLOTS = "benchmarks"


def load(results_dir: str) -> dict[str, object]:
    docs = {}
    for name in sorted(os.listdir(results_dir)):
        if name.endswith(".json"):
            with open(os.path.join(results_dir, name), encoding="utf-8") as f:
                docs[name] = json.load(f)
    return docs


def build(results_dir: str, out: str) -> list[str]:
    """Writes the report and the plots under `out`; returns their paths relative to it."""
    run = gather(load(results_dir))
    note_path = os.path.join(results_dir, "note.md")
    note = open(note_path, encoding="utf-8").read().strip() if os.path.exists(note_path) else None
    root = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    shown = os.path.relpath(os.path.abspath(results_dir), root)
    os.makedirs(os.path.join(out, PLOTS), exist_ok=True)
    written = []
    figures = plots.draw(run)
    # A plot this run cannot draw must not survive from an earlier one.
    for stale in sorted(set(plots.NAMES) - set(figures)):
        path = os.path.join(out, PLOTS, stale)
        if os.path.exists(path):
            os.remove(path)
    for name, svg in figures.items():
        rel = f"{PLOTS}/{name}"
        with open(os.path.join(out, rel), "w", encoding="utf-8") as f:
            f.write(svg)
        written.append(rel)
    text = markdown.report(run, note=note, results_dir=shown, plots_dir=PLOTS, figures=list(figures))
    with open(os.path.join(out, REPORT), "w", encoding="utf-8") as f:
        f.write(text)
    written.append(REPORT)
    return written


def check(results_dir: str, out: str) -> list[str]:
    """What differs between `out` and a fresh build from `results_dir`."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = build(results_dir, tmp)
        problems = []
        for rel in fresh:
            have = os.path.join(out, rel)
            if not os.path.exists(have):
                problems.append(f"{have}: missing")
            elif not filecmp.cmp(have, os.path.join(tmp, rel), shallow=False):
                problems.append(f"{have}: differs from a rebuild")
        extra = sorted(
            f"{PLOTS}/{n}" for n in os.listdir(os.path.join(out, PLOTS))
            if n.endswith(".svg") and f"{PLOTS}/{n}" not in fresh
        ) if os.path.isdir(os.path.join(out, PLOTS)) else []
        problems += [f"{os.path.join(out, rel)}: not produced by a rebuild" for rel in extra]
        return problems


def readme(path: str, results_dir: str, out: str, written: list[str]) -> None:
    """Rewrites the README's Performance block, its links relative to the README."""
    here = os.path.dirname(os.path.abspath(path))
    link = os.path.relpath(os.path.join(os.path.abspath(out), REPORT), here)
    plot = f"{PLOTS}/contended.svg"
    plot_link = os.path.relpath(os.path.join(os.path.abspath(out), plot), here) if plot in written else None
    with open(path, encoding="utf-8") as f:
        text = f.read()
    block = markdown.readme_block(gather(load(results_dir)), link, plot_link)
    with open(path, "w", encoding="utf-8") as f:
        f.write(markdown.replace_block(text, block))
    print(f"wrote {path}")


def main() -> int:
    root = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(root, "docs", "benchmarks", "results"),
                    help="the directory of results files (*.json)")
    ap.add_argument("--out", default=os.path.join(root, "docs"),
                    help="where BENCHMARKS.md and benchmarks/*.svg go")
    ap.add_argument("--readme", help="also rewrite this README's generated Performance block")
    ap.add_argument("--check", action="store_true", help="rebuild into a temporary directory and compare")
    args = ap.parse_args()
    try:
        if args.check:
            problems = check(args.results, args.out)
            for p in problems:
                print(f"bench-report --check: {p}", file=sys.stderr)
            if problems:
                print("bench-report --check: the report does not rebuild identically from its results",
                      file=sys.stderr)
                return 1
            print(f"bench-report --check: {args.out} rebuilds identically from {args.results}")
            return 0
        written = build(args.results, args.out)
        for rel in written:
            print(f"wrote {os.path.join(args.out, rel)}")
        if args.readme:
            readme(args.readme, args.results, args.out, written)
        return 0
    except ResultsError as e:
        print(f"bench-report: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
