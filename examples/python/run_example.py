"""Runs example.py against a fresh redis-server with the module loaded (used by `make test`).

The module is $RLOCK_MODULE, else target/debug/librlock.so; the server binary is
$REDIS_SERVER, else redis-server on $PATH. The server gets a free port and a temp dir, and
is stopped whatever happens.
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


def main() -> int:
    module = pathlib.Path(os.environ.get("RLOCK_MODULE", ROOT / "target/debug/librlock.so"))
    if not module.is_file():
        sys.exit(f"module not found at {module}: run `cargo build -p rlock` first")
    server = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
    if not server:
        sys.exit("redis-server not found: apt-get install -y redis-server, or set REDIS_SERVER")
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
                        sys.exit("redis-server with the module did not start")
                    time.sleep(0.05)
            example.main(url)
        finally:
            proc.kill()
            proc.wait()
    print("python example: 1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
