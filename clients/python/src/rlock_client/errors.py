"""The errors rlock_client raises. Server errors it does not know pass through as
redis-py's own (``redis.exceptions.ResponseError`` and its kind)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = [
    "RlockError",
    "NotAcquired",
    "NotHeld",
    "StaleToken",
    "Unexpected",
    "Lost",
    "Deadlock",
    "DeadlockWait",
    "NotAcknowledged",
    "DuplicateValue",
]


class RlockError(Exception):
    """Base class of every error this package raises on its own."""


class NotAcquired(RlockError):
    """The wait ended before the lock (permits, leadership) was granted.

    Raised by the context managers; ``acquire()`` returns ``None`` instead."""


class NotHeld(RlockError):
    """A release by an owner that does not hold the lock (the server's ``NOTHELD``): ``key``
    (for a multi-key release, the first key sent) and ``owner`` say which."""

    def __init__(self, message: str, key: Optional[str] = None, owner: Optional[str] = None):
        super().__init__(message)
        self.key = key
        self.owner = owner


class StaleToken(NotHeld):
    """A guarded command (``hold.guard(...)``) of a fenced hold refused, and not run, because
    the lock was taken again since this hold got its token (the server's ``STALETOKEN``): the
    owner holds it, but as a newer hold (another process, or a restart with the same owner).
    ``token`` is the hold's, ``current`` the lock's now as the server said it (or None)."""

    def __init__(self, message: str, key: Optional[str] = None, owner: Optional[str] = None,
                 token: Optional[int] = None, current: Optional[int] = None):
        super().__init__(message, key, owner)
        self.token = token
        self.current = current


class Unexpected(RlockError):
    """A reply the server's contract does not allow (an acquire replied 0): never taken as a grant."""


class Lost(RlockError):
    """The hold is gone: a renewal was refused, the lease ran out while renewals failed,
    or the lock was force-released."""


@dataclass(frozen=True)
class DeadlockWait:
    """One wait of a deadlock cycle: ``owner`` waits for ``key``, held by ``holder``
    (``kept`` when the lock is kept for a multi-key call rather than held)."""

    owner: str
    key: str
    holder: str
    kept: bool = False


class Deadlock(RlockError):
    """The wait would close a cycle of waits in the server: nothing was taken.

    ``cycle`` lists the waits, this call's first."""

    def __init__(self, message: str, cycle: list[DeadlockWait]):
        super().__init__(message)
        self.cycle = cycle


class NotAcknowledged(RlockError):
    """A grant that fewer replicas than asked acknowledged (``WAIT``) in time: it was
    released. ``acked`` is how many did."""

    def __init__(self, message: str, acked: int = 0):
        super().__init__(message)
        self.acked = acked


class DuplicateValue(RlockError):
    """A campaign whose value is already the leader's (the grant came back as a re-entry)."""
