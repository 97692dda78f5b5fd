// MultiLock: several reentrant locks taken all or none (`RLOCK.MACQUIRE`), Redisson's RedissonMultiLock.
import { checkMultiNames, checkOptions, checkLease, checkWait, checkBool, ownerOr, acquireSignal, type AcquireOptions } from "./core/args.js";
import { macquire, mrelease, requestId, slotOf } from "./core/commands.js";
import { asInt, notHeld } from "./core/replies.js";
import { resending, type Hub } from "./hub.js";
import { NotAcquiredError } from "./errors.js";
import { releaseAtScopeEnd, releaseTellingLoss, runHolding } from "./lock.js";
import type { Entry } from "./watchdog.js";

export interface MultiOptions {
  /** A fixed lease in ms for every lock, not renewed; without it the watchdog's, renewed. */
  lease?: number;
  /** How long to wait in the server until every lock can be taken at once, in ms. Unset: `acquire()` tries once and `using` waits as long as it takes. */
  wait?: number;
  /** The holds end when the connection that took them closes (`SESSION`). */
  session?: boolean;
  /** The owner id, instead of the handle's own. */
  owner?: string;
}

const MULTI_OPTIONS: ReadonlySet<string> = new Set(["lease", "wait", "session", "owner"]);

/** `RLOCK.MRELEASE` with a `REQ` id, resent once with the same id if the connection broke: how many of the locks are free now. */
async function releaseAll(hub: Hub, owner: string, keys: string[], req: string): Promise<number> {
  try {
    return asInt(await hub.callOnce(mrelease(owner, keys, req)), "RLOCK.MRELEASE");
  } catch (e) {
    throw notHeld(e, keys[0]!, owner);
  }
}

/** Holds on several locks taken together; `signal` aborts when any of them is lost. */
export class MultiHold implements AsyncDisposable {
  readonly signal: AbortSignal;
  private released: Promise<number> | undefined;
  /** @internal */
  constructor(
    private readonly hub: Hub,
    readonly keys: string[],
    readonly owner: string,
    private readonly entries: Entry[],
  ) {
    this.signal = AbortSignal.any(entries.map((e) => e.controller.signal));
  }
  get lost(): boolean {
    return this.signal.aborted;
  }
  /** `RLOCK.MRELEASE`: how many of the locks are free now. The loss, if one of them was lost; NotHeldError if the server no longer had one. */
  release(): Promise<number> {
    this.released ??= releaseTellingLoss(this.hub, this.entries, () => releaseAll(this.hub, this.owner, this.keys, requestId()));
    return this.released;
  }
  /** `await using`: released at the end of the block. A loss already told by `signal` is not thrown again here. */
  async [Symbol.asyncDispose](): Promise<void> {
    await releaseAtScopeEnd(() => this.release());
  }
}

/**
 * Several reentrant locks, all or none (`RLOCK.MACQUIRE`): Redisson's RedissonMultiLock. Each
 * is an ordinary lock of the set's owner, renewed by the watchdog.
 */
export class MultiLock {
  readonly keys: string[];
  readonly owner: string;
  private readonly lease: number | undefined;
  private readonly wait: number | undefined;
  private readonly session: boolean;
  /** @internal */
  constructor(
    private readonly hub: Hub,
    names: string[],
    options: MultiOptions | undefined,
  ) {
    this.keys = checkMultiNames(names, hub.topology.cluster ? (n) => new Set(n.map(slotOf)).size === 1 : undefined);
    const o = checkOptions(options, MULTI_OPTIONS);
    this.lease = o["lease"] === undefined ? undefined : checkLease(o["lease"]);
    this.wait = o["wait"] === undefined ? undefined : checkWait(o["wait"]);
    this.session = checkBool(o["session"], "session");
    this.owner = ownerOr(o["owner"], () => hub.newOwner());
  }

  /** Takes every lock, or none: null when one is held by another owner after the handle's `wait` (without one, tries once). */
  async acquire(options?: AcquireOptions): Promise<MultiHold | null> {
    return this.acquireWith(this.wait ?? 0, acquireSignal(options));
  }

  private async acquireWith(wait: number, signal: AbortSignal | undefined): Promise<MultiHold | null> {
    const hub = this.hub;
    const lease = this.lease ?? hub.options.watchdogLease;
    const req = requestId();
    const call = (w: number, session: boolean) => macquire({ owner: this.owner, keys: this.keys, lease, wait: w, session, req });
    // Each give-back its own REQ id: `recover`'s MACQUIRE (same id, no BLOCK) replays the grant
    // only while this owner still holds every lock, and otherwise takes them anew, so what it
    // replies is a hold that stands now and must be released, even after an earlier give-back.
    const giveBack = async () => void (await releaseAll(hub, this.owner, this.keys, requestId()));
    const sent = Date.now();
    const r = await hub.send(call(wait, this.session), wait, signal, giveBack, resending(hub, call(0, false), giveBack));
    if (r === null) return null;
    asInt(r, "RLOCK.MACQUIRE");
    const basis = wait === 0 ? sent : Date.now();
    const entries = this.keys.map((key) => hub.watchdog.register({ key, owner: this.owner, side: undefined, permit: false }, lease, this.lease === undefined, basis));
    return new MultiHold(hub, this.keys, this.owner, entries);
  }

  /** Acquires (waiting as long as it takes unless the handle has a `wait`), runs fn, releases. Rejects with NotAcquiredError when not acquired (fn never runs). */
  async using<T>(fn: (hold: MultiHold) => Promise<T> | T, options?: AcquireOptions): Promise<T> {
    if (typeof fn !== "function") throw new TypeError("using needs a callback");
    const wait = this.wait ?? Infinity;
    const hold = await this.acquireWith(wait, acquireSignal(options));
    if (!hold) throw new NotAcquiredError(this.keys, wait);
    return runHolding(hold, fn);
  }
}
