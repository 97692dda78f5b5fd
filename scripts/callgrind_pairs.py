#!/usr/bin/env python3
"""Server instructions per uncontended pair, counted by callgrind (see docs/PROFILE.md).

Starts the server under `valgrind --tool=callgrind` with the module, warms up, zeroes the
counters, sends PAIRS pairs of one path in pipelines of 16 (8 acquires on distinct random keys
of 100,000, then their 8 releases), dumps, and prints instructions per pair. Instruction counts
do not depend on machine load, so two builds compare exactly.

    scripts/callgrind_pairs.py --module target/release/librlock.so [--server valkey-server]
        [--paths plain,fair,token,req,read,write,rsem,set,lua] [--pairs 4000] [--annotate]

--annotate keeps each dump and prints the top inclusive functions of each path.
"""

import argparse
import glob
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def redisson_script(name):
    text = open(os.path.join(HERE, "..", "module-tests", "src", "redisson.rs")).read()
    m = re.search(r"pub const %s: &str = r#\"(.*?)\"#;" % name, text, re.S)
    return m.group(1)


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(1 << 16)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(1 << 16)
            data, self.buf = self.buf[:n], self.buf[n + 2 :]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        if kind == b"-":
            return RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"_":
            return None
        return rest

    def pipeline(self, cmds):
        self.s.sendall(b"".join(encode(*c) for c in cmds))
        return [self._reply() for _ in cmds]


def path_commands(path, shas, rng):
    """Returns (acquire(key, i), release(key, i)) command makers."""
    lease = 30000
    if path == "plain":
        return (lambda k, i: ("RLOCK.ACQUIRE", k, "o", "LEASE", lease),
                lambda k, i: ("RLOCK.RELEASE", k, "o"))
    if path == "fair":
        return (lambda k, i: ("RLOCK.ACQUIRE", k, "o", "FAIR", "LEASE", lease),
                lambda k, i: ("RLOCK.RELEASE", k, "o"))
    if path == "token":
        return (lambda k, i: ("RLOCK.ACQUIRE", k, "o", "LEASE", lease, "TOKEN"),
                lambda k, i: ("RLOCK.RELEASE", k, "o"))
    if path == "req":
        return (lambda k, i: ("RLOCK.ACQUIRE", k, "o", "LEASE", lease, "REQ", "a%d" % i),
                lambda k, i: ("RLOCK.RELEASE", k, "o", "REQ", "r%d" % i))
    if path == "read":
        return (lambda k, i: ("RLOCK.ACQUIRE", k, "o", "READ", "LEASE", lease),
                lambda k, i: ("RLOCK.RELEASE", k, "o", "READ"))
    if path == "write":
        return (lambda k, i: ("RLOCK.ACQUIRE", k, "o", "WRITE", "LEASE", lease),
                lambda k, i: ("RLOCK.RELEASE", k, "o", "WRITE"))
    if path == "rsem":
        return (lambda k, i: ("RSEM.ACQUIRE", "sem" + k),
                lambda k, i: ("RSEM.RELEASE", "sem" + k))
    if path == "set":
        return (lambda k, i: ("SET", k, "o", "NX", "PX", lease),
                lambda k, i: ("DEL", k))
    if path == "lua":
        return (lambda k, i: ("EVALSHA", shas[0], 1, k, lease, "o"),
                lambda k, i: ("EVALSHA", shas[1], 2, k, "redisson_lock__channel:{%s}" % k, 0, lease, "o"))
    raise SystemExit("unknown path " + path)


def run_pairs(conn, acquire, release, pairs, rng, counter):
    for _ in range(pairs // 8):
        keys = ["k%d" % rng.randrange(100000) for _ in range(8)]
        while len(set(keys)) < 8:
            keys = ["k%d" % rng.randrange(100000) for _ in range(8)]
        cmds = []
        for k in keys:
            counter[0] += 1
            cmds.append(acquire(k, counter[0]))
        for k in keys:
            counter[0] += 1
            cmds.append(release(k, counter[0]))
        for reply in conn.pipeline(cmds):
            if isinstance(reply, RuntimeError):
                raise SystemExit("error reply: %s (%s)" % (reply, cmds[0]))


def total_ir(outfile):
    for line in open(outfile):
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit("no totals in " + outfile)


def measure(args, path):
    tmp = tempfile.mkdtemp(prefix="cg-")
    out = os.path.join(tmp, "cg.out")
    port = args.port
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
           args.server, "--port", str(port), "--save", "", "--appendonly", "no",
           "--loadmodule", os.path.abspath(args.module)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while True:
            try:
                conn = Conn(port)
                conn.pipeline([("PING",)])
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        shas = [conn.pipeline([("SCRIPT", "LOAD", redisson_script(n))])[0].decode()
                for n in ("TRY_LOCK", "UNLOCK")]
        if path == "rsem":
            conn.pipeline([("RSEM.TRYSETPERMITS", "semk%d" % i, 1000) for i in range(100000)])
        rng = random.Random(1)
        counter = [0]
        acquire, release = path_commands(path, shas, rng)
        run_pairs(conn, acquire, release, args.warmup, rng, counter)
        subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True,
                       stdout=subprocess.DEVNULL)
        run_pairs(conn, acquire, release, args.pairs, rng, counter)
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True,
                       stdout=subprocess.DEVNULL)
    finally:
        proc.terminate()
        proc.wait()
    dumps = sorted(f for f in glob.glob(out + ".*") if re.search(r"\.\d+$", f))
    dump = dumps[0]
    per_pair = total_ir(dump) / args.pairs
    if args.annotate:
        keep = "%s/%s-%s.cg" % (args.keep_dir, os.path.basename(args.module), path)
        os.makedirs(args.keep_dir, exist_ok=True)
        os.replace(dump, keep)
        print("  kept", keep)
    return per_pair


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--module", required=True)
    p.add_argument("--server", default="/usr/bin/redis-server")
    p.add_argument("--paths", default="plain,fair,token,req,read,write,rsem")
    p.add_argument("--pairs", type=int, default=4000)
    p.add_argument("--warmup", type=int, default=800)
    p.add_argument("--port", type=int, default=7390)
    p.add_argument("--annotate", action="store_true")
    p.add_argument("--keep-dir", default="/tmp/cg-keep")
    args = p.parse_args()
    for path in args.paths.split(","):
        print("%-6s %9.0f instructions/pair" % (path, measure(args, path)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
