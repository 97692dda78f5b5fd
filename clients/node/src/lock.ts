// Lock handles (reentrant and read-write sides) and the Hold a successful acquire returns.
import * as command from "./command.js";
import type { Reply, Side } from "./command.js";
import { resending, type Core } from "./core.js";
import { LockLostError, NotAcknowledgedError, NotAcquiredError, NotHeldError, RlockError } from "./errors.js";
import type { Entry } from "./watchdog.js";

export interface LockOptions {
  /** A fixed lease in ms, not renewed: the hold is lost when it runs out (unless `hold.renew()`). Without it the lease is the watchdog's (30 s), renewed every third of it. */
  lease?: number;
  /** How long to wait in the server for a busy lock, in ms: 0 tries once (the default for `acquire`), Infinity waits as long as it takes (the default for `using`). */
  wait?: number;
  /** First come, first served across every fair acquirer, Redisson's included (`FAIR`). */
  fair?: boolean;
  /** Ask for a fencing token (`TOKEN`): `hold.token` strictly increases each time the lock goes from free to held. */
  fenced?: boolean;
  /** The hold ends when the connection that took it closes, as when this process dies (`SESSION`). */
  session?: boolean;
  /** Replicas that must acknowledge the grant (`WAIT`) before acquire returns. Default: 1 when the server has replicas attached, else 0. 0 sends no `WAIT`. */
  syncReplicas?: number;
  /** The owner id, instead of the handle's own (`<client-uuid>:<n>`). 1 to 1024 bytes. */
  owner?: string;
}

export interface AcquireOptions {
  /** Ends the wait; nothing is left behind (a grant made meanwhile is given back). */
  signal?: AbortSignal;
}

export interface Settings {
  lease: number | undefined;
  wait: number | undefined;
  fair: boolean;
  fenced: boolean;
  session: boolean;
  syncReplicas: number | undefined;
}

const KNOWN = new Set(["lease", "wait", "fair", "fenced", "session", "syncReplicas", "owner"]);

/** Checks lock options before anything is sent: TypeError / RangeError. */
export function settings(opts: LockOptions | undefined, allowed = KNOWN): Settings {
  if (opts === undefined) opts = {};
  if (opts === null || typeof opts !== "object") throw new TypeError("options must be an object");
  for (const k of Object.keys(opts)) if (!allowed.has(k)) throw new TypeError(`unknown option ${JSON.stringify(k)}`);
  return {
    lease: opts.lease === undefined ? undefined : command.checkLease(opts.lease),
    wait: opts.wait === undefined ? undefined : command.checkWait(opts.wait),
    fair: command.checkBool(opts.fair, "fair"),
    fenced: command.checkBool(opts.fenced, "fenced"),
    session: command.checkBool(opts.session, "session"),
    syncReplicas: opts.syncReplicas === undefined ? undefined : command.checkCount(opts.syncReplicas, "syncReplicas", 0, 1000),
  };
}

export function checkSignal(o: AcquireOptions | undefined): AbortSignal | undefined {
  if (o === undefined) return undefined;
  if (o === null || typeof o !== "object") throw new TypeError("acquire options must be an object");
  const s = o.signal;
  if (s !== undefined && !(s instanceof AbortSignal)) throw new TypeError("signal must be an AbortSignal");
  return s;
}

/** What a successful acquire holds. Release it with `release()` or `await using`. */
export class Hold implements AsyncDisposable {
  /** The fencing token, for a fenced acquire; else null. */
  readonly token: number | null;
  /** The owner's hold count after this acquire (1, or more for a re-entry); null if a fenced hold was gone before its count was read. */
  readonly holdCount: number | null;
  /** Replicas that acknowledged the grant (`WAIT`), or null when none was asked for. */
  readonly replicasAcked: number | null;
  private released: Promise<boolean> | undefined;

  /** @internal */
  constructor(
    private readonly core: Core,
    private readonly entry: Entry,
    token: number | null,
    holdCount: number | null,
    replicasAcked: number | null,
    private readonly unpin?: () => void,
  ) {
    this.token = token;
    this.holdCount = holdCount;
    this.replicasAcked = replicasAcked;
  }

  get key(): string {
    return this.entry.key;
  }
  get owner(): string {
    return this.entry.owner;
  }
  /** `"read"` or `"write"` on a read-write lock; undefined on a reentrant one. */
  get side(): Side | undefined {
    return this.entry.side;
  }
  /** Aborted with a `LockLostError` as its reason when the hold is lost; never after a release. Pass it to work that needs the lock. */
  get signal(): AbortSignal {
    return this.entry.controller.signal;
  }
  get lost(): boolean {
    return this.entry.isLost;
  }
  /** Throws the `LockLostError` if the hold is lost. */
  throwIfLost(): void {
    this.signal.throwIfAborted();
  }

  /** Resets the lease to its full length now (`RLOCK.RENEW`). LockLostError if the hold is gone. */
  async renew(): Promise<void> {
    this.throwIfLost();
    if (this.released) throw new RlockError("this hold was released");
    const e = this.entry;
    const sent = Date.now();
    const r = await this.core.callOnce(command.renew(e.key, e.owner, e.side, e.lease, command.requestId()));
    if (r === 1) this.core.watchdog.renewed(e, sent);
    else {
      this.core.watchdog.markLost(e, "the server refused the renewal: the lock expired, was deleted or was force-released");
      this.throwIfLost();
    }
  }

  /**
   * Releases this hold (`RLOCK.RELEASE`): true when the lock is now free, false when other
   * re-entries of the owner still hold it. LockLostError if it had been lost (the release
   * is sent all the same), NotHeldError if the server no longer had it. Once only: later
   * calls return the first call's promise.
   */
  release(): Promise<boolean> {
    this.released ??= (async () => {
      const e = this.entry;
      const lost = e.isLost ? (this.signal.reason as Error) : undefined;
      this.core.watchdog.unregister(e);
      let r: boolean;
      try {
        r = await releaseHold(this.core, e.key, e.owner, e.side);
      } catch (err) {
        throw lost ?? err;
      } finally {
        this.unpin?.();
      }
      if (lost) throw lost;
      return r;
    })();
    return this.released;
  }

  /** `await using hold = ...`: released at the end of the block. A loss already told by `signal` is not thrown again here. */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (e) {
      if (!(e instanceof LockLostError) && !(e instanceof NotHeldError)) throw e;
    }
  }
}

/** `RLOCK.RELEASE` with a `REQ` id, sent once more with the same id if the connection broke. */
export async function releaseHold(core: Core, key: string, owner: string, side: Side | undefined): Promise<boolean> {
  try {
    const r = await core.callOnce(command.release(key, owner, side, command.requestId()));
    return command.asInt(r, "RLOCK.RELEASE") === 1;
  } catch (e) {
    if (e instanceof RlockError && e.code === "NOTHELD") throw new NotHeldError(key, owner);
    throw e;
  }
}

function replyOf(x: Reply | Error | undefined): Reply {
  if (x instanceof Error) throw x;
  return x ?? null;
}

/** A handle on one lock with one owner. Acquiring twice through it re-enters. */
export class Lock {
  /** @internal */
  constructor(
    protected readonly core: Core,
    readonly key: string,
    readonly owner: string,
    readonly side: Side | undefined,
    private readonly s: Settings,
  ) {}

  /**
   * Takes the lock, or re-enters it; null when another owner holds it (after the wait).
   * With `signal`, aborting ends the wait and rejects with the signal's reason; a grant made
   * meanwhile is given back.
   */
  async acquire(options?: AcquireOptions): Promise<Hold | null> {
    const signal = checkSignal(options);
    return this.acquireWith(this.s.wait ?? 0, signal);
  }

  /** @internal */
  async acquireWith(wait: number, signal: AbortSignal | undefined): Promise<Hold | null> {
    signal?.throwIfAborted();
    const core = this.core;
    const s = this.s;
    const lease = s.lease ?? core.options.watchdogLease;
    let replicas = s.syncReplicas === undefined ? core.replicaCount(this.key) : 0;
    if (typeof replicas !== "number") replicas = await replicas;
    const wanted = s.syncReplicas ?? Math.min(1, replicas);
    const req = command.requestId();
    const acq = (w: number) => command.acquire({ key: this.key, owner: this.owner, side: this.side, lease, wait: w, fair: s.fair, fenced: s.fenced, session: s.session, req });
    const countCmd = ["HGET", this.key, command.field(this.owner, this.side)];
    const cmds = (w: number) => {
      const c = [acq(w)];
      if (s.fenced) c.push(countCmd);
      if (wanted > 0) c.push(["WAIT", String(wanted), String(core.options.syncTimeout)]);
      return c;
    };
    const sent = Date.now();
    let replies: Array<Reply | Error>;
    let unpin: (() => void) | undefined;
    if (wait === 0 && wanted === 0) {
      // One round trip on the shared connection; resent with the same REQ id if it broke.
      replies = await this.shared(cmds(0));
    } else {
      // A wait given up without its reply read: a grant may still stand (see Core.blocking).
      // Only if this owner holds the lock: the same acquire, same REQ id, no BLOCK/FAIR/SESSION,
      // and the hold it replies is released.
      const once = command.acquire({ key: this.key, owner: this.owner, side: this.side, lease, wait: 0, fair: false, fenced: s.fenced, session: false, req });
      const recover = resending(core, once, async (r) => {
        if (command.parseAcquire(r) !== null) await releaseHold(core, this.key, this.owner, this.side);
      }, async () => (await core.call(["HGET", this.key, command.field(this.owner, this.side)])) !== null);
      ({ replies, unpin } = await this.dedicated(cmds, wait, signal, sent, s.session, recover));
    }
    let granted: number | null;
    try {
      granted = command.parseAcquire(replyOf(replies[0]));
    } finally {
      if (unpin && replies[0] === null) unpin();
    }
    if (granted === null) return null;
    let count: number | null = granted;
    if (s.fenced) {
      const c = replies[1];
      count = typeof c === "string" || typeof c === "number" ? Number(c) || null : null;
    }
    let acked: number | null = null;
    if (wanted > 0) {
      const w = replies[replies.length - 1];
      acked = typeof w === "number" ? w : 0;
      if (acked < wanted) {
        await releaseHold(core, this.key, this.owner, this.side).catch(() => {});
        unpin?.();
        throw new NotAcknowledgedError(this.key, acked, wanted);
      }
    }
    const basis = wait === 0 ? sent : Math.max(sent, Date.now() - (wanted > 0 ? core.options.syncTimeout : 0));
    const entry = core.watchdog.register({ key: this.key, owner: this.owner, side: this.side, permit: false }, lease, s.lease === undefined, basis);
    return new Hold(core, entry, s.fenced ? granted : null, count, acked, unpin);
  }

  private async shared(cmds: string[][]): Promise<Array<Reply | Error>> {
    if (cmds.length === 1) return [await this.core.callOnce(cmds[0]!).catch((e: unknown) => {
      if (e instanceof RlockError) return e; // a server error, in its place
      throw e;
    })];
    const once = async () => {
      const r = await this.core.batch(cmds);
      const broken = r.find((x) => x instanceof Error && !(x instanceof RlockError));
      if (broken) throw broken;
      return r;
    };
    try {
      return await once();
    } catch (e) {
      if (e instanceof RlockError && e.constructor.name !== "TimeoutError") throw e;
      await this.core.reconnected(this.key);
      return await once();
    }
  }

  private async dedicated(cmds: (w: number) => string[][], wait: number, signal: AbortSignal | undefined, started: number, session: boolean, recover: () => Promise<void>): Promise<{ replies: Array<Reply | Error>; unpin?: () => void }> {
    const orphaned = async (replies: Array<Reply | Error>) => {
      const r = replies[0];
      if (r !== null && !(r instanceof Error)) await releaseHold(this.core, this.key, this.owner, this.side);
    };
    let first = true;
    for (;;) {
      const left = wait === Infinity ? Infinity : Math.max(0, wait - (Date.now() - started));
      const w = first ? wait : left === 0 ? 0 : Math.max(1, Math.ceil(left));
      const out = await this.core.blocking(cmds(w), w, signal, orphaned, session ? (r) => r[0] !== null && !(r[0] instanceof Error) : undefined, recover);
      const broke = out.replies[0] instanceof Error && !(out.replies[0] instanceof RlockError);
      if (!broke || !first) return out;
      // The connection broke before the reply: once more, same REQ id, the wait that is left.
      first = false;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Acquires (waiting as long as it takes unless `wait` was given), runs `fn(hold)`, releases. Rejects with NotAcquiredError when not acquired (fn never runs), with the LockLostError when the hold is lost before fn settles. */
  async using<T>(fn: (hold: Hold) => Promise<T> | T, options?: AcquireOptions): Promise<T> {
    if (typeof fn !== "function") throw new TypeError("using needs a callback");
    const signal = checkSignal(options);
    const wait = this.s.wait ?? Infinity;
    const hold = await this.acquireWith(wait, signal);
    if (!hold) throw new NotAcquiredError(this.key, wait);
    return runHolding(hold, fn);
  }

  /** Whether anyone holds the lock (`EXISTS`). */
  async isLocked(): Promise<boolean> {
    return (await this.core.call(["EXISTS", this.key])) === 1;
  }

  /** This handle's owner's hold count (0 when none). */
  async holdCount(): Promise<number> {
    const v = await this.core.call(["HGET", this.key, command.field(this.owner, this.side)]);
    return v === null ? 0 : Number(v);
  }

  /** The lease left, whoever holds it (`PTTL`); null when free. */
  async remainingLease(): Promise<number | null> {
    const v = command.asInt(await this.core.call(["PTTL", this.key]), "PTTL");
    return v < 0 ? null : v;
  }

  /** One `RLOCK.RELEASE` for this owner without a hold (a hold from before a restart, under a stable owner). */
  unlock(): Promise<boolean> {
    return releaseHold(this.core, this.key, this.owner, this.side);
  }
}

/** Runs fn while `hold` is held: rejects with the loss if it comes first, releases either way. */
export async function runHolding<H extends { signal: AbortSignal; release(): Promise<unknown> }, T>(hold: H, fn: (hold: H) => Promise<T> | T): Promise<T> {
  const signal = hold.signal;
  let onLost: (() => void) | undefined;
  const lost = new Promise<never>((_, reject) => {
    onLost = () => reject(signal.reason);
    if (signal.aborted) onLost();
    else signal.addEventListener("abort", onLost, { once: true });
  });
  lost.catch(() => {});
  const work = (async () => fn(hold))();
  work.catch(() => {}); // a callback that fails after the loss was told must not be an unhandled rejection
  let result: T;
  try {
    result = await Promise.race([work, lost]);
  } catch (e) {
    signal.removeEventListener("abort", onLost!);
    await hold.release().catch(() => {});
    throw e;
  }
  signal.removeEventListener("abort", onLost!);
  await hold.release();
  return result;
}
