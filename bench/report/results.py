"""The results files every benchmark writes (schema `rlock-bench/1`, bench/report/README.md):
reading them, checking them, and the questions the report asks of them. No plotting and no
output here: pure functions of the parsed files."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

SCHEMA = "rlock-bench/1"

# Every suite the report expects, in report order: its file stem, its name, and the make
# target that writes it.
SUITES = (
    ("module", "The module (Rust load)", "make bench"),
    ("python", "The Python client", "make bench-python"),
    ("node", "The Node client", "make bench-node"),
    ("java", "The Java client", "make bench-java"),
    ("go", "The Go client", "make bench-go"),
)

# The scenarios each suite measures when it runs whole: one it did not write, and did not list
# under not_measured, is reported as not measured all the same.
SCENARIOS = {
    "module": ("uncontended", "contended", "expiry", "fair", "fair-uncontended", "memory", "stall", "cluster",
               "mixed", "rwlock-uncontended", "rwlock-contended", "semaphore-uncontended", "semaphore-contended",
               "semaphore-reclaim", "guard"),
    "python": ("uncontended", "contended"),
    "node": ("uncontended", "contended"),
    "java": ("uncontended", "contended"),
    "go": ("uncontended", "contended"),
}

TOP_KEYS = (
    "schema", "suite", "language", "title", "command", "date", "machine", "build",
    "servers", "scenarios", "paths", "results", "ratios", "not_measured",
)
RESULT_KEYS = ("scenario", "server", "setting", "path", "metric", "unit", "better", "rounds", "median")
RATIO_KEYS = ("scenario", "server", "setting", "metric", "path", "baseline", "value")
# A ratio must be the quotient of the two medians of the same file (rounding aside).
RATIO_TOLERANCE = 1e-6
# The module's contended setting the plots and the answers lead with: as many clients as the
# client suites' workers.
HEADLINE_CLIENTS = 32


class ResultsError(ValueError):
    """A results file that does not follow the schema."""


def setting_key(setting: dict) -> tuple:
    return tuple(sorted(setting.items()))


@dataclass
class Suite:
    """One benchmark's results file."""

    doc: dict
    source: str

    @property
    def id(self) -> str:
        return self.doc["suite"]

    def results(self, **where) -> list[dict]:
        return [r for r in self.doc["results"] if all(r.get(k) == v for k, v in where.items())]

    def median(self, scenario: str, server: str, setting: dict, path: str, metric: str) -> float | None:
        for r in self.doc["results"]:
            if (r["scenario"], r["server"], r["path"], r["metric"]) == (scenario, server, path, metric) and \
                    setting_key(r["setting"]) == setting_key(setting):
                return r["median"]
        return None

    def paths(self, scenario: str) -> list[dict]:
        return [p for p in self.doc["paths"] if p["scenario"] == scenario]

    def role(self, scenario: str, path: str) -> str:
        return next((p["role"] for p in self.paths(scenario) if p["path"] == path), "baseline")

    def unaccounted(self) -> list[str]:
        """The suite's scenarios with no results and no not_measured entry naming them."""
        listed = {n.get("scenario") for n in self.doc["not_measured"]}
        return [x for x in SCENARIOS.get(self.id, ()) if not self.results(scenario=x) and x not in listed]

    def scenario(self, scenario: str) -> dict | None:
        return next((s for s in self.doc["scenarios"] if s["id"] == scenario), None)

    def server_version(self, server: str) -> str:
        return next((s["version"] for s in self.doc["servers"] if s["id"] == server), server)

    def settings(self, scenario: str) -> list[dict]:
        """The settings of a scenario in the order the file lists them."""
        seen: list[dict] = []
        for r in self.results(scenario=scenario):
            if r["setting"] not in seen:
                seen.append(r["setting"])
        return seen


def check(doc: object, source: str) -> Suite:
    """A results file as the schema says, or ResultsError naming what is wrong."""
    if not isinstance(doc, dict):
        raise ResultsError(f"{source}: not a JSON object")
    missing = [k for k in TOP_KEYS if k not in doc]
    if missing:
        raise ResultsError(f"{source}: missing {', '.join(missing)}")
    if doc["schema"] != SCHEMA:
        raise ResultsError(f"{source}: schema {doc['schema']!r}, expected {SCHEMA!r}")
    for r in doc["results"]:
        gone = [k for k in RESULT_KEYS if k not in r]
        if gone:
            raise ResultsError(f"{source}: a result lacks {', '.join(gone)}: {r}")
        if r["better"] not in ("higher", "lower"):
            raise ResultsError(f"{source}: better must be higher or lower: {r}")
        rounds = [x for x in r["rounds"] if x is not None]
        want = statistics.median(rounds) if rounds else None
        if not close(want, r["median"]):
            raise ResultsError(f"{source}: median {r['median']} is not the median of its rounds {r['rounds']}")
    suite = Suite(doc, source)
    for q in doc["ratios"]:
        gone = [k for k in RATIO_KEYS if k not in q]
        if gone:
            raise ResultsError(f"{source}: a ratio lacks {', '.join(gone)}: {q}")
        a = suite.median(q["scenario"], q["server"], q["setting"], q["path"], q["metric"])
        b = suite.median(q["scenario"], q["server"], q["setting"], q["baseline"], q["metric"])
        want = a / b if a is not None and b is not None and b > 0 else None
        if not close(want, q["value"]):
            raise ResultsError(
                f"{source}: ratio {q['path']} ÷ {q['baseline']} ({q['metric']}) is {q['value']}, "
                f"but the file's medians give {want}")
    for n in doc["not_measured"]:
        if "reason" not in n:
            raise ResultsError(f"{source}: a not_measured entry without a reason: {n}")
    return suite


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=RATIO_TOLERANCE, abs_tol=1e-12)


@dataclass
class Run:
    """Every suite's results, and what the report must say was not measured."""

    suites: list[Suite]
    absent: list[tuple[str, str, str]] = field(default_factory=list)  # (suite, name, target)

    def suite(self, suite_id: str) -> Suite | None:
        return next((s for s in self.suites if s.id == suite_id), None)


def gather(docs: dict[str, object]) -> Run:
    """`docs`: the parsed files by name. Several files of one suite (one per server) merge."""
    by_suite: dict[str, list[Suite]] = {}
    for source in sorted(docs):
        s = check(docs[source], source)
        by_suite.setdefault(s.id, []).append(s)
    suites = []
    for suite_id in sorted(by_suite, key=suite_order):
        parts = by_suite[suite_id]
        suites.append(parts[0] if len(parts) == 1 else merge(parts))
    absent = [(sid, name, target) for sid, name, target in SUITES if sid not in by_suite]
    return Run(suites, absent)


def suite_order(suite_id: str) -> tuple[int, str]:
    ids = [s[0] for s in SUITES]
    return (ids.index(suite_id) if suite_id in ids else len(ids), suite_id)


def merge(parts: list[Suite]) -> Suite:
    """One suite's files, one per server, as one: lists joined, the first file's header, every
    file's date, command and load kept (they differ)."""
    head = dict(parts[0].doc)
    for key in ("servers", "results", "ratios", "not_measured"):
        head[key] = [x for p in parts for x in p.doc[key]]
    for key in ("scenarios", "paths"):
        head[key] = []
        for p in parts:
            head[key] += [x for x in p.doc[key] if x not in head[key]]
    head["runs"] = [{"server": ", ".join(s["id"] for s in p.doc["servers"]), "date": p.doc["date"],
                     "command": p.doc["command"], "load_before": p.doc["machine"].get("load_before", "?"),
                     "commit": p.doc["build"].get("commit", "?")} for p in parts]
    return Suite(head, ", ".join(p.source for p in parts))


def runs_of(s: Suite) -> list[dict]:
    """Each run behind a suite: when, which command, what load, which commit."""
    if "runs" in s.doc:
        return s.doc["runs"]
    d = s.doc
    return [{"server": ", ".join(x["id"] for x in d["servers"]), "date": d["date"], "command": d["command"],
             "load_before": d["machine"].get("load_before", "?"), "commit": d["build"].get("commit", "?")}]


def headline_setting(s: Suite, scenario: str) -> list[dict]:
    """The settings a plot shows: for the module's grid of clients × hold, 32 clients at hold 0
    (the client suites' 32 workers), else the most clients at hold 0; for a client suite (a
    handful of settings), each."""
    settings = s.settings(scenario)
    grid = [x for x in settings if "clients" in x]
    if not grid:
        return settings
    hold0 = [x for x in grid if x.get("hold_ms", 0) == 0] or grid
    return [next((x for x in hold0 if x["clients"] == HEADLINE_CLIENTS), max(hold0, key=lambda x: x["clients"]))]


def contended_metric(s: Suite) -> str:
    """hand-offs/s where the suite counts hand-offs, else acquisitions/s (said on the plot)."""
    metrics = {r["metric"] for r in s.results(scenario="contended")}
    return "handoffs_per_sec" if "handoffs_per_sec" in metrics else "acquisitions_per_sec"


def ratios_to(s: Suite, scenario: str, server: str, setting: dict, baseline: str) -> list[dict]:
    return [q for q in s.doc["ratios"] if q["scenario"] == scenario and q["server"] == server and
            q["baseline"] == baseline and setting_key(q["setting"]) == setting_key(setting)]
