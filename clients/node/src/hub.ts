// The connection hub every handle of one Locks shares: the shared connection (short commands,
// resent once with the same REQ id when the connection broke), the pool of dedicated
// connections for calls that wait in the server, the watchdog, the keyspace-event follower and
// the replica count. The decisions it acts on live in core/ (pure); this file only does I/O.
import { randomUUID } from "node:crypto";
import { keyOf } from "./core/commands.js";
import { eventChannels, eventMode, lossKey } from "./core/events.js";
import { asInt, isBroken, parseInfo, redirect, replyOf, type Reply } from "./core/replies.js";
import type { Conn, Subscriber, Topology } from "./conn.js";
import { NoReplyError, RlockError } from "./errors.js";
import { onAbort } from "./signals.js";
import { Watchdog } from "./watchdog.js";

export interface HubOptions {
  watchdogLease: number;
  syncTimeout: number;
  responseTimeout: number;
  idleConnections: number;
}

/** How long a reply may take beyond the wait it was asked to wait in the server. */
export const WAIT_MARGIN = 5000;
/** How long a call waits for the shared connection to come back before it resends. */
const RESEND_AFTER = 100;

/** A call given up on (cancelled or past its deadline) after the server may have granted it: what to give back. */
export type Orphaned = (replies: Array<Reply | Error>) => Promise<void>;
/** After a wait given up without its reply read: finds a grant that still stands and releases it. */
export type Recover = () => Promise<void>;

/**
 * The `recover` of a call that carries a `REQ` id: `once` is that call with the same id and
 * no `BLOCK` (nor `FAIR` or `SESSION`). The wait has ended in the server, so no grant comes
 * after this. While the grant stands the server replays its reply and takes nothing more;
 * if there was none (or the server gave it back), `once` runs as a single try. Either way
 * what the reply says was granted is what this call holds: `giveBack` returns exactly that.
 * `worthLooking`, when given, is asked first (a lock: does its owner hold it at all?).
 */
export function resending(hub: Hub, once: string[], giveBack: (granted: Reply) => Promise<void>, worthLooking?: () => Promise<boolean>): Recover {
  return async () => {
    if (worthLooking && !(await worthLooking())) return;
    const r = await hub.callOnce(once);
    if (r !== null) await giveBack(r);
  };
}

interface Dedicated {
  conn: Conn;
  id: number;
  node: string;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  if (!Number.isFinite(ms)) return p;
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new NoReplyError(`${what}: no reply within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

export class Hub {
  readonly clientId = randomUUID();
  private nextOwner = 1;
  private readonly shared = new Map<string, Promise<Conn>>();
  private readonly idle: Dedicated[] = [];
  readonly watchdog: Watchdog;
  private readonly replicas = new Map<string, { count: number; at: number }>();
  private readonly replicaRead = new Map<string, Promise<number>>();
  private events: Promise<Subscriber | null> | undefined;
  private readonly followed = new Set<string>();
  private closed = false;
  private readonly open = new Set<Conn>();

  constructor(
    readonly topology: Topology,
    readonly options: HubOptions,
    private readonly ownsClient: (() => Promise<void>) | undefined,
  ) {
    this.watchdog = new Watchdog({
      batch: (cmds, ms) => this.batch(cmds, ms),
      follow: (key, on) => this.follow(key, on),
    });
  }

  newOwner(): string {
    return `${this.clientId}:${this.nextOwner++}`;
  }

  private check(): void {
    if (this.closed) throw new RlockError("this Locks is closed");
  }

  get driverName(): string {
    return this.topology.name;
  }

  /** The shared connection to `node` (the server, or a cluster primary as `host:port`). */
  conn(node: string): Promise<Conn> {
    this.check();
    let c = this.shared.get(node);
    if (!c) {
      c = this.topology.driver(node).open(true, this.options.responseTimeout).then(
        (conn) => {
          this.open.add(conn);
          return conn;
        },
        (e) => {
          this.shared.delete(node);
          throw e;
        },
      );
      this.shared.set(node, c);
    }
    return c;
  }

  /** One command on the shared connection of the node that serves `key` (by default, the command's own key); a `MOVED`/`ASK` is followed. */
  async call(args: string[], timeout = this.options.responseTimeout, key: string | undefined = keyOf(args)): Promise<Reply> {
    let node = this.topology.cluster ? await this.topology.nodeFor(key, this) : "server";
    let ask = false;
    for (let hop = 0; ; hop++) {
      const c = await this.conn(node);
      try {
        if (ask) void c.call(["ASKING"]).catch(() => {});
        return await withTimeout(c.call(args), timeout, args[0]!);
      } catch (e) {
        const r = redirect(e);
        if (!r || hop >= 5) throw e;
        if (!r.ask) await this.topology.refresh(this);
        node = r.node;
        ask = r.ask;
      }
    }
  }

  /** One command that carries a `REQ` id (or is harmless twice): sent once more, the same, if the connection broke before its reply came. */
  async callOnce(args: string[]): Promise<Reply> {
    try {
      return await this.call(args);
    } catch (e) {
      if (!isBroken(e)) throw e;
      await this.reconnected(keyOf(args));
      return await this.call(args);
    }
  }

  /** Waits (up to responseTimeout) for the shared connection to `key`'s node to be back, before a resend. */
  async reconnected(key: string | undefined): Promise<void> {
    await new Promise((r) => setTimeout(r, RESEND_AFTER));
    const node = this.topology.cluster ? await this.topology.nodeFor(key, this) : "server";
    const end = Date.now() + this.options.responseTimeout;
    const c = await this.conn(node);
    while (!c.isReady && c.isOpen && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  }

  /** A keyless command on one node (a primary of `primaries()`). */
  async callOn(node: string, args: string[]): Promise<Reply> {
    return withTimeout((await this.conn(node)).call(args), this.options.responseTimeout, args[0]!);
  }

  primaries(): Promise<string[]> {
    return this.topology.primaries(this);
  }

  /** Commands sent together, one pipeline per node; each reply or error in its place (a redirected one follows its redirection). */
  async batch(cmds: string[][], timeout = this.options.responseTimeout): Promise<Array<Reply | Error>> {
    const asError = (e: unknown) => (e instanceof Error ? e : new Error(String(e)));
    const nodes = await Promise.all(cmds.map((a) => this.topology.nodeFor(keyOf(a), this)));
    const all = Promise.all(
      cmds.map(async (a, i) => {
        try {
          return await (await this.conn(nodes[i]!)).call(a);
        } catch (e) {
          if (redirect(e)) return this.call(a, timeout).catch(asError);
          return asError(e);
        }
      }),
    );
    return withTimeout(all, timeout, "pipeline");
  }

  private async take(node: string): Promise<Dedicated> {
    this.check();
    const i = this.idle.findIndex((d) => d.node === node);
    const d = i >= 0 ? this.idle.splice(i, 1)[0] : undefined;
    if (d && d.conn.isOpen) return d;
    if (d) d.conn.destroy();
    const conn = await this.topology.driver(node).open(false, this.options.responseTimeout);
    this.open.add(conn);
    try {
      const id = asInt(await withTimeout(conn.call(["CLIENT", "ID"]), this.options.responseTimeout, "CLIENT ID"), "CLIENT ID");
      return { conn, id, node };
    } catch (e) {
      conn.destroy();
      this.open.delete(conn);
      throw e;
    }
  }

  private giveBack(d: Dedicated): void {
    if (!this.closed && d.conn.isOpen && this.idle.length < this.options.idleConnections) this.idle.push(d);
    else this.drop(d);
  }

  private drop(d: Dedicated): void {
    d.conn.destroy();
    this.open.delete(d.conn);
  }

  /**
   * Commands that may wait in the server (`BLOCK`, `WAIT`), sent together on a dedicated
   * connection. `waitMs` bounds the first command's wait (Infinity: forever); the replies
   * must come within it plus a margin, whatever timeouts the application's client has.
   *
   * Given up (the signal aborts, or the deadline passes) while the server may hold the
   * call, the server ends it: `CLIENT KILL ID` from the shared connection while this one
   * still reads. A grant the server wrote before the kill is read here and `orphaned` gives
   * it back. A blocked call granted in the very turn of the kill (its reply not yet written)
   * the module gives back itself. What neither covers is a call granted at once, without
   * blocking (what it waits for came free before it arrived): its reply sits in the
   * connection's output buffer until the server's next write phase, and a `CLIENT KILL` read
   * in the same event-loop pass frees the connection with that buffer unsent. The module
   * answered a command, not a blocked client, so nothing gives it back; this side sees the
   * connection end with no reply (a FIN, no data). `recover` finds that grant afterwards
   * (the call resent with its `REQ` id, see `resending`). An ACL that refuses `CLIENT KILL`
   * gets the connection closed from this side instead, and the same `recover` 200 ms later.
   * Closing the socket from this side when the kill is allowed could lose the first kind: the
   * server would count it delivered, and the hold would stay for its whole lease, held by nobody.
   */
  async blocking(cmds: string[][], waitMs: number, signal: AbortSignal | undefined, orphaned: Orphaned, pinIf?: (replies: Array<Reply | Error>) => boolean, recover?: Recover): Promise<{ replies: Array<Reply | Error>; unpin?: () => void }> {
    signal?.throwIfAborted();
    const key = keyOf(cmds[0]!);
    const node = await this.topology.nodeFor(key, this);
    const d = await this.take(node);
    if (signal?.aborted) {
      this.giveBack(d);
      throw signal.reason;
    }
    const replies = Promise.all(cmds.map((a) => d.conn.call(a).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e))))));
    let stopListening = () => {};
    let timer: NodeJS.Timeout | undefined;
    const givenUp = new Promise<unknown>((resolve) => {
      if (signal) stopListening = onAbort(signal, () => resolve(signal.reason));
      const deadline = waitMs + this.options.syncTimeout + WAIT_MARGIN;
      if (Number.isFinite(deadline)) {
        timer = setTimeout(() => resolve(new NoReplyError(`no reply within the wait of ${waitMs} ms and a margin`)), deadline);
      }
    });
    const first = await Promise.race([replies.then((r) => ({ r })), givenUp.then((reason) => ({ reason }))]);
    stopListening();
    clearTimeout(timer);
    if ("r" in first && redirect(first.r[0]) && waitMs !== Infinity) {
      // The slot moved: the server ran nothing. Sent once more where it went.
      this.giveBack(d);
      await this.topology.refresh(this);
      return this.blocking(cmds, waitMs, signal, orphaned, pinIf, recover);
    }
    if ("r" in first) {
      if (first.r.some(isBroken)) this.drop(d);
      else if (pinIf?.(first.r)) {
        // A SESSION hold lives as long as the connection that took it: kept out of the pool until released.
        let done = false;
        return { replies: first.r, unpin: () => { if (!done) { done = true; this.giveBack(d); } } };
      } else this.giveBack(d);
      return { replies: first.r };
    }
    // Given up: have the server end the call, read what it wrote, give back a grant.
    let killed: boolean;
    try {
      await this.call(["CLIENT", "KILL", "ID", String(d.id)], this.options.responseTimeout, key);
      killed = true;
    } catch (e) {
      // NOPERM (an ACL user without CLIENT KILL) or "No such client" (gone already).
      killed = !(e instanceof RlockError && e.code === "NOPERM");
    }
    if (!killed) this.drop(d);
    const after = await Promise.race([replies, new Promise<null>((r) => setTimeout(() => r(null), 3000).unref())]);
    this.drop(d);
    // The first reply read (a grant, null, or the server's error): `orphaned` gives back a grant.
    // Not read (the connection ended with no reply, or nothing came within 3 s): a grant may still
    // stand. Mostly one made at once: the call reached the server in the same event-loop pass as
    // CLIENT KILL (on the shared connection), after what it waits for had come free; its reply was
    // in the output buffer, which the kill freed unsent (Redis writes replies after the pass).
    // `recover` finds and releases it (the same REQ id, no BLOCK).
    if (after !== null && !isBroken(after[0])) {
      try {
        await orphaned(after);
      } catch {
        // The give-back failed (a broken connection after its one resend): look again.
        await recover?.().catch(() => {});
      }
    } else if (recover) {
      // Closed from this side (no CLIENT KILL): let the server drop the connection first,
      // so the wait cannot be granted after the look.
      if (!killed) await new Promise((r) => setTimeout(r, 200));
      await recover().catch(() => {});
    }
    throw first.reason;
  }

  /**
   * Sends `cmd`, which may wait `wait` ms: on the shared connection when it does not (resent
   * once with its REQ id if the connection broke), else on a dedicated one (see `blocking`).
   * Given up, a grant read is handed to `giveBack`, and one not read is found by `recover`.
   */
  async send(cmd: string[], wait: number, signal: AbortSignal | undefined, giveBack: (granted: Reply) => Promise<void>, recover?: Recover): Promise<Reply> {
    if (wait === 0) {
      signal?.throwIfAborted();
      return this.callOnce(cmd);
    }
    const { replies } = await this.blocking([cmd], wait, signal, async (r) => {
      const x = r[0];
      if (x !== null && x !== undefined && !(x instanceof Error)) await giveBack(x);
    }, undefined, recover);
    return replyOf(replies[0]);
  }

  /** Replicas attached to the server that serves `key` (`INFO replication`), read at most once a second. */
  replicaCount(key: string): number | Promise<number> {
    if (!this.topology.cluster) {
      const known = this.replicas.get("server");
      if (known && Date.now() - known.at < 1000) return known.count;
    }
    return this.readReplicaCount(key);
  }

  private async readReplicaCount(key: string): Promise<number> {
    const node = await this.topology.nodeFor(key, this);
    const now = Date.now();
    const known = this.replicas.get(node);
    if (known && now - known.at < 1000) return known.count;
    let read = this.replicaRead.get(node);
    if (!read) {
      read = this.call(["INFO", "replication"], this.options.responseTimeout, key)
        .then((text) => {
          const info = parseInfo(String(text));
          const count = Number(info["connected_slaves"] ?? 0);
          this.replicas.set(node, { count, at: Date.now() });
          return count;
        })
        .finally(() => {
          this.replicaRead.delete(node);
        });
      this.replicaRead.set(node, read);
    }
    if (known) {
      read.catch(() => {}); // stale value now, fresh one for the next call
      return known.count;
    }
    return read;
  }

  private eventsOff = false;
  private perKeyEvents = true;

  private follow(key: string, on: boolean): void {
    if (this.eventsOff) return; // the server sends no keyspace events: nothing to follow
    if (on) this.followed.add(key);
    else this.followed.delete(key);
    void this.subscriber()
      .then(async (sub) => {
        if (!sub || !this.perKeyEvents) return;
        for (const channel of eventChannels("keyspace", this.topology.db, key)) {
          if (on) await sub.subscribe(channel);
          else if (!this.followed.has(key)) await sub.unsubscribe(channel);
        }
      })
      .catch(() => {});
  }

  /** A pub/sub connection for keyspace events, opened only when the server sends them (`notify-keyspace-events` with `K` or `E`, and `d`). */
  private subscriber(): Promise<Subscriber | null> {
    if (!this.events) {
      this.events = (async () => {
        let flags = "";
        try {
          const reply = await this.call(["CONFIG", "GET", "notify-keyspace-events"]);
          flags = Array.isArray(reply) ? String(reply[1] ?? "") : "";
        } catch {
          this.eventsOff = true;
          return null; // CONFIG refused: renewals alone tell loss
        }
        const mode = eventMode(flags);
        if (this.topology.cluster || !mode || this.closed) {
          this.eventsOff = true;
          return null;
        }
        const sub = await this.topology.driver(this.topology.anyNode()).subscriber(this.options.responseTimeout);
        const db = this.topology.db;
        sub.onMessage((channel, message) => {
          const key = lossKey(db, channel, message);
          if (key !== null && this.followed.has(key)) void this.watchdog.check(key);
        });
        // keyevent: one channel per event, the key as the message, subscribed once for every key.
        // keyspace: one channel per key held, subscribed by `follow` as holds come.
        if (mode === "keyevent") {
          this.perKeyEvents = false;
          await Promise.all(eventChannels(mode, db).map((c) => sub.subscribe(c)));
        }
        return sub;
      })().catch(() => null);
    }
    return this.events;
  }

  /** Whether keyspace events are followed (so a loss is told at once, not at the next renewal). */
  async followsEvents(): Promise<boolean> {
    return (await this.subscriber()) !== null;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.watchdog.close();
    const sub = await this.events?.catch(() => null);
    await sub?.quit();
    for (const d of this.idle.splice(0)) this.drop(d);
    await Promise.all([...this.open].map((c) => c.quit()));
    this.open.clear();
    await this.ownsClient?.();
  }
}
