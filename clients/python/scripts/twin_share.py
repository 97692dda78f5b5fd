"""The twin share of the Python client's two faces: the part of ``asyncio.py``'s code lines
that, with ``async``/``await`` stripped, are also lines of ``_sync.py`` (issue 38: at most 20 %).

A code line is a line of code with its indentation, comments, docstrings and blank lines left
out. Each line of ``_sync.py`` matches at most one line of ``asyncio.py`` (a multiset), so a
line written once in the sync face and twice in the asyncio face counts once.

    python scripts/twin_share.py [--max PERCENT]   # prints the share; exits 1 above PERCENT
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tokenize
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "rlock_client"
_ASYNC = re.compile(r"\b(async|await)\s+")


def code_lines(source: str) -> list[str]:
    """The code lines of ``source``: no comments, docstrings, blank lines or indentation."""
    skip: set[int] = set()
    cut: dict[int, int] = {}  # line -> the column its comment starts at
    prev = tokenize.INDENT
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        # A string that is a statement of its own (a docstring) is not code.
        if tok.type == tokenize.STRING and prev in (tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE):
            skip.update(range(tok.start[0], tok.end[0] + 1))
        if tok.type == tokenize.COMMENT:
            cut[tok.start[0]] = tok.start[1]
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            prev = tok.type
    out = []
    for n, line in enumerate(source.splitlines(), 1):
        if n in skip:
            continue
        text = line[: cut.get(n, len(line))].strip()
        if text:
            out.append(text)
    return out


def stripped(line: str) -> str:
    return _ASYNC.sub("", line)


def twin_share(sync_source: str, async_source: str) -> tuple[int, int]:
    """(asyncio lines that are sync lines too, asyncio code lines)."""
    sync = Counter(stripped(x) for x in code_lines(sync_source))
    lines = [stripped(x) for x in code_lines(async_source)]
    twins = 0
    for x in lines:
        if sync[x] > 0:
            sync[x] -= 1
            twins += 1
    return twins, len(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=float, default=None, help="fail above this percentage")
    ap.add_argument("--sync", type=Path, default=PACKAGE / "_sync.py")
    ap.add_argument("--asyncio", type=Path, default=PACKAGE / "asyncio.py")
    a = ap.parse_args(argv)
    twins, total = twin_share(a.sync.read_text(), a.asyncio.read_text())
    share = 100.0 * twins / total if total else 0.0
    print(f"twin share: {twins} of {total} asyncio.py code lines match _sync.py: {share:.1f} %")
    return 1 if a.max is not None and share > a.max else 0


if __name__ == "__main__":
    sys.exit(main())
