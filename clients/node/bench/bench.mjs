// make bench-node: rlock-client against raw commands on the same driver, redlock 4 (defaults and
// tuned) and redis-semaphore's Mutex, on one Redis with the module. Every figure is a median
// of ROUNDS rounds and is shown beside a ratio to a baseline measured in this same run; the
// server runs on core 0 and this process on core 1 (taskset).
//   uncontended: acquire+release pairs per second, one loop;
//   contended: 32 async workers on one lock, each looping acquire/release with hold 0:
//   hand-offs per second (a grant to another worker than the one that released), hand-off p50 (a release to the next grant), fairness (min/max
//   acquisitions per worker) and the server's CPU per hand-off (INFO cpu).
// Usage: node bench/bench.mjs [--flavor redis|redis8|valkey] [--rounds N] [--seconds S] [--json FILE]
//   --json FILE also writes the results in the schema of bench/report/README.md.
import { spawn, spawnSync } from "node:child_process";
import net from "node:net";
import { createRequire } from "node:module";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { Server, binary, sleep } from "../test/helpers.mjs";
import { Locks } from "../dist/esm/index.js";

const require = createRequire(import.meta.url);
const Redlock = require("redlock");
const { Mutex } = require("redis-semaphore");

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const flavor = arg("flavor", "redis");
const ROUNDS = Number(arg("rounds", 3));
const SECONDS = Number(arg("seconds", 1.5));
const WORKERS = 32;

// Pin: this process on core 1, the server (started below) on core 0.
if (!process.env.RLOCK_BENCH_PINNED) {
  const r = spawnSync("taskset", ["-c", "1", process.execPath, ...process.argv.slice(1)], { stdio: "inherit", env: { ...process.env, RLOCK_BENCH_PINNED: "1" } });
  process.exit(r.status ?? 1);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function serverCpu(admin) {
  const text = await admin.call("INFO", "cpu");
  const f = (k) => Number(new RegExp(`${k}:([0-9.]+)`).exec(text)[1]);
  return f("used_cpu_user") + f("used_cpu_sys");
}

/** One uncontended loop for SECONDS: pairs per second and server CPU µs per pair. */
async function uncontended(admin, pair) {
  const cpu0 = await serverCpu(admin);
  const end = performance.now() + SECONDS * 1000;
  let n = 0;
  const t0 = performance.now();
  while (performance.now() < end) {
    await pair();
    n++;
  }
  const secs = (performance.now() - t0) / 1000;
  const cpu = (await serverCpu(admin)) - cpu0;
  return { rate: n / secs, cpuUs: (cpu * 1e6) / n };
}

/** WORKERS loops on one lock for SECONDS: hand-offs/s, p50 of release -> next grant, fairness, CPU µs per hand-off. */
async function contended(admin, makeWorker) {
  const counts = new Array(WORKERS).fill(0);
  const gaps = [];
  let lastRelease = 0;
  let stop = false;
  const workers = [];
  for (let i = 0; i < WORKERS; i++) workers.push(await makeWorker(i));
  await sleep(100);
  const cpu0 = await serverCpu(admin);
  const t0 = performance.now();
  let lastHolder = -1;
  let handoffs = 0;
  const loops = workers.map(async (w, i) => {
    while (!stop) {
      const held = await w.acquire();
      if (!held) continue;
      const now = performance.now();
      // A hand-off: the lock went to another worker than the one that released it (a worker
      // that barges back in after its own release is not one).
      if (lastHolder !== i && lastHolder !== -1) {
        handoffs++;
        gaps.push(now - lastRelease);
      }
      counts[i]++;
      lastHolder = i;
      lastRelease = performance.now();
      await w.release(held);
    }
  });
  await sleep(SECONDS * 1000);
  stop = true;
  const secs = (performance.now() - t0) / 1000;
  const total = counts.reduce((a, b) => a + b, 0);
  const taken = handoffs;
  const cpu = (await serverCpu(admin)) - cpu0;
  await Promise.race([Promise.all(loops), sleep(15_000)]);
  for (const w of workers) await w.close?.();
  return { rate: taken / secs, acquisitions: total / secs, p50: median(gaps), fairness: Math.min(...counts) / Math.max(...counts), cpuUs: (cpu * 1e6) / Math.max(1, taken) };
}

async function rounds(fn) {
  const out = [];
  for (let r = 0; r < ROUNDS; r++) out.push(await fn(r));
  const m = {};
  for (const k of Object.keys(out[0])) m[k] = median(out.map((o) => o[k]));
  return m;
}

const server = new Server(flavor);
await startPinned(server, binary(flavor));
const admin = server.admin();
const version = (await admin.call("INFO", "server")).match(/(redis|valkey)_version:(\S+)/);
const ioredis = () => {
  const c = new Redis({ host: "127.0.0.1", port: server.port });
  c.on("error", () => {});
  return c;
};
const nodeRedis = async () => {
  const c = createClient({ url: server.url });
  c.on("error", () => {});
  await c.connect();
  return c;
};
let seq = 0;
const key = (what) => `bench:${what}:${seq++}`;
const req = () => Math.random().toString(16).slice(2).padEnd(16, "0") + Math.random().toString(16).slice(2).padEnd(16, "0");

const show = (group, name, m, base) => {
  const ratio = base ? ` (x${(m.rate / base.rate).toFixed(2)} ${base.name})` : "";
  const extra = m.p50 !== undefined ? ` hand-offs (${Math.round(m.acquisitions)} acquisitions/s), p50 ${(m.p50 * 1000).toFixed(0)} us, fairness ${m.fairness.toFixed(2)}` : "";
  console.log(`${group.padEnd(12)} ${name.padEnd(30)} ${Math.round(m.rate).toString().padStart(7)}/s${ratio}${extra}, server CPU ${m.cpuUs.toFixed(1)} us`);
};

const { loadavg } = await import("node:os");
const loadBefore = loadavg().map((x) => x.toFixed(2)).join(" ");
console.log(`rlock-client bench on ${version ? version[0] : flavor}: ${ROUNDS} rounds of ${SECONDS} s, paths interleaved in each round, medians; server on core 0, node on core 1; load average before: ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);

const sendOf = (driver, c) => (driver === "ioredis" ? (a) => c.call(...a) : (a) => c.sendCommand(a));
const closeOf = async (driver, c) => (driver === "ioredis" ? c.disconnect() : c.destroy());
const clientOf = async (driver) => (driver === "ioredis" ? ioredis() : await nodeRedis());
const REDLOCK_TUNED = { retryCount: -1, retryDelay: 10, retryJitter: 10 };

// Each path: how one round of it runs. Baselines: raw commands on the same driver.
const paths = [];
for (const driver of ["ioredis", "node-redis"]) {
  const k = key("raw");
  paths.push({ group: "uncontended", name: `raw RLOCK.* on ${driver}`, id: `u-raw-${driver}`, run: async () => {
    const c = await clientOf(driver);
    const send = sendOf(driver, c);
    const m = await uncontended(admin, async () => {
      await send(["RLOCK.ACQUIRE", k, "owner-1", "LEASE", "30000", "REQ", req()]);
      await send(["RLOCK.RELEASE", k, "owner-1", "REQ", req()]);
    });
    await closeOf(driver, c);
    return m;
  } });
  const kc = key("client");
  paths.push({ group: "uncontended", name: `rlock-client on ${driver}`, base: `u-raw-${driver}`, run: async () => {
    const locks = new Locks(driver === "ioredis" ? ioredis() : createClient({ url: server.url }));
    const lock = locks.lock(kc);
    await (await lock.acquire()).release(); // connected, replica count known
    const m = await uncontended(admin, async () => {
      const h = await lock.acquire();
      await h.release();
    });
    await locks.close();
    return m;
  } });
}
for (const [name, opts] of [["redlock 4 (defaults)", {}], ["redlock 4 (tuned)", REDLOCK_TUNED]]) {
  const k = key("redlock");
  paths.push({ group: "uncontended", name, base: "u-raw-ioredis", run: async () => {
    const c = ioredis();
    const rl = new Redlock([c], opts);
    rl.on("clientError", () => {});
    const m = await uncontended(admin, async () => {
      const l = await rl.lock(k, 30000);
      await l.unlock();
    });
    c.disconnect();
    return m;
  } });
}
{
  const k = key("mutex");
  paths.push({ group: "uncontended", name: "redis-semaphore Mutex", base: "u-raw-ioredis", run: async () => {
    const c = ioredis();
    const m = await uncontended(admin, async () => {
      const mu = new Mutex(c, k, { refreshInterval: 0 });
      await mu.acquire();
      await mu.release();
    });
    c.disconnect();
    return m;
  } });
}
for (const driver of ["ioredis", "node-redis"]) {
  const k = key("craw");
  paths.push({ group: "contended", name: `raw ACQUIRE BLOCK on ${driver}`, id: `c-raw-${driver}`, run: () => contended(admin, async (i) => {
    const c = await clientOf(driver);
    const send = sendOf(driver, c);
    return {
      acquire: () => send(["RLOCK.ACQUIRE", k, `w${i}`, "LEASE", "30000", "BLOCK", "0"]),
      release: () => send(["RLOCK.RELEASE", k, `w${i}`]),
      close: () => closeOf(driver, c),
    };
  }) });
}
for (const driver of ["ioredis", "node-redis"]) {
  const k = key("cclient");
  paths.push({ group: "contended", name: `rlock-client on ${driver}`, base: `c-raw-${driver}`, run: async () => {
    const locks = new Locks(driver === "ioredis" ? ioredis() : createClient({ url: server.url }), { idleConnections: WORKERS });
    const r = await contended(admin, async () => {
      const lock = locks.lock(k, { wait: Infinity });
      return { acquire: () => lock.acquire(), release: (h) => h.release() };
    });
    await locks.close();
    return r;
  } });
}
for (const [name, opts] of [["redlock 4 (defaults)", {}], ["redlock 4 (tuned)", REDLOCK_TUNED]]) {
  const k = key("credlock");
  paths.push({ group: "contended", name, id: `c-${name}`, base: "c-raw-ioredis", run: async () => {
    const c = ioredis();
    const rl = new Redlock([c], opts);
    rl.on("clientError", () => {});
    const r = await contended(admin, async () => ({
      acquire: () => rl.lock(k, 30000).catch(() => null),
      release: (l) => l.unlock().catch(() => {}),
    }));
    c.disconnect();
    return r;
  } });
}
{
  const k = key("cmutex");
  paths.push({ group: "contended", name: "redis-semaphore Mutex", id: "c-mutex", base: "c-raw-ioredis", run: async () => {
    const c = ioredis();
    const r = await contended(admin, async () => ({
      acquire: async () => {
        const mu = new Mutex(c, k, { refreshInterval: 0, acquireTimeout: 60_000 });
        await mu.acquire();
        return mu;
      },
      release: (mu) => mu.release(),
    }));
    c.disconnect();
    return r;
  } });
}

const results = new Map(paths.map((p) => [p, []]));
for (let r = 0; r < ROUNDS; r++) {
  for (const p of paths) results.get(p).push(await p.run());
  process.stderr.write(`round ${r + 1} of ${ROUNDS} done\n`);
}
const medians = new Map();
for (const p of paths) {
  const out = results.get(p);
  const m = {};
  for (const k of Object.keys(out[0])) m[k] = median(out.map((o) => o[k]));
  medians.set(p.id ?? p.name + p.group, { ...m, name: p.name });
}
for (const p of paths) show(p.group, p.name, medians.get(p.id ?? p.name + p.group), p.base ? medians.get(p.base) : undefined);
// Against the libraries Node users run today, contended: the client's hand-offs/s over theirs.
for (const driver of ["ioredis", "node-redis"]) {
  const mine = medians.get(`rlock-client on ${driver}contended`);
  for (const other of ["c-redlock 4 (defaults)", "c-redlock 4 (tuned)", "c-mutex"]) {
    const o = medians.get(other);
    console.log(`contended    rlock-client on ${driver} / ${o.name}: x${(mine.rate / o.rate).toFixed(2)} hand-offs/s, server CPU per hand-off x${(mine.cpuUs / o.cpuUs).toFixed(2)}`);
  }
}

const jsonFile = arg("json", undefined);
if (jsonFile) {
  const { writeFileSync, readFileSync } = await import("node:fs");
  writeFileSync(jsonFile, `${JSON.stringify(await resultsJson(readFileSync), null, 2)}\n`);
  process.stderr.write(`wrote ${jsonFile}\n`);
}

await server.stop();
process.exit(0);

/** The run in the common schema (bench/report/README.md): every figure is this run's own. */
async function resultsJson(readFileSync) {
  const { cpus } = await import("node:os");
  const finite = (x) => (Number.isFinite(x) ? x : null);
  const info = await admin.call("INFO", "server");
  const field = (k) => (new RegExp(`^${k}:(\\S+)`, "m").exec(info) ?? [])[1];
  const serverVersion = field("valkey_version") ? `Valkey ${field("valkey_version")} (redis_version ${field("redis_version")})` : `Redis ${field("redis_version")}`;
  const modules = await admin.call("MODULE", "LIST");
  const rlock = modules.map((m) => Object.fromEntries(m.reduce((acc, v, i) => (i % 2 ? acc : [...acc, [String(v), m[i + 1]]]), []))).find((m) => m.name === "rlock");
  const git = (...a) => spawnSync("git", ["-C", new URL("../../..", import.meta.url).pathname, ...a], { encoding: "utf8" }).stdout?.trim();
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url)));
  const versionOf = (name) => {
    try {
      return JSON.parse(readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url))).version;
    } catch {
      return "?";
    }
  };
  const scenarioOf = (p) => p.group;
  const isRlock = (p) => p.name.startsWith("raw") || p.name.startsWith("rlock-client");
  const METRICS = {
    uncontended: [["rate", "pairs_per_sec", "pairs/s", "higher"], ["cpuUs", "server_us_per_pair", "µs", "lower"]],
    contended: [
      ["rate", "handoffs_per_sec", "hand-offs/s", "higher"],
      ["acquisitions", "acquisitions_per_sec", "acquisitions/s", "higher"],
      ["fairness", "fairness", "min/max per worker", "higher"],
      ["p50", "latency_p50_ms", "ms", "lower"],
      ["cpuUs", "server_us_per_handoff", "µs", "lower"],
    ],
  };
  const setting = (p) => (p.group === "contended" ? { workers: WORKERS, hold_ms: 0 } : {});
  const out = [];
  const ratios = [];
  for (const p of paths) {
    for (const [key, metric, unit, better] of METRICS[p.group]) {
      const rounds = results.get(p).map((o) => o[key]);
      out.push({ scenario: scenarioOf(p), server: flavor, setting: setting(p), path: p.name, metric, unit, better, rounds: rounds.map(finite), median: finite(median(rounds)) });
    }
  }
  // rlock-client on each driver against raw commands on that driver and against every library.
  for (const p of paths.filter((q) => q.name.startsWith("rlock-client"))) {
    const driver = p.name.split(" on ")[1];
    const primary = METRICS[p.group][0];
    for (const b of paths.filter((q) => q.group === p.group && (q.name === `${p.group === "contended" ? "raw ACQUIRE BLOCK" : "raw RLOCK.*"} on ${driver}` || !isRlock(q)))) {
      const theirs = median(results.get(b).map((o) => o[primary[0]]));
      const value = theirs > 0 ? median(results.get(p).map((o) => o[primary[0]])) / theirs : null;
      ratios.push({ scenario: p.group, server: flavor, setting: setting(p), metric: primary[1], path: p.name, baseline: b.name, value: finite(value) });
    }
  }
  const now = new Date().toISOString();
  return {
    schema: "rlock-bench/1",
    suite: "node",
    language: "Node.js",
    title: "The Node client against redlock and redis-semaphore",
    command: `node bench/bench.mjs ${process.argv.slice(2).join(" ")}`.trim(),
    date: `${now.slice(0, 10)} ${now.slice(11, 16)} UTC`,
    machine: { cpu: cpus()[0]?.model ?? "?", nproc: cpus().length, load_before: loadBefore, pinning: "server on CPU 0, node on CPU 1 (taskset)" },
    build: {
      commit: git("rev-parse", "--short", "HEAD") || "?",
      dirty: Boolean(git("status", "--porcelain", "--", "src", "clients/node/src")),
      module_version: String(rlock?.ver ?? "?"),
      client: `rlock-client ${pkg.version}, ioredis ${versionOf("ioredis")}, node-redis ${versionOf("redis")}`,
      runtime: `Node.js ${process.versions.node}`,
    },
    plan: { rounds: ROUNDS, seconds: SECONDS, workers: WORKERS },
    servers: [{ id: flavor, version: serverVersion }],
    scenarios: [
      { id: "uncontended", title: "Uncontended acquire+release pairs (one loop)", primary_metric: "pairs_per_sec" },
      { id: "contended", title: "Contended: workers on one lock, hold 0", primary_metric: "handoffs_per_sec" },
    ],
    paths: paths.map((p) => ({ scenario: p.group, path: p.name, label: p.name, role: isRlock(p) ? "rlock" : "baseline" })),
    results: out,
    ratios,
    not_measured: [],
  };
}

async function startPinned(s, bin) {
  // Server.spawn runs the binary as it is; here it runs under taskset -c 0.
  s.port = await new Promise((r) => {
    const srv = net.createServer();
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => r(port));
    });
  });
  s.proc = spawn("taskset", ["-c", "0", bin, ...s.args()], { stdio: "ignore" });
  s.exited = new Promise((r) => s.proc.once("exit", () => r(true)));
  for (let i = 0; i < 400; i++) {
    if (await s.ping()) return;
    await sleep(25);
  }
  throw new Error(`server did not start: ${s.log().slice(-1000)}`);
}
