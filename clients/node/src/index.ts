export { Locks, type LocksOptions } from "./locks.js";
export { Owner } from "./owner.js";
export { Lock, Hold } from "./lock.js";
export { ReadWriteLock } from "./rwlock.js";
export { MultiLock, MultiHold, type MultiOptions } from "./multilock.js";
export { Semaphore, Permits } from "./semaphore.js";
export { PermitSemaphore, LeasedPermit } from "./permits.js";
export { Latch } from "./latch.js";
export { Election, Leadership } from "./election.js";
export type { LockOptions, AcquireOptions, PermitOptions, LeaseOptions } from "./core/args.js";
export type { Side } from "./core/commands.js";
export type { LockInfo, Waiter, ScannedLock, ContendedKey, Leader, Reply } from "./core/replies.js";
export { RlockError, ServerError, NoReplyError, NotAcquiredError, NotHeldError, StaleTokenError, LockLostError, DeadlockError, NotAcknowledgedError, type DeadlockWait } from "./errors.js";
export type { UrlOptions, DriverName } from "./conn.js";
/** This package's version, which is also the version of the rlock module it is made for. */
export const VERSION = "4.1.0";
