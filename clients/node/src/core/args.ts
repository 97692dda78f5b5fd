// Arguments checked before anything is sent (case C17): a wrong type is a TypeError, a wrong
// value a RangeError. Pure: no socket, no clock.

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

/** A wait in ms: 0 (try once), a finite number > 0 (rounded up, so never 0), or Infinity (as long as it takes). */
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

/**
 * The command a guard runs, given as `guard("SET", "k", "v")` or `guard(["SET", "k", "v"])`:
 * a command name and its arguments, every one a string.
 */
export function checkGuarded(given: readonly unknown[]): string[] {
  const words = given.length === 1 && Array.isArray(given[0]) ? (given[0] as unknown[]) : given;
  if (words.length === 0) throw new TypeError("guard needs a command: guard(\"SET\", key, value) or guard([\"SET\", key, value])");
  words.forEach((w, i) => {
    if (typeof w !== "string") throw new TypeError(`guard's ${i === 0 ? "command" : `argument ${i}`} must be a string, got ${Array.isArray(w) ? "an array" : typeof w}`);
  });
  if (words[0] === "") throw new RangeError("guard's command must not be empty");
  return words as string[];
}

export function checkOptions(o: unknown, allowed: ReadonlySet<string>, what = "options"): Record<string, unknown> {
  if (o === undefined) return {};
  if (o === null || typeof o !== "object") throw new TypeError(`${what} must be an object`);
  for (const k of Object.keys(o)) if (!allowed.has(k)) throw new TypeError(`unknown option ${JSON.stringify(k)}`);
  return o as Record<string, unknown>;
}

export interface LockOptions {
  /** A fixed lease in ms, not renewed: the hold is lost when it runs out (unless `hold.renew()`). Without it the lease is the watchdog's (30 s), renewed every third of it. */
  lease?: number;
  /** How long to wait in the server for a busy lock, in ms: 0 tries once, Infinity waits as long as it takes. Unset: `acquire()` tries once and `using` waits as long as it takes. */
  wait?: number;
  /** First come, first served across every fair acquirer, Redisson's included (`FAIR`). */
  fair?: boolean;
  /** Ask for a fencing token (`TOKEN`): `hold.token` strictly increases each time the lock goes from free to held. */
  fenced?: boolean;
  /** The hold ends when the connection that took it closes, as when this process dies (`SESSION`). */
  session?: boolean;
  /** Replicas that must acknowledge the grant (`WAIT`) before acquire returns. Default: 1 when the server has replicas attached, else 0. 0 sends no `WAIT`. */
  syncReplicas?: number;
  /** The owner id, instead of the handle's own (`<client-uuid>:<n>`). 1 to 1024 bytes. */
  owner?: string;
}

/** A lock handle's options, checked. `wait` undefined: the call decides (acquire tries once, using waits). */
export interface Settings {
  lease: number | undefined;
  wait: number | undefined;
  fair: boolean;
  fenced: boolean;
  session: boolean;
  syncReplicas: number | undefined;
}

export const LOCK_OPTIONS: ReadonlySet<string> = new Set(["lease", "wait", "fair", "fenced", "session", "syncReplicas", "owner"]);

/** Checks lock options before anything is sent: TypeError / RangeError. */
export function settings(opts: LockOptions | undefined, allowed: ReadonlySet<string> = LOCK_OPTIONS): Settings {
  const o = checkOptions(opts, allowed);
  return {
    lease: o["lease"] === undefined ? undefined : checkLease(o["lease"]),
    wait: o["wait"] === undefined ? undefined : checkWait(o["wait"]),
    fair: checkBool(o["fair"], "fair"),
    fenced: checkBool(o["fenced"], "fenced"),
    session: checkBool(o["session"], "session"),
    syncReplicas: o["syncReplicas"] === undefined ? undefined : checkCount(o["syncReplicas"], "syncReplicas", 0, 1000),
  };
}

/** The owner a handle takes: the one given, checked, or a new one. */
export function ownerOr(given: unknown, fresh: () => string): string {
  return given === undefined ? fresh() : checkOwner(given);
}

export interface AcquireOptions {
  /** Ends the wait; nothing is left behind (a grant made meanwhile is given back). */
  signal?: AbortSignal;
}

export function checkSignal(s: unknown): AbortSignal | undefined {
  if (s !== undefined && !(s instanceof AbortSignal)) throw new TypeError("signal must be an AbortSignal");
  return s;
}

/** `{ signal }` of an acquire, checked. */
export function acquireSignal(o: AcquireOptions | undefined): AbortSignal | undefined {
  if (o === undefined) return undefined;
  if (o === null || typeof o !== "object") throw new TypeError("acquire options must be an object");
  return checkSignal(o.signal);
}

/**
 * The names of a multi-key lock as sent: each once, sorted bytewise (every client names a set of
 * locks the same way, whatever order the caller gave); 1 to 1024 of them; in a cluster all in one slot.
 */
export function checkMultiNames(names: unknown, oneSlot: ((names: string[]) => boolean) | undefined): string[] {
  if (!Array.isArray(names)) throw new TypeError("multi takes an array of lock names");
  names.forEach((n) => checkName(n));
  const keys = [...new Set(names as string[])].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  if (keys.length < 1 || keys.length > 1024) throw new RangeError("multi takes 1 to 1024 lock names");
  if (oneSlot && !oneSlot(keys)) {
    throw new RangeError(`in a cluster the locks of one multi must share a slot (use a hash tag, as {order:7}:stock and {order:7}:payment): ${JSON.stringify(keys)}`);
  }
  return keys;
}

export interface PermitOptions {
  permits?: number;
  wait?: number;
  signal?: AbortSignal;
}

export interface LeaseOptions extends PermitOptions {
  /** A fixed lease in ms, not renewed; without it the watchdog lease, renewed. */
  lease?: number;
}

/** Permits (default 1), wait (default 0: try once), signal, and (leased permits) a fixed lease. */
export function permitOptions(opts: LeaseOptions | undefined, allowed: ReadonlySet<string>): { permits: number; wait: number; signal: AbortSignal | undefined; lease: number | undefined } {
  const o = checkOptions(opts, allowed);
  return {
    permits: o["permits"] === undefined ? 1 : checkCount(o["permits"], "permits", 1),
    wait: o["wait"] === undefined ? 0 : checkWait(o["wait"]),
    signal: checkSignal(o["signal"]),
    lease: o["lease"] === undefined ? undefined : checkLease(o["lease"]),
  };
}
