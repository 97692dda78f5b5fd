// C20 guarded writes: hold.guard(...) sends RLOCK.GUARD, through node-redis v5 and ioredis, on each
// server. A write through a hold lands while the hold stands, and is refused, changing nothing,
// once the lease ran out, the lock was force-released, or a newer token exists.
import { test } from "node:test";
import assert from "node:assert/strict";
import { eachServer, key, sleep, info } from "./helpers.mjs";
import { NotHeldError, StaleTokenError, ServerError, RlockError } from "../dist/esm/index.js";

// The data a lock guards, in the lock's slot (what a cluster requires).
const dataOf = (k) => `{${k}}:data`;

/** Calls of RLOCK.GUARD the server has counted (INFO commandstats). */
async function guardCalls(admin) {
  const v = (await info(admin, "commandstats"))["cmdstat_rlock.guard"];
  return v ? Number(/calls=(\d+)/.exec(v)[1]) : 0;
}

/** The lock's and its data's state, to show a refusal changed nothing. */
async function state(admin, k) {
  return { lock: await admin.call("HGETALL", k), data: await admin.call("GET", dataOf(k)) };
}

eachServer("guarded writes", (env, driver, flavor) => {
  test(`[${driver}] C20 a write through a hold is applied while the hold stands, its reply returned (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c20");
    const hold = await locks.lock(k).acquire();
    assert.equal(await hold.guard("SET", dataOf(k), "v1"), "OK");
    assert.equal(await env.admin.call("GET", dataOf(k)), "v1");
    assert.equal(await hold.guard(["APPEND", dataOf(k), "+2"]), 4, "the array form; an integer reply");
    assert.equal(await hold.guard("GET", dataOf(k)), "v1+2");
    await assert.rejects(hold.guard("INCR", dataOf(k)), (e) => e instanceof ServerError && !(e instanceof NotHeldError) && e.code === "ERR", "the inner command's own error");
    await hold.release();

    const fenced = await locks.lock(k, { fenced: true }).acquire();
    assert.ok(fenced.token >= 1);
    assert.equal(await fenced.guard("SET", dataOf(k), `t${fenced.token}`), "OK", "with TOKEN, the hold's own");
    assert.equal(await env.admin.call("GET", dataOf(k)), `t${fenced.token}`);
    await fenced.release();

    const rw = locks.readWrite(k + ":rw");
    const write = await rw.write({ fenced: true }).acquire();
    assert.equal(await write.guard("SET", dataOf(k + ":rw"), "w"), "OK", "a write hold of a read-write lock: WRITE");
    await write.release();
    const read = await rw.read().acquire();
    assert.equal(await read.guard("GET", dataOf(k + ":rw")), "w", "a read hold: READ");
    await read.release();
  });

  test(`[${driver}] C20 refused, changing nothing, once the lease has run out (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c20lease");
    const hold = await locks.lock(k, { lease: 300 }).acquire(); // a fixed lease: no watchdog renewal
    assert.equal(await hold.guard("SET", dataOf(k), "before"), "OK");
    await sleep(450);
    const before = await state(env.admin, k);
    const err = await hold.guard("SET", dataOf(k), "after").then(
      () => assert.fail("a write after the lease ran out landed"),
      (e) => e,
    );
    assert.ok(err instanceof NotHeldError && !(err instanceof StaleTokenError), `${err?.name}: ${err?.message}`);
    assert.equal(err.key, k);
    assert.equal(err.owner, hold.owner);
    assert.deepEqual(await state(env.admin, k), before);
    assert.equal(before.data, "before");
  });

  test(`[${driver}] C20 refused once the lease ran out while the server was busy (DEBUG SLEEP) (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c20sleep");
    const hold = await locks.lock(k, { lease: 200, fenced: true }).acquire();
    assert.equal(await hold.guard("SET", dataOf(k), "before"), "OK");
    const busy = env.admin.call("DEBUG", "SLEEP", "0.4");
    await sleep(20); // DEBUG SLEEP is running: the guard below waits behind it
    const refused = hold.guard("SET", dataOf(k), "after");
    await busy;
    await assert.rejects(refused, (e) => e instanceof NotHeldError && !(e instanceof StaleTokenError));
    assert.equal(await env.admin.call("GET", dataOf(k)), "before");
  });

  test(`[${driver}] C20 refused, changing nothing, once the lock was force-released (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c20force");
    const hold = await locks.lock(k, { fenced: true }).acquire();
    assert.equal(await hold.guard("SET", dataOf(k), "before"), "OK");
    assert.equal(await env.admin.call("RLOCK.FORCERELEASE", k), 1);
    await assert.rejects(hold.guard("SET", dataOf(k), "after"), (e) => e instanceof NotHeldError && !(e instanceof StaleTokenError) && e.code === "NOTHELD");
    assert.deepEqual(await state(env.admin, k), { lock: [], data: "before" });
  });

  test(`[${driver}] C20 refused, changing nothing, once a newer token exists: another owner's (NotHeldError), the same owner's (StaleTokenError) (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c20token");
    const first = await locks.lock(k, { fenced: true }).acquire();
    assert.equal(await first.guard("SET", dataOf(k), "first"), "OK");

    // Another holder takes the lock after a force release, and writes.
    await env.admin.call("RLOCK.FORCERELEASE", k);
    const second = await env.server.locks(driver).lock(k, { fenced: true }).acquire();
    assert.ok(second.token > first.token);
    assert.equal(await second.guard("SET", dataOf(k), "second"), "OK");
    let before = await state(env.admin, k);
    await assert.rejects(first.guard("SET", dataOf(k), "stale"), (e) => e instanceof NotHeldError && !(e instanceof StaleTokenError));
    assert.deepEqual(await state(env.admin, k), before);
    assert.equal(before.data, "second");
    await second.release();

    // The same owner (a stable owner, in another process or after a restart) takes it again:
    // it holds the lock, but not as the hold with the old token.
    const again = await locks.lock(k, { fenced: true, owner: first.owner }).acquire();
    assert.ok(again.token > second.token);
    before = await state(env.admin, k);
    const err = await first.guard("SET", dataOf(k), "stale").then(
      () => assert.fail("a write with a stale token landed"),
      (e) => e,
    );
    assert.ok(err instanceof StaleTokenError, `${err?.name}: ${err?.message}`);
    assert.ok(err instanceof NotHeldError, "a stale token is a kind of not held");
    assert.deepEqual([err.key, err.owner, err.token, err.current, err.code], [k, first.owner, first.token, again.token, "STALETOKEN"]);
    assert.deepEqual(await state(env.admin, k), before);
    assert.equal(await again.guard("SET", dataOf(k), "again"), "OK", "the newer hold's own token passes");
    assert.equal(await env.admin.call("GET", dataOf(k)), "again");
    await again.release();
  });

  test(`[${driver}] C20 bad commands throw before anything is sent; a released hold sends nothing (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c20bad");
    const hold = await locks.lock(k).acquire();
    const sentBefore = await guardCalls(env.admin);
    await assert.rejects(hold.guard(), TypeError);
    await assert.rejects(hold.guard([]), TypeError);
    await assert.rejects(hold.guard("SET", dataOf(k), 1), TypeError);
    await assert.rejects(hold.guard(["SET", dataOf(k)], "v"), TypeError);
    await assert.rejects(hold.guard("SET", dataOf(k), null), TypeError);
    await assert.rejects(hold.guard(""), RangeError);
    await hold.release();
    await assert.rejects(hold.guard("SET", dataOf(k), "v"), (e) => e instanceof RlockError && /released/.test(e.message));
    assert.equal(await guardCalls(env.admin), sentBefore, "no RLOCK.GUARD reached the server");
    assert.equal(await env.admin.call("EXISTS", dataOf(k)), 0);
  });

  test(`[${driver}] C20 a leader writes only while it leads, in its term (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c20lead");
    const leader = await locks.election(k).campaign("node-a");
    assert.equal(await leader.guard("SET", dataOf(k), "a"), "OK");
    await env.admin.call("RLOCK.FORCERELEASE", k);
    const next = await env.server.locks(driver).election(k).campaign("node-b");
    assert.ok(next.term > leader.term);
    await assert.rejects(leader.guard("SET", dataOf(k), "a again"), NotHeldError);
    assert.equal(await env.admin.call("GET", dataOf(k)), "a");
    await next.resign();
  });
});
