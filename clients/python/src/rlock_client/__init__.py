"""rlock_client: the Python client of the rlock Redis module (distributed locks as native
commands, on Redisson-compatible keys). Sync API here; ``rlock_client.asyncio`` mirrors it."""

from ._core import Leader, LockInfo, ScannedLock, Waiter
from ._sync import (
    Election,
    Hold,
    Latch,
    LeasedPermit,
    Leadership,
    Lock,
    Locks,
    MultiHold,
    MultiLock,
    PermitSemaphore,
    Permits,
    ReadWriteLock,
    Semaphore,
)
from .errors import (
    Deadlock,
    DeadlockWait,
    DuplicateValue,
    Lost,
    NotAcknowledged,
    NotAcquired,
    NotHeld,
    RlockError,
    StaleToken,
    Unexpected,
)

__version__ = "4.1.0"

__all__ = [
    "Locks",
    "Lock",
    "Hold",
    "ReadWriteLock",
    "MultiLock",
    "MultiHold",
    "Semaphore",
    "Permits",
    "PermitSemaphore",
    "LeasedPermit",
    "Latch",
    "Election",
    "Leadership",
    "Leader",
    "LockInfo",
    "ScannedLock",
    "Waiter",
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
    "__version__",
]
