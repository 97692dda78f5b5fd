// The pure layer (src/core/): arguments, command plans, replies, errors, keyspace events. No server.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as args from "../dist/esm/core/args.js";
import * as commands from "../dist/esm/core/commands.js";
import * as replies from "../dist/esm/core/replies.js";
import * as events from "../dist/esm/core/events.js";
import { DeadlockError, NoReplyError, NotHeldError, RlockError, ServerError, StaleTokenError } from "../dist/esm/index.js";

test("acquire arguments: lease, BLOCK (0 forever, none for 0), keywords, REQ last", () => {
  const a = commands.acquire({ key: "k", owner: "o", lease: 100, wait: Infinity, fair: true, fenced: true, session: true, req: "r" });
  assert.deepEqual(a, ["RLOCK.ACQUIRE", "k", "o", "LEASE", "100", "BLOCK", "0", "FAIR", "TOKEN", "SESSION", "REQ", "r"]);
  assert.deepEqual(commands.acquire({ key: "k", owner: "o", side: "write", lease: 5, wait: 0, req: "r" }), ["RLOCK.ACQUIRE", "k", "o", "WRITE", "LEASE", "5", "REQ", "r"]);
  assert.deepEqual(commands.blockArgs(250), ["BLOCK", "250"]);
});

test("an acquire's plan: HGET of the count when fenced, WAIT when replicas are wanted; the retry has no BLOCK, FAIR or SESSION and the same REQ id", () => {
  const plan = commands.acquirePlan({ key: "k", owner: "o", side: undefined, lease: 100, fair: true, fenced: true, session: true, req: "r" }, 1, 1000);
  assert.deepEqual(plan.send(50), [
    ["RLOCK.ACQUIRE", "k", "o", "LEASE", "100", "BLOCK", "50", "FAIR", "TOKEN", "SESSION", "REQ", "r"],
    ["HGET", "k", "o"],
    ["WAIT", "1", "1000"],
  ]);
  assert.deepEqual(plan.retry, ["RLOCK.ACQUIRE", "k", "o", "LEASE", "100", "TOKEN", "REQ", "r"]);
  assert.deepEqual(commands.acquirePlan({ key: "k", owner: "o", side: "write", lease: 100, req: "r" }, 0, 1000).send(0), [["RLOCK.ACQUIRE", "k", "o", "WRITE", "LEASE", "100", "REQ", "r"]]);
  assert.equal(commands.replicasWanted(undefined, 3), 1);
  assert.equal(commands.replicasWanted(undefined, 0), 0);
  assert.equal(commands.replicasWanted(2, 0), 2);
});

test("multi-key calls carry REQ: MACQUIRE and MRELEASE", () => {
  assert.deepEqual(commands.macquire({ owner: "o", keys: ["{a}1", "{a}2"], lease: 30, wait: 0, session: true, req: "r" }), ["RLOCK.MACQUIRE", "o", "2", "{a}1", "{a}2", "LEASE", "30", "SESSION", "REQ", "r"]);
  assert.deepEqual(commands.macquire({ owner: "o", keys: ["x"], lease: 30, wait: Infinity, req: "r" }), ["RLOCK.MACQUIRE", "o", "1", "x", "LEASE", "30", "BLOCK", "0", "REQ", "r"]);
  assert.deepEqual(commands.mrelease("o", ["x", "y"], "q"), ["RLOCK.MRELEASE", "o", "2", "x", "y", "REQ", "q"]);
  assert.equal(commands.keyOf(commands.mrelease("o", ["x", "y"], "q")), "x");
});

test("REQ ids are 32 hex characters, new each call", () => {
  const a = commands.requestId();
  assert.match(a, /^[0-9a-f]{32}$/);
  assert.notEqual(a, commands.requestId());
});

test("argument checks: TypeError for a wrong type, RangeError for a wrong value", () => {
  assert.throws(() => args.checkLease(0), RangeError);
  assert.throws(() => args.checkLease(2 ** 40 + 1), RangeError);
  assert.throws(() => args.checkLease(Infinity), RangeError);
  assert.equal(args.checkLease(0.2), 1, "rounded up, never 0");
  assert.throws(() => args.checkWait(-0.5), RangeError);
  assert.equal(args.checkWait(Infinity), Infinity);
  assert.equal(args.checkWait(0.1), 1, "a wait > 0 never becomes BLOCK 0 (forever)");
  assert.throws(() => args.checkOwner("x".repeat(1025)), RangeError);
  assert.throws(() => args.checkName(null), TypeError);
  assert.throws(() => args.settings({ leese: 1 }), TypeError);
  assert.throws(() => args.checkMultiNames([], undefined), RangeError);
  assert.deepEqual(args.checkMultiNames(["b", "a", "b"], undefined), ["a", "b"], "sorted, each once");
  assert.throws(() => args.checkMultiNames(["a", "b"], () => false), RangeError);
  assert.throws(() => args.permitOptions({ permits: 0 }, new Set(["permits"])), RangeError);
  assert.throws(() => args.acquireSignal({ signal: "now" }), TypeError);
});

test("a DEADLOCK reply becomes DeadlockError with its cycle; NOTHELD names key and owner; others are ServerError with their code", () => {
  const text = '"b" waits for "k1" held by "a"; "a \\"x\\"" waits for "k\\x002" kept for "b"';
  const e = replies.serverError(`DEADLOCK ${text}`);
  assert.ok(e instanceof DeadlockError);
  assert.deepEqual(e.cycle, [
    { owner: "b", key: "k1", holder: "a", kept: false },
    { owner: 'a "x"', key: "k\u00002", holder: "b", kept: true },
  ]);
  assert.equal(replies.parseCycle('"b" waits for "k1"'), null);
  assert.equal(replies.parseCycle('"b" waits for "k1" held by "a" and more'), null);
  assert.equal(replies.serverError("DEADLOCK something else").code, "DEADLOCK");
  assert.ok(replies.serverError("NOTHELD no", { key: "k", owner: "o" }) instanceof NotHeldError);
  const wrong = replies.serverError("WRONGTYPE Operation against a key");
  assert.ok(wrong instanceof ServerError);
  assert.equal(wrong.code, "WRONGTYPE");
  assert.ok(replies.notHeld(replies.serverError("NOTHELD no"), "k", "o") instanceof NotHeldError);
});

test("a guarded command's plan: the hold's key, owner, side and token, then CALL and the command as given", () => {
  assert.deepEqual(commands.guard("k", "o", undefined, null, ["SET", "x", "1"]), ["RLOCK.GUARD", "k", "o", "CALL", "SET", "x", "1"]);
  assert.deepEqual(commands.guard("k", "o", "write", 7, ["HSET", "h", "f", "v"]), ["RLOCK.GUARD", "k", "o", "WRITE", "TOKEN", "7", "CALL", "HSET", "h", "f", "v"]);
  assert.deepEqual(commands.guard("k", "o", "read", null, ["GET", "TOKEN"]), ["RLOCK.GUARD", "k", "o", "READ", "CALL", "GET", "TOKEN"], "words after CALL are the command's, even option names");
  assert.deepEqual(commands.guard("k", "o", undefined, 0, ["PING"]), ["RLOCK.GUARD", "k", "o", "TOKEN", "0", "CALL", "PING"]);
  assert.equal(commands.keyOf(commands.guard("lock", "o", undefined, 3, ["SET", "other", "v"])), "lock", "routed by the lock's key");
});

test("a guarded command is words or one array of words, every one a string: TypeError otherwise, RangeError for an empty name", () => {
  assert.deepEqual(args.checkGuarded(["SET", "k", "v"]), ["SET", "k", "v"]);
  assert.deepEqual(args.checkGuarded([["SET", "k", "v"]]), ["SET", "k", "v"]);
  assert.deepEqual(args.checkGuarded([["PING"]]), ["PING"]);
  assert.deepEqual(args.checkGuarded(["SET", "k", ""]), ["SET", "k", ""], "an empty argument is an argument");
  assert.throws(() => args.checkGuarded([]), TypeError);
  assert.throws(() => args.checkGuarded([[]]), TypeError);
  assert.throws(() => args.checkGuarded(["SET", "k", 1]), TypeError);
  assert.throws(() => args.checkGuarded(["SET", "k", Buffer.from("v")]), TypeError);
  assert.throws(() => args.checkGuarded([["SET", "k"], "v"]), TypeError, "an array and more words");
  assert.throws(() => args.checkGuarded([["SET", ["k"]]]), TypeError);
  assert.throws(() => args.checkGuarded([null]), TypeError);
  assert.throws(() => args.checkGuarded([""]), RangeError);
});

test("a guard's refusals: NOTHELD is NotHeldError, STALETOKEN a StaleTokenError (a NotHeldError) with the token now; other errors as they are", () => {
  const notHeld = replies.guardRefusal(replies.serverError("NOTHELD the lock is not held by this owner"), "k", "o", null);
  assert.ok(notHeld instanceof NotHeldError && !(notHeld instanceof StaleTokenError));
  assert.equal(notHeld.key, "k");
  assert.equal(notHeld.owner, "o");
  assert.equal(notHeld.code, "NOTHELD");
  assert.match(notHeld.message, /guarded command was not run/);
  const stale = replies.guardRefusal(replies.serverError("STALETOKEN the lock's fencing token is now 8, not 7"), "k", "o", 7);
  assert.ok(stale instanceof StaleTokenError && stale instanceof NotHeldError);
  assert.deepEqual([stale.key, stale.owner, stale.token, stale.current, stale.code], ["k", "o", 7, 8, "STALETOKEN"]);
  const none = replies.guardRefusal(replies.serverError("STALETOKEN the lock has no fencing token, not 7"), "k", "o", 7);
  assert.ok(none instanceof StaleTokenError);
  assert.equal(none.current, null);
  const inner = replies.serverError("WRONGTYPE Operation against a key holding the wrong kind of value");
  assert.equal(replies.guardRefusal(inner, "k", "o", 7), inner, "the inner command's own error passes through");
  const broken = new Error("socket closed");
  assert.equal(replies.guardRefusal(broken, "k", "o", null), broken);
});

test("a broken connection or a deadline is no reply; a server error is one", () => {
  assert.equal(replies.isBroken(new Error("socket closed")), true);
  assert.equal(replies.isBroken(new NoReplyError("no reply within 2000 ms")), true);
  assert.equal(replies.isBroken(new ServerError("ERR x", { code: "ERR" })), false);
  assert.equal(replies.isBroken(new RlockError("x")), false);
  assert.equal(replies.isBroken(1), false);
  assert.equal(replies.isBroken(null), false);
});

test("replies: acquire null/count, a grant's token, count and acks, renewals, flat maps, INFO text", () => {
  assert.equal(replies.parseAcquire(null), null);
  assert.equal(replies.parseAcquire(2), 2);
  assert.throws(() => replies.parseAcquire(0));
  assert.deepEqual(replies.readGrant([7, "1", 1], true, 1), { token: 7, holdCount: 1, acked: 1 });
  assert.deepEqual(replies.readGrant([2], false, 0), { token: null, holdCount: 2, acked: null });
  assert.deepEqual(replies.readGrant([7, null, 0], true, 1), { token: 7, holdCount: null, acked: 0 });
  assert.equal(replies.readGrant([null, null], true, 0), null);
  assert.throws(() => replies.readGrant([new ServerError("WRONGTYPE x", { code: "WRONGTYPE" })], false, 0), ServerError);
  assert.equal(replies.renewal(1), "renewed");
  assert.equal(replies.renewal(0), "lost");
  assert.equal(replies.renewal(new ServerError("WRONGTYPE x", { code: "WRONGTYPE" })), "lost");
  assert.equal(replies.renewal(new ServerError("LOADING x", { code: "LOADING" })), "retry");
  assert.equal(replies.renewal(new Error("socket closed")), "retry");
  assert.deepEqual(replies.pairs(["a", 1, "b", "x"]), { a: 1, b: "x" });
  assert.deepEqual(replies.parseInfo("# rlock\r\nrlock_acquires:5\r\n"), { rlock_acquires: "5" });
});

test("an election's leader is RLOCK.INFO's one holder, with the fencing counter as its term", () => {
  const held = replies.readLockInfo(["blocked", 0, "holders", ["alice", "1"], "pttl", 29000, "queue", [], "token", 4]);
  assert.deepEqual(replies.leaderOf(held), { value: "alice", term: 4 });
  assert.equal(replies.leaderOf(replies.readLockInfo(["blocked", 0, "holders", [], "pttl", -2, "queue", [], "token", 4])), null);
  assert.equal(replies.leaderOf(replies.readLockInfo(["holders", ["a", "1", "b", "1"], "pttl", 100, "queue", [], "token", null, "mode", "read"])), null);
});

test("keyspace flags: the subscription mode; loss events by channel and message", () => {
  assert.equal(events.eventMode("Kd"), "keyspace");
  assert.equal(events.eventMode("KA"), "keyspace");
  assert.equal(events.eventMode("Ed"), "keyevent");
  assert.equal(events.eventMode("KEd"), "keyspace", "K wins: it hears only the keys held");
  assert.equal(events.eventMode("Ex"), null);
  assert.equal(events.eventMode(""), null);
  assert.equal(events.lossKey(0, "__keyspace@0__:k", "rlock.forcerelease"), "k");
  assert.equal(events.lossKey(0, "__keyspace@0__:k", "pexpire"), null);
  assert.equal(events.lossKey(0, "__keyspace@1__:k", "del"), null);
  assert.equal(events.lossKey(0, "__keyevent@0__:del", "k"), "k");
  assert.deepEqual(events.eventChannels("keyspace", 3, "k"), ["__keyspace@3__:k"]);
  assert.ok(events.eventChannels("keyevent", 0).every((c) => c.startsWith("__keyevent@0__:")));
});

test("cluster slots: CRC16 of the hash tag, as Redis computes them", () => {
  assert.equal(commands.slotOf("foo"), 12182);
  assert.equal(commands.slotOf("{user1000}.following"), commands.slotOf("{user1000}.followers"));
  assert.equal(commands.slotOf("123456789"), 0x31c3 % 16384);
  assert.equal(commands.slotOf("foo{}bar"), commands.slotOf("foo{}bar"));
});
