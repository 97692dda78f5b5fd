// C21: the shared vectors (clients/spec/*.json), every case, through this package's public API.
// No server: a scripted client of each driver's shape (node-redis, ioredis) stands in for the
// application's client. Locks opens its connections from it as from a real one, so the
// commands recorded are what the package would send, and error replies come back as the
// driver's own error class (node-redis ErrorReply, ioredis ReplyError) through the same
// conversion a server's would. The connection's own housekeeping (CLIENT ID of a dedicated
// connection, INFO replication, CONFIG GET notify-keyspace-events) is answered and not recorded.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ErrorReply } from "redis";
import { ReplyError } from "ioredis";
import { DRIVERS } from "./helpers.mjs";
import { DeadlockError, Locks, LockLostError, NotAcknowledgedError, NotAcquiredError, NotHeldError, RlockError, ServerError } from "../dist/esm/index.js";
import { LOSS_EVENTS, eventChannels, eventMode, lossKey } from "../dist/esm/core/events.js";
import { renewal, serverError } from "../dist/esm/core/replies.js";

const SPEC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../spec");
const FILES = ["commands", "replies", "errors", "refusals", "keyspace"];
const FORMAT = 1;

function load(name) {
  const doc = JSON.parse(readFileSync(path.join(SPEC, `${name}.json`), "utf8"));
  assert.equal(doc.format, FORMAT, `${name}.json is format ${doc.format}; this test reads format ${FORMAT}`);
  return doc;
}

/** `{"repeat": "v", "times": n}` as the string; everything else as it is. */
function value(v) {
  if (v && typeof v === "object" && !Array.isArray(v) && "repeat" in v) return v.repeat.repeat(v.times);
  return v;
}

/** A reply of the vectors as the driver gives it: `{"error"}` thrown as the driver's error class, `{"map"}` as an object. */
function reply(driver, r) {
  if (r && typeof r === "object" && !Array.isArray(r)) {
    if ("error" in r) return new (driver === "ioredis" ? ReplyError : ErrorReply)(r.error);
    if ("map" in r) return Object.fromEntries(r.map.map(([k, v]) => [k, reply(driver, v)]));
  }
  if (Array.isArray(r)) return r.map((x) => reply(driver, x));
  return r;
}

/** What the scripted server answers once the case's replies are used up: enough for the call to finish. */
function fallback(args) {
  switch (args[0].toUpperCase()) {
    case "RLOCK.RELEASE":
    case "RSEM.RETURN":
      return 1;
    case "RLOCK.MRELEASE":
      return Number(args[2]);
    case "RSEM.RELEASE":
      return 0;
    case "RLOCK.SCAN":
      return ["0", []];
    case "INFO":
      return "";
    default:
      return null;
  }
}

/** The scripted server every connection of one Locks talks to. */
class Script {
  constructor(driver, context = {}) {
    this.driver = driver;
    this.replicas = context.attached_replicas ?? 0;
    this.sent = [];
    this.queue = [];
  }
  answer(args) {
    const a = args.map(String);
    const name = `${a[0]} ${a[1] ?? ""}`.toUpperCase();
    if (name === "CLIENT ID") return Promise.resolve(1);
    if (name === "INFO REPLICATION") return Promise.resolve(`# Replication\r\nrole:master\r\nconnected_slaves:${this.replicas}\r\n`);
    if (name === "CONFIG GET") return Promise.resolve(["notify-keyspace-events", ""]);
    this.sent.push(a);
    const r = this.queue.length > 0 ? this.queue.shift() : fallback(a);
    const v = reply(this.driver, r);
    return v instanceof Error ? Promise.reject(v) : Promise.resolve(v);
  }
}

/** An application client of `driver`'s shape (not connected), whose duplicates all talk to `script`. */
function fakeClient(driver, script) {
  if (driver === "node-redis") {
    const make = () => {
      const c = {
        options: {},
        isOpen: false,
        isReady: false,
        duplicate: () => make(),
        on: () => c,
        connect: async () => {
          c.isOpen = c.isReady = true;
          return c;
        },
        sendCommand: (args) => script.answer(args),
        close: async () => {
          c.isOpen = c.isReady = false;
        },
        destroy: () => {
          c.isOpen = c.isReady = false;
        },
      };
      return c;
    };
    return make();
  }
  const make = () => {
    const c = {
      options: {},
      status: "wait",
      duplicate: () => make(),
      on: () => c,
      connect: async () => {
        c.status = "ready";
      },
      call: (...args) => script.answer(args),
      quit: async () => {
        c.status = "end";
      },
      disconnect: () => {
        c.status = "end";
      },
    };
    return c;
  };
  return make();
}

/** The vectors' args as this package's options. */
function lockOptions(a) {
  const o = {};
  if ("lease_ms" in a) o.lease = value(a.lease_ms);
  if ("wait_ms" in a) o.wait = a.wait_ms === "forever" ? Infinity : value(a.wait_ms);
  for (const k of ["fair", "fenced", "session"]) if (k in a) o[k] = a[k];
  if (a.sync_replicas) o.syncReplicas = a.sync_replicas.n;
  return o;
}

function lockHandle(locks, a) {
  const o = lockOptions(a);
  if (a.side) {
    delete o.fair;
    return locks.readWrite(value(a.key), { owner: value(a.owner) })[a.side](o);
  }
  return locks.lock(value(a.key), { ...o, owner: value(a.owner) });
}

/** What a grant says, in the vectors' words. */
const granted = (h) => (h ? { granted: true, hold_count: h.holdCount, token: h.token, replicas_acked: h.replicasAcked } : { granted: false });

/** Calls that send one command and read its reply: the handle is made, the call sent, its result named as the vectors name it. */
const QUERIES = {
  "lock.is_locked": async (locks, a) => ({ locked: await lockHandle(locks, a).isLocked() }),
  "lock.is_held_by": async (locks, a) => ({ held: await lockHandle(locks, a).isHeldByOwner() }),
  "lock.hold_count": async (locks, a) => ({ hold_count: await lockHandle(locks, a).holdCount() }),
  "lock.remaining_lease": async (locks, a) => ({ remaining_ms: await lockHandle(locks, a).remainingLease() }),
  "lock.release": async (locks, a) => ({ freed: await lockHandle(locks, a).unlock() }),
  "lock.force_release": async (locks, a) => ({ removed: await locks.forceRelease(value(a.key)) }),
  "lock.info": (locks, a) => locks.info(value(a.key)),
  "semaphore.try_set_permits": async (locks, a) => ({ set: await locks.semaphore(value(a.key)).trySetPermits(value(a.permits)) }),
  "permits.try_set_permits": async (locks, a) => ({ set: await locks.permitSemaphore(value(a.key)).trySetPermits(value(a.permits)) }),
  "semaphore.add_permits": async (locks, a) => ({ available: await locks.semaphore(value(a.key)).addPermits(value(a.permits)) }),
  "semaphore.available": async (locks, a) => ({ available: await locks.semaphore(value(a.key)).available() }),
  "semaphore.acquire": async (locks, a) => ({ granted: (await locks.semaphore(value(a.key)).acquire({ permits: value(a.permits), ...waitOption(a) })) !== null }),
  "semaphore.release": async (locks, a) => ({ available: await locks.semaphore(value(a.key)).release(value(a.permits)) }),
  "permits.acquire": async (locks, a) => {
    const got = await locks.permitSemaphore(value(a.key)).acquireMany({ permits: value(a.permits), ...("lease_ms" in a ? { lease: value(a.lease_ms) } : {}), ...waitOption(a) });
    return got ? { granted: true, ids: got.map((p) => p.id) } : { granted: false };
  },
  "permits.release": async (locks, a) => ({ returned: await locks.permitSemaphore(value(a.key)).release(value(a.id)) }),
  "latch.try_set_count": async (locks, a) => ({ set: await locks.latch(value(a.key)).trySetCount(value(a.count)) }),
  "latch.count_down": async (locks, a) => ({ count: await locks.latch(value(a.key)).countDown() }),
  "latch.count": async (locks, a) => ({ count: await locks.latch(value(a.key)).count() }),
  "latch.await_zero": async (locks, a) => ({ open: await locks.latch(value(a.key)).awaitZero(waitOption(a)) }),
  "election.campaign": async (locks, a) => {
    const l = await locks.election(value(a.key)).campaign(value(a.value), waitOption(a));
    return { leader: l ? { value: l.value, term: l.term } : null };
  },
  "election.leader": async (locks, a) => ({ leader: await locks.election(value(a.key)).leader() }),
  "election.resign": async (locks, a) => ({ resigned: await locks.election(value(a.key)).resign(value(a.value)) }),
  "queries.waiters": (locks, a) => locks.waiters(value(a.key)),
  "queries.scan": (locks, a) => locks.scan({ ...("match" in a ? { match: a.match } : {}), ...("type" in a ? { type: a.type } : {}) }),
  "queries.stats": (locks) => locks.stats(),
  "queries.top": (locks, a) => locks.top(value(a.count)),
};

function waitOption(a) {
  return "wait_ms" in a ? { wait: a.wait_ms === "forever" ? Infinity : value(a.wait_ms) } : {};
}

/**
 * Runs one call of the vectors through the public API. A hold to release or renew is taken
 * first by an acquire the script grants; then `script.sent` is cleared, so what is recorded is
 * the call's own. Returns the call's result in the vectors' words.
 */
async function run(driver, c, replies = []) {
  const a = c.args ?? {};
  const script = new Script(driver, c.context);
  const locks = new Locks(fakeClient(driver, script), a.sync_replicas ? { syncTimeout: a.sync_replicas.timeout_ms } : undefined);
  const go = (rs) => {
    script.sent = [];
    script.queue = [...rs];
  };
  try {
    if (QUERIES[c.call]) {
      go(replies);
      return await QUERIES[c.call](locks, a);
    }
    switch (c.call) {
      case "lock.acquire": {
        const lock = lockHandle(locks, a);
        go(replies);
        return granted(await lock.acquire());
      }
      case "lock.scoped": {
        const lock = lockHandle(locks, a);
        go(replies);
        let seen;
        await lock.using((h) => {
          seen = granted(h);
        });
        return seen;
      }
      case "lock.renew": {
        const lock = lockHandle(locks, a);
        go([1]);
        const hold = await lock.acquire();
        go(replies);
        await hold.renew();
        return { renewed: true };
      }
      case "multi.acquire":
      case "multi.scoped": {
        const o = { owner: value(a.owner), ...waitOption(a) };
        if ("lease_ms" in a) o.lease = value(a.lease_ms);
        if ("session" in a) o.session = a.session;
        const multi = locks.multi(a.keys.map(value), o);
        go(replies);
        if (c.call === "multi.acquire") return { granted: (await multi.acquire()) !== null };
        await multi.using(() => {});
        return { granted: true };
      }
      case "multi.release": {
        const multi = locks.multi(a.keys.map(value), { owner: value(a.owner) });
        go([a.keys.length]);
        const hold = await multi.acquire();
        go(replies);
        return { freed: await hold.release() };
      }
      case "permits.renew": {
        const sem = locks.permitSemaphore(value(a.key));
        go([[value(a.id)]]);
        const [permit] = await sem.acquireMany({ permits: 1, lease: value(a.lease_ms) });
        go(replies);
        await permit.renew();
        return { renewed: true };
      }
      default:
        throw new Error(`case ${c.id}: the call ${c.call} is not one this test knows: a call the client cannot express`);
    }
  } finally {
    c.sent = script.sent;
    await locks.close();
  }
}

/** Checks `actual` commands against `expected`, binding `{req}`-style placeholders (same name, same id; different names, different ids). */
function sameCommands(id, actual, expected, bound = new Map()) {
  assert.equal(actual.length, expected.length, `${id}: sent ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
  expected.forEach((cmd, i) => {
    assert.equal(actual[i].length, cmd.length, `${id}: command ${i} is ${JSON.stringify(actual[i])}, expected ${JSON.stringify(cmd)}`);
    cmd.forEach((word, j) => {
      const got = actual[i][j];
      const m = /^\{(req\d*)\}$/.exec(word);
      if (!m) return assert.equal(got, word, `${id}: command ${i} is ${JSON.stringify(actual[i])}, expected ${JSON.stringify(cmd)}`);
      assert.ok(Buffer.byteLength(got) >= 1 && Buffer.byteLength(got) <= 64 && !/[{}]/.test(got), `${id}: ${got} is no REQ id`);
      if (bound.has(m[1])) assert.equal(got, bound.get(m[1]), `${id}: {${m[1]}} is the same id each time`);
      else {
        assert.ok(![...bound.values()].includes(got), `${id}: {${m[1]}} must be a new id, got one already used`);
        bound.set(m[1], got);
      }
    });
  });
  return bound;
}

/** The vectors' error class names as this package's classes. */
function isClass(e, cls) {
  switch (cls) {
    case "NotAcquired":
      return e instanceof NotAcquiredError;
    case "NotHeld":
      return e instanceof NotHeldError;
    case "Lost":
      return e instanceof LockLostError;
    case "Deadlock":
      return e instanceof DeadlockError;
    case "NotAcknowledged":
      return e instanceof NotAcknowledgedError;
    case "InvalidArgument":
      return e instanceof TypeError || e instanceof RangeError;
    case "ServerError":
      return e instanceof ServerError;
    case "Unexpected":
      return Object.getPrototypeOf(e) === RlockError.prototype;
    default:
      throw new Error(`an error class this test does not know: ${cls}`);
  }
}

async function outcome(driver, c, replies) {
  try {
    return { value: await run(driver, c, replies) };
  } catch (e) {
    return { error: e };
  }
}

async function checkCommands(driver, doc) {
  for (const c of doc.cases) {
    const o = await outcome(driver, c, []);
    // The scripted replies (null, mostly) may end the call in an error of its own; an argument
    // error or an unknown call is the client failing to express the case.
    if (o.error && (o.error instanceof TypeError || o.error instanceof RangeError || /not one this test knows/.test(o.error.message))) throw o.error;
    sameCommands(c.id, c.sent, c.expect);
  }
}

async function checkReplies(driver, doc) {
  for (const c of doc.cases) {
    if (c.call === "watchdog.renewal") {
      const r = c.replies[0];
      const got = renewal(r && typeof r === "object" && "error" in r ? serverError(r.error) : r);
      assert.deepEqual({ outcome: got }, c.expect, c.id);
      continue;
    }
    const o = await outcome(driver, c, c.replies);
    if ("error" in c.expect) {
      assert.ok(o.error, `${c.id}: returned ${JSON.stringify(o.value)}, expected ${c.expect.error}`);
      assert.ok(isClass(o.error, c.expect.error), `${c.id}: raised ${o.error?.name}: ${o.error?.message}, expected ${c.expect.error}`);
      if (c.expect.then_sends) {
        const expected = (await commandsOf(c)).concat(c.expect.then_sends);
        sameCommands(c.id, c.sent, expected);
      }
    } else {
      if (o.error) throw new Error(`${c.id}: raised ${o.error.name}: ${o.error.message}, expected ${JSON.stringify(c.expect)}`);
      assert.deepEqual(o.value, c.expect, c.id);
    }
  }
}

let commandsDoc;
/** The commands `commands.json` gives for the same call, args and context (the first round trip of a replies case). */
async function commandsOf(c) {
  commandsDoc ??= load("commands");
  const same = commandsDoc.cases.find((x) => x.call === c.call && JSON.stringify(x.args) === JSON.stringify(c.args) && JSON.stringify(x.context ?? {}) === JSON.stringify(c.context ?? {}));
  if (same) return same.expect;
  // Not listed there: the first round trip is as many commands as the case has replies.
  return c.sent.slice(0, c.replies.length).map((cmd) => cmd.map((w) => (/^[0-9a-f]{32}$/.test(w) ? "{req}" : w)));
}

async function checkErrors(driver, doc) {
  for (const c of doc.cases) {
    const o = await outcome(driver, c, [{ error: c.error }]);
    assert.ok(o.error, `${c.id}: returned ${JSON.stringify(o.value)}, expected ${c.expect.class}`);
    assert.ok(isClass(o.error, c.expect.class), `${c.id}: raised ${o.error.name}: ${o.error.message}, expected ${c.expect.class}`);
    if (c.expect.class === "NotHeld") {
      assert.equal(o.error.key, c.expect.key, c.id);
      assert.equal(o.error.owner, c.expect.owner, c.id);
    }
    if (c.expect.class === "Deadlock") assert.deepEqual(o.error.cycle, c.expect.cycle, c.id);
    if (c.expect.class === "ServerError") assert.equal(o.error.code, c.expect.code, c.id);
  }
}

async function checkRefusals(driver, doc) {
  for (const c of doc.cases) {
    const o = await outcome(driver, c, []);
    assert.ok(o.error, `${c.id}: not refused (returned ${JSON.stringify(o.value)})`);
    assert.ok(isClass(o.error, c.expect.class), `${c.id}: raised ${o.error.name}: ${o.error.message}, expected ${c.expect.class}`);
    assert.deepEqual(c.sent, [], `${c.id}: refused, but only after sending ${JSON.stringify(c.sent)}`);
  }
}

function checkKeyspace(doc) {
  assert.deepEqual([...LOSS_EVENTS], doc.loss_events, "the loss events are the vectors' one list, in its order");
  for (const c of doc.cases) {
    const a = c.args;
    let got;
    if (c.call === "keyspace.mode") got = eventMode(a.flags);
    else if (c.call === "keyspace.channels") got = a.mode === "keyevent" ? eventChannels("keyevent", a.db) : a.keys.flatMap((k) => eventChannels("keyspace", a.db, k));
    else if (c.call === "keyspace.lost_key") got = lossKey(a.db, a.channel, a.message);
    else throw new Error(`case ${c.id}: the call ${c.call} is not one this test knows`);
    assert.deepEqual(got, c.expect, c.id);
  }
}

for (const driver of DRIVERS) {
  for (const file of FILES) {
    test(`[${driver}] C21 the shared vectors: every case of ${file}.json agrees`, async () => {
      const doc = load(file);
      assert.ok(doc.cases.length > 0, `${file}.json has no cases`);
      if (file === "commands") await checkCommands(driver, doc);
      else if (file === "replies") await checkReplies(driver, doc);
      else if (file === "errors") await checkErrors(driver, doc);
      else if (file === "refusals") await checkRefusals(driver, doc);
      else checkKeyspace(doc);
    });
  }
}

// Errors are told apart by class, never by name: with the drivers' error classes and this
// package's renamed as a minifier renames them, every error case still agrees.
test("error replies are told apart by class: errors.json agrees with every class renamed as a minifier would", async () => {
  const classes = [ErrorReply, ReplyError, RlockError, ServerError, NotHeldError, DeadlockError, NotAcquiredError, LockLostError, NotAcknowledgedError];
  const names = classes.map((c) => Object.getOwnPropertyDescriptor(c, "name"));
  classes.forEach((c, i) => Object.defineProperty(c, "name", { value: `m${i}`, configurable: true }));
  try {
    for (const driver of DRIVERS) await checkErrors(driver, load("errors"));
  } finally {
    classes.forEach((c, i) => Object.defineProperty(c, "name", names[i]));
  }
});
