// The operator queries: what a lock, its waiters and the server say. Replies are read by core/replies.
import { checkName } from "./core/args.js";
import { mergeStats, parseInfo, readLockInfo, readScanPage, readTop, readWaiters, type ContendedKey, type LockInfo, type ScannedLock, type Waiter } from "./core/replies.js";
import type { Hub } from "./hub.js";

export async function info(hub: Hub, key: string): Promise<LockInfo> {
  return readLockInfo(await hub.call(["RLOCK.INFO", key]));
}

export async function waiters(hub: Hub, key: string): Promise<Waiter[]> {
  return readWaiters(await hub.call(["RLOCK.WAITERS", key]));
}

/** `RLOCK.SCAN` followed to the end on every primary. */
export async function scan(hub: Hub, options?: { match?: string; type?: "lock" | "rwlock" | "LOCK" | "RWLOCK" }): Promise<ScannedLock[]> {
  const extra: string[] = [];
  if (options?.match !== undefined) extra.push("MATCH", checkName(options.match, "match"));
  if (options?.type !== undefined) {
    const type = typeof options.type === "string" ? options.type.toLowerCase() : options.type;
    if (type !== "lock" && type !== "rwlock") throw new RangeError('type must be "lock" or "rwlock"');
    extra.push("TYPE", type.toUpperCase());
  }
  const out: ScannedLock[] = [];
  for (const node of await hub.primaries()) {
    let cursor = "0";
    do {
      const page = readScanPage(await hub.callOn(node, ["RLOCK.SCAN", cursor, "COUNT", "500", ...extra]));
      out.push(...page.locks);
      cursor = page.cursor;
    } while (cursor !== "0");
  }
  return out;
}

/** `INFO rlock`; in a cluster, every primary's, counters summed (other fields from the first). */
export async function stats(hub: Hub): Promise<Record<string, string>> {
  return mergeStats(await Promise.all((await hub.primaries()).map(async (n) => parseInfo(String(await hub.callOn(n, ["INFO", "rlock"]))))));
}

/** `RLOCK.TOP`; in a cluster, every primary's, merged in the server's order. */
export async function top(hub: Hub, count: number): Promise<ContendedKey[]> {
  return readTop(await Promise.all((await hub.primaries()).map((n) => hub.callOn(n, ["RLOCK.TOP", "COUNT", String(count)]))), count);
}
