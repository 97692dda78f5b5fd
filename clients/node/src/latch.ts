// Latch: Redisson's RCountDownLatch (`RLATCH.*`).
import { checkCount, permitOptions } from "./core/args.js";
import { latchAwait } from "./core/commands.js";
import { asInt } from "./core/replies.js";
import type { Hub } from "./hub.js";

const AWAIT_OPTIONS: ReadonlySet<string> = new Set(["wait", "signal"]);

/** Redisson's RCountDownLatch (`RLATCH.*`). */
export class Latch {
  /** @internal */
  constructor(
    private readonly hub: Hub,
    readonly key: string,
  ) {}
  async trySetCount(n: number): Promise<boolean> {
    checkCount(n, "count", 1, Number.MAX_SAFE_INTEGER);
    return (await this.hub.call(["RLATCH.TRYSETCOUNT", this.key, String(n)])) === 1;
  }
  /** Counts down once: the count now (0 opens the latch). */
  async countDown(): Promise<number> {
    return asInt(await this.hub.call(["RLATCH.COUNTDOWN", this.key]), "RLATCH.COUNTDOWN");
  }
  async count(): Promise<number> {
    return asInt(await this.hub.call(["RLATCH.COUNT", this.key]), "RLATCH.COUNT");
  }
  /** Waits up to `wait` ms (Infinity: forever; default 0: look once) for the count to reach zero: true once it has. */
  async awaitZero(options?: { wait?: number; signal?: AbortSignal }): Promise<boolean> {
    const o = permitOptions(options, AWAIT_OPTIONS);
    // Nothing to give back: a wait for zero takes nothing.
    const r = await this.hub.send(latchAwait(this.key, o.wait), o.wait, o.signal, async () => {});
    return r === 1;
  }
  /** @deprecated since 4.1.0: `awaitZero`, the name every rlock client gives this wait. */
  await(options?: { wait?: number; signal?: AbortSignal }): Promise<boolean> {
    return this.awaitZero(options);
  }
}
