// PermitSemaphore: Redisson's RPermitExpirableSemaphore, permits with a lease of their own.
import { checkName, permitOptions, type LeaseOptions } from "./core/args.js";
import { requestId, semLease, semRenew, semReturn } from "./core/commands.js";
import { renewal, type Reply } from "./core/replies.js";
import { resending, type Hub } from "./hub.js";
import { RlockError } from "./errors.js";
import { releaseTellingLoss } from "./lock.js";
import { Semaphore } from "./semaphore.js";
import type { Entry } from "./watchdog.js";

const LEASE_OPTIONS: ReadonlySet<string> = new Set(["permits", "wait", "signal", "lease"]);

/** A permit leased from a PermitSemaphore: renewed by the watchdog unless its lease was fixed. */
export class LeasedPermit implements AsyncDisposable {
  private released: Promise<boolean> | undefined;
  /** @internal */
  constructor(
    private readonly hub: Hub,
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
  /** Resets the permit's lease to its full length now (`RSEM.RENEW`). LockLostError if it is no longer leased. */
  async renew(): Promise<void> {
    this.signal.throwIfAborted();
    if (this.released) throw new RlockError("this permit was released");
    const e = this.entry;
    const sent = Date.now();
    const r = await this.hub.callOnce(semRenew(e.key, e.owner, e.lease)).catch((err: unknown) => {
      if (renewal(err as Error) === "lost") return 0;
      throw err;
    });
    if (renewal(r) === "renewed") this.hub.watchdog.renewed(e, sent);
    else {
      this.hub.watchdog.markLost(e, "the server refused the renewal: the lease ended, or the permit was given back or deleted");
      this.signal.throwIfAborted();
    }
  }

  /** Gives the permit back (`RSEM.RETURN`): false when it was no longer leased. */
  release(): Promise<boolean> {
    this.released ??= releaseTellingLoss(this.hub, this.entry, async () => (await this.hub.callOnce(semReturn(this.key, this.id, requestId()))) === 1);
    return this.released;
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release().catch(() => {});
  }
}

/** Redisson's RPermitExpirableSemaphore: permits that come back by themselves when their lease ends. */
export class PermitSemaphore {
  /** The permit counts, kept by the same commands as a plain semaphore's. */
  private readonly counts: Semaphore;
  /** @internal */
  constructor(
    private readonly hub: Hub,
    readonly key: string,
  ) {
    this.counts = new Semaphore(hub, key);
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
  /** One leased permit, or null when none came within the wait (default 0: try once). */
  async acquire(options?: LeaseOptions): Promise<LeasedPermit | null> {
    if (options?.permits !== undefined && options.permits !== 1) throw new RangeError("acquire leases one permit: use acquireMany for more");
    const many = await this.acquireMany({ ...options, permits: 1 });
    return many ? many[0]! : null;
  }
  /** `permits` leased permits, all or none. */
  async acquireMany(options?: LeaseOptions): Promise<LeasedPermit[] | null> {
    const o = permitOptions(options, LEASE_OPTIONS);
    const lease = o.lease ?? this.hub.options.watchdogLease;
    const req = requestId();
    const sent = Date.now();
    // The permits a reply names are returned by id (returning one twice changes nothing).
    const giveBack = async (ids: Reply) => {
      if (Array.isArray(ids)) for (const id of ids) await this.release(String(id));
    };
    const r = await this.hub.send(semLease(this.key, lease, o.permits, o.wait, req), o.wait, o.signal, giveBack, resending(this.hub, semLease(this.key, lease, o.permits, 0, req), giveBack));
    if (r === null) return null;
    if (!Array.isArray(r)) throw new RlockError(`RSEM.LEASE replied ${JSON.stringify(r)}`);
    const basis = o.wait === 0 ? sent : Date.now();
    return r.map((id) => new LeasedPermit(this.hub, this.hub.watchdog.register({ key: this.key, owner: String(id), side: undefined, permit: true }, lease, o.lease === undefined, basis)));
  }
  /** Gives back any permit by id: false when it was not leased (expired or unknown). */
  async release(id: string): Promise<boolean> {
    checkName(id, "id");
    return (await this.hub.callOnce(semReturn(this.key, id, requestId()))) === 1;
  }
}
