#!/usr/bin/env python3
"""10,000 fenced locks (`RLOCK.ACQUIRE k o TOKEN`, a new counter each) on a 3-primary cluster.

Starts 3 primaries with the module (the first under callgrind with --callgrind), creates the
cluster, sends each acquire to the primary of its slot in pipelines of 100, and prints the wall
time, the servers' CPU (INFO cpu), and with --callgrind the first primary's instructions per
acquire it served. See docs/PROFILE.md.

    scripts/cluster_fenced.py --module target/release/librlock.so [--server valkey-server] [--callgrind]
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from callgrind_pairs import Conn, total_ir  # noqa: E402


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def cpu(conn):
    info = conn.pipeline([("INFO", "cpu")])[0].decode()
    fields = dict(l.split(":", 1) for l in info.splitlines() if ":" in l)
    return float(fields["used_cpu_user"]) + float(fields["used_cpu_sys"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--module", required=True)
    p.add_argument("--server", default="/usr/bin/redis-server")
    p.add_argument("--locks", type=int, default=10000)
    p.add_argument("--base-port", type=int, default=7411)
    p.add_argument("--callgrind", action="store_true")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="cl-")
    ports = [args.base_port + i for i in range(3)]
    procs = []
    out = os.path.join(tmp, "cg.out")
    try:
        for i, port in enumerate(ports):
            d = os.path.join(tmp, str(port))
            os.makedirs(d)
            cmd = [args.server, "--port", str(port), "--dir", d, "--save", "", "--appendonly", "no",
                   "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                   "--loadmodule", os.path.abspath(args.module)]
            if i == 0 and args.callgrind:
                cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + cmd
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        conns = []
        for port in ports:
            for _ in range(300):
                try:
                    c = Conn(port)
                    c.pipeline([("PING",)])
                    conns.append(c)
                    break
                except OSError:
                    time.sleep(0.1)
        per = 16384 // 3
        ranges = [(0, per - 1), (per, 2 * per - 1), (2 * per, 16383)]
        for c, (a, b) in zip(conns, ranges):
            c.pipeline([("CLUSTER", "ADDSLOTSRANGE", a, b)])
        for c in conns[1:]:
            c.pipeline([("CLUSTER", "MEET", "127.0.0.1", ports[0])])
        for _ in range(600):
            states = [c.pipeline([("CLUSTER", "INFO")])[0] for c in conns]
            if all(b"cluster_state:ok" in s and b"cluster_known_nodes:3" in s for s in states):
                break
            time.sleep(0.1)
        else:
            raise SystemExit("cluster not ok")
        time.sleep(1)

        def owner(slot):
            return 0 if slot < per else (1 if slot < 2 * per else 2)

        keys = ["lock-%d" % i for i in range(args.locks)]
        by_node = [[], [], []]
        for k in keys:
            by_node[owner(crc16(k.encode()) & 0x3FFF)].append(k)
        # Warm-up on other keys, then zero the counters.
        for n, c in enumerate(conns):
            warm = [k + "-warm" for k in by_node[n][:50]]
            warm = [k for k in warm if owner(crc16(k.encode()) & 0x3FFF) == n]
            if warm:
                c.pipeline([("RLOCK.ACQUIRE", k, "o", "TOKEN") for k in warm])
        if args.callgrind:
            subprocess.run(["callgrind_control", "-z", str(procs[0].pid)], check=True,
                           stdout=subprocess.DEVNULL)
        before = [cpu(c) for c in conns]
        t0 = time.time()
        for n, c in enumerate(conns):
            ks = by_node[n]
            for i in range(0, len(ks), 100):
                for r in c.pipeline([("RLOCK.ACQUIRE", k, "o", "TOKEN") for k in ks[i:i + 100]]):
                    if r != 1:
                        raise SystemExit("unexpected reply %r" % (r,))
        wall = time.time() - t0
        used = sum(cpu(c) - b for c, b in zip(conns, before))
        if args.callgrind:
            subprocess.run(["callgrind_control", "-d", str(procs[0].pid)], check=True,
                           stdout=subprocess.DEVNULL)
        print("%d fenced locks: wall %.3f s, servers' CPU %.3f s (%.1f us/lock)"
              % (args.locks, wall, used, used * 1e6 / args.locks))
        if args.callgrind:
            dump = sorted(glob.glob(out + ".*"))[0]
            # INFO cpu calls are in the window too: negligible against thousands of acquires.
            print("first primary: %d acquires, %.0f instructions each"
                  % (len(by_node[0]), total_ir(dump) / len(by_node[0])))
    finally:
        for pr in procs:
            pr.terminate()
        for pr in procs:
            pr.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
