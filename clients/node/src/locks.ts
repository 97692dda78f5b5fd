// Locks: the entry point, bound to one server or cluster through a node-redis v5 or ioredis client.
import { checkCount, checkLease, checkName, checkOwner, ownerOr, settings, type LockOptions } from "./core/args.js";
import type { ContendedKey, LockInfo, ScannedLock, Waiter } from "./core/replies.js";
import { clientFromUrl, topologyFor, type UrlOptions } from "./conn.js";
import { Election } from "./election.js";
import { Hub } from "./hub.js";
import { Latch } from "./latch.js";
import { Lock, type Hold } from "./lock.js";
import { MultiLock, type MultiOptions } from "./multilock.js";
import { Owner } from "./owner.js";
import { PermitSemaphore } from "./permits.js";
import * as queries from "./queries.js";
import { ReadWriteLock } from "./rwlock.js";
import { Semaphore } from "./semaphore.js";

export interface LocksOptions {
  /** The lease of holds taken without `lease`, renewed every third of it. Default 30,000 ms (Redisson's). */
  watchdogLease?: number;
  /** How long an acquire waits for replicas to acknowledge a grant (`WAIT`). Default 1,000 ms. */
  syncTimeout?: number;
  /** How long a short command may take on the shared connection. Default 2,000 ms. */
  responseTimeout?: number;
  /** Idle connections kept for waits. Default 4. */
  idleConnections?: number;
}

function locksOptions(o: LocksOptions | undefined) {
  if (o === undefined) o = {};
  if (o === null || typeof o !== "object") throw new TypeError("options must be an object");
  return {
    watchdogLease: o.watchdogLease === undefined ? 30_000 : checkLease(o.watchdogLease, "watchdogLease"),
    syncTimeout: o.syncTimeout === undefined ? 1_000 : checkLease(o.syncTimeout, "syncTimeout"),
    responseTimeout: o.responseTimeout === undefined ? 2_000 : checkLease(o.responseTimeout, "responseTimeout"),
    idleConnections: o.idleConnections === undefined ? 4 : checkCount(o.idleConnections, "idleConnections", 0, 1000),
  };
}

/**
 * The locks on one server. `new Locks(client)` takes a node-redis v5 client (`createClient()`)
 * or an ioredis client (`new Redis()`); it opens connections of its own from it (same address,
 * TLS, credentials and database) with the settings lock traffic needs. Close it with `close()`.
 */
export class Locks {
  /** @internal */
  readonly hub: Hub;

  constructor(client: unknown, options?: LocksOptions) {
    const o = locksOptions(options);
    this.hub = new Hub(topologyFor(client), o, undefined);
  }

  /** Locks on the server at `url` (`redis://`, `rediss://` with `tls.ca`), through node-redis when installed, else ioredis. */
  static async fromUrl(url: string, options?: LocksOptions & UrlOptions): Promise<Locks> {
    if (typeof url !== "string") throw new TypeError("url must be a string");
    if (!/^rediss?:\/\//.test(url)) throw new RangeError(`url must start with redis:// or rediss://, got ${JSON.stringify(url)}`);
    const { driver, tls, ...rest } = options ?? {};
    const o = locksOptions(rest);
    const { client } = await clientFromUrl(url, { ...(driver ? { driver } : {}), ...(tls ? { tls } : {}) });
    const locks = Object.create(Locks.prototype) as Locks;
    const close = async () => {
      if (typeof client.disconnect === "function" && typeof client.status === "string") client.disconnect();
    };
    (locks as { hub: Hub }).hub = new Hub(topologyFor(client), o, close);
    return locks;
  }

  /** This client's uuid: the first half of every owner id it makes. */
  get clientId(): string {
    return this.hub.clientId;
  }

  /** The driver in use: `"node-redis"` or `"ioredis"`. */
  get driver(): string {
    return this.hub.driverName;
  }

  /** A handle on the lock `name`, with an owner of its own (unless `owner` is given): acquiring twice through it re-enters; two handles exclude each other. */
  lock(name: string, options?: LockOptions): Lock {
    checkName(name);
    const s = settings(options);
    const owner = options?.owner === undefined ? this.hub.newOwner() : checkOwner(options.owner);
    return new Lock(this.hub, name, owner, undefined, s);
  }

  /** Acquires `name` (waiting as long as it takes unless `wait` is given), runs `fn(hold)` and releases. See `Lock.using`. */
  using<T>(name: string, options: LockOptions | undefined, fn: (hold: Hold) => Promise<T> | T): Promise<T> {
    return this.lock(name, options).using(fn);
  }

  /** A read-write lock (Redisson's RReadWriteLock); its `read()` and `write()` handles share one owner. */
  readWrite(name: string, options?: { owner?: string }): ReadWriteLock {
    checkName(name);
    const owner = options?.owner === undefined ? this.hub.newOwner() : checkOwner(options.owner);
    return new ReadWriteLock(this.hub, name, owner);
  }

  /** A scope whose locks share one owner id (a new one, or `id`): re-entry and deadlock detection work across them. */
  owner(id?: string): Owner {
    return new Owner(this.hub, ownerOr(id, () => this.hub.newOwner()));
  }

  /** Several locks, all or none (`RLOCK.MACQUIRE`). In a cluster, the names must share one slot (hash tags: `{order:7}:stock`): a RangeError otherwise, before anything is sent. */
  multi(names: string[], options?: MultiOptions): MultiLock {
    return new MultiLock(this.hub, names, options);
  }

  /** Redisson's RSemaphore. */
  semaphore(name: string): Semaphore {
    return new Semaphore(this.hub, checkName(name));
  }

  /** Redisson's RPermitExpirableSemaphore: permits with a lease, renewed while held. */
  permitSemaphore(name: string): PermitSemaphore {
    return new PermitSemaphore(this.hub, checkName(name));
  }

  /** Redisson's RCountDownLatch. */
  latch(name: string): Latch {
    return new Latch(this.hub, checkName(name));
  }

  /** Leader election on the lock `name`: the owner is the candidate's value, the fencing token the term. */
  election(name: string): Election {
    return new Election(this.hub, checkName(name));
  }

  /** `RLOCK.FORCERELEASE`: deletes the lock whoever holds it. True if there was one. */
  async forceRelease(name: string): Promise<boolean> {
    return (await this.hub.call(["RLOCK.FORCERELEASE", checkName(name)])) === 1;
  }

  /** `RLOCK.INFO`: holders, lease left, fair queue, blocked waiters, fencing counter. */
  info(name: string): Promise<LockInfo> {
    return queries.info(this.hub, checkName(name));
  }

  /** `RLOCK.WAITERS`: the calls blocked on `name`, in the order they will be served. */
  waiters(name: string): Promise<Waiter[]> {
    return queries.waiters(this.hub, checkName(name));
  }

  /** `RLOCK.SCAN` followed to the end: every lock (and read-write lock) in the database. */
  scan(options?: { match?: string; type?: "lock" | "rwlock" | "LOCK" | "RWLOCK" }): Promise<ScannedLock[]> {
    return queries.scan(this.hub, options);
  }

  /** `INFO rlock` as fields. */
  stats(): Promise<Record<string, string>> {
    return queries.stats(this.hub);
  }

  /** `RLOCK.TOP`: the most contended keys. */
  top(count = 10): Promise<ContendedKey[]> {
    return queries.top(this.hub, checkCount(count, "count", 1, 1000));
  }

  /** Closes this Locks' connections; holds still registered are told they are lost (their locks are not released: their leases end them). */
  close(): Promise<void> {
    return this.hub.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
