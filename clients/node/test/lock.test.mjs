// Locks: C01-C05, C07, C09-C11, C17, C18, through node-redis v5 and ioredis, on each server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Server, eachServer, key, checkGrantedInArrivalOrder, sleep, until, info } from "./helpers.mjs";
import { Locks, NotAcquiredError, LockLostError, DeadlockError, RlockError } from "../dist/esm/index.js";

const here = path.dirname(fileURLToPath(import.meta.url));

eachServer("locks", (env, driver, flavor) => {
  test(`[${driver}] C01 acquire, re-enter through the same handle, release (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c01");
    const lock = locks.lock(k);
    const outer = await lock.acquire();
    assert.ok(outer);
    assert.equal(outer.holdCount, 1);
    const inner = await lock.acquire();
    assert.equal(inner.holdCount, 2);
    assert.equal(await env.admin.call("HGET", k, lock.owner), "2");
    assert.equal(await locks.lock(k).acquire(), null, "a second owner is refused");
    assert.equal(await inner.release(), false);
    assert.equal(await env.admin.call("HGET", k, lock.owner), "1");
    assert.equal(await outer.release(), true);
    assert.equal(await env.admin.call("EXISTS", k), 0);
    const fenced = await locks.lock(k, { fenced: true }).acquire();
    assert.equal(fenced.holdCount, 1);
    assert.ok(fenced.token >= 1);
    await fenced.release();
  });

  test(`[${driver}] C02 a waiter blocked in the server is granted at once, in arrival order (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    await checkGrantedInArrivalOrder(locks, key("c02"));
  });

  test(`[${driver}] C03 a wait that ends: null, and using never runs its body (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c03");
    const holder = await locks.lock(k).acquire();
    const t0 = Date.now();
    assert.equal(await locks.lock(k, { wait: 150 }).acquire(), null);
    assert.ok(Date.now() - t0 >= 140);
    let ran = false;
    await assert.rejects(
      locks.using(k, { wait: 100 }, async () => {
        ran = true;
      }),
      NotAcquiredError,
    );
    assert.equal(ran, false);
    await holder.release();
    assert.equal(await locks.using(k, { wait: 100 }, async (h) => h.holdCount), 1);
    assert.equal(await env.admin.call("EXISTS", k), 0, "using released");
  });

  test(`[${driver}] C04 renewal keeps a hold for 3 leases, same token, at most one renewal per lease/3 (${flavor})`, async () => {
    const lease = 600;
    const locks = env.server.locks(driver, { watchdogLease: lease });
    const k = key("c04");
    const before = await renewCalls(env.admin);
    const hold = await locks.lock(k, { fenced: true }).acquire();
    await sleep(3 * lease);
    assert.equal(hold.lost, false);
    assert.equal(await env.admin.call("HEXISTS", k, hold.owner), 1);
    assert.equal((await locks.info(k)).token, hold.token, "same token");
    const renewals = (await renewCalls(env.admin)) - before;
    assert.ok(renewals >= 3, `${renewals} renewals`);
    assert.ok(renewals <= (3 * lease) / (lease / 3) + 1, `${renewals} renewals: more than one per lease/3`);
    await hold.release();
  });

  test(`[${driver}] C05 a force-release is told through hold.signal within lease/3 (${flavor})`, async () => {
    const lease = 900;
    const locks = env.server.locks(driver, { watchdogLease: lease });
    const k = key("c05");
    const hold = await locks.lock(k).acquire();
    await sleep(100);
    const lost = new Promise((r) => hold.signal.addEventListener("abort", () => r(performance.now())));
    const t0 = performance.now();
    await env.admin.call("RLOCK.FORCERELEASE", k);
    const at = await lost;
    assert.ok(hold.signal.reason instanceof LockLostError);
    assert.ok(at - t0 <= lease / 3 + 50, `told after ${at - t0} ms`);
    await assert.rejects(hold.release(), LockLostError);
  });

  for (const flags of ["Kd", "Ed"]) test(`[${driver}] C05 with notify-keyspace-events ${flags} a force-release is told within 100 ms (${flavor})`, async () => {
    await env.admin.call("CONFIG", "SET", "notify-keyspace-events", flags);
    try {
      const locks = env.server.locks(driver, { watchdogLease: 30_000 });
      const k = key("c05e");
      const hold = await locks.lock(k).acquire();
      assert.equal(await locks.hub.followsEvents(), true);
      await sleep(100); // the subscription is made in the background
      const lost = new Promise((r) => hold.signal.addEventListener("abort", () => r(performance.now())));
      await env.admin.call("RLOCK.FORCERELEASE", k);
      const t0 = performance.now(); // the force-release is done (the server sent the event in that call)
      const at = await lost;
      assert.ok(at - t0 <= 100, `told ${at - t0} ms after the force-release`);
    } finally {
      await env.admin.call("CONFIG", "SET", "notify-keyspace-events", "");
    }
  });

  test(`[${driver}] C05 using rejects with the loss when its callback outlives the hold (${flavor})`, async () => {
    const locks = env.server.locks(driver, { watchdogLease: 600 });
    const k = key("c05u");
    let seen;
    const p = locks.using(k, {}, async (hold) => {
      seen = hold.signal;
      await env.admin.call("RLOCK.FORCERELEASE", k);
      await sleep(2000);
      throw new Error("late failure, after the loss was told: no unhandled rejection");
    });
    await assert.rejects(p, LockLostError);
    assert.equal(seen.aborted, true);
  });

  test(`[${driver}] C07 a long wait outlives the client's 1 s socket and command timeouts (${flavor})`, async () => {
    const opts = driver === "ioredis" ? { commandTimeout: 1000, socketTimeout: 1000 } : { socket: { socketTimeout: 1000 }, commandOptions: { timeout: 1000 } };
    const locks = env.server.locks(driver, {}, opts);
    const k = key("c07");
    const holder = await env.server.locks(driver).lock(k).acquire();
    setTimeout(() => holder.release(), 2500);
    const t0 = Date.now();
    const hold = await locks.lock(k, { wait: 5000 }).acquire();
    assert.ok(hold, "granted");
    assert.ok(Date.now() - t0 >= 2400);
    assert.equal(hold.holdCount, 1);
    assert.deepEqual((await locks.info(k)).holders, { [hold.owner]: 1 }, "no duplicate");
    await hold.release();
  });

  test(`[${driver}] C09 a session hold ends when its process dies (${flavor})`, async () => {
    const k = key("c09");
    const child = spawn(process.execPath, [path.join(here, "fixtures", "hold-session.mjs"), driver, String(env.server.port), k], { stdio: ["ignore", "pipe", "inherit"] });
    const ready = await new Promise((r) => child.stdout.once("data", (d) => r(String(d))));
    assert.match(ready, /held/);
    assert.equal(await env.admin.call("EXISTS", k), 1);
    assert.ok((await env.admin.call("PTTL", k)) > 20_000);
    const waiter = env.server.locks(driver).lock(k, { wait: 5000 }).acquire();
    const t0 = Date.now();
    child.kill("SIGKILL");
    const hold = await waiter;
    assert.ok(hold, "granted once the holder died");
    assert.ok(Date.now() - t0 < 1000, `freed after ${Date.now() - t0} ms`);
    await hold.release();
  });

  test(`[${driver}] C11 two holders crossing: one gets DeadlockError naming both owners and keys (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const [k1, k2] = [key("c11a"), key("c11b")];
    const a = locks.owner();
    const b = locks.owner();
    const { a1, b2, aWaits, err } = await cross(locks, a, b, k1, k2);
    assert.ok(err instanceof DeadlockError, String(err));
    assert.ok(err instanceof RlockError);
    const owners = new Set(err.cycle.flatMap((w) => [w.owner, w.holder]));
    assert.deepEqual(owners, new Set([a.id, b.id]));
    assert.deepEqual(new Set(err.cycle.map((w) => w.key)), new Set([k1, k2]));
    await b2.release();
    const a2 = await aWaits;
    assert.ok(a2);
    await a2.release();
    await a1.release();
  });

  test(`[${driver}] C17 bad arguments throw TypeError/RangeError before anything is sent (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const sentBefore = await commandCalls(env.admin);
    assert.throws(() => locks.lock(""), RangeError);
    assert.throws(() => locks.lock(42), TypeError);
    assert.throws(() => locks.lock("k", { lease: 0 }), RangeError);
    assert.throws(() => locks.lock("k", { lease: -5 }), RangeError);
    assert.throws(() => locks.lock("k", { lease: "100" }), TypeError);
    assert.throws(() => locks.lock("k", { wait: -1 }), RangeError);
    assert.throws(() => locks.lock("k", { wait: NaN }), RangeError);
    assert.throws(() => locks.lock("k", { fair: "yes" }), TypeError);
    assert.throws(() => locks.lock("k", { owner: "" }), RangeError);
    assert.throws(() => locks.lock("k", { leese: 5 }), TypeError);
    assert.throws(() => locks.multi([]), RangeError);
    assert.throws(() => locks.multi(["a", ""]), RangeError);
    assert.throws(() => locks.semaphore(""), RangeError);
    await assert.rejects(locks.lock("k").acquire({ signal: "now" }), TypeError);
    await assert.rejects(locks.semaphore("s").acquire({ permits: 0 }), RangeError);
    await assert.rejects(locks.latch("l").trySetCount(-1), RangeError);
    assert.throws(() => new Locks({}), TypeError);
    assert.throws(() => new Locks(env.server.appClient(driver), { watchdogLease: 0 }), RangeError);
    await assert.rejects(Locks.fromUrl("http://x"), RangeError);
    assert.equal(await commandCalls(env.admin), sentBefore, "no rlock command reached the server");
  });

  test(`[${driver}] C18 owners: one scope re-enters, two scopes crossing get DeadlockError, a hold released elsewhere is released (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const [k1, k2] = [key("c18a"), key("c18b")];
    const me = locks.owner();
    const outer = await me.lock(k1).acquire();
    const inner = await me.lock(k1).acquire();
    assert.equal(inner.holdCount, 2, "a second handle of one scope re-enters");
    assert.equal(await locks.lock(k1).acquire(), null, "a plain handle is another owner");
    await inner.release();
    await outer.release();
    assert.equal(await env.admin.call("EXISTS", k1), 0);
    const x = locks.owner();
    const y = locks.owner();
    const { a1: x1, b2: y2, aWaits: xw, err } = await cross(locks, x, y, k1, k2);
    assert.ok(err instanceof DeadlockError, String(err));
    // Released from another task than the one that took it.
    await new Promise((r) => setImmediate(() => y2.release().then(r)));
    const x2 = await xw;
    assert.ok(x2);
    await Promise.all([x1.release(), x2.release()]);
    assert.equal(await env.admin.call("EXISTS", k1), 0);
    assert.equal(await env.admin.call("EXISTS", k2), 0);
    const named = locks.owner("billing-worker-7");
    assert.equal(named.id, "billing-worker-7");
    const h = await named.lock(k1).acquire();
    assert.equal(await env.admin.call("HGET", k1, "billing-worker-7"), "1");
    await h[Symbol.asyncDispose]();
    assert.equal(await env.admin.call("EXISTS", k1), 0, "asyncDispose released");
  });

  test(`[${driver}] C10 fencing tokens increase across holders and across a restart from AOF (${flavor})`, async () => {
    const s = await Server.start(flavor, { aof: true, config: { appendfsync: "always" } });
    try {
      const k = key("c10");
      const tokens = [];
      for (let i = 0; i < 3; i++) {
        const l = s.locks(driver);
        const h = await l.lock(k, { fenced: true }).acquire();
        tokens.push(h.token);
        await h.release();
      }
      await s.restart();
      const l = s.locks(driver);
      const h = await l.lock(k, { fenced: true }).acquire();
      tokens.push(h.token);
      await h.release();
      for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens ${tokens}`);
    } finally {
      await s.stop();
    }
  });
});

/**
 * Owners `a` and `b` crossing: a holds k1, b holds k2, a waits in the server for k2, then b asks
 * for k1. Gives their holds, a's pending wait and what b's request ended with (the error).
 */
async function cross(locks, a, b, k1, k2) {
  const a1 = await a.lock(k1).acquire();
  const b2 = await b.lock(k2).acquire();
  const aWaits = a.lock(k2, { wait: 5000 }).acquire();
  await until(async () => (await locks.info(k2)).blocked === 1, 2000, 2);
  const err = await b.lock(k1, { wait: 5000 }).acquire().catch((e) => e);
  return { a1, b2, aWaits, err };
}

async function renewCalls(admin) {
  const s = await info(admin, "commandstats");
  const m = /calls=(\d+)/.exec(s["cmdstat_rlock.renew"] ?? "");
  return m ? Number(m[1]) : 0;
}

async function commandCalls(admin) {
  const s = await info(admin, "commandstats");
  let total = 0;
  for (const [k, v] of Object.entries(s)) if (/^cmdstat_(rlock|rsem|rlatch)\./.test(k)) total += Number(/calls=(\d+)/.exec(v)[1]);
  return total;
}
