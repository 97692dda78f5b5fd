// The pure functions: arguments, replies, REQ ids, deadlock cycles, slots. No server.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as command from "../dist/esm/command.js";
import { DeadlockError, NotHeldError } from "../dist/esm/index.js";

test("acquire arguments: lease, BLOCK (0 forever, none for 0), keywords, REQ last", () => {
  const a = command.acquire({ key: "k", owner: "o", lease: 100, wait: Infinity, fair: true, fenced: true, session: true, req: "r" });
  assert.deepEqual(a, ["RLOCK.ACQUIRE", "k", "o", "LEASE", "100", "BLOCK", "0", "FAIR", "TOKEN", "SESSION", "REQ", "r"]);
  assert.deepEqual(command.acquire({ key: "k", owner: "o", side: "write", lease: 5, wait: 0, req: "r" }), ["RLOCK.ACQUIRE", "k", "o", "WRITE", "LEASE", "5", "REQ", "r"]);
  assert.deepEqual(command.blockArgs(250), ["BLOCK", "250"]);
});

test("REQ ids are 32 hex characters, new each call", () => {
  const a = command.requestId();
  assert.match(a, /^[0-9a-f]{32}$/);
  assert.notEqual(a, command.requestId());
});

test("argument checks: TypeError for a wrong type, RangeError for a wrong value", () => {
  assert.throws(() => command.checkLease(0), RangeError);
  assert.throws(() => command.checkLease(2 ** 40 + 1), RangeError);
  assert.throws(() => command.checkLease(Infinity), RangeError);
  assert.equal(command.checkLease(0.2), 1, "rounded up, never 0");
  assert.throws(() => command.checkWait(-0.5), RangeError);
  assert.equal(command.checkWait(Infinity), Infinity);
  assert.equal(command.checkWait(0.1), 1, "a wait > 0 never becomes BLOCK 0 (forever)");
  assert.throws(() => command.checkOwner("x".repeat(1025)), RangeError);
  assert.throws(() => command.checkName(null), TypeError);
});

test("a DEADLOCK reply becomes DeadlockError with its cycle; NOTHELD names key and owner", () => {
  const text = '"b" waits for "k1" held by "a"; "a \\"x\\"" waits for "k\\x002" kept for "b"';
  const e = command.serverError(`DEADLOCK ${text}`);
  assert.ok(e instanceof DeadlockError);
  assert.deepEqual(e.cycle, [
    { owner: "b", key: "k1", holder: "a", kept: false },
    { owner: 'a "x"', key: "k\u00002", holder: "b", kept: true },
  ]);
  assert.equal(command.parseCycle('"b" waits for "k1"'), null);
  assert.equal(command.parseCycle('"b" waits for "k1" held by "a" and more'), null);
  assert.equal(command.serverError("DEADLOCK something else").code, "DEADLOCK");
  assert.ok(command.serverError("NOTHELD no", { key: "k", owner: "o" }) instanceof NotHeldError);
  assert.equal(command.serverError("WRONGTYPE Operation against a key").code, "WRONGTYPE");
});

test("replies: acquire null/count, flat maps, INFO text, keyspace flags", () => {
  assert.equal(command.parseAcquire(null), null);
  assert.equal(command.parseAcquire(2), 2);
  assert.throws(() => command.parseAcquire(0));
  assert.deepEqual(command.pairs(["a", 1, "b", "x"]), { a: 1, b: "x" });
  assert.deepEqual(command.parseInfo("# rlock\r\nrlock_acquires:5\r\n"), { rlock_acquires: "5" });
  assert.equal(command.keyspaceEvents("Kd"), "keyspace");
  assert.equal(command.keyspaceEvents("KA"), "keyspace");
  assert.equal(command.keyspaceEvents("Ed"), "keyevent");
  assert.equal(command.keyspaceEvents("KEd"), "keyevent");
  assert.equal(command.keyspaceEvents("Ex"), null);
  assert.equal(command.keyspaceEvents(""), null);
});

test("cluster slots: CRC16 of the hash tag, as Redis computes them", () => {
  assert.equal(command.slotOf("foo"), 12182);
  assert.equal(command.slotOf("{user1000}.following"), command.slotOf("{user1000}.followers"));
  assert.equal(command.slotOf("123456789"), 0x31c3 % 16384);
  assert.equal(command.slotOf("foo{}bar"), command.slotOf("foo{}bar"));
});
