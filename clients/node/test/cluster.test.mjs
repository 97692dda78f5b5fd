// C14: C01, C02 and C12 on a 3-primary cluster, through both drivers' cluster clients; a
// multi-key lock over names in different slots is refused before anything is sent.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { TestCluster, DRIVERS, flavors, sleep, key, checkGrantedInArrivalOrder } from "./helpers.mjs";
import { NotHeldError, ServerError } from "../dist/esm/index.js";

for (const flavor of flavors()) {
  describe(`cluster on ${flavor}`, () => {
    let cluster;
    before(async () => {
      cluster = await TestCluster.start(flavor, 3);
    });
    after(() => cluster?.stop());

    for (const driver of DRIVERS) {
      test(`[${driver}] C14 on a cluster: acquire, re-enter, release on each primary (${flavor})`, async () => {
        const locks = cluster.locks(driver);
        // Keys until every primary has some.
        const keys = [];
        const ports = new Set();
        for (let i = 0; ports.size < 3 && i < 200; i++) {
          const k = key(`c14a${i}`);
          ports.add((await cluster.adminFor(k)).options.port);
          keys.push(k);
        }
        const nodes = new Set();
        for (const k of keys) {
          const admin = await cluster.adminFor(k);
          nodes.add(admin.options.port);
          const lock = locks.lock(k, { fenced: true });
          const a = await lock.acquire();
          const b = await lock.acquire();
          assert.equal(b.holdCount, 2);
          assert.equal(await admin.call("HGET", k, lock.owner), "2");
          assert.equal(await locks.lock(k).acquire(), null);
          await b.release();
          assert.equal(await a.release(), true);
          assert.equal(await admin.call("EXISTS", k), 0);
        }
        assert.equal(nodes.size, 3, "keys on every primary");
      });

      test(`[${driver}] C14 on a cluster: waiters granted in arrival order at once (${flavor})`, async () => {
        const locks = cluster.locks(driver);
        await checkGrantedInArrivalOrder(locks, key("c14b"));
      });

      test(`[${driver}] C14 on a cluster: read-write, multi-key in one slot, semaphore, latch (${flavor})`, async () => {
        const locks = cluster.locks(driver, { watchdogLease: 900 });
        const rw = key("c14rw");
        const r = await locks.readWrite(rw).read().acquire();
        assert.ok(await locks.readWrite(rw).read().acquire());
        assert.equal(await locks.readWrite(rw).write().acquire(), null);
        await r.release();
        const tag = `{${key("c14m")}}`;
        const multi = await locks.multi([`${tag}:a`, `${tag}:b`]).acquire();
        assert.ok(multi);
        assert.equal(await locks.multi([`${tag}:b`, `${tag}:c`]).acquire(), null, "all or none");
        assert.equal(await multi.release(), 2);
        const sem = locks.semaphore(key("c14s"));
        await sem.trySetPermits(1);
        const p = await sem.acquire();
        assert.equal(await sem.acquire({ wait: 30 }), null);
        await p.release();
        const latch = locks.latch(key("c14l"));
        await latch.trySetCount(1);
        const opened = latch.awaitZero({ wait: 3000 });
        await sleep(20);
        await latch.countDown();
        assert.equal(await opened, true);
        const held = await locks.lock(key("c14renew")).acquire();
        await sleep(1200);
        assert.equal(held.lost, false, "renewed by the watchdog on its primary");
        await held.release();
      });

      test(`[${driver}] operator queries on a cluster ask every primary (${flavor})`, async () => {
        const locks = cluster.locks(driver);
        const prefix = key("c14ops");
        const keys = Array.from({ length: 9 }, (_, i) => `${prefix}:${i}`);
        const holds = await Promise.all(keys.map((k) => locks.lock(k).acquire()));
        const nodes = new Set();
        for (const k of keys) nodes.add((await cluster.adminFor(k)).options.port);
        assert.ok(nodes.size >= 2, "keys on several primaries");
        const found = (await locks.scan({ match: `${prefix}:*` })).map((s) => s.key).sort();
        assert.deepEqual(found, [...keys].sort());
        const stats = await locks.stats();
        assert.ok(Number(stats.rlock_acquires) >= keys.length);
        await Promise.all(holds.map((h) => h.release()));
      });

      test(`[${driver}] C14 a multi-key lock over different slots is refused before anything is sent (${flavor})`, async () => {
        const locks = cluster.locks(driver);
        assert.throws(() => locks.multi(["a", "b"]), RangeError);
        assert.throws(() => locks.multi(["{x}a", "{y}b"]), /share a slot/);
      });

      test(`[${driver}] C20 on a cluster: a guarded write goes to the lock's primary; a key outside the lock's slot is refused with CROSSSLOT, nothing written (${flavor})`, async () => {
        const locks = cluster.locks(driver);
        const ports = new Set();
        for (let i = 0; ports.size < 3 && i < 200; i++) {
          const k = key(`c20c${i}`);
          const admin = await cluster.adminFor(k);
          if (ports.has(admin.options.port)) continue;
          ports.add(admin.options.port);
          const hold = await locks.lock(k, { fenced: true }).acquire();
          assert.equal(await hold.guard("SET", `{${k}}:data`, "v"), "OK");
          assert.equal(await admin.call("GET", `{${k}}:data`), "v", "written on the lock's primary");
          const elsewhere = `${k}:elsewhere`; // no hash tag: another slot
          assert.notEqual(await admin.call("CLUSTER", "KEYSLOT", elsewhere), await admin.call("CLUSTER", "KEYSLOT", k));
          await assert.rejects(hold.guard("SET", elsewhere, "v"), (e) => e instanceof ServerError && !(e instanceof NotHeldError) && e.code === "CROSSSLOT");
          assert.equal(await (await cluster.adminFor(elsewhere)).call("EXISTS", elsewhere), 0);
          await admin.call("RLOCK.FORCERELEASE", k);
          await assert.rejects(hold.guard("SET", `{${k}}:data`, "late"), NotHeldError);
          assert.equal(await admin.call("GET", `{${k}}:data`), "v");
        }
        assert.equal(ports.size, 3, "locks on every primary");
      });
    }
  });
}
