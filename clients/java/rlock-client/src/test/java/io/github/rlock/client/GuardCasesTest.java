package io.github.rlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * C20 guarded writes: {@code hold.guard(...)} sends RLOCK.GUARD; a write lands while the hold
 * stands, and is refused, changing nothing, once the lease ran out, the lock was force-released,
 * or a newer token exists.
 */
class GuardCasesTest extends ServerTestBase {
  /** The data a lock guards, in the lock's slot. */
  static String dataOf(String key) {
    return "{" + key + "}:data";
  }

  /** The lock's and its data's state, as the server's raw replies: a refusal must not change it. */
  static List<String> state(Servers.Server s, String key) throws Exception {
    return List.of(s.call("HGETALL", key), s.call("GET", dataOf(key)));
  }

  /** RLOCK.GUARD calls the server counted (INFO commandstats). */
  static long guardCalls(Servers.Server s) throws Exception {
    String info = s.call("INFO", "commandstats");
    java.util.regex.Matcher m = java.util.regex.Pattern.compile("cmdstat_rlock\\.guard:calls=(\\d+)").matcher(info);
    return m.find() ? Long.parseLong(m.group(1)) : 0;
  }

  @ParameterizedTest(name = "C20 a write through a hold is applied while the hold stands [{0}] [{1}]")
  @MethodSource("targets")
  void c20_appliedWhileHeld(String flavor, Driver driver) throws Exception {
    Servers.Server s = shared(flavor);
    Locks locks = locks(flavor, driver);
    String k = name("c20");
    try (Hold hold = locks.lock(k).acquire().orElseThrow()) {
      assertEquals("OK", hold.guard("SET", dataOf(k), "v1"));
      assertEquals(4L, hold.guard("APPEND", dataOf(k), "+2"));
      assertEquals("v1+2", hold.guard("GET", dataOf(k)));
      ServerException inner = assertThrows(ServerException.class, () -> hold.guard("INCR", dataOf(k)), "the inner command's own error");
      assertEquals("ERR", inner.code());
    }
    assertTrue(s.call("GET", dataOf(k)).contains("v1+2"));
    try (Hold fenced = locks.lock(k, LockOptions.defaults().fenced()).acquire().orElseThrow()) {
      assertEquals("OK", fenced.guard("SET", dataOf(k), "t" + fenced.token()), "with TOKEN, the hold's own");
      assertTrue(s.call("GET", dataOf(k)).contains("t" + fenced.token()));
    }
    RlockReadWriteLock rw = locks.readWriteLock(k + ":rw");
    try (Hold write = rw.writeLock().acquire().orElseThrow()) {
      assertEquals("OK", write.guard("SET", dataOf(k + ":rw"), "w"), "a write hold: WRITE");
    }
    try (Hold read = rw.readLock().acquire().orElseThrow()) {
      assertEquals("w", read.guard("GET", dataOf(k + ":rw")), "a read hold: READ");
    }
  }

  @ParameterizedTest(name = "C20 refused, changing nothing, once the lease has run out [{0}] [{1}]")
  @MethodSource("targets")
  void c20_refusedAfterLease(String flavor, Driver driver) throws Exception {
    Servers.Server s = shared(flavor);
    Locks locks = locks(flavor, driver);
    String k = name("c20lease");
    Hold hold = locks.lock(k, LockOptions.defaults().lease(Duration.ofMillis(300))).acquire().orElseThrow();
    assertEquals("OK", hold.guard("SET", dataOf(k), "before"));
    Thread.sleep(450);
    List<String> before = state(s, k);
    NotHeldException e = assertThrows(NotHeldException.class, () -> hold.guard("SET", dataOf(k), "after"));
    assertFalse(e instanceof StaleTokenException, e.toString());
    assertEquals(k, e.key());
    assertEquals(hold.owner(), e.owner());
    assertEquals(before, state(s, k));
    assertTrue(before.get(1).contains("before"));
  }

  @ParameterizedTest(name = "C20 refused, changing nothing, after RLOCK.FORCERELEASE [{0}] [{1}]")
  @MethodSource("targets")
  void c20_refusedAfterForceRelease(String flavor, Driver driver) throws Exception {
    Servers.Server s = shared(flavor);
    Locks locks = locks(flavor, driver);
    String k = name("c20force");
    Hold hold = locks.lock(k, LockOptions.defaults().fenced()).acquire().orElseThrow();
    assertEquals("OK", hold.guard("SET", dataOf(k), "before"));
    assertTrue(locks.forceRelease(k));
    List<String> before = state(s, k);
    NotHeldException e = assertThrows(NotHeldException.class, () -> hold.guard("SET", dataOf(k), "after"));
    assertFalse(e instanceof StaleTokenException, e.toString());
    assertEquals(before, state(s, k));
    assertTrue(before.get(1).contains("before"));
  }

  @ParameterizedTest(name = "C20 refused, changing nothing, once a newer token exists [{0}] [{1}]")
  @MethodSource("targets")
  void c20_refusedOnceNewerToken(String flavor, Driver driver) throws Exception {
    Servers.Server s = shared(flavor);
    Locks locks = locks(flavor, driver);
    String k = name("c20token");
    String owner = "c20-owner-" + java.util.UUID.randomUUID();
    LockOptions fenced = LockOptions.defaults().fenced().owner(owner);
    Hold first = locks.lock(k, fenced).acquire().orElseThrow();
    assertEquals("OK", first.guard("SET", dataOf(k), "first"));

    // Another owner takes the lock after a force release, and writes: the first is not held.
    assertTrue(locks.forceRelease(k));
    Hold second = locks.lock(k, LockOptions.defaults().fenced().owner(owner + "-other")).acquire().orElseThrow();
    assertTrue(second.token() > first.token());
    assertEquals("OK", second.guard("SET", dataOf(k), "second"));
    List<String> before = state(s, k);
    NotHeldException other = assertThrows(NotHeldException.class, () -> first.guard("SET", dataOf(k), "stale"));
    assertFalse(other instanceof StaleTokenException, other.toString());
    assertEquals(before, state(s, k));
    second.release();

    // The same owner takes it again: it holds the lock, but not as the hold of the old token.
    Hold again = locks.lock(k, fenced).acquire().orElseThrow();
    assertTrue(again.token() > second.token());
    before = state(s, k);
    StaleTokenException stale = assertThrows(StaleTokenException.class, () -> first.guard("SET", dataOf(k), "stale"));
    assertInstanceOf(NotHeldException.class, stale);
    assertEquals(k, stale.key());
    assertEquals(owner, stale.owner());
    assertEquals(before, state(s, k));
    assertTrue(before.get(1).contains("second"));
    assertEquals("OK", again.guard("SET", dataOf(k), "again"), "the newer hold's own token passes");
    assertTrue(s.call("GET", dataOf(k)).contains("again"));
    again.release();
  }

  @ParameterizedTest(name = "C20 bad commands are refused before anything is sent [{0}] [{1}]")
  @MethodSource("targets")
  void c20_badInputSendsNothing(String flavor, Driver driver) throws Exception {
    Servers.Server s = shared(flavor);
    Locks locks = locks(flavor, driver);
    String k = name("c20bad");
    Hold hold = locks.lock(k).acquire().orElseThrow();
    long sent = guardCalls(s);
    assertThrows(IllegalArgumentException.class, () -> hold.guard());
    assertThrows(IllegalArgumentException.class, () -> hold.guard(""));
    assertThrows(NullPointerException.class, () -> hold.guard((String[]) null));
    assertThrows(NullPointerException.class, () -> hold.guard("SET", dataOf(k), null));
    hold.release();
    assertThrows(IllegalStateException.class, () -> hold.guard("SET", dataOf(k), "v"));
    assertEquals(sent, guardCalls(s), "no RLOCK.GUARD reached the server");
  }
}
