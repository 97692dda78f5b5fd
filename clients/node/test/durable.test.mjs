// Durable by default (C15) and one watchdog (C16).
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Server, DRIVERS, flavors, sleep, until, info, key } from "./helpers.mjs";
import { NotAcknowledgedError } from "../dist/esm/index.js";

async function waitCalls(admin) {
  const s = await info(admin, "commandstats");
  const m = /calls=(\d+)/.exec(s["cmdstat_wait"] ?? "");
  return m ? Number(m[1]) : 0;
}

/** Counts the timers set while `fn` runs (the watchdog's timers are unref'd, so Node's own resource count misses them). */
async function countingTimers(fn) {
  const real = globalThis.setTimeout;
  let count = 0;
  globalThis.setTimeout = (...args) => {
    count++;
    return real(...args);
  };
  try {
    await fn();
  } finally {
    globalThis.setTimeout = real;
  }
  return count;
}

for (const flavor of flavors()) {
  describe(`durability on ${flavor}`, () => {
    let primary, replica, admin;
    before(async () => {
      primary = await Server.start(flavor);
      replica = await Server.start(flavor, { replicaOf: primary.port });
      admin = primary.admin();
      const ok = await until(async () => (await info(admin, "replication")).connected_slaves === "1" && (await info(replica.admin(), "replication")).master_link_status === "up", 10_000, 50);
      assert.ok(ok, "the replica attached");
    });
    after(async () => {
      await replica?.stop();
      await primary?.stop();
    });

    for (const driver of DRIVERS) {
      test(`[${driver}] C15 with a replica attached a default acquire returns after WAIT says a replica has it (${flavor})`, async () => {
        const locks = primary.locks(driver);
        const before = await waitCalls(admin);
        const hold = await locks.lock(key("c15")).acquire();
        assert.ok(hold.replicasAcked >= 1, `replicasAcked ${hold.replicasAcked}`);
        assert.equal(await waitCalls(admin), before + 1);
        assert.equal(await replica.admin().call("EXISTS", hold.key), 1, "the replica has it");
        await hold.release();
        const waited = await locks.lock(key("c15w"), { wait: 1000, fenced: true }).acquire();
        assert.ok(waited.replicasAcked >= 1);
        assert.equal(waited.holdCount, 1);
        await waited.release();
      });

      test(`[${driver}] C15 syncReplicas 0 sends no WAIT (${flavor})`, async () => {
        const locks = primary.locks(driver);
        const before = await waitCalls(admin);
        const hold = await locks.lock(key("c15z"), { syncReplicas: 0 }).acquire();
        assert.equal(hold.replicasAcked, null);
        await hold.release();
        assert.equal(await waitCalls(admin), before);
      });

      test(`[${driver}] C15 a grant no replica acknowledges in time is released and rejects with NotAcknowledgedError (${flavor})`, async () => {
        const locks = primary.locks(driver, { syncTimeout: 300 });
        const k = key("c15n");
        await locks.lock(key("warm")).acquire().then((h) => h.release()); // replica count known
        process.kill(replica.proc.pid, "SIGSTOP");
        try {
          const err = await locks.lock(k).acquire().catch((e) => e);
          assert.ok(err instanceof NotAcknowledgedError, String(err));
          assert.equal(err.acked, 0);
          assert.equal(err.wanted, 1);
          assert.equal(await admin.call("EXISTS", k), 0, "released");
        } finally {
          process.kill(replica.proc.pid, "SIGCONT");
        }
      });

      test(`[${driver}] C06 an acquire aborted while its WAIT for a replica blocks gives the grant back (${flavor})`, async () => {
        const locks = primary.locks(driver, { syncTimeout: 5000 });
        const k = key("c06wait");
        await locks.lock(key("warm")).acquire().then((h) => h.release()); // replica count known
        process.kill(replica.proc.pid, "SIGSTOP");
        try {
          const ac = new AbortController();
          const p = locks.lock(k).acquire({ signal: ac.signal });
          await until(async () => (await admin.call("EXISTS", k)) === 1, 2000, 5); // granted, WAIT blocking
          ac.abort();
          await assert.rejects(p, { name: "AbortError" });
          assert.ok(await until(async () => (await admin.call("EXISTS", k)) === 0, 2000, 10), "the grant was given back");
        } finally {
          process.kill(replica.proc.pid, "SIGCONT");
        }
      });
    }
  });

  describe(`watchdog on ${flavor}`, () => {
    let server;
    before(async () => {
      server = await Server.start(flavor);
    });
    after(() => server?.stop());

    for (const driver of DRIVERS) {
      test(`[${driver}] C16 1,000 holds on one Locks renew through one timer, in batches (${flavor})`, async () => {
        const lease = 2400; // 1,000 renewals take 100-400 ms on a loaded 2-core machine with a debug build
        const locks = server.locks(driver, { watchdogLease: lease });
        await locks.lock(key("warm")).acquire().then((h) => h.release());
        const holds = [];
        for (let i = 0; i < 1000; i += 100) {
          holds.push(...(await Promise.all(Array.from({ length: 100 }, (_, j) => locks.lock(key(`c16:${i + j}`)).acquire()))));
        }
        const wd = locks.hub.watchdog;
        const [b0, r0] = [wd.batches, wd.renewals];
        const set = await countingTimers(() => sleep(1.5 * lease));
        const lost = holds.filter((h) => h.lost);
        assert.equal(lost.length, 0, `${lost.length} lost: ${lost[0]?.signal.reason}`);
        const batches = wd.batches - b0;
        const renewals = wd.renewals - r0;
        assert.ok(renewals >= 3000, `${renewals} renewals`);
        assert.ok(renewals / batches >= 100, `${renewals} renewals in ${batches} batches`);
        // A few timers per tick (the tick, the bound on its batch), not one per hold: 1,000
        // holds renewed 3 times each would set 3,000.
        assert.ok(set <= 10 * batches + 10, `${set} timers set for ${batches} batches`);
        await Promise.all(holds.map((h) => h.release()));
        assert.equal(wd.size, 0);
      });
    }
  });
}
