// ReadWriteLock: Redisson's RReadWriteLock; its read and write sides are Lock handles of one owner.
import { settings, type LockOptions } from "./core/args.js";
import type { Hub } from "./hub.js";
import { Lock } from "./lock.js";

const RW_OPTIONS: ReadonlySet<string> = new Set(["lease", "wait", "fenced", "session", "syncReplicas"]);

/** A read-write lock (Redisson's RReadWriteLock): `read()` and `write()` handles share one owner. */
export class ReadWriteLock {
  /** @internal */
  constructor(
    private readonly hub: Hub,
    readonly key: string,
    readonly owner: string,
  ) {}
  /** The read side: shared with other readers. Options as for `locks.lock`, without `fair`. */
  read(options?: Omit<LockOptions, "owner" | "fair">): Lock {
    return new Lock(this.hub, this.key, this.owner, "read", settings(options, RW_OPTIONS));
  }
  /** The write side: alone (the writer may also read). */
  write(options?: Omit<LockOptions, "owner" | "fair">): Lock {
    return new Lock(this.hub, this.key, this.owner, "write", settings(options, RW_OPTIONS));
  }
}
