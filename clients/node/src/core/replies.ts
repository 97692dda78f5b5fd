// What each reply means, and which error each server error becomes. Pure: the faces hand
// replies here and act on what comes back.
import { DeadlockError, NoReplyError, NotHeldError, RlockError, ServerError, StaleTokenError, type DeadlockWait } from "../errors.js";

export type Reply = null | number | string | Reply[];

/** Whether `x` is no reply at all (a broken connection, a deadline passed), as opposed to a reply or a server error. */
export function isBroken(x: unknown): x is Error {
  return x instanceof Error && (!(x instanceof RlockError) || x instanceof NoReplyError);
}

/** One reply of a pipeline: an error reply thrown, a missing one null. */
export function replyOf(x: Reply | Error | undefined): Reply {
  if (x instanceof Error) throw x;
  return x ?? null;
}

export function asInt(v: Reply, what: string): number {
  if (typeof v === "number") return v;
  if (typeof v === "string" && /^-?\d+$/.test(v)) return Number(v);
  throw new RlockError(`${what} replied ${JSON.stringify(v)}`);
}

/** `RLOCK.ACQUIRE`'s reply: null when not acquired, else the token or hold count (>= 1). */
export function parseAcquire(v: Reply): number | null {
  if (v === null) return null;
  const n = asInt(v, "RLOCK.ACQUIRE");
  if (n < 1) throw new RlockError(`RLOCK.ACQUIRE replied ${n}`);
  return n;
}

/** What an acquire's pipeline (see `acquirePlan`) says: null when not granted. */
export interface Grant {
  /** The fencing token (fenced), else null. */
  token: number | null;
  /** The hold count after this acquire; null if a fenced hold was gone before its count was read. */
  holdCount: number | null;
  /** Replicas that acknowledged (`WAIT`), null when none was asked for. */
  acked: number | null;
}

export function readGrant(replies: Array<Reply | Error>, fenced: boolean, wanted: number): Grant | null {
  const granted = parseAcquire(replyOf(replies[0]));
  if (granted === null) return null;
  let holdCount: number | null = granted;
  if (fenced) {
    const c = replies[1];
    holdCount = typeof c === "string" || typeof c === "number" ? Number(c) || null : null;
  }
  let acked: number | null = null;
  if (wanted > 0) {
    const w = replies[replies.length - 1];
    acked = typeof w === "number" ? w : 0;
  }
  return { token: fenced ? granted : null, holdCount, acked };
}

/**
 * `RLOCK.RENEW` / `RSEM.RENEW`: renewed; lost (0, or `WRONGTYPE`: the key is no longer this
 * kind of lock, so the hold is gone); or no answer to act on (another error, a broken
 * connection: try again soon, until the lease runs out).
 */
export function renewal(r: Reply | Error | undefined): "renewed" | "lost" | "retry" {
  if (r === 1) return "renewed";
  if (r === 0) return "lost";
  if (r instanceof RlockError && r.code === "WRONGTYPE") return "lost";
  return "retry";
}

/** `RLOCK.RELEASE`: true when the lock is free now, false when a re-entry was undone. */
export function released(r: Reply): boolean {
  if (r === 1) return true;
  if (r === 0) return false;
  throw new RlockError(`RLOCK.RELEASE replied ${JSON.stringify(r)}`);
}

/** A server error as this package's error: `DEADLOCK` with its cycle, `NOTHELD`, or a `ServerError` with its code. */
export function serverError(message: string, ctx?: { key: string; owner: string }): RlockError {
  const space = message.indexOf(" ");
  const code = space > 0 ? message.slice(0, space) : message;
  const text = space > 0 ? message.slice(space + 1) : "";
  if (code === "DEADLOCK") {
    const cycle = parseCycle(text);
    if (cycle) return new DeadlockError(cycle, text);
  }
  if (code === "NOTHELD" && ctx) return new NotHeldError(ctx.key, ctx.owner);
  return new ServerError(message, { code });
}

/** A server's `NOTHELD` (already a `ServerError`) as `NotHeldError` naming the key and owner; any other error as it is. */
export function notHeld(e: unknown, key: string, owner: string): unknown {
  return e instanceof RlockError && e.code === "NOTHELD" && !(e instanceof NotHeldError) ? new NotHeldError(key, owner) : e;
}

/**
 * A guarded command's refusal (`RLOCK.GUARD`) as this package's error: `NOTHELD` as
 * `NotHeldError`, `STALETOKEN` as `StaleTokenError` (with the token the server says is the
 * lock's now); any other error (the inner command's own, a bad call) as it is.
 */
export function guardRefusal(e: unknown, key: string, owner: string, token: number | null): unknown {
  if (!(e instanceof RlockError) || e instanceof NotHeldError) return e;
  if (e.code === "NOTHELD") return new NotHeldError(key, owner, `lock ${JSON.stringify(key)} is not held by ${JSON.stringify(owner)}: its lease ran out or it was force-released, so the guarded command was not run`);
  if (e.code === "STALETOKEN" && token !== null) {
    // "STALETOKEN the lock's fencing token is now 8, not 7"
    const now = /\bis now (\d+)/.exec(e.message);
    return new StaleTokenError(key, owner, token, now ? Number(now[1]) : null);
  }
  return e;
}

/** `MOVED slot host:port` / `ASK slot host:port`: where the command must go (the server ran nothing). */
export function redirect(e: unknown): { ask: boolean; node: string } | null {
  if (!(e instanceof RlockError) || (e.code !== "MOVED" && e.code !== "ASK")) return null;
  const parts = e.message.split(" ");
  return { ask: e.code === "ASK", node: parts[2] ?? "" };
}

/** The cycle of a `DEADLOCK` error's text: `"b" waits for "k1" held by "a"; ...`; null when not of that shape. */
export function parseCycle(text: string): DeadlockWait[] | null {
  let rest = text.trim();
  const cycle: DeadlockWait[] = [];
  for (;;) {
    const owner = quoted(rest);
    if (!owner || !owner.rest.startsWith(" waits for ")) return null;
    const key = quoted(owner.rest.slice(" waits for ".length));
    if (!key) return null;
    let kept: boolean;
    let after: string;
    if (key.rest.startsWith(" held by ")) {
      kept = false;
      after = key.rest.slice(" held by ".length);
    } else if (key.rest.startsWith(" kept for ")) {
      kept = true;
      after = key.rest.slice(" kept for ".length);
    } else return null;
    const holder = quoted(after);
    if (!holder) return null;
    cycle.push({ owner: owner.text, key: key.text, holder: holder.text, kept });
    if (holder.rest === "") return cycle;
    if (!holder.rest.startsWith("; ")) return null;
    rest = holder.rest.slice(2);
  }
}

/** A leading `"..."` with `\"`, `\\` and `\xNN` escapes, as redis-cli shows strings. */
function quoted(s: string): { text: string; rest: string } | null {
  if (!s.startsWith('"')) return null;
  const bytes: number[] = [];
  for (let i = 1; i < s.length; i++) {
    const c = s[i]!;
    if (c === '"') return { text: Buffer.from(bytes).toString("utf8"), rest: s.slice(i + 1) };
    if (c === "\\") {
      const e = s[++i];
      if (e === undefined) return null;
      if (e === "x") {
        const hex = s.slice(i + 1, i + 3);
        if (!/^[0-9a-fA-F]{2}$/.test(hex)) return null;
        bytes.push(parseInt(hex, 16));
        i += 2;
      } else bytes.push(...Buffer.from(e));
    } else bytes.push(...Buffer.from(c));
  }
  return null;
}

/** A flat `[field, value, ...]` array (RESP2 map) as an object; a RESP3 object passes through. */
export function pairs(v: Reply | Record<string, unknown>): Record<string, any> {
  if (v === null) return {};
  if (!Array.isArray(v)) {
    if (typeof v === "object") return v as Record<string, any>;
    throw new RlockError(`expected a map, got ${JSON.stringify(v)}`);
  }
  const out: Record<string, any> = {};
  for (let i = 0; i + 1 < v.length; i += 2) out[String(v[i])] = v[i + 1];
  return out;
}

/** `INFO` text as fields. */
export function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i > 0 && !line.startsWith("#")) out[line.slice(0, i)] = line.slice(i + 1).trim();
  }
  return out;
}

/** `INFO`s of several primaries as one: counters summed, other fields from the first. */
export function mergeStats(all: Array<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = { ...all[0] };
  for (const other of all.slice(1)) {
    for (const [k, v] of Object.entries(other)) {
      if (/^-?\d+$/.test(v) && /^-?\d+$/.test(out[k] ?? "") && k !== "rlock_version") out[k] = String(Number(out[k]) + Number(v));
      else out[k] ??= v;
    }
  }
  return out;
}

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

/** A leader as seen by anyone: its value (the owner of the lock) and its term (the fencing token). */
export interface Leader {
  value: string;
  term: number;
}

const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

function holders(v: Reply): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  for (const [k, c] of Object.entries(pairs(v ?? []))) out[k] = num(c);
  return out;
}

export function readLockInfo(v: Reply): LockInfo {
  const m = pairs(v);
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

/** The leader an election's lock names: its one holder (not a read-write lock), with the fencing counter as the term. */
export function leaderOf(info: LockInfo): Leader | null {
  const values = Object.keys(info.holders);
  if (info.mode !== undefined || values.length !== 1) return null;
  return { value: values[0]!, term: info.token ?? 0 };
}

export function readWaiters(v: Reply): Waiter[] {
  return ((v as Reply[]) ?? []).map((e) => {
    const m = pairs(e);
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

/** One `RLOCK.SCAN` reply: the next cursor ("0" at the end) and the locks of this page. */
export function readScanPage(v: Reply): { cursor: string; locks: ScannedLock[] } {
  const r = v as Reply[];
  const locks = ((r[1] as Reply[]) ?? []).map((e) => {
    const m = pairs(e);
    const s: ScannedLock = { key: String(m["key"]), type: m["type"] === "rwlock" ? "rwlock" : "lock", holders: holders(m["holders"]), pttl: Number(m["pttl"]), waiters: Number(m["waiters"] ?? 0) };
    if (m["mode"] !== undefined && m["mode"] !== null) s.mode = String(m["mode"]);
    return s;
  });
  return { cursor: String(r[0]), locks };
}

/** `RLOCK.TOP` replies of one or more primaries, merged in the server's order (waiting now, then waits). */
export function readTop(lists: Reply[], count: number): ContendedKey[] {
  const merged = lists.flatMap((l) => (l as Reply[]) ?? []).map((e) => {
    const m = pairs(e);
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
