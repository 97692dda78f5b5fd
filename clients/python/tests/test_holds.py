"""Sessions, fencing, deadlocks, the watchdog: C09, C10, C11, C16."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from rlock_client import Deadlock, Locks
from servers import Server

SRC = os.path.join(os.path.dirname(__file__), "..", "src")


def test_c09_session_hold_ends_with_the_holders_process(server, r, key):
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {SRC!r})
        from rlock_client import Locks
        locks = Locks.from_url({server.url!r})
        hold = locks.lock({key!r}, session=True, lease=60).acquire()
        print("held", hold.owner, flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("held"), line
        assert r.exists(key)
        assert r.pttl(key) > 50_000
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        t0 = time.monotonic()
        while r.exists(key) and time.monotonic() - t0 < 2:
            time.sleep(0.01)
        assert not r.exists(key)
        assert time.monotonic() - t0 < 0.5
    finally:
        proc.kill()
        proc.wait()


def test_c09_session_hold_in_process(locks, r, key):
    hold = locks.lock(key, session=True).acquire()
    assert hold is not None and r.exists(key)
    assert hold.release() is True
    assert not r.exists(key)


def test_c10_tokens_increase_across_holders(locks, key):
    tokens = []
    for i in range(4):
        lock = locks.lock(key, fenced=True, owner=f"o{i}")
        with lock as hold:
            tokens.append(hold.token)
    assert tokens == sorted(tokens) and len(set(tokens)) == 4


def test_c10_tokens_increase_across_an_aof_restart(flavor):
    s = Server(flavor, {"appendonly": "yes", "appendfsync": "always"}).start()
    try:
        locks = Locks.from_url(s.url)
        with locks.lock("fenced", fenced=True, owner="a") as h:
            before = h.token
        with locks.lock("fenced", fenced=True, owner="b") as h:
            before = max(before, h.token)
        s.restart()
        locks = Locks.from_url(s.url)
        with locks.lock("fenced", fenced=True, owner="c") as h:
            assert h.token > before
    finally:
        s.close()


def test_c11_crossing_holders_get_deadlock_naming_both(locks, key):
    k1, k2 = f"{key}:1", f"{key}:2"
    alice = locks.lock(k1, owner="alice").acquire()
    bob = locks.lock(k2, owner="bob").acquire()
    got = {}
    t = threading.Thread(target=lambda: got.update(a=locks.lock(k2, owner="alice", wait=5).acquire()))
    t.start()
    end = time.monotonic() + 5
    while not locks.waiters(k2) and time.monotonic() < end:
        time.sleep(0.01)
    with pytest.raises(Deadlock) as e:
        locks.lock(k1, owner="bob", wait=5).acquire()
    cycle = e.value.cycle
    assert cycle[0].owner == "bob" and cycle[0].key == k1 and cycle[0].holder == "alice"
    assert {(w.owner, w.key, w.holder) for w in cycle} == {("bob", k1, "alice"), ("alice", k2, "bob")}
    bob.release()
    t.join(5)
    assert got["a"] is not None
    got["a"].release()
    alice.release()


def test_c16_one_watchdog_renews_a_thousand_holds_in_batches(server, r, key):
    locks = Locks.from_url(server.url, watchdog_lease=1.5)
    before = {t.ident for t in threading.enumerate()}
    holds = [locks.lock(f"{key}:{i}").acquire() for i in range(1000)]
    r.execute_command("CONFIG", "RESETSTAT")
    time.sleep(1.6)
    new = [t for t in threading.enumerate() if t.ident not in before]
    assert [t.name for t in new] == ["rlock-watchdog"]
    renews = r.info("commandstats")["cmdstat_rlock.renew"]["calls"]
    assert renews >= 1000
    dog = locks._watchdog
    assert dog.renewals >= 1000
    # batched: a round renews many holds in one pipeline, not one round per hold
    assert dog.rounds * 50 < dog.renewals, (dog.rounds, dog.renewals)
    assert not any(h.lost.is_set() for h in holds)
    for h in holds:
        h.release()


def test_c16_after_fork_the_child_renews_and_releases_nothing(server, r, key):
    locks = Locks.from_url(server.url, watchdog_lease=0.6)
    hold = locks.lock(key).acquire()
    r.execute_command("CONFIG", "RESETSTAT")
    pid = os.fork()
    if pid == 0:  # the child: a second of life with the parent's hold in memory
        code = 0
        try:
            if hold.release() is not False:
                code = 3
            time.sleep(1.2)
        except BaseException:
            code = 4
        os._exit(code)
    hold.release()  # the parent gives it back; nobody may renew or release it now
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    stats = r.info("commandstats")
    assert stats.get("cmdstat_rlock.renew", {}).get("calls", 0) == 0, stats.get("cmdstat_rlock.renew")
    assert stats["cmdstat_rlock.release"]["calls"] == 1
    assert not r.exists(key)


def test_c05_loss_told_at_the_lease_end_while_the_server_hangs(flavor):
    s = Server(flavor).start()
    try:
        locks = Locks.from_url(s.url, watchdog_lease=0.9)
        hold = locks.lock("hung").acquire()
        acquired = time.monotonic()
        os.kill(s.proc.pid, signal.SIGSTOP)
        try:
            assert hold.lost.wait(3)
            assert time.monotonic() - acquired < 0.9 + 0.35, time.monotonic() - acquired
        finally:
            os.kill(s.proc.pid, signal.SIGCONT)
    finally:
        s.close()
