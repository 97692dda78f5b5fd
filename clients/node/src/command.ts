// The wire format: arguments checked and turned into commands, replies read. Pure functions,
// no socket, so each rule is tested alone (test/command.test.mjs).
import { randomBytes } from "node:crypto";
import { DeadlockError, NotHeldError, RlockError, type DeadlockWait } from "./errors.js";

export type Reply = null | number | string | Reply[];

/** A server error reply, with its code (the first word). */
export class ServerError extends RlockError {}

/** The largest lease the server takes (2^40 ms). */
export const MAX_LEASE = 2 ** 40;

export function checkName(name: unknown, what = "name"): string {
  if (typeof name !== "string") throw new TypeError(`${what} must be a string, got ${typeof name}`);
  if (name.length === 0) throw new RangeError(`${what} must not be empty`);
  return name;
}

export function checkOwner(owner: unknown): string {
  if (typeof owner !== "string") throw new TypeError(`owner must be a string, got ${typeof owner}`);
  if (owner.length === 0 || Buffer.byteLength(owner) > 1024) {
    throw new RangeError("owner must be 1 to 1024 bytes");
  }
  return owner;
}

/** A lease in ms: a finite number > 0 (rounded up to whole ms), at most 2^40. */
export function checkLease(lease: unknown, what = "lease"): number {
  if (typeof lease !== "number") throw new TypeError(`${what} must be a number of milliseconds, got ${typeof lease}`);
  if (!Number.isFinite(lease) || lease <= 0 || Math.ceil(lease) > MAX_LEASE) {
    throw new RangeError(`${what} must be > 0 and at most 2^40 ms, got ${lease}`);
  }
  return Math.ceil(lease);
}

/** A wait in ms: 0 (try once), a finite number > 0, or Infinity (as long as it takes). */
export function checkWait(wait: unknown): number {
  if (typeof wait !== "number") throw new TypeError(`wait must be a number of milliseconds, got ${typeof wait}`);
  if (Number.isNaN(wait) || wait < 0) throw new RangeError(`wait must be >= 0 (or Infinity), got ${wait}`);
  return wait === Infinity ? Infinity : Math.ceil(wait);
}

export function checkCount(n: unknown, what: string, min: number, max = 2 ** 31 - 1): number {
  if (typeof n !== "number") throw new TypeError(`${what} must be a number, got ${typeof n}`);
  if (!Number.isInteger(n) || n < min || n > max) throw new RangeError(`${what} must be an integer from ${min} to ${max}, got ${n}`);
  return n;
}

export function checkBool(v: unknown, what: string): boolean {
  if (v === undefined) return false;
  if (typeof v !== "boolean") throw new TypeError(`${what} must be a boolean, got ${typeof v}`);
  return v;
}

/** A fresh `REQ` id: 16 random bytes as 32 hex characters. A resend of one call carries the same id, so the server applies it at most once. */
export function requestId(): string {
  return randomBytes(16).toString("hex");
}

/** Whether a `CLIENT LIST` line shows its connection blocked (`flags` with `b`) in `cmd` (lower case, as the server shows it). */
export function blockedIn(line: string, cmd: string): boolean {
  const fields = new Map(line.trim().split(/\s+/).map((f) => [f.slice(0, f.indexOf("=")), f.slice(f.indexOf("=") + 1)] as const));
  return (fields.get("flags") ?? "").includes("b") && fields.get("cmd") === cmd;
}

/** `BLOCK ms` for a wait: none for 0, `BLOCK 0` for Infinity. */
export function blockArgs(wait: number): string[] {
  if (wait === 0) return [];
  return ["BLOCK", wait === Infinity ? "0" : String(wait)];
}

export type Side = "read" | "write";

export interface AcquireArgs {
  key: string;
  owner: string;
  side?: Side | undefined;
  lease: number;
  wait: number;
  fair?: boolean;
  fenced?: boolean;
  session?: boolean;
  req: string;
}

export function acquire(a: AcquireArgs): string[] {
  const c = ["RLOCK.ACQUIRE", a.key, a.owner];
  if (a.side) c.push(a.side.toUpperCase());
  c.push("LEASE", String(a.lease), ...blockArgs(a.wait));
  if (a.fair) c.push("FAIR");
  if (a.fenced) c.push("TOKEN");
  if (a.session) c.push("SESSION");
  c.push("REQ", a.req);
  return c;
}

export function release(key: string, owner: string, side: Side | undefined, req: string): string[] {
  const c = ["RLOCK.RELEASE", key, owner];
  if (side) c.push(side.toUpperCase());
  c.push("REQ", req);
  return c;
}

export function renew(key: string, owner: string, side: Side | undefined, lease: number, req: string): string[] {
  const c = ["RLOCK.RENEW", key, owner];
  if (side) c.push(side.toUpperCase());
  c.push("LEASE", String(lease), "REQ", req);
  return c;
}

/** The hash field that counts a hold: the owner, or `<owner>:write` for a write hold (Redisson's layout). */
export function field(owner: string, side: Side | undefined): string {
  return side === "write" ? `${owner}:write` : owner;
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

/** How much of a lease to take off for clock drift between client and server (Redisson: 1 % + 2 ms). */
export function drift(lease: number): number {
  return Math.floor(lease * 0.01) + 2;
}

/** Keyspace events that may end a hold on the key: worth checking the hold at once. */
export const ENDING_EVENTS = new Set(["del", "expired", "evicted", "rlock.forcerelease", "rlock.expire", "rlock.sessionend", "rlock.release", "rename_from", "move_from"]);

/** Which of the server's notifications tell this client of a hold's end: keyevent (`E`, one channel per event, the key as message) or keyspace (`K`, one channel per key), each with the module's class (`d`); none without it. */
export function keyspaceEvents(flags: string): "keyevent" | "keyspace" | null {
  if (!flags.includes("d") && !flags.includes("A")) return null;
  if (flags.includes("E")) return "keyevent";
  if (flags.includes("K")) return "keyspace";
  return null;
}

/** The cluster slot of a key (CRC16 of its hash tag), for the client-side check that multi-key names share one slot. */
export function slotOf(key: string): number {
  const b = Buffer.from(key);
  let s = b.indexOf(0x7b); // {
  let data = b;
  if (s >= 0) {
    const e = b.indexOf(0x7d, s + 1); // }
    if (e > s + 1) data = b.subarray(s + 1, e);
  }
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}
