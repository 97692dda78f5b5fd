"""BENCHMARKS.md from the gathered results: the run, the three answers, the plots, one table
per scenario, what was not measured, and how to read it. A pure function of its input."""

from __future__ import annotations

from results import SUITES, Run, Suite, contended_metric, headline_setting, runs_of, setting_key

SERVERS = (("redis", "Redis 7.0"), ("redis8", "Redis 8.2"), ("valkey", "Valkey 9"))

PLOT_CAPTIONS = {
    "contended.svg": "Contended hand-offs/s and fairness (min/max acquisitions per worker), rlock against "
                     "each library, per language",
    "latency.svg": "Hand-off latency, p50 and p99: from a release sent to the next holder's grant, against "
                   "BLPOP (a token list) and the libraries",
    "uncontended.svg": "Uncontended acquire/release pairs/s: rlock against Lua (Redisson's scripts) and "
                       "SET NX PX, per server",
    "memory.svg": "Server memory per blocked waiter: RLOCK.ACQUIRE BLOCK against BLPOP",
}

METRIC_NAMES = {
    "pairs_per_sec": "pairs/s",
    "handoffs_per_sec": "hand-offs/s",
    "acquisitions_per_sec": "acquisitions/s",
    "fairness": "min/max per worker",
    "latency_p50_ms": "latency p50 ms",
    "latency_p99_ms": "p99 ms",
    "bytes_per_waiter": "bytes/waiter",
    "client_bytes_per_waiter": "of which client memory",
    "idle_connection_bytes": "idle connection bytes",
    "server_us_per_pair": "server CPU µs/pair",
    "server_us_per_handoff": "server CPU µs/hand-off",
    "server_us_per_acquisition": "server CPU µs/acquisition",
    "tries_per_handoff": "tries/hand-off",
    "stall_ms": "stall ms",
    "forgotten_ms": "forgotten ms",
    "writes_per_sec": "writes/s",
    "server_us_per_write": "server CPU µs/write",
    "redisson_share": "Q ÷ mean B",
}


def num(x: float | None) -> str:
    if x is None:
        return "–"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def times(x: float | None) -> str:
    return "–" if x is None else f"×{x:.2f}"


def metric_name(name: str, unit: str) -> str:
    if name in METRIC_NAMES:
        return METRIC_NAMES[name]
    words = name.replace("_per_sec", "/s").replace("_", " ")
    return words if unit in ("", words.split(" ")[-1]) else f"{words} ({unit})"


def setting_text(setting: dict) -> str:
    if not setting:
        return "—"
    parts = []
    for k, v in setting.items():
        if k == "hold_ms":
            parts.append(f"hold {v} ms")
        else:
            parts.append(f"{k.replace('_', ' ')} {v}")
    return ", ".join(parts)


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("*", "\\*").replace("\n", " ")


def table(columns: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- the three answers


def headline(s: Suite) -> list[tuple[str, dict, str, list[dict]]]:
    """(server, setting, rlock path, its ratios against the baselines) at each headline setting
    of the contended scenario, on the suite's first server."""
    if not s.results(scenario="contended"):
        return []
    server = s.doc["servers"][0]["id"]
    metric = contended_metric(s)
    out = []
    for setting in headline_setting(s, "contended"):
        ratios = [q for q in s.doc["ratios"] if q["scenario"] == "contended" and q["server"] == server and
                  q["metric"] == metric and setting_key(q["setting"]) == setting_key(setting) and
                  s.role("contended", q["baseline"]) == "baseline"]
        subjects = []
        for q in ratios:
            if q["path"] not in subjects:
                subjects.append(q["path"])
        for path in subjects[:1]:
            out.append((server, setting, path, [q for q in ratios if q["path"] == path]))
    return out


def speaker(s: Suite, setting: dict) -> str:
    """Whose figure: the module's commands sent raw, or a client in its language (and mode)."""
    who = "The module (raw commands)" if s.id == "module" else s.doc["language"]
    return who + (f" ({setting['mode']})" if "mode" in setting else "")


def where(s: Suite, server: str, setting: dict) -> str:
    shown_setting = {k: v for k, v in setting.items() if k != "mode"}
    return f"{speaker(s, setting)}, {s.server_version(server)}, {setting_text(shown_setting)}"


def answer_parts(run: Run, who) -> tuple[list[str], list[str], list[str]]:
    """Per headline: rlock's throughput ratios, the fairness and the hand-off latency of rlock and
    of each baseline; `who(suite, server, setting)` says whose figures they are."""
    faster, fair, cost = [], [], []
    for s in run.suites:
        for server, setting, path, ratios in headline(s):
            w = who(s, server, setting)
            name = lambda p: shown(s, "contended", p)  # noqa: E731
            faster.append(f"{w}: " + ", ".join(f"{times(q['value'])} {name(q['baseline'])}" for q in ratios))
            f = lambda p: s.median("contended", server, setting, p, "fairness")  # noqa: E731
            fair.append(f"{w}: rlock {num(f(path))}, " + ", ".join(f"{name(q['baseline'])} {num(f(q['baseline']))}"
                                                                   for q in ratios))
            lat = lambda p: s.median("contended", server, setting, p, "latency_p50_ms")  # noqa: E731
            # Every baseline with a latency, BLPOP's too (it has no throughput ratio: it is no lock).
            timed = [p["path"] for p in s.paths("contended") if s.role("contended", p["path"]) == "baseline" and
                     lat(p["path"]) is not None]
            cost.append(f"{w}: rlock {num(lat(path))} ms, " + ", ".join(
                f"{name(b)} {num(lat(b))} ms" for b in timed))
    return faster, fair, cost


def answers(run: Run) -> list[str]:
    faster, fair, cost = answer_parts(run, where)
    none = "not measured in this run"
    return [
        "**How much faster than what I use?** Workers contending for one lock, rlock's throughput "
        "(hand-offs/s, or acquisitions/s where a suite's file has no hand-off count) ÷ each library's, same run: "
        + ("; ".join(faster) or none) + ".",
        "**Is it fair?** The fewest acquisitions of a worker ÷ the most (1.00 is even): "
        + ("; ".join(fair) or none) + ".",
        "**What does a hand-off cost?** From a release sent to the next holder's grant, median: "
        + ("; ".join(cost) or none) + ". Server CPU per hand-off is in the tables; memory per "
          "blocked waiter in the module's.",
    ]


README_BEGIN = "<!-- bench-report: begin (scripts/bench-report --readme writes this block) -->"
README_END = "<!-- bench-report: end -->"


def shown(s: Suite, scenario: str, path: str) -> str:
    """A path by its short name where it has one (the module's letters), else by its name."""
    return next((p.get("short") or path for p in s.paths(scenario) if p["path"] == path), path)


def readme_block(run: Run, report_link: str, plot: str | None) -> str:
    """The README's Performance lines: the headline plot and the three answers, short."""
    faster, fair, cost = answer_parts(run, lambda s, server, setting: speaker(s, setting))
    none = "not measured in the last run"
    lines = [README_BEGIN]
    if plot:
        lines.append(f"![Contended hand-offs/s and fairness, rlock against each library]({plot})\n")
    dates = sorted(r["date"] for s in run.suites for r in runs_of(s))
    if dates:
        last = dates[-1][11:] if dates[0][:10] == dates[-1][:10] else dates[-1]  # the time, on the same day
        span = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {last}"
        lines.append(f"The run of {span}, on each suite's first server; how it ran, on what machine "
                     f"and under what load: [the report]({report_link}#the-run).\n")
    lines += [
        f"- **How much faster than what I use?** Workers contending for one lock, rlock's throughput ÷ "
        f"each library's, same run: {'; '.join(faster) or none}. [The tables]({report_link}#the-answers)",
        f"- **Is it fair?** Fewest ÷ most acquisitions per worker, 1.00 is even: "
        f"{'; '.join(fair) or none}. [The plots]({report_link}#plots)",
        f"- **What does a hand-off cost?** Release sent → next grant, median: "
        f"{'; '.join(cost) or none}. Server CPU and memory per waiter: [the report]({report_link}).",
        README_END,
    ]
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """`text` with the README's generated block replaced by `block` (ValueError if it has none)."""
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"no {README_BEGIN!r} ... {README_END!r} block")
    return text[:start] + block + text[end + len(README_END):]


# ---------------------------------------------------------------- tables


def scenario_section(s: Suite, scenario: dict) -> str:
    sid = scenario["id"]
    rows_in = s.results(scenario=sid)
    if not rows_in:
        return ""
    metrics: list[tuple[str, str]] = []
    for r in rows_in:
        if (r["metric"], r["unit"]) not in metrics:
            metrics.append((r["metric"], r["unit"]))
    paths = [p["path"] for p in s.paths(sid)]
    paths += [r["path"] for r in rows_in if r["path"] not in paths]
    primary = scenario.get("primary_metric")
    columns = ["server", "setting", "path"] + [metric_name(m, u) + ":" for m, u in metrics] + ["this ÷ baseline:"]
    rows = []
    for server in [x["id"] for x in s.doc["servers"]]:
        for setting in s.settings(sid):
            for path in paths:
                values = [s.median(sid, server, setting, path, m) for m, _ in metrics]
                if not any(r for r in rows_in if r["server"] == server and r["path"] == path and
                           setting_key(r["setting"]) == setting_key(setting)):
                    continue
                ratios = [q for q in s.doc["ratios"] if q["scenario"] == sid and q["server"] == server and
                          q["path"] == path and setting_key(q["setting"]) == setting_key(setting)]
                ratio_text = "; ".join(
                    f"{times(q['value'])} {q['baseline']}"
                    + ("" if q["metric"] == primary else f" ({METRIC_NAMES.get(q['metric'], q['metric'])})")
                    for q in ratios)
                rows.append([server, setting_text(setting), path] + [num(v) for v in values] + [ratio_text])
    legend = "\n".join(f"- **{cell(p['path'])}** ({p['role']}): {p['label']}" for p in s.paths(sid))
    return f"### {scenario['title']}\n\n{legend}\n\n{table(columns, rows)}\n"


def suite_section(s: Suite) -> str:
    name = next((n for sid, n, _ in SUITES if sid == s.id), s.doc["title"])
    b = s.doc["build"]
    lines = [f"## {name}\n", f"{s.doc['title']}.\n"]
    for r in runs_of(s):
        lines.append(f"- `{r['command']}` on {r['server']}, {r['date']}, commit {r['commit']}, "
                     f"load average before {r['load_before']}.")
    lines.append(f"- Pinning: {s.doc['machine'].get('pinning', 'not stated')}.")
    servers = "; ".join(f"{x['id']}: {x['version']}" for x in s.doc["servers"])
    lines.append(f"- Servers: {servers}. Module version {b.get('module_version', '?')}.")
    extra = ", ".join(str(b[k]) for k in ("client", "runtime") if b.get(k))
    if extra:
        lines.append(f"- Load: {extra}.")
    if s.doc.get("plan"):
        lines.append("- Plan: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in s.doc["plan"].items()) + ".")
    out = "\n".join(lines) + "\n\n"
    for scenario in s.doc["scenarios"]:
        out += scenario_section(s, scenario)
    return out


# ---------------------------------------------------------------- not measured


def not_measured(run: Run) -> list[str]:
    out = []
    for sid, name, target in run.absent:
        out.append(f"{name} (`{target}`): no results in this run (the benchmark did not run, or could not "
                   f"run on this machine).")
    for s in run.suites:
        name = next((n for i, n, _ in SUITES if i == s.id), s.id)
        ran = [x["id"] for x in s.doc["servers"]]
        missing = [label for sid, label in SERVERS if sid not in ran]
        if missing:
            out.append(f"{name}: not run on {', '.join(missing)} in this run.")
        for x in s.unaccounted():
            out.append(f"{name}, {x}: no results in this run (its file does not carry the scenario).")
        for n in s.doc["not_measured"]:
            what = ", ".join(str(n[k]) if k != "setting" else setting_text(n[k])
                             for k in ("scenario", "server", "setting", "path") if n.get(k))
            out.append(f"{name}, {what}: {n['reason']}.")
    if not blpop_measured(run):
        out.append("A BLPOP hand-off (one token in a list, `BLPOP` to take it, `RPUSH` to put it back) as "
                   "the latency baseline: not in this run's contended results.")
    for s in run.suites:
        name = next((n for i, n, _ in SUITES if i == s.id), s.id)
        if s.results(scenario="contended") and contended_metric(s) != "handoffs_per_sec":
            out.append(f"{name}: hand-offs (its file counts acquisitions only; its contended figures are "
                       f"acquisitions/s).")
    return out


def blpop_measured(run: Run) -> bool:
    return any(s.results(scenario="contended", path="BLPOP", metric="latency_p50_ms") for s in run.suites)


# ---------------------------------------------------------------- the report

METHOD = """## How to read it

- **One run.** Every figure in this file comes from the results files of one `make bench-report`
  (each suite's file says its own date, command, commit and load, above). Nothing is carried
  over from an earlier run: the generator reads only those files, and checks that every ratio
  is the quotient of two medians of the same file. Older reports are in
  [the archive](benchmarks/archive/).
- **Medians over rounds.** Each figure is the median over rounds of that figure in one round
  (latency percentiles too: the median of each round's p50 or p99). Within a round the paths
  run one after another on the same server from the same process, so drift in the machine's
  load hits every path alike.
- **Quote ratios, not rates.** *this ÷ baseline* divides the row's median by the baseline's,
  both from the same run on the same server. Above 1 is more throughput (or more memory,
  or more latency, for those metrics); the column names the metric when it is not the
  scenario's first. Absolute rates depend on the machine: 2 shared cores, the server pinned
  to core 0 and the load to core 1.
- **Hand-off** (contended): a grant to a worker other than the one that released last; a
  worker that takes the lock back right after its own release is an acquisition, not a
  hand-off. Every suite counts both and leads with hand-offs/s. **Latency**: from the
  release being sent to the next holder's grant arriving (hand-offs only), one clock for all
  workers. **BLPOP** (the module's contended scenario) is no lock: one token in a list,
  taken by `BLPOP` and put back by `RPUSH`, the server's own blocking hand-off, the floor
  for a hand-off's latency. **Fairness**: the fewest acquisitions of a worker ÷ the most,
  over the measured window; 1.00 is even, near 0 is starvation.
- **Rounds and seconds.** `make bench-report` shortens the benchmarks' own defaults so that
  the whole run fits in about 40 minutes on 2 cores, keeping every scenario, server and
  library: by default the module runs 3 rounds of 1 s (2 rounds of its 10,000 waiters), the
  Python and Node benches 3 rounds of 0.5 s, Java and Go their own defaults. The run's note
  above says what this run passed, and each suite's plan line what it ran.
- **Memory per blocked waiter**: the server's `used_memory` with N waiters blocked minus
  with the same N connections idle, ÷ N.
- **Not measured** means what it says: the figure is absent from this run (a suite that did
  not run, a library missing, a server not in the run), never filled in from elsewhere.
- **Server CPU µs** per operation is the server process's own CPU time (`INFO cpu`) over the
  window ÷ the operations in it; it does not depend on how fast the client is.
"""


def report(run: Run, note: str | None, results_dir: str, plots_dir: str, figures: list[str]) -> str:
    out = ["# rlock benchmarks\n",
           f"<!-- Generated by scripts/bench-report from {results_dir}/*.json; edit the benchmarks or "
           f"bench/report/, not this file. -->\n",
           "One run of every benchmark, rebuilt by `make bench-report` (the command runs each benchmark "
           "below, then `scripts/bench-report`). Older runs are in [the archive](benchmarks/archive/).\n"]
    machines = []
    for s in run.suites:
        m = s.doc["machine"]
        text = f"{m.get('cpu', '?')}, {m.get('nproc', '?')} CPUs"
        if text not in machines:
            machines.append(text)
    rows = []
    for s in run.suites:
        for r in runs_of(s):
            rows.append([s.doc["language"], f"`{r['command']}`", r["date"], r["server"], r["commit"],
                         r["load_before"]])
    out.append("## The run\n")
    facts = [f"- Machine: {m}." for m in machines]
    commits = sorted({r[4] for r in rows})
    if len(commits) > 1:
        facts.append(f"- The suites ran at different commits: {', '.join(commits)}.")
    out.append("\n".join(facts) + "\n")
    out.append(table(["language", "command", "date", "servers", "commit", "load average before"], rows))
    if note:
        out.append("**About this run.**\n\n" + note + "\n")
    out.append("## The answers\n")
    out.append("\n".join(f"- {a}" for a in answers(run)) + "\n")
    out.append("## Plots\n")
    for f in PLOT_CAPTIONS:
        caption = PLOT_CAPTIONS[f]
        if f in figures:
            out.append(f"![{caption}]({plots_dir}/{f})\n\n*{caption}.*\n")
        else:
            out.append(f"*{caption}*: not measured in this run (no results to draw it from).\n")
    for s in run.suites:
        out.append(suite_section(s))
    missing = not_measured(run)
    out.append("## Not measured\n")
    out.append(("\n".join(f"- {m}" for m in missing) if missing else "Everything was measured.") + "\n")
    out.append(METHOD)
    return "\n".join(out)
