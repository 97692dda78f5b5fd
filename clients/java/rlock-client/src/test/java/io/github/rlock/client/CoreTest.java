package io.github.rlock.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The pure core, without a server: plans, checks, replies, errors, the watchdog's schedule. */
class CoreTest {
  private static byte[] b(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void acquirePlansEveryOption() {
    Plan.Acquire plain = new Plan.Acquire(b("k"), null, 30_000, false, false, false);
    assertEquals(List.of("RLOCK.ACQUIRE", "k", "o", "LEASE", "30000", "REQ", "r"), Plan.acquire(plain, b("o"), "r", -1).words());
    Plan.Acquire all = new Plan.Acquire(b("k"), Side.WRITE, 500, true, true, true);
    assertEquals(
        List.of("RLOCK.ACQUIRE", "k", "o", "WRITE", "LEASE", "500", "BLOCK", "0", "FAIR", "TOKEN", "SESSION", "REQ", "r"),
        Plan.acquire(all, b("o"), "r", 0).words());
    Cmd c = Plan.acquire(plain, b("o"), "r", 5000);
    assertEquals(List.of("RLOCK.ACQUIRE", "k", "o", "LEASE", "30000", "BLOCK", "1", "REQ", "r"), c.withBlock(1).words());
    assertArrayEquals(b("k"), c.routeKey());
  }

  @Test
  void releaseRenewAndMultiPlans() {
    assertEquals(List.of("RLOCK.RELEASE", "k", "o", "READ", "REQ", "r"), Plan.release(b("k"), b("o"), Side.READ, "r").words());
    assertEquals(List.of("RLOCK.RENEW", "k", "o", "LEASE", "900", "REQ", "r"), Plan.renew(b("k"), b("o"), null, 900, "r").words());
    Cmd m = Plan.macquire(b("o"), List.of(b("{t}a"), b("{t}b")), 100, 50, true, "r");
    assertEquals(List.of("RLOCK.MACQUIRE", "o", "2", "{t}a", "{t}b", "LEASE", "100", "BLOCK", "50", "SESSION", "REQ", "r"), m.words());
    assertArrayEquals(b("{t}a"), m.routeKey());
    assertEquals(List.of("RLOCK.MRELEASE", "o", "1", "x", "REQ", "r"), Plan.mrelease(b("o"), List.of(b("x")), "r").words());
    assertEquals(List.of("RSEM.LEASE", "s", "LEASE", "10", "PERMITS", "2", "REQ", "r"), Plan.semLease(b("s"), 10, 2, -1, "r").words());
    assertEquals(List.of("RLATCH.AWAIT", "l", "BLOCK", "7"), Plan.latchAwait(b("l"), 7).words());
    assertArrayEquals(b("o:write"), Plan.field(b("o"), Side.WRITE));
    assertEquals("gabc", Plan.giveBackReq("abc"));
    assertEquals(32, Plan.newReq().length());
  }

  @Test
  void guardPlansTheHoldsSideAndToken() {
    assertEquals(
        List.of("RLOCK.GUARD", "k", "o", "CALL", "SET", "{k}:d", "v"),
        Plan.guard(b("k"), b("o"), null, null, Checks.command("SET", "{k}:d", "v")).words());
    assertEquals(
        List.of("RLOCK.GUARD", "k", "o", "WRITE", "TOKEN", "7", "CALL", "GET", "x"),
        Plan.guard(b("k"), b("o"), Side.WRITE, 7L, Checks.command("GET", "x")).words());
    assertThrows(IllegalArgumentException.class, () -> Checks.command());
    assertThrows(IllegalArgumentException.class, () -> Checks.command(" "));
    assertThrows(NullPointerException.class, () -> Checks.command("SET", null));
    StaleTokenException stale =
        assertThrows(StaleTokenException.class, () -> Replies.guarded(new ServerError("STALETOKEN the lock's fencing token is now 8, not 7"), b("k"), b("o")));
    assertEquals("k", stale.key());
    assertInstanceOf(NotHeldException.class, stale);
    assertEquals(List.of("a", 1L), Replies.guarded(List.of(b("a"), 1L), b("k"), b("o")));
  }

  @Test
  void ownersAreRedissonsFormat() {
    assertEquals("1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed:42", Plan.threadOwner("1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed", 42));
  }

  @Test
  void argumentChecks() {
    assertThrows(NullPointerException.class, () -> Checks.name(null, "name"));
    assertThrows(IllegalArgumentException.class, () -> Checks.name("", "name"));
    assertThrows(IllegalArgumentException.class, () -> Checks.owner("é".repeat(513)));
    assertEquals(1024, Checks.owner("x".repeat(1024)).length);
    assertThrows(IllegalArgumentException.class, () -> Checks.leaseMs(Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> Checks.leaseMs(Duration.ofDays(365 * 100)));
    assertEquals(2, Checks.leaseMs(Duration.ofNanos(1_000_001)));
    assertEquals(-1, Checks.waitMs(Duration.ZERO));
    assertEquals(1, Checks.waitMs(Duration.ofNanos(1)));
    assertThrows(IllegalArgumentException.class, () -> Checks.waitMs(Duration.ofMillis(-1)));
    assertEquals(3000, Checks.waitMs(3, TimeUnit.SECONDS));
    assertThrows(IllegalArgumentException.class, () -> Checks.waitMs(-1, TimeUnit.SECONDS));
  }

  @Test
  void slotsAndHashTags() {
    assertEquals(12182, Plan.slot(b("foo")));
    assertEquals(Plan.slot(b("{user1000}.following")), Plan.slot(b("{user1000}.followers")));
    assertEquals(Plan.slot(b("{}x")), Plan.slot(b("{}x")));
    Plan.checkSameSlot(List.of(b("{o}a"), b("{o}b")));
    assertThrows(IllegalArgumentException.class, () -> Plan.checkSameSlot(List.of(b("a"), b("b"))));
  }

  @Test
  void serverErrorsMapToTheFamily() {
    assertInstanceOf(NotHeldException.class, Replies.serverError("NOTHELD the lock is not held by this owner"));
    RlockException d = Replies.serverError("DEADLOCK \"b\" waits for \"k1\" held by \"a\"; \"a\" waits for \"k\\\"2\" kept for \"b\"");
    DeadlockException de = assertInstanceOf(DeadlockException.class, d);
    assertEquals(
        List.of(new DeadlockException.Wait("b", "k1", "a", false), new DeadlockException.Wait("a", "k\"2", "b", true)), de.cycle());
    assertEquals("WRONGTYPE", assertInstanceOf(ServerException.class, Replies.serverError("WRONGTYPE x")).code());
    assertEquals("a\u0001b", Replies.unescape("a\\x01b"));
  }

  @Test
  void repliesAreRead() {
    LockInfo info =
        Replies.info(List.of(b("holders"), List.of(b("o"), 2L), b("pttl"), 900L, b("queue"), List.of(), b("token"), b("7"), b("blocked"), 1L));
    assertEquals(2L, info.holders().get("o"));
    assertEquals(900L, info.pttl());
    assertEquals(7L, info.token());
    assertTrue(info.locked());
    LockInfo free = Replies.info(List.of(b("holders"), List.of(), b("pttl"), -2L, b("blocked"), 0L));
    assertNull(free.pttl());
    assertEquals(2, Replies.connectedReplicas("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n"));
    assertEquals(3L, Replies.stats("# rlock\r\nrlock_tracked_locks:3\r\nx:1.5\r\n").get("rlock_tracked_locks"));
    assertTrue(Replies.blockedIn("id=7 flags=b cmd=rlock.acquire", "RLOCK.ACQUIRE"));
    assertThrows(NotHeldException.class, () -> Replies.ok(new ServerError("NOTHELD x")));
  }

  @Test
  void keyspaceEventsNameLostKeys() {
    assertEquals('K', Replies.eventsOn("Kd"));
    assertEquals('E', Replies.eventsOn("Ed"));
    assertEquals(0, Replies.eventsOn("Kg"));
    assertEquals("k", Replies.lostKey(0, "__keyspace@0__:k", "rlock.forcerelease"));
    assertNull(Replies.lostKey(0, "__keyspace@0__:k", "rlock.acquire"));
    assertEquals("k", Replies.lostKey(0, "__keyevent@0__:expired", "k"));
  }

  @Test
  void watchdogScheduleIsAGridOfAThirdOfTheLease() {
    Renewal r = new Renewal(List.of(b("k")), b("o"), null, 3000, true, 0);
    r.schedule(0, 2_500_000_000L);
    assertEquals(3_000_000_000L, r.nextDueNanos);
    Renewal s = new Renewal(List.of(b("k2")), b("o"), null, 3000, true, 0);
    s.schedule(0, 2_900_000_000L);
    assertEquals(r.nextDueNanos, s.nextDueNanos, "holds of one lease fall due together");
    Renewal fixed = new Renewal(List.of(b("k")), b("o"), null, 500, false, 100);
    assertEquals(100 + 500_000_000L, fixed.dueAt());
  }

  @Test
  void lettuceRepliesOfAnyShape() {
    LettuceTransport.ReplyOutput out = new LettuceTransport.ReplyOutput();
    out.multi(3);
    out.set(ByteBuffer.wrap(b("a")));
    out.multi(2);
    out.set(1L);
    out.set((ByteBuffer) null);
    out.multi(0);
    Object v = out.get();
    assertInstanceOf(List.class, v);
    List<?> l = (List<?>) v;
    assertArrayEquals(b("a"), (byte[]) l.get(0));
    assertEquals(java.util.Arrays.asList(1L, null), l.get(1));
    assertEquals(List.of(), l.get(2));
    LettuceTransport.ReplyOutput one = new LettuceTransport.ReplyOutput();
    one.set(5L);
    assertEquals(5L, one.get());
  }
}
