// Semaphore: Redisson's RSemaphore (`RSEM.*`), waiting in the server in arrival order.
import { checkCount, permitOptions, type PermitOptions } from "./core/args.js";
import { requestId, semAcquire, semRelease } from "./core/commands.js";
import { asInt } from "./core/replies.js";
import { resending, type Hub } from "./hub.js";

export const PERMIT_OPTIONS: ReadonlySet<string> = new Set(["permits", "wait", "signal"]);

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
    private readonly hub: Hub,
    readonly key: string,
  ) {}
  /** Sets the permits when the semaphore has none set yet: 0 (one that starts empty) to 2^31-1. */
  async trySetPermits(n: number): Promise<boolean> {
    checkCount(n, "permits", 0);
    return (await this.hub.call(["RSEM.TRYSETPERMITS", this.key, String(n)])) === 1;
  }
  async addPermits(n: number): Promise<number> {
    checkCount(n, "permits", -(2 ** 31));
    return asInt(await this.hub.call(["RSEM.ADDPERMITS", this.key, String(n)]), "RSEM.ADDPERMITS");
  }
  async available(): Promise<number> {
    return asInt(await this.hub.call(["RSEM.AVAILABLE", this.key]), "RSEM.AVAILABLE");
  }
  /** Takes `permits` (default 1), waiting up to `wait` ms (default 0: try once); null when not enough came in time. */
  async acquire(options?: PermitOptions): Promise<Permits | null> {
    const o = permitOptions(options, PERMIT_OPTIONS);
    const req = requestId();
    // A grant given back once: the give-back has one REQ id, whether a read grant's or one `recover` found.
    const back = requestId();
    const giveBack = async () => void (await this.releaseWith(o.permits, back));
    const r = await this.hub.send(semAcquire(this.key, o.permits, o.wait, req), o.wait, o.signal, giveBack, resending(this.hub, semAcquire(this.key, o.permits, 0, req), giveBack));
    return r === null ? null : new Permits(this, o.permits);
  }
  /** Gives `n` permits back (anyone may, as in Redisson): the permits now available. */
  async release(n = 1): Promise<number> {
    checkCount(n, "permits", 1);
    return this.releaseWith(n, requestId());
  }
  private async releaseWith(n: number, req: string): Promise<number> {
    return asInt(await this.hub.callOnce(semRelease(this.key, n, req)), "RSEM.RELEASE");
  }
}
