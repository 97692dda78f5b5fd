// A user's program: must type-check under tsc --strict against the packed rlock-client.
import { createClient } from "redis";
import { Redis } from "ioredis";
import { Locks, LockLostError, NotAcquiredError, DeadlockError, ServerError, type Hold, type LockOptions, type MultiHold } from "rlock-client";

export async function main(url: string): Promise<number | null> {
  const viaNodeRedis = new Locks(createClient({ url }));
  const viaIoredis = new Locks(new Redis(url, { lazyConnect: true }));
  const opts: LockOptions = { lease: 30_000, wait: 5_000, fenced: true };
  const token = await viaNodeRedis.using("orders", opts, async (hold: Hold) => {
    hold.signal.throwIfAborted();
    return hold.token;
  });
  {
    await using h = await viaIoredis.lock("jobs", { wait: 0 }).acquire();
    if (h && h.signal.reason instanceof LockLostError) console.log(h.signal.reason.key);
  }
  try {
    await viaIoredis.owner().lock("a", { wait: 100 }).acquire({ signal: AbortSignal.timeout(1000) });
  } catch (e) {
    if (e instanceof DeadlockError) console.log(e.cycle.map((w) => w.owner));
    if (e instanceof NotAcquiredError) console.log(e.waited);
  }
  const both = await viaNodeRedis.multi(["{o}:a", "{o}:b"], { wait: 1_000 }).using(async (h: MultiHold) => h.keys.length);
  const open: boolean = await viaIoredis.latch("batch").awaitZero({ wait: 10 });
  try {
    await viaIoredis.semaphore("pool").acquire({ permits: 2, wait: 100 });
  } catch (e) {
    if (e instanceof ServerError) console.log(e.code, both, open);
  }
  await viaNodeRedis.close();
  await viaIoredis.close();
  return token;
}
