// The operator queries: what a lock, its waiters and the server say.
import * as command from "./command.js";
import type { Reply } from "./command.js";
import type { Core } from "./core.js";

export interface LockInfo {
  /** owner -> hold count (a read-write lock's writer as `owner:write`). */
  holders: Record<string, number | null>;
  /** The lease left in ms; -2 when free. */
  pttl: number;
  /** The fair queue's owners, head first. */
  queue: string[];
  /** Clients blocked on this lock on this server. */
  blocked: number;
  /** The fencing counter, or null. */
  token: number | null;
  /** `read` or `write` for a read-write lock. */
  mode?: string;
}

export interface Waiter {
  clientId: number;
  clientName: string;
  kind: string;
  owner: string | null;
  permits: number | null;
  waitedMs: number;
  timeoutMs: number;
  session: boolean;
}

export interface ScannedLock {
  key: string;
  type: "lock" | "rwlock";
  mode?: string;
  holders: Record<string, number | null>;
  pttl: number;
  waiters: number;
}

export interface ContendedKey {
  key: string;
  db: number;
  kind: string;
  waiters: number;
  longestWaitMs: number;
  waits: number;
  timeouts: number;
  waitP99Usec: number | null;
}

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

function holders(v: Reply): Record<string, number | null> {
  const h = command.pairs(v ?? []);
  const out: Record<string, number | null> = {};
  for (const [k, c] of Object.entries(h)) out[k] = num(c);
  return out;
}

export async function info(core: Core, key: string): Promise<LockInfo> {
  const m = command.pairs(await core.call(["RLOCK.INFO", key]));
  const out: LockInfo = {
    holders: holders(m["holders"]),
    pttl: Number(m["pttl"]),
    queue: ((m["queue"] as Reply[]) ?? []).map(String),
    blocked: Number(m["blocked"] ?? 0),
    token: num(m["token"]),
  };
  if (m["mode"] !== undefined && m["mode"] !== null) out.mode = String(m["mode"]);
  return out;
}

export async function waiters(core: Core, key: string): Promise<Waiter[]> {
  const list = (await core.call(["RLOCK.WAITERS", key])) as Reply[];
  return (list ?? []).map((e) => {
    const m = command.pairs(e);
    return {
      clientId: Number(m["client-id"]),
      clientName: String(m["client-name"] ?? ""),
      kind: String(m["kind"]),
      owner: m["owner"] === null || m["owner"] === undefined ? null : String(m["owner"]),
      permits: num(m["permits"]),
      waitedMs: Number(m["waited-ms"]),
      timeoutMs: Number(m["timeout-ms"]),
      session: Number(m["session"]) === 1,
    };
  });
}

export async function scan(core: Core, options?: { match?: string; type?: "lock" | "rwlock" }): Promise<ScannedLock[]> {
  const extra: string[] = [];
  if (options?.match !== undefined) extra.push("MATCH", command.checkName(options.match, "match"));
  if (options?.type !== undefined) {
    if (options.type !== "lock" && options.type !== "rwlock") throw new RangeError('type must be "lock" or "rwlock"');
    extra.push("TYPE", options.type);
  }
  const out: ScannedLock[] = [];
  for (const node of await core.primaries()) {
  let cursor = "0";
  do {
    const r = (await core.callOn(node, ["RLOCK.SCAN", cursor, ...extra, "COUNT", "100"])) as Reply[];
    cursor = String(r[0]);
    for (const e of (r[1] as Reply[]) ?? []) {
      const m = command.pairs(e);
      const s: ScannedLock = { key: String(m["key"]), type: m["type"] === "rwlock" ? "rwlock" : "lock", holders: holders(m["holders"]), pttl: Number(m["pttl"]), waiters: Number(m["waiters"] ?? 0) };
      if (m["mode"] !== undefined && m["mode"] !== null) s.mode = String(m["mode"]);
      out.push(s);
    }
  } while (cursor !== "0");
  }
  return out;
}

/** `INFO rlock`; in a cluster, every primary's, counters summed (other fields from the first). */
export async function stats(core: Core): Promise<Record<string, string>> {
  const all = await Promise.all((await core.primaries()).map(async (n) => command.parseInfo(String(await core.callOn(n, ["INFO", "rlock"])))));
  const out: Record<string, string> = { ...all[0] };
  for (const other of all.slice(1)) {
    for (const [k, v] of Object.entries(other)) {
      if (/^-?\d+$/.test(v) && /^-?\d+$/.test(out[k] ?? "") && k !== "rlock_version") out[k] = String(Number(out[k]) + Number(v));
      else out[k] ??= v;
    }
  }
  return out;
}

/** `RLOCK.TOP`; in a cluster, every primary's, merged in the server's order (waiting now, then waits). */
export async function top(core: Core, count: number): Promise<ContendedKey[]> {
  const lists = await Promise.all((await core.primaries()).map(async (n) => ((await core.callOn(n, ["RLOCK.TOP", "COUNT", String(count)])) as Reply[]) ?? []));
  const merged = lists.flat().map((e) => {
    const m = command.pairs(e);
    return {
      key: String(m["key"]),
      db: Number(m["db"]),
      kind: String(m["kind"]),
      waiters: Number(m["waiters"]),
      longestWaitMs: Number(m["longest-wait-ms"]),
      waits: Number(m["waits"]),
      timeouts: Number(m["timeouts"]),
      waitP99Usec: num(m["wait-p99-usec"]),
    };
  });
  if (lists.length > 1) merged.sort((a, b) => b.waiters - a.waiters || b.longestWaitMs - a.longestWaitMs || b.waits - a.waits);
  return merged.slice(0, count);
}
