// Waits given up and connections cut: C06 (cancelled waits leave nothing) and C08 (a retry
// carries the same REQ id, hold counts stay exact, the driver re-sends nothing).
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { eachServer, key, sleep, until } from "./helpers.mjs";
import { Locks } from "../dist/esm/index.js";

/**
 * Frees what a wait waits for and aborts the wait within 0–2 ms of each other: the release
 * first (not awaited; the abort on the next turn at the soonest), or the abort first.
 */
async function releaseAndAbort(release, ac, releaseFirst) {
  const gap = Math.random() * 2;
  if (releaseFirst) {
    void release();
    if (gap > 1) await sleep(gap - 1);
    else await new Promise((r) => setImmediate(r));
    ac.abort();
  } else {
    ac.abort();
    if (gap > 1) await sleep(gap - 1);
    await release();
  }
}

/** A TCP proxy to the server that can cut the connection after a command has reached the server, before its reply gets back. */
class CuttingProxy {
  constructor(target) {
    this.target = target;
    this.sent = []; // every chunk sent to the server, as text
    this.cutOn = null;
    this.server = net.createServer((client) => {
      const upstream = net.connect(target, "127.0.0.1");
      let cutting = false;
      client.on("data", (d) => {
        const text = d.toString("latin1");
        this.sent.push(text);
        if (this.cutOn && text.includes(this.cutOn)) {
          this.cutOn = null;
          cutting = true;
        }
        upstream.write(d);
      });
      upstream.on("data", (d) => {
        if (cutting) {
          // The server has run the command; its reply never arrives.
          client.destroy();
          upstream.destroy();
          return;
        }
        client.write(d);
      });
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on("error", end);
      upstream.on("error", end);
      client.on("close", end);
      upstream.on("close", end);
    });
  }
  listen() {
    return new Promise((r) => this.server.listen(0, "127.0.0.1", () => r(this.server.address().port)));
  }
  close() {
    this.server.close();
  }
  /** The REQ ids of every `command` sent, in order. */
  reqs(command) {
    const ids = [];
    for (const chunk of this.sent) {
      const parts = chunk.split("\r\n");
      for (let i = 0; i < parts.length; i++) {
        if (parts[i].toUpperCase() !== command) continue;
        for (let j = i + 1; j < parts.length; j++) {
          if (/^\*\d+$/.test(parts[j])) break;
          if (parts[j] === "REQ") {
            ids.push(parts[j + 2]);
            break;
          }
        }
      }
    }
    return ids;
  }
}

/**
 * `run(locks, proxy)` with Locks through `driver` whose connections pass through a CuttingProxy
 * to `server`; the Locks is closed after, the proxy always.
 */
async function throughCuttingProxy(server, driver, run) {
  const proxy = new CuttingProxy(server.port);
  const port = await proxy.listen();
  try {
    const options = driver === "ioredis" ? { port } : { url: `redis://127.0.0.1:${port}` };
    const locks = new Locks(server.appClient(driver, options));
    await run(locks, proxy);
    await locks.close();
  } finally {
    proxy.close();
  }
}

/** `command` went twice through the proxy (its reply was cut once), both times with one REQ id. */
function assertSentAgainWithSameReq(proxy, command) {
  const ids = proxy.reqs(command);
  assert.equal(ids.length, 2, `sent ${ids.length} times: the driver re-sent on its own`);
  assert.equal(ids[0], ids[1], "the retry carries the same REQ id");
}

eachServer("waits", (env, driver, flavor) => {
  test(`[${driver}] C06 40 waits cancelled by AbortSignal at random moments around grants leave no orphaned hold (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c06");
    let granted = 0;
    let aborted = 0;
    for (let i = 0; i < 40; i++) {
      const holder = await locks.lock(k).acquire();
      const ac = new AbortController();
      const wait = locks
        .lock(k, { wait: 10_000 })
        .acquire({ signal: ac.signal })
        .then(
          async (h) => {
            granted++;
            await h.release();
          },
          (e) => {
            assert.equal(e.name, "AbortError", String(e));
            aborted++;
          },
        );
      await sleep(Math.random() * 3);
      // Release and abort close together, in either order.
      await releaseAndAbort(() => holder.release(), ac, Math.random() < 0.5);
      await wait;
      // Nothing left: the lock is free (or comes free at once), no waiter blocked.
      const free = await until(async () => (await env.admin.call("EXISTS", k)) === 0, 2000, 5);
      assert.ok(free, `round ${i}: the lock is held by ${JSON.stringify(await env.admin.call("HGETALL", k))}`);
    }
    assert.equal((await locks.info(k)).blocked, 0);
    assert.equal(granted + aborted, 40);
    assert.ok(aborted > 0, "some waits were cancelled");
  });

  // Waits given up at the moment of their grant, in each family: the holder's release and
  // the abort close together in either order; and, every third round, the grant made at once
  // as CLIENT KILL arrives. For that one the server is paused (DEBUG SLEEP) while the wait,
  // on a pooled connection, sends its call with what it waits for already free, and the abort
  // sends the kill: the server reads both in one pass, grants at once (the reply waits in the
  // connection's buffer for the pass to end) and then frees the connection, reply unsent.
  // Afterwards nothing is held: every permit is available, every lock free, no waiter left.
  // The same for multi-key waits of a user whose ACL refuses CLIENT KILL: the wait's connection
  // is closed from this side instead, and the REQ id of RLOCK.MACQUIRE finds what it left.
  const runs = [...["lock", "multi-key", "semaphore", "permit lease"].map((family) => ({ family, acl: false })), { family: "multi-key", acl: true }];
  for (const { family, acl } of runs) {
    const who = acl ? " of a user whose ACL refuses CLIENT KILL" : "";
    const how = acl ? "as the connection closes" : "as the kill arrives";
    test(`[${driver}] C06 40 ${family} waits${who} cancelled by AbortSignal around grants, some granted at once ${how}, leave nothing held (${flavor})`, async () => {
      let clientOpts;
      if (acl) {
        await env.admin.call("ACL", "SETUSER", "nokill", "reset", "on", ">pw", "~*", "&*", "+@all", "-client|kill");
        clientOpts = { username: "nokill", password: "pw" };
      }
      const locks = env.server.locks(driver, {}, clientOpts);
      const k = key(`c06-${family.replace(" ", "-")}`);
      let take, wait, free, waiters;
      if (family === "lock" || family === "multi-key") {
        const [a, b] = [`{${k}}a`, `{${k}}b`];
        take = async () => {
          const h = await locks.lock(a).acquire();
          return () => h.release();
        };
        wait = family === "lock" ? (signal) => locks.lock(a, { wait: 10_000 }).acquire({ signal }) : (signal) => locks.multi([a, b], { wait: 10_000 }).acquire({ signal });
        free = async () => (await env.admin.call("EXISTS", a, b)) === 0;
        waiters = async () => (await env.admin.call("RLOCK.WAITERS", a)).length + (await env.admin.call("RLOCK.WAITERS", b)).length;
      } else {
        const sem = family === "semaphore" ? locks.semaphore(k) : locks.permitSemaphore(k);
        assert.ok(await sem.trySetPermits(1));
        take = async () => {
          const p = await sem.acquire();
          return () => p.release();
        };
        wait = (signal) => sem.acquire({ wait: 10_000, signal });
        free = async () => (await sem.available()) === 1 && (family === "semaphore" || (await env.admin.call("ZCARD", `{${k}}:timeout`)) === 0);
        waiters = async () => (await env.admin.call("RLOCK.WAITERS", k)).length;
      }
      let granted = 0;
      let aborted = 0;
      for (let i = 0; i < 40; i++) {
        const release = await take();
        const ac = new AbortController();
        const atOnce = i % 3 === 2;
        if (atOnce) {
          await release();
          // A pooled connection (a wait granted at once gives its connection back), then the pause.
          const warm = await wait(undefined);
          assert.ok(warm, `round ${i}: granted at once`);
          await warm.release();
          void env.admin.call("DEBUG", "SLEEP", "0.1");
          await sleep(5);
        }
        const waiting = wait(ac.signal).then(
          async (h) => {
            assert.ok(h, `round ${i}: a wait that ended with nothing`);
            granted++;
            await h.release();
          },
          (e) => {
            assert.equal(e.name, "AbortError", String(e));
            aborted++;
          },
        );
        if (atOnce) {
          await sleep(10);
          ac.abort();
        } else {
          await sleep(Math.random() * 3);
          await releaseAndAbort(release, ac, i % 3 === 0);
        }
        await waiting;
        assert.ok(await until(free, 2000, 5), `round ${i}${atOnce ? " (granted at once as the kill came)" : ""}: still held after the wait was given up`);
      }
      assert.equal(await waiters(), 0, "no waiter is left");
      assert.equal(granted + aborted, 40);
      assert.ok(aborted > 0, "some waits were cancelled");
      if (acl) assert.ok(/calls=[1-9]/.test((await env.admin.call("INFO", "commandstats")).match(/cmdstat_rlock\.macquire:.*/)?.[0] ?? ""));
    });
  }

  test(`[${driver}] C06 25 waits sharing one AbortSignal end together, with no MaxListenersExceededWarning (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c06-shared");
    const warnings = [];
    const onWarning = (w) => warnings.push(w);
    process.on("warning", onWarning);
    try {
      const holder = await locks.lock(k).acquire();
      const sem = locks.semaphore(`${k}:sem`);
      await sem.trySetPermits(1);
      const permit = await sem.acquire();
      const ac = new AbortController();
      const waits = [];
      for (let i = 0; i < 15; i++) waits.push(locks.lock(k, { wait: Infinity }).acquire({ signal: ac.signal }));
      for (let i = 0; i < 5; i++) waits.push(locks.multi([k], { wait: Infinity }).acquire({ signal: ac.signal }));
      for (let i = 0; i < 5; i++) waits.push(sem.acquire({ wait: Infinity, signal: ac.signal }));
      assert.ok(await until(async () => (await env.admin.call("RLOCK.WAITERS", k)).length === 20 && (await env.admin.call("RLOCK.WAITERS", `${k}:sem`)).length === 5, 5000, 10), "all 25 blocked in the server");
      ac.abort();
      const ends = await Promise.allSettled(waits);
      assert.deepEqual(ends.map((e) => e.status === "rejected" && e.reason.name), ends.map(() => "AbortError"));
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
      assert.deepEqual(warnings.map((w) => `${w.name}: ${w.message}`), [], "no warning");
      assert.equal((await env.admin.call("RLOCK.WAITERS", k)).length, 0);
      await holder.release();
      await permit.release();
      assert.equal(await env.admin.call("EXISTS", k), 0, "nothing granted to a wait that was given up");
      assert.equal(await sem.available(), 1);
    } finally {
      process.off("warning", onWarning);
    }
  });

  test(`[${driver}] C06 an abort before the grant ends the wait at once and leaves no waiter (${flavor})`, async () => {
    const locks = env.server.locks(driver);
    const k = key("c06b");
    const holder = await locks.lock(k).acquire();
    const ac = new AbortController();
    const p = locks.lock(k, { wait: Infinity }).acquire({ signal: ac.signal });
    await until(async () => (await locks.info(k)).blocked === 1, 2000, 2);
    const t0 = Date.now();
    ac.abort(new Error("stop"));
    await assert.rejects(p, /stop/);
    assert.ok(Date.now() - t0 < 500);
    assert.equal((await locks.info(k)).blocked, 0);
    await holder.release();
    assert.equal(await env.admin.call("EXISTS", k), 0);
    const already = AbortSignal.abort();
    await assert.rejects(locks.lock(k, { wait: 100 }).acquire({ signal: already }), { name: "AbortError" });
  });

  test(`[${driver}] C08 an acquire whose reply is cut is sent again with the same REQ id: hold count stays exact (${flavor})`, async () => {
    await throughCuttingProxy(env.server, driver, async (locks, proxy) => {
      const k = key("c08a");
      const lock = locks.lock(k);
      proxy.cutOn = "RLOCK.ACQUIRE";
      const hold = await lock.acquire();
      assert.ok(hold);
      assert.equal(hold.holdCount, 1);
      assert.equal(await env.admin.call("HGET", k, lock.owner), "1", "applied once");
      assertSentAgainWithSameReq(proxy, "RLOCK.ACQUIRE");
      await hold.release();
    });
  });

  test(`[${driver}] C08 a release whose reply is cut is sent again with the same REQ id: one hold released, not two (${flavor})`, async () => {
    await throughCuttingProxy(env.server, driver, async (locks, proxy) => {
      const k = key("c08r");
      const lock = locks.lock(k);
      const outer = await lock.acquire();
      const inner = await lock.acquire();
      assert.equal(inner.holdCount, 2);
      proxy.cutOn = "RLOCK.RELEASE";
      assert.equal(await inner.release(), false);
      assert.equal(await env.admin.call("HGET", k, lock.owner), "1", "one re-entry undone, not two");
      assertSentAgainWithSameReq(proxy, "RLOCK.RELEASE");
      assert.equal(await outer.release(), true);
    });
  });

  test(`[${driver}] C08 a multi-key acquire and release whose replies are cut are sent again with the same REQ id: hold counts stay exact (${flavor})`, async () => {
    await throughCuttingProxy(env.server, driver, async (locks, proxy) => {
      const k = key("c08m");
      const [a, b] = [`{${k}}a`, `{${k}}b`];
      const multi = locks.multi([a, b]);
      const outer = await multi.acquire();
      proxy.cutOn = "RLOCK.MACQUIRE";
      const inner = await multi.acquire();
      assert.ok(inner);
      assert.deepEqual([await env.admin.call("HGET", a, multi.owner), await env.admin.call("HGET", b, multi.owner)], ["2", "2"], "applied once");
      const acquires = proxy.reqs("RLOCK.MACQUIRE");
      assert.equal(acquires.length, 3, `sent ${acquires.length} times`);
      assert.equal(acquires[1], acquires[2], "the retry carries the same REQ id");
      proxy.cutOn = "RLOCK.MRELEASE";
      assert.equal(await inner.release(), 0, "re-entries left on both");
      assert.deepEqual([await env.admin.call("HGET", a, multi.owner), await env.admin.call("HGET", b, multi.owner)], ["1", "1"], "one re-entry undone, not two");
      assertSentAgainWithSameReq(proxy, "RLOCK.MRELEASE");
      assert.equal(await outer.release(), 2);
      assert.equal(await env.admin.call("EXISTS", a, b), 0);
    });
  });

  test(`[${driver}] C08 a wait whose connection is cut is sent again with the same REQ id (${flavor})`, async () => {
    await throughCuttingProxy(env.server, driver, async (locks, proxy) => {
      const k = key("c08w");
      const lock = locks.lock(k, { wait: 2000 });
      proxy.cutOn = "RLOCK.ACQUIRE";
      const hold = await lock.acquire();
      assert.ok(hold);
      assert.equal(await env.admin.call("HGET", k, lock.owner), "1");
      assertSentAgainWithSameReq(proxy, "RLOCK.ACQUIRE");
      await hold.release();
    });
  });
});
