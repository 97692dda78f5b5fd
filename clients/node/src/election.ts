// Election: leader election on a fenced lock; the owner is the candidate's value, the token the term.
import { checkLease, checkOptions, checkOwner, checkSignal, settings } from "./core/args.js";
import { leaderOf, readLockInfo, type Leader, type Reply } from "./core/replies.js";
import type { Hub } from "./hub.js";
import { RlockError } from "./errors.js";
import { Lock, releaseHold, type Hold } from "./lock.js";
import { sleep } from "./signals.js";

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
  /** Runs `command` only while this leadership stands, in this term (`hold.guard`): a deposed leader's command is refused with `NotHeldError` or `StaleTokenError`, and not run. */
  guard(...command: unknown[]): Promise<Reply> {
    return this.hold.guard(...command);
  }
  /** Steps down: the next candidate waiting is elected at once. */
  async resign(): Promise<void> {
    await this.hold.release();
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.hold[Symbol.asyncDispose]();
  }
}

const CAMPAIGN_OPTIONS: ReadonlySet<string> = new Set(["wait", "signal", "syncReplicas"]);
const OBSERVE_OPTIONS: ReadonlySet<string> = new Set(["signal", "interval"]);

/** Leader election: a fenced lock whose owner is the candidate's value and whose token is the term. */
export class Election {
  /** @internal */
  constructor(
    private readonly hub: Hub,
    readonly key: string,
  ) {}

  /** Waits in the server until elected (or `wait` ms; then null), then holds leadership, renewed by the watchdog. */
  async campaign(value: string, options?: { wait?: number; signal?: AbortSignal; syncReplicas?: number }): Promise<Leadership | null> {
    checkOwner(value);
    const o = checkOptions(options, CAMPAIGN_OPTIONS);
    const signal = checkSignal(o["signal"]);
    const s = settings({ fenced: true, wait: (o["wait"] as number | undefined) ?? Infinity, ...(o["syncReplicas"] !== undefined ? { syncReplicas: o["syncReplicas"] as number } : {}) });
    const hold = await new Lock(this.hub, this.key, value, undefined, s).acquireWith(s.wait!, signal);
    if (!hold) return null;
    if (hold.holdCount !== null && hold.holdCount > 1) {
      await hold.release().catch(() => {});
      throw new RlockError(`election ${JSON.stringify(this.key)}: another candidate with the value ${JSON.stringify(value)} is the leader; give each candidate a value of its own`);
    }
    return new Leadership(hold);
  }

  /** The leader now, or null (`RLOCK.INFO`: the lock's one holder, and its fencing counter as the term). */
  async leader(): Promise<Leader | null> {
    return leaderOf(readLockInfo(await this.hub.call(["RLOCK.INFO", this.key])));
  }

  /** The leader now, then each change (null while there is none), until `signal` aborts. Polls every `interval` ms (default 50). */
  async *observe(options?: { signal?: AbortSignal; interval?: number }): AsyncGenerator<Leader | null, void, undefined> {
    const o = checkOptions(options, OBSERVE_OPTIONS);
    const signal = checkSignal(o["signal"]);
    const interval = o["interval"] === undefined ? 50 : checkLease(o["interval"], "interval");
    let last: string | undefined;
    while (!signal?.aborted) {
      const l = await this.leader();
      const id = l ? `${l.term}\u0000${l.value}` : "";
      if (id !== last) {
        last = id;
        yield l;
      }
      await sleep(interval, signal);
    }
  }

  /** Steps down `value`'s leadership without its Leadership object (one `RLOCK.RELEASE`). */
  resign(value: string): Promise<boolean> {
    return releaseHold(this.hub, this.key, checkOwner(value), undefined);
  }
}
