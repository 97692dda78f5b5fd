// The two drivers behind one small interface. rlock-client never sends a lock command on
// the application's own connection: it opens its own from the client it is given
// (`duplicate()`, same address, TLS, auth and database) with the settings lock traffic needs:
// - no silent re-send: ioredis's `autoResendUnfulfilledCommands` re-sends what was in flight
//   after a reconnect (a re-sent RLOCK.ACQUIRE re-enters, a re-sent release undoes someone's
//   re-entry); node-redis rejects in-flight commands on a broken socket, which is what we want.
//   Retries are this package's, with the same REQ id;
// - no command or socket timeout on connections that wait in the server (`BLOCK`, `WAIT`):
//   the wait's own deadline plus a margin is enforced here instead;
// - RESP2, so replies have one shape whichever protocol the application picked.
import { slotOf } from "./core/commands.js";
import { serverError, type Reply } from "./core/replies.js";
import { RlockError } from "./errors.js";

export type DriverName = "ioredis" | "node-redis";

export interface Conn {
  call(args: string[]): Promise<Reply>;
  /** Closes at once, replies in flight lost (the server forgets a closed connection's waits). */
  destroy(): void;
  /** Closes after the replies in flight. */
  quit(): Promise<void>;
  /** Resolves when the connection has closed, for whatever reason. */
  readonly closed: Promise<void>;
  readonly isOpen: boolean;
  /** Connected and ready for commands (not reconnecting). */
  readonly isReady: boolean;
}

export interface Subscriber {
  subscribe(channel: string): Promise<void>;
  unsubscribe(channel: string): Promise<void>;
  onMessage(fn: (channel: string, message: string) => void): void;
  quit(): Promise<void>;
}

export interface Driver {
  readonly name: DriverName;
  readonly db: number;
  /** `reconnect`: the shared connection reconnects by itself after a break (nothing re-sent); dedicated ones do not. */
  open(reconnect: boolean, timeoutMs: number): Promise<Conn>;
  subscriber(timeoutMs: number): Promise<Subscriber>;
}

type ErrorClass = abstract new (...args: never[]) => Error;
const replyErrors = new Map<DriverName, Promise<ErrorClass>>();

/**
 * The class of a driver's error replies, from the driver's own package (a peer dependency, so
 * the application's copy): node-redis's `ErrorReply`, ioredis's `ReplyError`. Told apart by
 * class, never by name, which a minifier may change. The imports are literal, so a bundler
 * that bundles the driver bundles these too.
 */
function replyErrorClass(driver: DriverName): Promise<ErrorClass> {
  let p = replyErrors.get(driver);
  if (!p) {
    const load = async (): Promise<unknown> => {
      if (driver === "ioredis") {
        const mod: any = await import("ioredis");
        return mod.ReplyError ?? mod.default?.ReplyError;
      }
      const mod: any = await import("redis");
      return mod.ErrorReply ?? mod.default?.ErrorReply;
    };
    p = load().then(
      (c) => {
        if (typeof c !== "function") throw new RlockError(`the ${driver} package has no error reply class where rlock-client looks for it`);
        return c as ErrorClass;
      },
      (e: unknown) => {
        replyErrors.delete(driver);
        throw new RlockError(`rlock-client could not load the ${driver} package to tell its error replies apart: install ${driver === "ioredis" ? "ioredis" : "redis"} beside rlock-client`, { cause: e });
      },
    );
    replyErrors.set(driver, p);
  }
  return p;
}

/** Server error replies as this package's errors (`ServerError`, `DeadlockError`, ...); anything else (a broken connection, a timeout) as it is. */
function converter(replyError: ErrorClass): (e: unknown) => unknown {
  return (e) => (e instanceof replyError ? serverError(e.message) : e);
}

function normalize(v: unknown): Reply {
  if (Buffer.isBuffer(v)) return v.toString("utf8");
  if (Array.isArray(v)) return v.map(normalize);
  if (typeof v === "bigint") return Number(v);
  return v as Reply;
}

function isIoredis(c: any): boolean {
  return typeof c?.call === "function" && typeof c?.duplicate === "function" && typeof c?.status === "string";
}

function isNodeRedis(c: any): boolean {
  return typeof c?.sendCommand === "function" && typeof c?.duplicate === "function" && "isOpen" in c;
}

function isIoredisCluster(c: any): boolean {
  return c?.isCluster === true && typeof c?.nodes === "function";
}

function isNodeRedisCluster(c: any): boolean {
  return typeof c?.getSlotMaster === "function";
}

const WANT = "Locks takes a node-redis v5 client (createClient(), createCluster()) or an ioredis client (new Redis(), new Cluster())";

export function driverFor(client: unknown): Driver {
  if (client === null || typeof client !== "object") throw new TypeError(WANT);
  if (isIoredis(client)) return new IoredisDriver(client);
  if (isNodeRedis(client)) return new NodeRedisDriver(client);
  throw new TypeError(WANT);
}

/** Where commands go: one server, or the primaries of a cluster by slot. */
export interface Topology {
  readonly name: DriverName;
  readonly db: number;
  readonly cluster: boolean;
  /** The node that serves `key` (any node for none). */
  nodeFor(key: string | undefined, via: NodeCaller): Promise<string>;
  driver(node: string): Driver;
  anyNode(): string;
  /** Reads the slot map again (after a `MOVED`). */
  refresh(via: NodeCaller): Promise<void>;
  /** Every primary (the one server for a standalone one). */
  primaries(via: NodeCaller): Promise<string[]>;
}

export interface NodeCaller {
  conn(node: string): Promise<Conn>;
}

export function topologyFor(client: unknown): Topology {
  if (client !== null && typeof client === "object" && (isIoredisCluster(client) || isNodeRedisCluster(client))) return new ClusterTopology(client);
  const d = driverFor(client);
  return { name: d.name, db: d.db, cluster: false, nodeFor: async () => "server", driver: () => d, anyNode: () => "server", refresh: async () => {}, primaries: async () => ["server"] };
}

/**
 * A cluster, reached through connections of this package's own to each primary (made from the
 * cluster client's per-node options): every command goes to the primary of its key's slot,
 * read from `CLUSTER SLOTS`; a `MOVED` reads the map again and the command goes where it
 * moved (the server ran nothing, so that is no re-send). The cluster clients' own retries are
 * never in the path.
 */
class ClusterTopology implements Topology {
  readonly name: DriverName;
  readonly db = 0;
  readonly cluster = true;
  private readonly seeds: string[];
  private readonly slots: string[] = new Array(16384);
  private readonly drivers = new Map<string, Driver>();
  private make: ((host: string, port: number) => unknown) | undefined;
  private loading: Promise<void> | undefined;
  private known = false;

  constructor(private readonly client: any) {
    if (isIoredisCluster(client)) {
      this.name = "ioredis";
      this.seeds = (client.startupNodes ?? []).map((n: any) => (typeof n === "object" ? `${n.host ?? "127.0.0.1"}:${n.port ?? 6379}` : String(n).replace(/^rediss?:\/\//, "")));
    } else {
      this.name = "node-redis";
      const o = (client._self ?? client)._options ?? {};
      this.seeds = (o.rootNodes ?? []).map((n: any) => {
        if (n.url) {
          const u = new URL(n.url);
          return `${u.hostname}:${u.port || 6379}`;
        }
        return `${n.socket?.host ?? "127.0.0.1"}:${n.socket?.port ?? 6379}`;
      });
    }
    if (this.seeds.length === 0) throw new TypeError("the cluster client names no node");
  }

  private async init(): Promise<void> {
    if (this.make) return;
    if (this.name === "ioredis") {
      const mod: any = await import("ioredis");
      const Redis = mod.Redis ?? mod.default;
      const base = this.client.options?.redisOptions ?? {};
      this.make = (host, port) => new Redis({ ...base, host, port, lazyConnect: true });
    } else {
      const mod: any = await import("redis");
      const createClient = mod.createClient ?? mod.default?.createClient;
      const o = (this.client._self ?? this.client)._options ?? {};
      const base = o.defaults ?? {};
      this.make = (host, port) => createClient({ ...base, socket: { ...(base.socket ?? {}), host, port } });
    }
  }

  driver(node: string): Driver {
    let d = this.drivers.get(node);
    if (!d) {
      const i = node.lastIndexOf(":");
      const client = this.make!(node.slice(0, i), Number(node.slice(i + 1)));
      d = driverFor(client);
      this.drivers.set(node, d);
    }
    return d;
  }

  anyNode(): string {
    return this.slots.find((n) => n !== undefined) ?? this.seeds[0]!;
  }

  async primaries(via: NodeCaller): Promise<string[]> {
    await this.init();
    if (!this.known) await this.refresh(via);
    return [...new Set(this.slots.filter((n) => n !== undefined))];
  }

  async nodeFor(key: string | undefined, via: NodeCaller): Promise<string> {
    await this.init();
    if (!this.known) await this.refresh(via);
    if (key === undefined) return this.anyNode();
    return this.slots[slotOf(key)] ?? this.anyNode();
  }

  refresh(via: NodeCaller): Promise<void> {
    this.loading ??= (async () => {
      await this.init();
      let last: unknown;
      const candidates = [...new Set([...this.drivers.keys(), ...this.seeds])];
      for (const node of candidates) {
        try {
          const reply = (await (await via.conn(node)).call(["CLUSTER", "SLOTS"])) as Reply[][];
          for (const range of reply) {
            const [start, end, master] = range as [number, number, Reply[]];
            const host = String(master[0]) || node.slice(0, node.lastIndexOf(":"));
            for (let s = Number(start); s <= Number(end); s++) this.slots[s] = `${host}:${Number(master[1])}`;
          }
          this.known = true;
          return;
        } catch (e) {
          last = e;
        }
      }
      throw last;
    })().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }
}

const quiet = () => {};

/**
 * Keeps `c`'s errors quiet and gives a promise that settles once one of `events` says the
 * connection has ended for good, or once `settle()` is called (when we end it ourselves).
 */
function watchClose(c: any, events: string[]): { closed: Promise<void>; settle: () => void } {
  c.on("error", quiet);
  let settle!: () => void;
  const closed = new Promise<void>((r) => (settle = r));
  for (const e of events) c.on(e, () => settle());
  return { closed, settle };
}

/** Connects, or gives up after `ms` (a wrong CA, a dead server) and closes what was started. */
async function connectWithin(c: any, ms: number, close: () => void): Promise<void> {
  let t: NodeJS.Timeout | undefined;
  const lastError: { e?: unknown } = {};
  c.on("error", (e: unknown) => (lastError.e = e));
  try {
    await Promise.race([
      c.connect(),
      new Promise((_, rej) => {
        t = setTimeout(() => rej(new RlockError(`could not connect within ${ms} ms`, { cause: lastError.e })), ms);
      }),
    ]);
  } catch (e) {
    close();
    // ioredis rejects with "Connection is closed."; the cause (a certificate refused...) came as an event.
    if (lastError.e instanceof Error && !(e instanceof RlockError)) throw lastError.e;
    throw e;
  } finally {
    clearTimeout(t);
  }
}

class IoredisDriver implements Driver {
  readonly name = "ioredis" as const;
  readonly db: number;
  constructor(private readonly client: any) {
    this.db = Number(client.options?.db ?? 0);
  }

  private dup(reconnect: boolean, extra: object = {}): any {
    return this.client.duplicate({
      lazyConnect: true,
      commandTimeout: undefined,
      socketTimeout: undefined,
      autoResendUnfulfilledCommands: false,
      // A command in flight when the connection breaks fails at once (it is not kept to
      // be re-sent); retries are ours, with the same REQ id.
      maxRetriesPerRequest: 0,
      // A command is sent now or fails: none waits in a queue to be sent after a reconnect,
      // when its caller may have given up on it (an acquire held by nobody).
      enableOfflineQueue: false,
      keyPrefix: undefined,
      monitor: false,
      connectionName: "rlock-client",
      retryStrategy: reconnect ? (n: number) => Math.min(n * 50, 500) : () => null,
      ...extra,
    });
  }

  async open(reconnect: boolean, timeoutMs: number): Promise<Conn> {
    const convert = converter(await replyErrorClass(this.name));
    const c = this.dup(reconnect);
    const { closed } = watchClose(c, [reconnect ? "end" : "close"]);
    await connectWithin(c, timeoutMs, () => c.disconnect(false));
    return {
      call: (args) =>
        c.call(...args).then(normalize, (e: unknown) => {
          throw convert(e);
        }),
      destroy: () => c.disconnect(false),
      // QUIT when connected; either way no reconnecting afterwards (a connection that keeps
      // reconnecting to a server that is gone keeps the process alive).
      quit: async () => {
        if (c.status === "ready") await c.quit().catch(quiet);
        c.disconnect(false);
      },
      closed,
      get isOpen() {
        return c.status === "ready" || c.status === "connect" || c.status === "connecting";
      },
      get isReady() {
        return c.status === "ready";
      },
    };
  }

  async subscriber(timeoutMs: number): Promise<Subscriber> {
    const c = this.dup(true);
    c.on("error", quiet);
    await connectWithin(c, timeoutMs, () => c.disconnect(false));
    return {
      subscribe: async (ch) => void (await c.subscribe(ch)),
      unsubscribe: async (ch) => void (await c.unsubscribe(ch)),
      onMessage: (fn) => c.on("message", (ch: string, m: string) => fn(String(ch), String(m))),
      quit: async () => {
        if (c.status === "ready") await c.quit().catch(quiet);
        c.disconnect(false);
      },
    };
  }
}

function destroy(c: any): void {
  try {
    c.destroy();
  } catch {
    /* closed already */
  }
}

class NodeRedisDriver implements Driver {
  readonly name = "node-redis" as const;
  readonly db: number;
  constructor(private readonly client: any) {
    this.db = Number(client.options?.database ?? 0);
  }

  private dup(reconnect: boolean): any {
    const o = this.client.options ?? {};
    return this.client.duplicate({
      RESP: 2,
      commandOptions: undefined,
      // As for ioredis: sent now or failed, never queued for after a reconnect.
      disableOfflineQueue: true,
      pingInterval: undefined,
      clientSideCache: undefined,
      name: "rlock-client",
      socket: {
        ...(o.socket ?? {}),
        socketTimeout: undefined,
        reconnectStrategy: reconnect ? (n: number) => Math.min(n * 50, 500) : false,
      },
    });
  }

  async open(reconnect: boolean, timeoutMs: number): Promise<Conn> {
    const convert = converter(await replyErrorClass(this.name));
    const c = this.dup(reconnect);
    // Without reconnecting, an error is the end of the connection too.
    const { closed, settle } = watchClose(c, reconnect ? ["end"] : ["end", "error"]);
    await connectWithin(c, timeoutMs, () => destroy(c));
    return {
      call: (args) =>
        c.sendCommand(args).then(normalize, (e: unknown) => {
          throw convert(e);
        }),
      destroy: () => {
        destroy(c);
        settle();
      },
      quit: async () => {
        try {
          if (c.isReady) await c.close();
        } catch {
          /* closed already */
        }
        destroy(c);
        settle();
      },
      closed,
      get isOpen() {
        return c.isOpen;
      },
      get isReady() {
        return c.isReady;
      },
    };
  }

  async subscriber(timeoutMs: number): Promise<Subscriber> {
    const c = this.dup(true);
    c.on("error", quiet);
    await connectWithin(c, timeoutMs, () => destroy(c));
    let listener: (channel: string, message: string) => void = quiet;
    return {
      subscribe: (ch) => c.subscribe(ch, (m: string, channel: string) => listener(String(channel), String(m))),
      unsubscribe: (ch) => c.unsubscribe(ch),
      onMessage: (fn) => {
        listener = fn;
      },
      quit: async () => {
        try {
          if (c.isReady) await c.close();
        } catch {
          /* closed already */
        }
        destroy(c);
      },
    };
  }
}

/** The driver packages are optional peers: load the one asked for, or whichever is installed. */
export async function clientFromUrl(url: string, options: UrlOptions = {}): Promise<{ client: any; driver: DriverName }> {
  const want = options.driver;
  const errors: unknown[] = [];
  const order: DriverName[] = want ? [want] : ["node-redis", "ioredis"];
  for (const name of order) {
    try {
      if (name === "node-redis") {
        const mod: any = await import("redis");
        const createClient = mod.createClient ?? mod.default?.createClient;
        const socket: any = {};
        if (options.tls) Object.assign(socket, { tls: true, ...options.tls });
        const client = createClient({ url, ...(Object.keys(socket).length ? { socket } : {}) });
        client.on("error", quiet);
        return { client, driver: name };
      }
      const mod: any = await import("ioredis");
      const Redis = mod.Redis ?? mod.default;
      const tls = options.tls ?? (url.startsWith("rediss://") ? {} : undefined);
      const client = new Redis(url, { lazyConnect: true, ...(tls ? { tls } : {}) });
      client.on("error", quiet);
      return { client, driver: name };
    } catch (e) {
      errors.push(e);
    }
  }
  throw new RlockError(
    `Locks.fromUrl needs the redis (node-redis v5) or ioredis package: npm install redis (or ioredis)`,
    { cause: errors[0] },
  );
}

export interface UrlOptions {
  /** Which driver to use; default node-redis (`redis`) when installed, else ioredis. */
  driver?: DriverName;
  /** TLS options (`ca`, `cert`, `key`, `servername`, `rejectUnauthorized`) for `rediss://`. */
  tls?: { ca?: string | Buffer | Array<string | Buffer>; cert?: string | Buffer; key?: string | Buffer; servername?: string; rejectUnauthorized?: boolean };
}
