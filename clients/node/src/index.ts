export { Locks, Owner, ReadWriteLock, type LocksOptions } from "./locks.js";
export { Lock, Hold, type LockOptions, type AcquireOptions } from "./lock.js";
export { MultiLock, MultiHold, Semaphore, Permits, PermitSemaphore, LeasedPermit, Latch, Election, Leadership, type Leader, type MultiOptions, type PermitOptions, type LeaseOptions } from "./sync.js";
export { RlockError, NotAcquiredError, NotHeldError, LockLostError, DeadlockError, NotAcknowledgedError, type DeadlockWait } from "./errors.js";
export type { LockInfo, Waiter, ScannedLock, ContendedKey } from "./queries.js";
export type { UrlOptions, DriverName } from "./conn.js";
export type { Side } from "./command.js";
/** This package's version, which is also the version of the rlock module it is made for. */
export const VERSION = "4.0.0";
