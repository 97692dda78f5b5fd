"""The Python client against what Python users run instead, every figure a ratio against a
baseline measured in the same run, on the same server, with the server pinned to core 0 and
this process to core 1; medians over rounds that alternate the contenders.

    make bench-python                      # Redis 7.0, 5 rounds
    make bench-python BENCH_ARGS="--flavor valkey --rounds 3"

Uncontended: acquire+release pairs per second from one thread.
Contended: N threads (or asyncio tasks) on one lock, hold 0, each looping acquire/release:
hand-offs per second, the hand-off p50 (from a release sent to the next grant seen), fairness
(min/max acquisitions per thread) and the server's CPU per hand-off (INFO cpu)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import statistics
import sys
import threading
import time
import uuid

import redis
import redis.asyncio as aredis
from redis.backoff import NoBackoff
from redis.retry import Retry

import redis_lock
import rlock_client
from rlock_client import asyncio as rl_async

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from servers import Server  # noqa: E402


def pin(core: int) -> None:
    try:
        os.sched_setaffinity(0, {core})
    except (AttributeError, OSError):
        pass


def server_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


# ------------------------------------------------------------------ uncontended


def uncontended(name: str, port: int, seconds: float) -> float:
    """Pairs per second of one contender."""
    key = f"u:{name}:{uuid.uuid4().hex[:6]}"
    if name == "raw":
        r = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
        owner = "raw-owner"

        def pair() -> None:
            r.execute_command("RLOCK.ACQUIRE", key, owner, "LEASE", 30000)
            r.execute_command("RLOCK.RELEASE", key, owner)
    elif name == "rlock_client":
        lock = rlock_client.Locks(redis.Redis(port=port)).lock(key)

        def pair() -> None:
            lock.acquire().release()
    elif name == "redis-py Lock":
        lk = redis.Redis(port=port).lock(key, timeout=30)

        def pair() -> None:
            lk.acquire(blocking=False)
            lk.release()
    elif name == "python-redis-lock":
        conn = redis.Redis(port=port)

        def pair() -> None:
            lk = redis_lock.Lock(conn, key, expire=30)
            lk.acquire(blocking=False)
            lk.release()
    else:
        raise ValueError(name)
    for _ in range(200):
        pair()
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        for _ in range(50):
            pair()
        n += 50
        if time.perf_counter() >= end:
            break
    return n / (time.perf_counter() - t0)


# ------------------------------------------------------------------ contended, threads


class Tally:
    """Grants, counted by the holder alone (the lock orders the calls): every acquisition per
    worker, and the hand-offs (a grant to a worker other than the one that released last; a
    worker taking the lock back after its own release is not one), each with its latency."""

    def __init__(self, workers: int):
        self.counts = [0] * workers
        self.handoffs = 0
        self.gaps: list[float] = []
        self.last_release = 0.0
        self.last_holder = -1
        self.mutex = threading.Lock()

    def granted(self, i: int) -> None:
        now = time.perf_counter()
        self.counts[i] += 1
        if self.last_holder not in (-1, i):
            self.handoffs += 1
            self.gaps.append(now - self.last_release)
        self.last_holder = i

    def restart(self) -> None:
        self.counts = [0] * len(self.counts)
        self.handoffs = 0
        self.gaps = []

    def figures(self, elapsed: float, cpu_s: float) -> dict:
        total, gaps = sum(self.counts), list(self.gaps)
        return {
            "handoffs": self.handoffs / elapsed,
            "acquisitions": total / elapsed,
            "p50_ms": statistics.median(gaps) * 1000 if gaps else float("nan"),
            "fairness": (min(self.counts) / max(self.counts)) if max(self.counts) else 0.0,
            "cpu_us": cpu_s / self.handoffs * 1e6 if self.handoffs else float("nan"),
        }

    def releasing(self) -> None:
        self.last_release = time.perf_counter()


def contended_threads(name: str, port: int, workers: int, seconds: float, r: redis.Redis) -> dict:
    key = f"c:{name}:{uuid.uuid4().hex[:6]}"
    stop = threading.Event()
    tally = Tally(workers)
    locks = rlock_client.Locks(redis.Redis(port=port)) if name == "rlock_client" else None
    shared = redis.Redis(port=port, max_connections=workers * 2)

    def worker(i: int) -> None:
        if name == "raw":
            c = redis.Redis(port=port, retry=Retry(NoBackoff(), 0), socket_timeout=None)
            owner = f"raw-{i}"
            while not stop.is_set():
                if c.execute_command("RLOCK.ACQUIRE", key, owner, "LEASE", 30000, "BLOCK", 1000) is None:
                    continue
                tally.granted(i)
                tally.releasing()
                c.execute_command("RLOCK.RELEASE", key, owner)
        elif name == "rlock_client":
            lock = locks.lock(key, wait=1)
            while not stop.is_set():
                h = lock.acquire()
                if h is None:
                    continue
                tally.granted(i)
                tally.releasing()
                h.release()
        elif name == "redis-py Lock":
            lk = shared.lock(key, timeout=30, blocking_timeout=1)  # default sleep=0.1
            while not stop.is_set():
                if not lk.acquire():
                    continue
                tally.granted(i)
                tally.releasing()
                lk.release()
        elif name == "python-redis-lock":
            while not stop.is_set():
                lk = redis_lock.Lock(shared, key, expire=30)
                if not lk.acquire(timeout=1):
                    continue
                tally.granted(i)
                tally.releasing()
                lk.release()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    time.sleep(0.5)  # warm up
    with tally.mutex:
        tally.restart()
    cpu0 = server_cpu(r)
    t0 = time.perf_counter()
    time.sleep(seconds)
    figures = tally.figures(time.perf_counter() - t0, server_cpu(r) - cpu0)
    stop.set()
    for t in threads:
        t.join(5)
    return figures


# ------------------------------------------------------------------ contended, asyncio


async def contended_tasks_async(name: str, port: int, workers: int, seconds: float, r: redis.Redis) -> dict:
    key = f"a:{name}:{uuid.uuid4().hex[:6]}"
    stop = asyncio.Event()
    tally = Tally(workers)
    clients = [aredis.Redis(port=port, max_connections=workers * 2)]
    shared = clients[0]
    if name == "rlock_client":
        clients.append(aredis.Redis(port=port))
        locks = rl_async.Locks(clients[-1])

    async def worker(i: int) -> None:
        if name == "raw":
            c = aredis.Redis(port=port, retry=None, socket_timeout=None, single_connection_client=True)
            clients.append(c)
            owner = f"raw-{i}"
            while not stop.is_set():
                if await c.execute_command("RLOCK.ACQUIRE", key, owner, "LEASE", 30000, "BLOCK", 1000) is None:
                    continue
                tally.granted(i)
                tally.releasing()
                await c.execute_command("RLOCK.RELEASE", key, owner)
        elif name == "rlock_client":
            lock = locks.lock(key, wait=1)
            while not stop.is_set():
                h = await lock.acquire()
                if h is None:
                    continue
                tally.granted(i)
                tally.releasing()
                await h.release()
        elif name == "redis-py Lock":
            lk = shared.lock(key, timeout=30, blocking_timeout=1)
            while not stop.is_set():
                if not await lk.acquire():
                    continue
                tally.granted(i)
                tally.releasing()
                await lk.release()

    tasks = [asyncio.create_task(worker(i)) for i in range(workers)]
    await asyncio.sleep(0.5)
    tally.restart()
    cpu0 = server_cpu(r)
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    figures = tally.figures(time.perf_counter() - t0, server_cpu(r) - cpu0)
    stop.set()
    await asyncio.wait(tasks, timeout=5)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for c in clients:
        await c.aclose()
    return figures


def contended_tasks(*args) -> dict:
    return asyncio.run(contended_tasks_async(*args))


# ------------------------------------------------------------------ report


def med(rows: list[dict], field: str) -> float:
    return statistics.median(r[field] for r in rows)


# ------------------------------------------------------------------ --json (bench/report/README.md)

PYTHON_PATHS = {
    "raw": ("RLOCK.ACQUIRE / RLOCK.RELEASE sent with redis-py (BLOCK 1000 when contended)", "rlock"),
    "rlock_client": ("rlock_client Locks.lock(), acquire() / release()", "rlock"),
    "redis-py Lock": ("redis-py's Lock (SET NX PX, Lua release; sleeps 0.1 s between tries)", "baseline"),
    "python-redis-lock": ("python-redis-lock's Lock (SET NX, waits for a list push)", "baseline"),
}
CONTENDED_METRICS = (  # the bench's field, the schema's metric, unit, better
    ("handoffs", "handoffs_per_sec", "hand-offs/s", "higher"),
    ("acquisitions", "acquisitions_per_sec", "acquisitions/s", "higher"),
    ("fairness", "fairness", "min/max per worker", "higher"),
    ("p50_ms", "latency_p50_ms", "ms", "lower"),
    ("cpu_us", "server_us_per_handoff", "µs", "lower"),
)


def finite(x: float) -> float | None:
    return x if x == x and x not in (float("inf"), float("-inf")) else None


def results_json(args: argparse.Namespace, r: redis.Redis, un: dict, contended: dict, load_before: str) -> dict:
    """The run in the common schema: every figure is this run's own."""
    from importlib.metadata import version

    info = r.info("server")
    server_version = (
        f"Valkey {info['valkey_version']} (redis_version {info['redis_version']})"
        if "valkey_version" in info
        else f"Redis {info['redis_version']}"
    )
    repo = os.path.join(os.path.dirname(__file__), "..", "..", "..")
    git = lambda *a: subprocess.run(["git", "-C", repo, *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    server = args.flavor
    results, ratios, not_measured = [], [], []

    def result(scenario: str, setting: dict, path: str, metric: str, unit: str, better: str, rounds: list) -> None:
        results.append({
            "scenario": scenario, "server": server, "setting": setting, "path": path, "metric": metric,
            "unit": unit, "better": better, "rounds": [finite(x) for x in rounds],
            "median": finite(statistics.median(rounds)),
        })

    def ratio(scenario: str, setting: dict, metric: str, values: dict) -> None:
        for other in values:
            if other != "rlock_client":
                mine, theirs = statistics.median(values["rlock_client"]), statistics.median(values[other])
                value = mine / theirs if theirs > 0 else float("nan")
                ratios.append({"scenario": scenario, "server": server, "setting": setting, "metric": metric,
                               "path": "rlock_client", "baseline": other, "value": finite(value)})

    for name, rounds in un.items():
        result("uncontended", {}, name, "pairs_per_sec", "pairs/s", "higher", rounds)
    ratio("uncontended", {}, "pairs_per_sec", un)
    for mode, rows in contended.items():
        setting = {"workers": args.workers, "hold_ms": 0, "mode": mode}
        for name, runs in rows.items():
            for field, metric, unit, better in CONTENDED_METRICS:
                result("contended", setting, name, metric, unit, better, [run[field] for run in runs])
        ratio("contended", setting, "handoffs_per_sec", {n: [run["handoffs"] for run in v] for n, v in rows.items()})
        for name in PYTHON_PATHS:
            if name not in rows:
                not_measured.append({"scenario": "contended", "server": server, "setting": setting, "path": name,
                                     "reason": f"{name} has no asyncio API"})
    return {
        "schema": "rlock-bench/1",
        "suite": "python",
        "language": "Python",
        "title": "The Python client against redis-py's Lock and python-redis-lock",
        "command": "python clients/python/bench/bench.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"cpu": cpu, "nproc": os.cpu_count(), "load_before": load_before,
                    "pinning": "server on CPU 0, this process on CPU 1 (sched_setaffinity)"},
        "build": {"commit": git("rev-parse", "--short", "HEAD") or "?",
                  "dirty": bool(git("status", "--porcelain", "--", "src", "clients/python/src")),
                  "module_version": str(next((m[b"ver"] for m in r.execute_command("MODULE", "LIST")
                                              if m.get(b"name") == b"rlock"), "?")),
                  "client": f"rlock-client {version('rlock-client')}, redis-py {version('redis')}",
                  "runtime": f"{platform.python_implementation()} {platform.python_version()}"},
        "plan": {"rounds": args.rounds, "seconds": args.seconds, "workers": args.workers},
        "servers": [{"id": server, "version": server_version}],
        "scenarios": [
            {"id": "uncontended", "title": "Uncontended acquire+release pairs (one thread)",
             "primary_metric": "pairs_per_sec"},
            {"id": "contended", "title": "Contended: workers on one lock, hold 0",
             "primary_metric": "handoffs_per_sec"},
        ],
        "paths": [{"scenario": s, "path": name, "label": label, "role": role}
                  for s in ("uncontended", "contended") for name, (label, role) in PYTHON_PATHS.items()],
        "results": results,
        "ratios": ratios,
        "not_measured": not_measured,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flavor", default="redis")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=32)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON (bench/report/README.md)")
    args = ap.parse_args()
    load_before = " ".join(open("/proc/loadavg").read().split()[:3])

    server = Server(args.flavor)
    server.start()
    try:
        os.sched_setaffinity(server.proc.pid, {0})
    except (AttributeError, OSError):
        pass
    pin(1)
    r = redis.Redis(port=server.port)
    print(f"# Python client benchmark: {args.flavor}, {args.rounds} rounds, medians; server on core 0, load on core 1")
    try:
        names = ["raw", "rlock_client", "redis-py Lock", "python-redis-lock"]
        un: dict = {n: [] for n in names}
        for _ in range(args.rounds):
            for n in names:
                un[n].append(uncontended(n, server.port, args.seconds))
        m = {n: statistics.median(v) for n, v in un.items()}
        print("\n## Uncontended acquire+release pairs/s (one thread)")
        print("| contender | pairs/s | rlock_client ÷ it |")
        print("|---|---:|---:|")
        for n in names:
            print(f"| {n} | {m[n]:,.0f} | {m['rlock_client'] / m[n]:.2f} |")

        contended: dict = {}
        for label, fn, contenders in (
            (f"{args.workers} threads", contended_threads, names),
            (f"{args.workers} asyncio tasks", contended_tasks, ["raw", "rlock_client", "redis-py Lock"]),
        ):
            rows: dict = {n: [] for n in contenders}
            for _ in range(args.rounds):
                for n in contenders:
                    rows[n].append(fn(n, server.port, args.workers, args.seconds * 2, r))
            contended["threads" if fn is contended_threads else "asyncio"] = rows
            base = med(rows["rlock_client"], "handoffs")
            print(f"\n## Contended, {label} on one lock, hold 0")
            print("| contender | hand-offs/s | rlock_client ÷ it | hand-off p50 | fairness (min/max) | server CPU per hand-off |")
            print("|---|---:|---:|---:|---:|---:|")
            for n in contenders:
                h = med(rows[n], "handoffs")
                print(
                    f"| {n} | {h:,.0f} | {base / h if h else float('nan'):.2f} | {med(rows[n], 'p50_ms'):.3f} ms | "
                    f"{med(rows[n], 'fairness'):.2f} | {med(rows[n], 'cpu_us'):.1f} µs |"
                )
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results_json(args, r, un, contended, load_before), f, indent=2, ensure_ascii=False)
                f.write("\n")
            print(f"wrote {args.json}", file=sys.stderr)
    finally:
        server.close()


if __name__ == "__main__":
    main()
