// Lock handles (reentrant and read-write sides) and the Hold a successful acquire returns.
import { acquirePlan, field, guard, holdCount, release, renew, replicasWanted, requestId, type Side } from "./core/commands.js";
import { acquireSignal, checkGuarded, type AcquireOptions, type Settings } from "./core/args.js";
import { asInt, guardRefusal, isBroken, notHeld, readGrant, released, renewal, type Reply } from "./core/replies.js";
import { resending, type Hub } from "./hub.js";
import { LockLostError, NotAcknowledgedError, NotAcquiredError, NotHeldError, RlockError } from "./errors.js";
import { onAbort } from "./signals.js";
import type { Entry } from "./watchdog.js";

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
    private readonly hub: Hub,
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
    const r = await this.hub.callOnce(renew(e.key, e.owner, e.side, e.lease, requestId())).catch((err: unknown) => {
      if (renewal(err as Error) === "lost") return 0;
      throw err;
    });
    if (renewal(r) === "renewed") this.hub.watchdog.renewed(e, sent);
    else {
      this.hub.watchdog.markLost(e, "the server refused the renewal: the lock expired, was deleted or was force-released");
      this.throwIfLost();
    }
  }

  /**
   * Runs `command` in the server only while this hold stands (`RLOCK.GUARD`), checked in the
   * same server turn as the command runs, and returns the command's reply (its own error
   * reply rejects, as a `ServerError`). Give it as `guard("SET", key, value)` or
   * `guard(["SET", key, value])`, every word a string.
   *
   * Refused, with nothing run: `NotHeldError` once the owner no longer holds the lock (its
   * lease ran out, it was force-released), `StaleTokenError` for a fenced hold once the lock
   * was taken again since this hold got its token. The server decides, not this process's
   * view of the hold. Sent once: a broken connection rejects without a resend, since the
   * command may have run. In a cluster the command's keys must be in the lock's slot (a hash
   * tag: lock `orders`, key `order:{orders}:1`), or the server refuses it with `CROSSSLOT`.
   */
  async guard(...command: unknown[]): Promise<Reply> {
    const words = checkGuarded(command);
    if (this.released) throw new RlockError("this hold was released");
    const e = this.entry;
    try {
      return await this.hub.call(guard(e.key, e.owner, e.side, this.token, words));
    } catch (err) {
      throw guardRefusal(err, e.key, e.owner, this.token);
    }
  }

  /**
   * Releases this hold (`RLOCK.RELEASE`): true when the lock is now free, false when other
   * re-entries of the owner still hold it. LockLostError if it had been lost (the release
   * is sent all the same), NotHeldError if the server no longer had it. Once only: later
   * calls return the first call's promise.
   */
  release(): Promise<boolean> {
    const e = this.entry;
    this.released ??= releaseTellingLoss(this.hub, e, () => releaseHold(this.hub, e.key, e.owner, e.side).finally(() => this.unpin?.()));
    return this.released;
  }

  /** `await using hold = ...`: released at the end of the block. A loss already told by `signal` is not thrown again here. */
  async [Symbol.asyncDispose](): Promise<void> {
    await releaseAtScopeEnd(() => this.release());
  }
}

/**
 * A hold's release, whatever its kind: the watchdog lets go of `entries`, `send` releases in
 * the server, and a loss told before the release is thrown in place of what `send` returned
 * (the release is sent all the same, so nothing stays held).
 */
export async function releaseTellingLoss<T>(hub: Hub, entries: Entry | Entry[], send: () => Promise<T>): Promise<T> {
  const all = Array.isArray(entries) ? entries : [entries];
  const lost = all.find((e) => e.isLost)?.controller.signal.reason as Error | undefined;
  for (const e of all) hub.watchdog.unregister(e);
  let r: T;
  try {
    r = await send();
  } catch (err) {
    throw lost ?? err;
  }
  if (lost) throw lost;
  return r;
}

/** What `await using` does with a hold: releases it; a loss already told by its signal, or a hold the server no longer had, is not thrown again there. */
export async function releaseAtScopeEnd(release: () => Promise<unknown>): Promise<void> {
  try {
    await release();
  } catch (e) {
    if (!(e instanceof LockLostError) && !(e instanceof NotHeldError)) throw e;
  }
}

/** `RLOCK.RELEASE` with a `REQ` id, sent once more with the same id if the connection broke. */
export async function releaseHold(hub: Hub, key: string, owner: string, side: Side | undefined): Promise<boolean> {
  try {
    return released(await hub.callOnce(release(key, owner, side, requestId())));
  } catch (e) {
    throw notHeld(e, key, owner);
  }
}

/** A handle on one lock with one owner. Acquiring twice through it re-enters. */
export class Lock {
  /** @internal */
  constructor(
    protected readonly hub: Hub,
    readonly key: string,
    readonly owner: string,
    readonly side: Side | undefined,
    private readonly s: Settings,
  ) {}

  /**
   * Takes the lock, or re-enters it; null when another owner holds it (after the handle's
   * `wait`; without one, tries once). With `signal`, aborting ends the wait and rejects with
   * the signal's reason; a grant made meanwhile is given back.
   */
  async acquire(options?: AcquireOptions): Promise<Hold | null> {
    return this.acquireWith(this.s.wait ?? 0, acquireSignal(options));
  }

  /** @internal */
  async acquireWith(wait: number, signal: AbortSignal | undefined): Promise<Hold | null> {
    signal?.throwIfAborted();
    const hub = this.hub;
    const s = this.s;
    const lease = s.lease ?? hub.options.watchdogLease;
    let attached = s.syncReplicas === undefined ? hub.replicaCount(this.key) : 0;
    if (typeof attached !== "number") attached = await attached;
    const wanted = replicasWanted(s.syncReplicas, attached);
    const plan = acquirePlan({ key: this.key, owner: this.owner, side: this.side, lease, fair: s.fair, fenced: s.fenced, session: s.session, req: requestId() }, wanted, hub.options.syncTimeout);
    const sent = Date.now();
    let replies: Array<Reply | Error>;
    let unpin: (() => void) | undefined;
    if (wait === 0 && wanted === 0) {
      // One round trip on the shared connection; resent with the same REQ id if it broke.
      replies = await this.shared(plan.send(0));
    } else {
      // A wait given up without its reply read: a grant may still stand (see Hub.blocking).
      // Only if this owner holds the lock: the same acquire, same REQ id, no BLOCK/FAIR/SESSION,
      // and the hold it replies is released.
      const recover = resending(hub, plan.retry, async () => {
        await releaseHold(hub, this.key, this.owner, this.side);
      }, async () => (await hub.call(holdCount(this.key, this.owner, this.side))) !== null);
      ({ replies, unpin } = await this.dedicated(plan.send, wait, signal, sent, s.session, recover));
    }
    let grant;
    try {
      grant = readGrant(replies, s.fenced, wanted);
    } finally {
      if (unpin && replies[0] === null) unpin();
    }
    if (grant === null) return null;
    if (grant.acked !== null && grant.acked < wanted) {
      await releaseHold(hub, this.key, this.owner, this.side).catch(() => {});
      unpin?.();
      throw new NotAcknowledgedError(this.key, grant.acked, wanted);
    }
    const basis = wait === 0 ? sent : Math.max(sent, Date.now() - (wanted > 0 ? hub.options.syncTimeout : 0));
    const entry = hub.watchdog.register({ key: this.key, owner: this.owner, side: this.side, permit: false }, lease, s.lease === undefined, basis);
    return new Hold(hub, entry, grant.token, grant.holdCount, grant.acked, unpin);
  }

  private async shared(cmds: string[][]): Promise<Array<Reply | Error>> {
    if (cmds.length === 1) {
      return [
        await this.hub.callOnce(cmds[0]!).catch((e: unknown) => {
          if (isBroken(e)) throw e;
          return e as Error; // a server error, in its place
        }),
      ];
    }
    const once = async () => {
      const r = await this.hub.batch(cmds);
      const broken = r.find(isBroken);
      if (broken) throw broken;
      return r;
    };
    try {
      return await once();
    } catch (e) {
      if (!isBroken(e)) throw e;
      await this.hub.reconnected(this.key);
      return await once();
    }
  }

  private async dedicated(cmds: (w: number) => string[][], wait: number, signal: AbortSignal | undefined, started: number, session: boolean, recover: () => Promise<void>): Promise<{ replies: Array<Reply | Error>; unpin?: () => void }> {
    const orphaned = async (replies: Array<Reply | Error>) => {
      const r = replies[0];
      if (r !== null && !(r instanceof Error)) await releaseHold(this.hub, this.key, this.owner, this.side);
    };
    let first = true;
    for (;;) {
      const left = wait === Infinity ? Infinity : Math.max(0, wait - (Date.now() - started));
      const w = first ? wait : left === 0 ? 0 : Math.max(1, Math.ceil(left));
      const out = await this.hub.blocking(cmds(w), w, signal, orphaned, session ? (r) => r[0] !== null && !(r[0] instanceof Error) : undefined, recover);
      if (!isBroken(out.replies[0]) || !first) return out;
      // The connection broke before the reply: once more, same REQ id, the wait that is left.
      first = false;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Acquires (waiting as long as it takes unless the handle has a `wait`), runs `fn(hold)`, releases. Rejects with NotAcquiredError when not acquired (fn never runs), with the LockLostError when the hold is lost before fn settles. */
  async using<T>(fn: (hold: Hold) => Promise<T> | T, options?: AcquireOptions): Promise<T> {
    if (typeof fn !== "function") throw new TypeError("using needs a callback");
    const signal = acquireSignal(options);
    const wait = this.s.wait ?? Infinity;
    const hold = await this.acquireWith(wait, signal);
    if (!hold) throw new NotAcquiredError(this.key, wait);
    return runHolding(hold, fn);
  }

  /** Whether anyone holds the lock (`EXISTS`). */
  async isLocked(): Promise<boolean> {
    return (await this.hub.call(["EXISTS", this.key])) === 1;
  }

  /** Whether this handle's owner holds the lock (`HEXISTS`), whatever hold object took it. */
  async isHeldByOwner(): Promise<boolean> {
    return (await this.hub.call(["HEXISTS", this.key, field(this.owner, this.side)])) === 1;
  }

  /** This handle's owner's hold count (0 when none). */
  async holdCount(): Promise<number> {
    const v = await this.hub.call(holdCount(this.key, this.owner, this.side));
    return v === null ? 0 : Number(v);
  }

  /** The lease left, whoever holds it (`PTTL`); null when free. */
  async remainingLease(): Promise<number | null> {
    const v = asInt(await this.hub.call(["PTTL", this.key]), "PTTL");
    return v < 0 ? null : v;
  }

  /** One `RLOCK.RELEASE` for this owner without a hold (a hold from before a restart, under a stable owner). */
  unlock(): Promise<boolean> {
    return releaseHold(this.hub, this.key, this.owner, this.side);
  }
}

/** Runs fn while `hold` is held: rejects with the loss if it comes first, releases either way. */
export async function runHolding<H extends { signal: AbortSignal; release(): Promise<unknown> }, T>(hold: H, fn: (hold: H) => Promise<T> | T): Promise<T> {
  const signal = hold.signal;
  let stopListening = () => {};
  const lost = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else stopListening = onAbort(signal, () => reject(signal.reason));
  });
  lost.catch(() => {});
  const work = (async () => fn(hold))();
  work.catch(() => {}); // a callback that fails after the loss was told must not be an unhandled rejection
  let result: T;
  try {
    result = await Promise.race([work, lost]);
  } catch (e) {
    stopListening();
    await hold.release().catch(() => {});
    throw e;
  } finally {
    stopListening();
  }
  await hold.release();
  return result;
}
