/** Every error this package raises on purpose. Server errors it does not know pass through as `RlockError` with `code`. */
export class RlockError extends Error {
  /** The server's error code (`ERR`, `WRONGTYPE`, ...), when the error came from the server. */
  readonly code: string | undefined;
  constructor(message: string, options?: { cause?: unknown; code?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options?.code;
  }
}

/** A server error reply this package gives no class of its own: `code` is its first word (`ERR`, `WRONGTYPE`, `NOPERM`, ...). */
export class ServerError extends RlockError {}

/** No reply came within the deadline (the response timeout, or a wait plus its margin): the command may or may not have run. */
export class NoReplyError extends RlockError {}

/** The lock (or every lock of a multi-key lock) was not acquired within the wait: `using` never runs its callback then. */
export class NotAcquiredError extends RlockError {
  /** The lock's name (a multi-key lock's names joined with ", "). */
  readonly key: string;
  constructor(
    key: string | string[],
    readonly waited: number,
  ) {
    const names = typeof key === "string" ? [key] : key;
    const within = waited === Infinity ? "the wait" : `${waited} ms`;
    super(
      names.length === 1
        ? `lock ${JSON.stringify(names[0])} was not acquired within ${within}: another owner holds it`
        : `locks ${JSON.stringify(names)} were not acquired within ${within}: another owner holds one of them`,
    );
    this.key = names.join(", ");
  }
}

/**
 * The server's `NOTHELD`: a release, or a guarded command (`hold.guard`), for an owner that no
 * longer holds the lock: its lease ran out or it was force-released, so another holder may
 * have overlapped. A guarded command was not run.
 */
export class NotHeldError extends RlockError {
  constructor(
    readonly key: string,
    readonly owner: string,
    message = `lock ${JSON.stringify(key)} is not held by ${JSON.stringify(owner)}: its lease ran out or it was force-released before this release, so another holder may have overlapped`,
    code = "NOTHELD",
  ) {
    super(message, { code });
  }
}

/**
 * The server's `STALETOKEN`, for a guarded command (`hold.guard`) of a fenced hold: the owner
 * holds the lock, but not as the hold that got `token`: the lock was taken again since (by
 * anyone), and its fencing token is `current` now. The command was not run.
 */
export class StaleTokenError extends NotHeldError {
  constructor(
    key: string,
    owner: string,
    readonly token: number,
    /** The lock's fencing token now, as the server said; null if its message did not say. */
    readonly current: number | null,
  ) {
    super(
      key,
      owner,
      `lock ${JSON.stringify(key)} was taken again since this hold got fencing token ${token}${current === null ? "" : ` (it is ${current} now)`}, so the guarded command was not run`,
      "STALETOKEN",
    );
  }
}

/** A hold is gone while it was believed held: renewal refused, lease ran out, force-released. `hold.signal.reason`. */
export class LockLostError extends RlockError {
  constructor(
    readonly key: string,
    readonly reason: string,
  ) {
    super(`lock ${JSON.stringify(key)} was lost: ${reason}`);
  }
}

/** One wait of a deadlock's cycle: `owner` waits for `key`, which `holder` holds (or which is kept for `holder`'s multi-key call). */
export interface DeadlockWait {
  owner: string;
  key: string;
  holder: string;
  kept: boolean;
}

/** The server refused a wait that would have closed a cycle of waits; this call holds nothing new. */
export class DeadlockError extends RlockError {
  constructor(
    readonly cycle: DeadlockWait[],
    text: string,
  ) {
    super(`deadlock, this call refused: ${text}`, { code: "DEADLOCK" });
  }
}

/** Fewer replicas than wanted acknowledged a grant in time, so it was released rather than trusted across a failover. */
export class NotAcknowledgedError extends RlockError {
  constructor(
    readonly key: string,
    readonly acked: number,
    readonly wanted: number,
  ) {
    super(
      `lock ${JSON.stringify(key)} was granted but only ${acked} of ${wanted} replicas acknowledged it in time, so it was released rather than trusted across a failover`,
    );
  }
}
