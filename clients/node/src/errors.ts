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

/** The lock was not acquired within the wait (`using` never runs its callback then). */
export class NotAcquiredError extends RlockError {
  constructor(
    readonly key: string,
    readonly waited: number,
  ) {
    super(
      `lock ${JSON.stringify(key)} was not acquired within ${waited === Infinity ? "the wait" : `${waited} ms`}: another owner holds it`,
    );
  }
}

/** A release for an owner that no longer holds the lock: its lease ran out or it was force-released, so another holder may have overlapped. */
export class NotHeldError extends RlockError {
  constructor(
    readonly key: string,
    readonly owner: string,
  ) {
    super(
      `lock ${JSON.stringify(key)} is not held by ${JSON.stringify(owner)}: its lease ran out or it was force-released before this release, so another holder may have overlapped`,
      { code: "NOTHELD" },
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
