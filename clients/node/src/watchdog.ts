// The watchdog: one timer per Locks renews every hold taken without a fixed lease, in one
// batch per tick (renewals due within a sixth of a lease ride along with one due now), and
// declares holds lost when a renewal is refused or their lease runs out. A keyspace event
// that may have ended a hold (a force-release, a deletion, an expiry) makes it look at once.
import { drift, field, renew, requestId, semRenew, type Side } from "./core/commands.js";
import { renewal, type Reply } from "./core/replies.js";
import { LockLostError } from "./errors.js";

export interface Watched {
  key: string;
  owner: string;
  side: Side | undefined;
  /** A leased permit (`RSEM.RENEW key id`), not a lock hold. */
  permit: boolean;
}

export class Entry implements Watched {
  guards = 0;
  validUntil = 0;
  due = 0;
  lastError: string | undefined;
  private ctl: AbortController | undefined;
  private lostWith: LockLostError | undefined;
  /** Made on first use (most holds never have their signal read); aborted at once if the hold was lost before. */
  get controller(): AbortController {
    if (!this.ctl) {
      this.ctl = new AbortController();
      if (this.lostWith) this.ctl.abort(this.lostWith);
    }
    return this.ctl;
  }
  get isLost(): boolean {
    return this.lostWith !== undefined;
  }
  lose(e: LockLostError): void {
    this.lostWith ??= e;
    this.ctl?.abort(this.lostWith);
  }
  constructor(
    readonly id: string,
    readonly key: string,
    readonly owner: string,
    readonly side: Side | undefined,
    readonly permit: boolean,
    public lease: number,
    public renew: boolean,
  ) {}
}

export interface WatchdogHost {
  /** Sends commands on the shared connection, at once (one round trip), with a deadline. */
  batch(cmds: string[][], timeoutMs: number): Promise<Array<Reply | Error>>;
  /** A key gained its first hold, or lost its last: follow its keyspace events, or stop. */
  follow(key: string, on: boolean): void;
}

export class Watchdog {
  private readonly entries = new Map<string, Entry>();
  private readonly perKey = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private running = false;
  /** Renewal batches sent, renewals sent: for tests and stats. */
  batches = 0;
  renewals = 0;

  constructor(private readonly host: WatchdogHost) {}

  get size(): number {
    return this.entries.size;
  }

  private static id(w: Watched): string {
    return `${w.permit ? "p" : "l"}\u0000${w.key}\u0000${w.owner}\u0000${w.side ?? ""}`;
  }

  /** Records a grant whose request was sent at `basis`; returns the entry every hold of it shares. */
  register(w: Watched, lease: number, renew: boolean, basis: number): Entry {
    const id = Watchdog.id(w);
    let e = this.entries.get(id);
    if (!e) {
      e = new Entry(id, w.key, w.owner, w.side, w.permit, lease, renew);
      this.entries.set(id, e);
      const n = this.perKey.get(w.key) ?? 0;
      this.perKey.set(w.key, n + 1);
      if (n === 0) this.host.follow(w.key, true);
    }
    e.guards++;
    e.lease = lease;
    e.renew ||= renew;
    e.validUntil = basis + lease - drift(lease);
    e.due = basis + lease / 3;
    this.schedule();
    return e;
  }

  /** A hold of `e` is released: the last one takes the entry away. */
  unregister(e: Entry): void {
    if (this.entries.get(e.id) !== e) return;
    if (--e.guards > 0) return;
    this.remove(e);
  }

  private remove(e: Entry): void {
    this.entries.delete(e.id);
    const n = (this.perKey.get(e.key) ?? 1) - 1;
    if (n > 0) this.perKey.set(e.key, n);
    else {
      this.perKey.delete(e.key);
      this.host.follow(e.key, false);
    }
    if (this.entries.size === 0) this.schedule();
  }

  markLost(e: Entry, reason: string): void {
    if (this.entries.get(e.id) !== e) return;
    this.remove(e);
    e.lose(new LockLostError(e.key, reason));
  }

  renewed(e: Entry, basis: number): void {
    if (this.entries.get(e.id) !== e) return;
    e.validUntil = Math.max(e.validUntil, basis + e.lease - drift(e.lease));
    e.due = basis + e.lease / 3;
    e.lastError = undefined;
    this.schedule();
  }

  /** A keyspace event says the key may have lost its holders: ask the server about each hold on it now. */
  async check(key: string): Promise<void> {
    const held = [...this.entries.values()].filter((e) => e.key === key && !e.permit);
    if (held.length === 0) return;
    const cmds = held.map((e) => ["HEXISTS", e.key, field(e.owner, e.side)]);
    const replies = await this.host.batch(cmds, 2000).catch(() => null);
    if (!replies) return;
    held.forEach((e, i) => {
      if (replies[i] === 0) this.markLost(e, "the server no longer has it: it was force-released, deleted or expired");
    });
  }

  /** Sets the one timer for the earliest renewal or lease end. It is only ever moved earlier here: a timer that fires with nothing due looks again and sets the next one. */
  private schedule(): void {
    if (this.running) return; // the tick schedules when it ends
    let next = Infinity;
    for (const e of this.entries.values()) {
      next = Math.min(next, e.validUntil);
      if (e.renew) next = Math.min(next, e.due);
    }
    if (next === Infinity) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Infinity;
      return;
    }
    if (this.timer && this.timerAt <= next) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = next;
    this.timer = setTimeout(() => void this.tick(), Math.max(0, next - Date.now()));
    this.timer.unref();
  }

  private expire(now: number): void {
    for (const e of [...this.entries.values()]) {
      if (e.validUntil > now) continue;
      const reason = e.lastError
        ? `lease ran out while renewals failed: ${e.lastError}`
        : e.renew
          ? "lease ran out before a renewal got through"
          : `its lease of ${e.lease} ms ran out (taken with a fixed lease, which the watchdog does not renew; call renew() or leave the lease out)`;
      this.markLost(e, reason);
    }
  }

  private async tick(): Promise<void> {
    this.timer = undefined;
    this.timerAt = Infinity;
    this.running = true;
    try {
      const now = Date.now();
      this.expire(now);
      const batch = [...this.entries.values()].filter((e) => e.renew && e.due <= now + e.lease / 6);
      if (!batch.some((e) => e.due <= now)) return;
      const cmds = batch.map((e) =>
        e.permit ? semRenew(e.key, e.owner, e.lease) : renew(e.key, e.owner, e.side, e.lease, requestId()),
      );
      this.batches++;
      this.renewals += cmds.length;
      const sent = Date.now();
      // A lease that ends while the renewals are on their way is lost at its end.
      const earliest = Math.min(...batch.map((e) => e.validUntil));
      // A big batch on a busy server may take a while: it has until the first lease ends.
      const limit = Math.max(50, earliest - Date.now());
      let endTimer: NodeJS.Timeout | undefined;
      const ended = new Promise<null>((r) => {
        endTimer = setTimeout(() => r(null), Math.max(0, earliest - Date.now()));
      });
      let replies: Array<Reply | Error> | null;
      try {
        replies = await Promise.race([this.host.batch(cmds, limit).catch((e: Error) => cmds.map(() => e)), ended]);
      } finally {
        clearTimeout(endTimer);
      }
      if (replies === null) {
        this.expire(Date.now());
        return;
      }
      const after = Date.now();
      batch.forEach((e, i) => {
        const r = replies![i];
        const outcome = renewal(r);
        if (outcome === "renewed") this.renewed(e, sent);
        else if (outcome === "lost")
          this.markLost(
            e,
            e.permit
              ? "the server refused the renewal: the lease ended, or the permit was given back or deleted"
              : "the server refused the renewal: the lock expired, was deleted or was force-released",
          );
        else if (this.entries.get(e.id) === e) {
          e.lastError = r instanceof Error ? r.message : `RENEW replied ${JSON.stringify(r)}`;
          e.due = after + Math.min(1000, Math.max(20, e.lease / 10));
        }
      });
    } finally {
      this.running = false;
      this.schedule();
    }
  }

  /** Stops the timer; every hold still registered is told it is lost (the Locks closed). */
  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const e of [...this.entries.values()]) this.markLost(e, "the Locks was closed while it was held");
  }
}
