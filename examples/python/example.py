"""rlock from Python with plain redis-py: the module's commands are ordinary Redis commands.

    python3 example.py redis://127.0.0.1:6379/
"""

import sys
import uuid

import redis

CLIENT = str(uuid.uuid4())  # owners are "<client-uuid>:<n>", as Redisson names them


def main(url: str) -> None:
    r = redis.Redis.from_url(url)
    alice, bob = f"{CLIENT}:1", f"{CLIENT}:2"

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
    r.execute_command("RLOCK.FORCERELEASE", "orders")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/")
