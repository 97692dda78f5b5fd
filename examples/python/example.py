"""rlock from Python with plain redis-py: the module's commands are ordinary Redis commands.

    python3 example.py redis://127.0.0.1:6379/
"""

import sys
import time
import uuid

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

CLIENT = str(uuid.uuid4())  # owners are "<client-uuid>:<n>", as Redisson names them

# redis-py 6+ re-sends a command after a timeout or a reconnect. A re-sent ACQUIRE re-enters
# (hold count 2), and one RELEASE then leaves the lock held for its whole lease. Lock
# connections never retry.
NO_RETRY = Retry(NoBackoff(), 0)


def main(url: str) -> None:
    r = redis.Redis.from_url(url, retry=NO_RETRY)
    alice, bob, carol = f"{CLIENT}:1", f"{CLIENT}:2", f"{CLIENT}:3"

    # Take the lock for 10 s with a fencing token; None would mean someone else holds it.
    token = r.execute_command("RLOCK.ACQUIRE", "orders", alice, "LEASE", 10_000, "TOKEN")
    print(f"alice holds orders, fencing token {token}")

    # Bob tries once and is refused; with BLOCK 2000 he would wait in the server instead.
    assert r.execute_command("RLOCK.ACQUIRE", "orders", bob) is None
    print("bob is refused while alice holds it")

    # Re-entry: the same owner acquires again; the reply is the hold count.
    assert r.execute_command("RLOCK.ACQUIRE", "orders", alice, "LEASE", 10_000) == 2
    print("lock hash, Redisson layout:", r.hgetall("orders"))

    # Lengthen the lease, then undo both holds: 0 = still held, 1 = free.
    assert r.execute_command("RLOCK.RENEW", "orders", alice, "LEASE", 30_000) == 1
    assert r.execute_command("RLOCK.RELEASE", "orders", alice) == 0
    assert r.execute_command("RLOCK.RELEASE", "orders", alice) == 1

    # Releasing a lock you do not hold is an error, not a silent no-op.
    try:
        r.execute_command("RLOCK.RELEASE", "orders", bob)
        raise AssertionError("expected NOTHELD")
    except redis.ResponseError as e:
        print("bob's release:", e)

    # Bob gets it now, with a larger token.
    bob_token = r.execute_command("RLOCK.ACQUIRE", "orders", bob, "TOKEN")
    assert bob_token > token
    print(f"bob holds orders, token {bob_token}")
    print("RLOCK.INFO:", r.execute_command("RLOCK.INFO", "orders"))

    # Carol waits in the server but gives up first (socket timeout). A caller that may give up
    # on a BLOCK uses SESSION: redis-py closes a connection that timed out, and the server then
    # drops her wait, and releases a grant that raced her giving up. Without SESSION such a
    # grant would hold the lock, unseen, for its whole lease.
    impatient = redis.Redis.from_url(url, retry=NO_RETRY, socket_timeout=0.2)
    try:
        impatient.execute_command("RLOCK.ACQUIRE", "orders", carol, "BLOCK", 5_000, "SESSION")
        raise AssertionError("carol should have given up: bob holds the lock")
    except redis.TimeoutError:
        print("carol gave up after 0.2 s; her wait ends with her connection")
    assert r.execute_command("RLOCK.RELEASE", "orders", bob) == 1
    deadline = time.monotonic() + 2
    while r.exists("orders") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not r.exists("orders"), "a dead waiter must not end up holding the lock"
    print("bob released; nobody holds orders")

    semaphore_and_latch(r)


def semaphore_and_latch(r: redis.Redis) -> None:
    """Redisson's semaphore and count-down latch: a Java service on `getSemaphore("pool")` or
    `getCountDownLatch("batch")` shares these keys."""
    assert r.execute_command("RSEM.TRYSETPERMITS", "pool", 2) == 1
    assert r.execute_command("RSEM.ACQUIRE", "pool", "PERMITS", 2) == 1
    # No permit left: a second caller waits in the server, and gives up after 100 ms.
    assert r.execute_command("RSEM.ACQUIRE", "pool", "BLOCK", 100) is None
    assert r.execute_command("RSEM.RELEASE", "pool", "PERMITS", 2) == 2
    print("semaphore pool: 2 permits taken, a waiter timed out, 2 given back")

    assert r.execute_command("RLATCH.TRYSETCOUNT", "batch", 2) == 1
    assert r.execute_command("RLATCH.AWAIT", "batch") is None  # not yet
    assert r.execute_command("RLATCH.COUNTDOWN", "batch") == 1
    assert r.execute_command("RLATCH.COUNTDOWN", "batch") == 0
    assert r.execute_command("RLATCH.AWAIT", "batch", "BLOCK", 1_000) == 1
    print("latch batch: counted down twice, its waiters pass")

    leased_permits(r)


def leased_permits(r: redis.Redis) -> None:
    """Redisson's permit-expiring semaphore (`getPermitExpirableSemaphore("slots")`): each permit
    is leased under an id and comes back by itself when its lease ends."""
    assert r.execute_command("RSEM.TRYSETPERMITS", "slots", 1) == 1
    [first] = r.execute_command("RSEM.LEASE", "slots", "LEASE", 300)
    print(f"slots: leased permit {first.decode()} for 300 ms")
    # The only permit is leased: this call waits in the server and is served the moment the
    # lease ends, by the server's timer; nobody gives the first permit back.
    started = time.monotonic()
    [second] = r.execute_command("RSEM.LEASE", "slots", "LEASE", 10_000, "BLOCK", 5_000)
    waited_ms = (time.monotonic() - started) * 1000
    assert 100 < waited_ms < 2_000, waited_ms
    print(f"slots: a waiter got {second.decode()} {waited_ms:.0f} ms later, when the lease ended")
    assert r.execute_command("RSEM.RETURN", "slots", first) == 0  # ended: back already
    assert r.execute_command("RSEM.RENEW", "slots", second, "LEASE", 30_000) == 1
    assert r.execute_command("RSEM.RETURN", "slots", second) == 1
    assert r.execute_command("RSEM.AVAILABLE", "slots") == 1
    print("slots: renewed, then given back")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/")
