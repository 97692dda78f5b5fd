// Owner: a scope whose locks share one owner id (Redisson's thread, in Node).
import { checkName, settings, type LockOptions } from "./core/args.js";
import type { Hub } from "./hub.js";
import { Lock, type Hold } from "./lock.js";
import { MultiLock, type MultiOptions } from "./multilock.js";
import { ReadWriteLock } from "./rwlock.js";

const NO_OWNER: ReadonlySet<string> = new Set(["lease", "wait", "fair", "fenced", "session", "syncReplicas"]);

/** Locks that share one owner id: re-entry and deadlock detection work across them. */
export class Owner {
  /** @internal */
  constructor(
    private readonly hub: Hub,
    readonly id: string,
  ) {}
  lock(name: string, options?: Omit<LockOptions, "owner">): Lock {
    return new Lock(this.hub, checkName(name), this.id, undefined, settings(options, NO_OWNER));
  }
  readWrite(name: string): ReadWriteLock {
    return new ReadWriteLock(this.hub, checkName(name), this.id);
  }
  multi(names: string[], options?: Omit<MultiOptions, "owner">): MultiLock {
    return new MultiLock(this.hub, names, { ...options, owner: this.id });
  }
  /** Acquires `name` for this owner (waiting as long as it takes unless `wait` is given), runs `fn(hold)`, releases. */
  using<T>(name: string, options: Omit<LockOptions, "owner"> | undefined, fn: (hold: Hold) => Promise<T> | T): Promise<T> {
    return this.lock(name, options).using(fn);
  }
}
