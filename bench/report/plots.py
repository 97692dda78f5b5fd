"""The report's plots as SVG text, made with matplotlib so that the same results give the same
bytes: a fixed hash salt and root id, text kept as text (no glyph ids), no date in the metadata."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("svg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from markdown import num  # noqa: E402
from results import Run, Suite, contended_metric, headline_setting  # noqa: E402

RLOCK = "#1565c0"
BASELINE = "#9e9e9e"
# One shade per server when a panel shows several (the module's suite).
SHADES = (1.0, 0.65, 0.4)

plt.rcParams.update({
    "svg.hashsalt": "rlock-bench-report",
    "svg.id": "rlock-bench",
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
})


def svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight",
                metadata={"Date": None, "Creator": "scripts/bench-report (matplotlib)"})
    plt.close(fig)
    return buf.getvalue()


def label(s: Suite, setting: dict) -> str:
    parts = [f"{k.replace('_ms', ' ms').replace('_', ' ')} {v}" for k, v in setting.items()]
    return f"{s.doc['language']}: " + ", ".join(parts)


def panels(run: Run) -> list[tuple[Suite, dict, list[str]]]:
    """(suite, setting, servers) for each panel of the contended plots."""
    out = []
    for s in run.suites:
        if s.results(scenario="contended"):
            servers = [x["id"] for x in s.doc["servers"]]
            out += [(s, setting, servers) for setting in headline_setting(s, "contended")]
    return out


def bars(ax, s: Suite, scenario: str, setting: dict, servers: list[str], metric: str, log: bool) -> None:
    """Horizontal bars, one per path (rlock's in blue), one shade per server."""
    paths = [p["path"] for p in s.paths(scenario)
             if any(s.median(scenario, sv, setting, p["path"], metric) is not None for sv in servers)]
    height = 0.8 / max(1, len(servers))
    for i, server in enumerate(servers):
        for j, path in enumerate(paths):
            v = s.median(scenario, server, setting, path, metric)
            if v is None:
                continue
            color = RLOCK if s.role(scenario, path) == "rlock" else BASELINE
            y = j + (i - (len(servers) - 1) / 2) * height
            ax.barh(y, v, height=height * 0.9, color=color, alpha=SHADES[i % len(SHADES)],
                    label=server if j == 0 else None)
            ax.text(v, y, f" {short(v)}", va="center", fontsize=7)
    ax.set_yticks(range(len(paths)), [name(s, scenario, p) for p in paths])
    ax.invert_yaxis()
    if log:
        log_axis(ax)


def log_axis(ax) -> None:
    """A log x axis with a few plain-number ticks: 1, 2 and 5 times the powers of ten over a
    short range, the powers of ten alone over a long one."""
    ax.set_xscale("log")
    lo, hi = ax.get_xlim()
    steps = [k * 10.0**e for e in range(-4, 8) for k in (1, 2, 5)]
    ticks = [t for t in steps if lo <= t <= hi]
    if len(ticks) > 7:
        ticks = [t for t in ticks if f"{t:g}".lstrip("0.").startswith("1")]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())


def name(s: Suite, scenario: str, path: str) -> str:
    """A path as the plots show it: its name, and its short description where it has one."""
    short = next((p.get("short") for p in s.paths(scenario) if p["path"] == path), None)
    return f"{path}: {short}" if short and short != path else path


def short(v: float) -> str:
    """A bar's label: thousands as k, the rest as the tables write them."""
    if abs(v) >= 1000:
        return f"{v / 1000:.{0 if abs(v) >= 10_000 else 1}f}k"
    return num(v)


def contended(run: Run) -> str | None:
    ps = panels(run)
    if not ps:
        return None
    most = max(len(s.paths("contended")) * len(servers) for s, _, servers in ps)
    fig, axes = plt.subplots(2, len(ps), figsize=(4.2 * len(ps), max(6.5, 2 * (1.2 + 0.18 * most))),
                             squeeze=False)
    for k, (s, setting, servers) in enumerate(ps):
        metric = contended_metric(s)
        top, bottom = axes[0][k], axes[1][k]
        bars(top, s, "contended", setting, servers, metric, log=False)
        top.set_title(label(s, setting), fontsize=9)
        top.set_xlabel("hand-offs/s" if metric == "handoffs_per_sec" else "acquisitions/s (every grant)")
        bars(bottom, s, "contended", setting, servers, "fairness", log=False)
        bottom.set_xlim(0, 1.15)
        bottom.set_xlabel("fairness: min/max acquisitions per worker")
    fig.suptitle("Contended: one lock, every worker looping acquire/release (blue: rlock)", fontsize=10)
    server_legend(fig, axes[0])
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return svg(fig)


def server_legend(fig, axes) -> None:
    """One legend for the figure: the shade of each server, from the panel that has the most."""
    handles, labels = max((ax.get_legend_handles_labels() for ax in axes), key=lambda hl: len(hl[1]))
    if len(labels) > 1:
        fig.legend(handles, labels, loc="upper right", ncol=len(labels), fontsize=7, frameon=False)


def latency(run: Run) -> str | None:
    ps = [p for p in panels(run) if p[0].results(scenario="contended", metric="latency_p50_ms")]
    if not ps:
        return None
    fig, axes = plt.subplots(1, len(ps), figsize=(4.2 * len(ps), 3.6), squeeze=False)
    for k, (s, setting, servers) in enumerate(ps):
        ax = axes[0][k]
        server = servers[0]
        paths = [p["path"] for p in s.paths("contended")
                 if s.median("contended", server, setting, p["path"], "latency_p50_ms") is not None]
        for j, path in enumerate(paths):
            color = RLOCK if s.role("contended", path) == "rlock" else BASELINE
            p50 = s.median("contended", server, setting, path, "latency_p50_ms")
            p99 = s.median("contended", server, setting, path, "latency_p99_ms")
            if p50 is None:  # `paths` has only those with one
                continue
            if p99 is not None:
                ax.barh(j + 0.2, p99, height=0.4, color=color, alpha=0.4)
                ax.text(p99, j + 0.2, f" p99 {short(p99)}", va="center", fontsize=7)
            ax.barh(j - 0.2, p50, height=0.4, color=color)
            ax.text(p50, j - 0.2, f" p50 {short(p50)}", va="center", fontsize=7)
        ax.set_yticks(range(len(paths)), [name(s, "contended", p) for p in paths])
        ax.invert_yaxis()
        log_axis(ax)
        ax.set_xlabel(f"ms, release sent → next grant (log); {server}")
        ax.set_title(label(s, setting), fontsize=9)
    blpop = any(s.results(scenario="contended", path="BLPOP", metric="latency_p50_ms") for s, _, _ in ps)
    against = "BLPOP: a token list, the server's own hand-off" if blpop else "BLPOP as a hand-off: not measured"
    fig.suptitle(f"Hand-off latency, p50 (dark) and p99 (light); blue: rlock. {against}", fontsize=10)
    fig.tight_layout()
    return svg(fig)


def grouped(ax, s: Suite, scenario: str, groups: list[tuple[str, str, dict]], metric: str) -> None:
    """Vertical bars: for each (label, server, setting) group, one bar per path."""
    paths = [p["path"] for p in s.paths(scenario)]
    width = 0.8 / max(1, len(paths))
    for j, path in enumerate(paths):
        color = RLOCK if s.role(scenario, path) == "rlock" else BASELINE
        shade = 1.0 if s.role(scenario, path) == "rlock" else 1.0 - 0.35 * (j % 2)
        for g, (_, server, setting) in enumerate(groups):
            v = s.median(scenario, server, setting, path, metric)
            if v is None:
                continue
            x = g + (j - (len(paths) - 1) / 2) * width
            ax.bar(x, v, width=width * 0.9, color=color, alpha=shade,
                   label=name(s, scenario, path) if g == 0 else None)
            ax.text(x, v, short(v), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(groups)), [g[0] for g in groups])
    ax.legend(fontsize=7, frameon=False)


def uncontended(run: Run) -> str | None:
    s = run.suite("module")
    if s is None or not s.results(scenario="uncontended"):
        return None
    servers = [x["id"] for x in s.doc["servers"]]
    fig, axes = plt.subplots(1, len(servers), figsize=(3.6 * len(servers), 3.4), squeeze=False)
    for k, server in enumerate(servers):
        ax = axes[0][k]
        groups = [(f"pipeline {st['pipeline']}", server, st) for st in s.settings("uncontended")]
        grouped(ax, s, "uncontended", groups, "pairs_per_sec")
        ax.set_title(s.server_version(server), fontsize=9)
        ax.set_ylabel("acquire/release pairs/s")
    fig.suptitle("Uncontended acquire/release pairs (blue: rlock)", fontsize=10)
    fig.tight_layout()
    return svg(fig)


def memory(run: Run) -> str | None:
    s = run.suite("module")
    if s is None or not s.results(scenario="memory"):
        return None
    servers = [x["id"] for x in s.doc["servers"]]
    groups = [(s.server_version(sv).split(" (")[0], sv, st) for sv in servers for st in s.settings("memory")
              if s.results(scenario="memory", server=sv)]
    fig, ax = plt.subplots(figsize=(2.2 + 1.6 * len(groups), 3.4))
    grouped(ax, s, "memory", groups, "bytes_per_waiter")
    waiters = s.settings("memory")[0].get("waiters", "?")
    ax.set_ylabel("server bytes per blocked waiter")
    ax.set_title(f"Memory per blocked waiter, N = {waiters} (blue: rlock)", fontsize=10)
    fig.tight_layout()
    return svg(fig)


MAKERS = (("contended.svg", contended), ("latency.svg", latency), ("uncontended.svg", uncontended),
          ("memory.svg", memory))
# Every plot the report can have, by file name, in the report's order.
NAMES = tuple(name for name, _ in MAKERS)


def draw(run: Run) -> dict[str, str]:
    """Each plot the results allow, by file name, in the report's order."""
    out = {}
    for name, make in MAKERS:
        text = make(run)
        if text is not None:
            out[name] = text
    return out
