// The other synchronizers: multi-key locks, semaphores, leased permits, latches, elections.
import * as command from "./command.js";
import type { Reply } from "./command.js";
import { resending, type Core, type Recover } from "./core.js";
import { NotHeldError, RlockError } from "./errors.js";
import { checkSignal, Lock, releaseHold, runHolding, settings, type AcquireOptions, type Hold } from "./lock.js";
import type { Entry } from "./watchdog.js";

function replyOf(x: Reply | Error | undefined): Reply {
  if (x instanceof Error) throw x;
  return x ?? null;
}

/**
 * Sends `cmd` that may wait `wait` ms: on the shared connection when it does not, else on a
 * dedicated one (see Core.blocking). Given up, a grant read is handed to `giveBack`; one not
 * read is found by `recover` (a call with a `REQ` id: `resending`), or, for a call without one,
 * never lost: `killOnlyBlocked` names it as `CLIENT LIST` does.
 */
async function maybeBlocking(core: Core, cmd: string[], wait: number, signal: AbortSignal | undefined, giveBack: (r: Reply) => Promise<void>, resend: boolean, recover?: Recover, killOnlyBlocked?: string): Promise<Reply> {
  if (wait === 0) return resend ? core.callOnce(cmd) : core.call(cmd);
  const { replies } = await core.blocking([cmd], wait, signal, async (r) => {
    const x = r[0];
    if (x !== null && x !== undefined && !(x instanceof Error)) await giveBack(x);
  }, undefined, recover, killOnlyBlocked);
  return replyOf(replies[0]);
}

export interface MultiOptions {
  lease?: number;
  wait?: number;
  session?: boolean;
  owner?: string;
}

/** Holds on several locks taken together; `signal` aborts when any of them is lost. */
export class MultiHold implements AsyncDisposable {
  readonly signal: AbortSignal;
  private released: Promise<number> | undefined;
  /** @internal */
  constructor(
    private readonly core: Core,
    readonly keys: string[],
    readonly owner: string,
    private readonly entries: Entry[],
  ) {
    this.signal = AbortSignal.any(entries.map((e) => e.controller.signal));
  }
  get lost(): boolean {
    return this.signal.aborted;
  }
  /** `RLOCK.MRELEASE`: how many of the locks are free now. */
  release(): Promise<number> {
    this.released ??= (async () => {
      const lost = this.signal.aborted ? (this.signal.reason as Error) : undefined;
      for (const e of this.entries) this.core.watchdog.unregister(e);
      let n: number;
      try {
        n = command.asInt(await this.core.call(["RLOCK.MRELEASE", this.owner, String(this.keys.length), ...this.keys]), "RLOCK.MRELEASE");
      } catch (err) {
        if (err instanceof RlockError && err.code === "NOTHELD") throw lost ?? new NotHeldError(this.keys.join(", "), this.owner);
        throw lost ?? err;
      }
      if (lost) throw lost;
      return n;
    })();
    return this.released;
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release().catch((e) => {
      if (!(e instanceof RlockError) || e.code === undefined) return;
      throw e;
    });
  }
}

/** Several locks, all or none (`RLOCK.MACQUIRE`); each is an ordinary reentrant lock of the set's owner, renewed by the watchdog. */
export class MultiLock {
  readonly keys: string[];
  readonly owner: string;
  private readonly lease: number | undefined;
  private readonly wait: number;
  private readonly session: boolean;
  /** @internal */
  constructor(
    private readonly core: Core,
    names: string[],
    options: MultiOptions | undefined,
  ) {
    if (!Array.isArray(names)) throw new TypeError("multi takes an array of lock names");
    if (names.length < 1 || names.length > 1024) throw new RangeError("multi takes 1 to 1024 lock names");
    names.forEach((n) => command.checkName(n));
    if (new Set(names).size !== names.length) throw new RangeError("a lock is named more than once");
    if (core.topology.cluster && new Set(names.map(command.slotOf)).size > 1) {
      throw new RangeError(`in a cluster the locks of one multi must share a slot (use a hash tag, as {order:7}:stock and {order:7}:payment): ${JSON.stringify(names)}`);
    }
    const s = settings(options, new Set(["lease", "wait", "session", "owner"]));
    this.keys = [...names];
    this.owner = options?.owner === undefined ? core.newOwner() : command.checkOwner(options.owner);
    this.lease = s.lease;
    this.wait = s.wait ?? 0;
    this.session = s.session;
  }

  async acquire(options?: AcquireOptions): Promise<MultiHold | null> {
    return this.acquireWith(this.wait, checkSignal(options));
  }

  private async acquireWith(wait: number, signal: AbortSignal | undefined): Promise<MultiHold | null> {
    const core = this.core;
    const lease = this.lease ?? core.options.watchdogLease;
    const cmd = ["RLOCK.MACQUIRE", this.owner, String(this.keys.length), ...this.keys, "LEASE", String(lease), ...command.blockArgs(wait)];
    if (this.session) cmd.push("SESSION");
    const sent = Date.now();
    // No REQ on MACQUIRE (the server refuses it): never resent, so nothing could find a grant
    // whose reply was lost. Given up, the call is ended only once the server shows it blocked
    // (a grant made at once is read first and given back).
    const r = await maybeBlocking(core, cmd, wait, signal, async () => {
      await core.call(["RLOCK.MRELEASE", this.owner, String(this.keys.length), ...this.keys]);
    }, false, undefined, "rlock.macquire");
    if (r === null) return null;
    const basis = wait === 0 ? sent : Date.now();
    const entries = this.keys.map((key) => core.watchdog.register({ key, owner: this.owner, side: undefined, permit: false }, lease, this.lease === undefined, basis));
    return new MultiHold(core, this.keys, this.owner, entries);
  }

  /** Acquires (waiting as long as it takes unless `wait` was given), runs fn, releases. */
  async using<T>(fn: (hold: MultiHold) => Promise<T> | T, options?: AcquireOptions): Promise<T> {
    const wait = this.wait || Infinity;
    const hold = await this.acquireWith(wait, checkSignal(options));
    if (!hold) throw new RlockError(`locks ${JSON.stringify(this.keys)} were not acquired within ${wait} ms`);
    return runHolding(hold, fn);
  }
}

export interface PermitOptions {
  permits?: number;
  wait?: number;
  signal?: AbortSignal;
}

function permitOptions(o: PermitOptions | undefined): { permits: number; wait: number; signal: AbortSignal | undefined } {
  if (o === undefined) o = {};
  if (o === null || typeof o !== "object") throw new TypeError("options must be an object");
  return {
    permits: o.permits === undefined ? 1 : command.checkCount(o.permits, "permits", 1),
    wait: o.wait === undefined ? 0 : command.checkWait(o.wait),
    signal: checkSignal({ ...(o.signal ? { signal: o.signal } : {}) }),
  };
}

/** Permits taken from a Semaphore; `release()` gives them back. */
export class Permits implements AsyncDisposable {
  private released: Promise<number> | undefined;
  /** @internal */
  constructor(
    private readonly sem: Semaphore,
    readonly count: number,
  ) {}
  /** Gives the permits back: the permits now available. */
  release(): Promise<number> {
    this.released ??= this.sem.release(this.count);
    return this.released;
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}

/** Redisson's RSemaphore (`RSEM.*`): waits in the server, in arrival order. */
export class Semaphore {
  /** @internal */
  constructor(
    private readonly core: Core,
    readonly key: string,
  ) {}
  async trySetPermits(n: number): Promise<boolean> {
    command.checkCount(n, "permits", 0);
    return (await this.core.call(["RSEM.TRYSETPERMITS", this.key, String(n)])) === 1;
  }
  async addPermits(n: number): Promise<number> {
    command.checkCount(n, "permits", -(2 ** 31));
    return command.asInt(await this.core.call(["RSEM.ADDPERMITS", this.key, String(n)]), "RSEM.ADDPERMITS");
  }
  async available(): Promise<number> {
    return command.asInt(await this.core.call(["RSEM.AVAILABLE", this.key]), "RSEM.AVAILABLE");
  }
  /** Takes `permits` (default 1), waiting up to `wait` ms; null when not enough came in time. */
  async acquire(options?: PermitOptions): Promise<Permits | null> {
    const o = permitOptions(options);
    const req = command.requestId();
    const cmd = (wait: number) => ["RSEM.ACQUIRE", this.key, "PERMITS", String(o.permits), ...command.blockArgs(wait), "REQ", req];
    // A grant given back once: the give-back has one REQ id, whether a read grant's or one `recover` found.
    const back = command.requestId();
    const giveBack = async () => void (await this.releaseWith(o.permits, back));
    const r = await maybeBlocking(this.core, cmd(o.wait), o.wait, o.signal, giveBack, true, resending(this.core, cmd(0), giveBack));
    return r === null ? null : new Permits(this, o.permits);
  }
  /** Gives `n` permits back (anyone may, as in Redisson): the permits now available. */
  async release(n = 1): Promise<number> {
    command.checkCount(n, "permits", 1);
    return this.releaseWith(n, command.requestId());
  }
  private async releaseWith(n: number, req: string): Promise<number> {
    return command.asInt(await this.core.callOnce(["RSEM.RELEASE", this.key, "PERMITS", String(n), "REQ", req]), "RSEM.RELEASE");
  }
}

/** A permit leased from a PermitSemaphore: renewed by the watchdog unless its lease was fixed. */
export class LeasedPermit implements AsyncDisposable {
  private released: Promise<boolean> | undefined;
  /** @internal */
  constructor(
    private readonly core: Core,
    private readonly entry: Entry,
  ) {}
  get id(): string {
    return this.entry.owner;
  }
  get key(): string {
    return this.entry.key;
  }
  get signal(): AbortSignal {
    return this.entry.controller.signal;
  }
  get lost(): boolean {
    return this.signal.aborted;
  }
  /** Gives the permit back (`RSEM.RETURN`): false when it was no longer leased. */
  release(): Promise<boolean> {
    this.released ??= (async () => {
      const lost = this.signal.aborted ? (this.signal.reason as Error) : undefined;
      this.core.watchdog.unregister(this.entry);
      const r = await this.core.callOnce(["RSEM.RETURN", this.key, this.id, "REQ", command.requestId()]);
      if (lost) throw lost;
      return r === 1;
    })();
    return this.released;
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release().catch(() => {});
  }
}

export interface LeaseOptions extends PermitOptions {
  /** A fixed lease in ms, not renewed; without it the watchdog lease, renewed. */
  lease?: number;
}

/** Redisson's RPermitExpirableSemaphore: permits that come back by themselves when their lease ends. */
export class PermitSemaphore {
  /** The permit counts, kept by the same commands as a plain semaphore's. */
  private readonly counts: Semaphore;
  /** @internal */
  constructor(
    private readonly core: Core,
    readonly key: string,
  ) {
    this.counts = new Semaphore(core, key);
  }
  trySetPermits(n: number): Promise<boolean> {
    return this.counts.trySetPermits(n);
  }
  addPermits(n: number): Promise<number> {
    return this.counts.addPermits(n);
  }
  available(): Promise<number> {
    return this.counts.available();
  }
  /** One leased permit, or null when none came within the wait. */
  async acquire(options?: LeaseOptions): Promise<LeasedPermit | null> {
    const many = await this.acquireMany({ ...options, permits: 1 });
    return many ? many[0]! : null;
  }
  /** `permits` leased permits, all or none. */
  async acquireMany(options?: LeaseOptions): Promise<LeasedPermit[] | null> {
    const o = permitOptions({ ...(options?.permits !== undefined ? { permits: options.permits } : {}), ...(options?.wait !== undefined ? { wait: options.wait } : {}), ...(options?.signal ? { signal: options.signal } : {}) });
    const fixed = options?.lease === undefined ? undefined : command.checkLease(options.lease);
    const lease = fixed ?? this.core.options.watchdogLease;
    const req = command.requestId();
    const cmd = (wait: number) => ["RSEM.LEASE", this.key, "LEASE", String(lease), "PERMITS", String(o.permits), ...command.blockArgs(wait), "REQ", req];
    const sent = Date.now();
    // The permits a reply names are returned by id (returning one twice changes nothing).
    const giveBack = async (ids: Reply) => {
      if (Array.isArray(ids)) for (const id of ids) await this.release(String(id));
    };
    const r = await maybeBlocking(this.core, cmd(o.wait), o.wait, o.signal, giveBack, true, resending(this.core, cmd(0), giveBack));
    if (r === null) return null;
    if (!Array.isArray(r)) throw new RlockError(`RSEM.LEASE replied ${JSON.stringify(r)}`);
    const basis = o.wait === 0 ? sent : Date.now();
    return r.map((id) => new LeasedPermit(this.core, this.core.watchdog.register({ key: this.key, owner: String(id), side: undefined, permit: true }, lease, fixed === undefined, basis)));
  }
  /** Gives back any permit by id: false when it was not leased (expired or unknown). */
  async release(id: string): Promise<boolean> {
    command.checkName(id, "id");
    return (await this.core.callOnce(["RSEM.RETURN", this.key, id, "REQ", command.requestId()])) === 1;
  }
}

/** Redisson's RCountDownLatch (`RLATCH.*`). */
export class Latch {
  /** @internal */
  constructor(
    private readonly core: Core,
    readonly key: string,
  ) {}
  async trySetCount(n: number): Promise<boolean> {
    command.checkCount(n, "count", 1, Number.MAX_SAFE_INTEGER);
    return (await this.core.call(["RLATCH.TRYSETCOUNT", this.key, String(n)])) === 1;
  }
  /** Counts down once: the count now (0 opens the latch). */
  async countDown(): Promise<number> {
    return command.asInt(await this.core.call(["RLATCH.COUNTDOWN", this.key]), "RLATCH.COUNTDOWN");
  }
  async count(): Promise<number> {
    return command.asInt(await this.core.call(["RLATCH.COUNT", this.key]), "RLATCH.COUNT");
  }
  /** Waits up to `wait` ms (Infinity: forever; default 0: look once) for the count to reach zero: true once it has. */
  async await(options?: { wait?: number; signal?: AbortSignal }): Promise<boolean> {
    const o = permitOptions({ ...(options?.wait !== undefined ? { wait: options.wait } : {}), ...(options?.signal ? { signal: options.signal } : {}) });
    const r = await maybeBlocking(this.core, ["RLATCH.AWAIT", this.key, ...command.blockArgs(o.wait)], o.wait, o.signal, async () => {}, true);
    return r === 1;
  }
}

/** A leader as seen by anyone: its value (the owner of the lock) and its term (the fencing token). */
export interface Leader {
  value: string;
  term: number;
}

/** Leadership won by `campaign`: lost with `signal`, given up with `resign()`. */
export class Leadership implements AsyncDisposable {
  /** @internal */
  constructor(private readonly hold: Hold) {}
  get value(): string {
    return this.hold.owner;
  }
  get term(): number {
    return this.hold.token!;
  }
  get replicasAcked(): number | null {
    return this.hold.replicasAcked;
  }
  get signal(): AbortSignal {
    return this.hold.signal;
  }
  get lost(): boolean {
    return this.hold.lost;
  }
  /** Steps down: the next candidate waiting is elected at once. */
  async resign(): Promise<void> {
    await this.hold.release();
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.hold[Symbol.asyncDispose]();
  }
}

function tokenKey(key: string): string {
  return key.includes("{") ? `redisson_lock_token:${key}` : `redisson_lock_token:{${key}}`;
}

/** Leader election: a fenced lock whose owner is the candidate's value and whose token is the term. */
export class Election {
  /** @internal */
  constructor(
    private readonly core: Core,
    readonly key: string,
  ) {}

  /** Waits in the server until elected (or `wait` ms; then null), then holds leadership, renewed by the watchdog. */
  async campaign(value: string, options?: { wait?: number; signal?: AbortSignal; syncReplicas?: number }): Promise<Leadership | null> {
    command.checkOwner(value);
    const signal = checkSignal(options?.signal ? { signal: options.signal } : undefined);
    const s = settings({ fenced: true, wait: options?.wait ?? Infinity, ...(options?.syncReplicas !== undefined ? { syncReplicas: options.syncReplicas } : {}) });
    const lock = new Lock(this.core, this.key, value, undefined, s);
    const hold = await lock.acquireWith(s.wait!, signal);
    if (!hold) return null;
    if (hold.holdCount !== null && hold.holdCount > 1) {
      await hold.release().catch(() => {});
      throw new RlockError(`election ${JSON.stringify(this.key)}: another candidate with the value ${JSON.stringify(value)} is the leader; give each candidate a value of its own`);
    }
    return new Leadership(hold);
  }

  /** The leader now, or null. */
  async leader(): Promise<Leader | null> {
    const [holders, term] = await this.core.batch([["HGETALL", this.key], ["GET", tokenKey(this.key)]]);
    if (holders instanceof Error) throw holders;
    if (term instanceof Error) throw term;
    const h = command.pairs(holders ?? []);
    const values = Object.keys(h);
    if (values.length !== 1 || values[0] === "mode") return null;
    return { value: values[0]!, term: term === null ? 0 : Number(term) };
  }

  /** The leader now, then each change (null while there is none), until `signal` aborts. Polls every 50 ms. */
  async *observe(options?: { signal?: AbortSignal; interval?: number }): AsyncGenerator<Leader | null, void, undefined> {
    const signal = checkSignal(options?.signal ? { signal: options.signal } : undefined);
    const interval = options?.interval === undefined ? 50 : command.checkLease(options.interval, "interval");
    let last: string | undefined;
    while (!signal?.aborted) {
      const l = await this.leader();
      const id = l ? `${l.term}\u0000${l.value}` : "";
      if (id !== last) {
        last = id;
        yield l;
      }
      await new Promise<void>((r) => {
        const t = setTimeout(r, interval);
        signal?.addEventListener("abort", () => {
          clearTimeout(t);
          r();
        }, { once: true });
      });
    }
  }

  /** Steps down `value`'s leadership without its Leadership object (one `RLOCK.RELEASE`). */
  resign(value: string): Promise<boolean> {
    return releaseHold(this.core, this.key, command.checkOwner(value), undefined);
  }
}
