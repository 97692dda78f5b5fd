// The other synchronizers (C12), leader election (C13) and the operator queries.
import { test } from "node:test";
import assert from "node:assert/strict";
import { eachServer, key, sleep, until } from "./helpers.mjs";
import { LockLostError } from "../dist/esm/index.js";

eachServer("synchronizers", (env, driver, flavor) => {
  test(`[${driver}] C12 read-write lock: readers share, a writer is alone (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("rw");
    const r1 = await locks.readWrite(k).read().acquire();
    const r2 = await locks.readWrite(k).read().acquire();
    assert.ok(r1 && r2, "two readers together");
    assert.equal(await locks.readWrite(k).write().acquire(), null, "no writer while read");
    const writer = locks.readWrite(k).write({ wait: 5000 }).acquire();
    await until(async () => (await locks.info(k)).blocked === 1, 2000, 2);
    await r1.release();
    await r2.release();
    const w = await writer;
    assert.ok(w);
    assert.equal(w.side, "write");
    assert.equal(await locks.readWrite(k).read().acquire(), null, "no reader while written");
    const mine = locks.readWrite(k, { owner: w.owner });
    const down = await mine.read().acquire();
    assert.ok(down, "the writer may also read");
    await down.release();
    await w.release();
    assert.equal(await env.admin.call("EXISTS", k), 0);
  });

  test(`[${driver}] C12 multi-key: all or none (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const [a, b, c] = [key("{m}a"), key("{m}b"), key("{m}c")];
    const other = await locks.lock(c).acquire();
    assert.equal(await locks.multi([a, b, c]).acquire(), null);
    assert.equal(await env.admin.call("EXISTS", a), 0, "none taken");
    const both = await locks.multi([a, b]).acquire();
    assert.ok(both);
    assert.equal(await env.admin.call("EXISTS", a), 1);
    assert.equal(await env.admin.call("EXISTS", b), 1);
    const waiting = locks.multi([b, c], { wait: 5000 }).acquire();
    await sleep(50);
    assert.equal(await both.release(), 2);
    await other.release();
    const bc = await waiting;
    assert.ok(bc, "granted once both came free");
    await bc.release();
    assert.equal(await env.admin.call("EXISTS", b), 0);
  });

  test(`[${driver}] C12 semaphore: never above N permits out (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("sem");
    const sem = locks.semaphore(k);
    assert.equal(await sem.trySetPermits(3), true);
    assert.equal(await sem.trySetPermits(5), false);
    let out = 0;
    let most = 0;
    const worker = async () => {
      for (let i = 0; i < 10; i++) {
        const p = await locks.semaphore(k).acquire({ wait: 10_000 });
        out++;
        most = Math.max(most, out);
        assert.ok(out <= 3, `${out} permits out`);
        await sleep(Math.random() * 3);
        out--;
        await p.release();
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    assert.equal(most, 3);
    assert.equal(await sem.available(), 3);
    const two = await sem.acquire({ permits: 2 });
    assert.equal(await sem.available(), 1);
    assert.equal(await sem.acquire({ permits: 2 }), null);
    await two.release();
    assert.equal(await sem.addPermits(-1), 2);
  });

  test(`[${driver}] C12 permit-expiring semaphore: a permit's lease expires, a renewed one stays (${flavor})`, async () => {
    const locks = env.server.locks(driver, { watchdogLease: 600 });
    const k = key("psem");
    const sem = locks.permitSemaphore(k);
    await sem.trySetPermits(2);
    const fixed = await sem.acquire({ lease: 300 });
    const kept = await sem.acquire();
    assert.match(fixed.id, /^[0-9a-f]{32}$/);
    assert.equal(await sem.available(), 0);
    const lost = new Promise((r) => fixed.signal.addEventListener("abort", r));
    await lost;
    assert.ok(fixed.signal.reason instanceof LockLostError);
    await until(async () => (await sem.available()) === 1, 1000, 10);
    assert.equal(await sem.available(), 1, "the fixed lease came back");
    await sleep(1500);
    assert.equal(kept.lost, false, "renewed past its 600 ms lease");
    assert.equal(await sem.available(), 1);
    assert.equal(await kept.release(), true);
    assert.equal(await sem.available(), 2);
    const many = await sem.acquireMany({ permits: 2 });
    assert.equal(many.length, 2);
    assert.equal(await sem.acquire({ wait: 50 }), null);
    for (const p of many) await p.release();
  });

  test(`[${driver}] C12 latch: opens at zero (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("latch");
    const latch = locks.latch(k);
    assert.equal(await latch.trySetCount(2), true);
    assert.equal(await latch.awaitZero(), false);
    assert.equal(await latch.await(), false, "await, the deprecated name, still works");
    const waiting = latch.awaitZero({ wait: 5000 });
    assert.equal(await latch.countDown(), 1);
    await sleep(30);
    assert.equal(await latch.countDown(), 0);
    assert.equal(await waiting, true);
    assert.equal(await latch.count(), 0);
    assert.equal(await latch.awaitZero({ wait: 10 }), true);
  });

  test(`[${driver}] C13 election: one leader among 4, resign hands over, observe reports each change in order (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("elect");
    const observer = locks.election(k);
    const stop = new AbortController();
    const seen = [];
    const watching = (async () => {
      for await (const l of observer.observe({ signal: stop.signal })) seen.push(l ? `${l.value}@${l.term}` : "none");
    })();
    await sleep(100);
    const candidates = ["a", "b", "c", "d"].map((v) => ({ v, p: env.server.locks(driver).election(k).campaign(v) }));
    const leaders = [];
    let pending = candidates;
    for (let round = 0; round < 4; round++) {
      const next = await Promise.race(pending.map((c) => c.p.then((l) => ({ c, l }))));
      leaders.push(next.l);
      pending = pending.filter((c) => c !== next.c);
      await sleep(200);
      const now = await observer.leader();
      assert.equal(now.value, next.l.value, "one leader, the one elected");
      assert.equal(now.term, next.l.term);
      for (const c of pending) assert.equal(await Promise.race([c.p.then(() => "won"), sleep(1).then(() => "waiting")]), "waiting");
      await next.l.resign();
    }
    await sleep(200);
    stop.abort();
    await watching;
    for (let i = 1; i < leaders.length; i++) assert.ok(leaders[i].term > leaders[i - 1].term);
    const expected = ["none", ...leaders.flatMap((l) => [`${l.value}@${l.term}`])];
    const changes = seen.filter((s) => s !== "none");
    assert.deepEqual(changes, expected.slice(1), `observed ${seen}`);
    assert.equal(seen[0], "none");
    assert.equal(seen.at(-1), "none");
  });

  test(`[${driver}] operator queries: info, waiters, scan, stats, top (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("ops");
    const h = await locks.lock(k, { fenced: true }).acquire();
    const waiting = locks.lock(k, { wait: 3000 }).acquire();
    await until(async () => (await locks.info(k)).blocked === 1, 2000, 2);
    const i = await locks.info(k);
    assert.deepEqual(i.holders, { [h.owner]: 1 });
    assert.ok(i.pttl > 0);
    assert.equal(i.token, h.token);
    const w = await locks.waiters(k);
    assert.equal(w.length, 1);
    assert.equal(w[0].kind, "lock");
    const scanned = await locks.scan({ match: k });
    assert.deepEqual(scanned.map((s) => s.key), [k]);
    const stats = await locks.stats();
    assert.ok(Number(stats.rlock_acquires) >= 1);
    const top = await locks.top(5);
    assert.ok(top.some((t) => t.key === k));
    await h.release();
    await (await waiting).release();
  });
});
