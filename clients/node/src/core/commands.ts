// The commands each call sends, for each combination of options. Pure: the faces (lock.ts,
// multilock.ts, ...) send what these return and nothing else.
import { randomBytes } from "node:crypto";

export type Side = "read" | "write";

/** A fresh `REQ` id: 16 random bytes as 32 hex characters. A resend of one call carries the same id, so the server applies it at most once. */
export function requestId(): string {
  return randomBytes(16).toString("hex");
}

/** `BLOCK ms` for a wait: none for 0, `BLOCK 0` for Infinity. */
export function blockArgs(wait: number): string[] {
  if (wait === 0) return [];
  return ["BLOCK", wait === Infinity ? "0" : String(wait)];
}

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

/** The owner's hold count (after a fenced acquire, whose reply is the token). */
export function holdCount(key: string, owner: string, side: Side | undefined): string[] {
  return ["HGET", key, field(owner, side)];
}

/**
 * `RLOCK.GUARD`: `command` runs in the server only while `owner` holds `key` (on that side of a
 * read-write lock, and as the hold that got `token` when it has one), in the same turn as the check.
 */
export function guard(key: string, owner: string, side: Side | undefined, token: number | null, command: readonly string[]): string[] {
  const c = ["RLOCK.GUARD", key, owner];
  if (side) c.push(side.toUpperCase());
  if (token !== null) c.push("TOKEN", String(token));
  c.push("CALL", ...command);
  return c;
}

/** `WAIT n ms`: replicas that must acknowledge a grant. */
export function waitReplicas(wanted: number, timeoutMs: number): string[] {
  return ["WAIT", String(wanted), String(timeoutMs)];
}

/**
 * A lock's acquire as sent: the acquire, then (fenced) `HGET` of the hold count, then (replicas
 * wanted) `WAIT`, in one pipeline; `retry` is the same call with no `BLOCK`, `FAIR` or
 * `SESSION`, sent to find a grant whose reply was never read (the same `REQ` id replays it).
 */
export function acquirePlan(a: Omit<AcquireArgs, "wait">, wanted: number, syncTimeout: number): { send: (wait: number) => string[][]; retry: string[] } {
  return {
    send: (wait) => {
      const c = [acquire({ ...a, wait })];
      if (a.fenced) c.push(holdCount(a.key, a.owner, a.side));
      if (wanted > 0) c.push(waitReplicas(wanted, syncTimeout));
      return c;
    },
    retry: acquire({ ...a, wait: 0, fair: false, session: false }),
  };
}

/** Replicas to wait for: as asked, else 1 when the server has replicas attached (C15). */
export function replicasWanted(asked: number | undefined, attached: number): number {
  return asked ?? Math.min(1, attached);
}

export interface MultiAcquireArgs {
  owner: string;
  keys: string[];
  lease: number;
  wait: number;
  session?: boolean;
  req: string;
}

export function macquire(a: MultiAcquireArgs): string[] {
  const c = ["RLOCK.MACQUIRE", a.owner, String(a.keys.length), ...a.keys, "LEASE", String(a.lease), ...blockArgs(a.wait)];
  if (a.session) c.push("SESSION");
  c.push("REQ", a.req);
  return c;
}

export function mrelease(owner: string, keys: string[], req: string): string[] {
  return ["RLOCK.MRELEASE", owner, String(keys.length), ...keys, "REQ", req];
}

export function semAcquire(key: string, permits: number, wait: number, req: string): string[] {
  return ["RSEM.ACQUIRE", key, "PERMITS", String(permits), ...blockArgs(wait), "REQ", req];
}

export function semRelease(key: string, permits: number, req: string): string[] {
  return ["RSEM.RELEASE", key, "PERMITS", String(permits), "REQ", req];
}

export function semLease(key: string, lease: number, permits: number, wait: number, req: string): string[] {
  return ["RSEM.LEASE", key, "LEASE", String(lease), "PERMITS", String(permits), ...blockArgs(wait), "REQ", req];
}

export function semReturn(key: string, id: string, req: string): string[] {
  return ["RSEM.RETURN", key, id, "REQ", req];
}

export function semRenew(key: string, id: string, lease: number): string[] {
  return ["RSEM.RENEW", key, id, "LEASE", String(lease)];
}

export function latchAwait(key: string, wait: number): string[] {
  return ["RLATCH.AWAIT", key, ...blockArgs(wait)];
}

/** The key a command is routed by: the first key (`RLOCK.MACQUIRE`/`MRELEASE`: after owner and numkeys); none for keyless commands. */
export function keyOf(args: string[]): string | undefined {
  const name = args[0]!.toUpperCase();
  if (name === "RLOCK.MACQUIRE" || name === "RLOCK.MRELEASE") return args[3];
  if (["INFO", "CONFIG", "CLIENT", "CLUSTER", "RLOCK.TOP", "RLOCK.SCAN", "WAIT", "PING"].includes(name)) return undefined;
  return args[1];
}

/** The cluster slot of a key (CRC16 of its hash tag), for the client-side check that multi-key names share one slot. */
export function slotOf(key: string): number {
  const b = Buffer.from(key);
  const s = b.indexOf(0x7b); // {
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

/** How much of a lease to take off for clock drift between client and server (Redisson: 1 % + 2 ms). */
export function drift(lease: number): number {
  return Math.floor(lease * 0.01) + 2;
}
