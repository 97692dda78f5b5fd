package io.github.rlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.rlock.testsupport.Threads;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.redisson.api.RLock;

/** Redisson's RLock and rlock's RLOCK.ACQUIRE on one name. */
class LockTest extends BothSides {
  @EachServer
  void aRedissonHoldIsReadAndRespectedByRlock(Fleet.Node node) throws Exception {
    RLock lock = node.redisson.getLock(key);
    try (Rlock rlock = node.rlock()) {
      lock.lock();
      lock.lock();
      String owner = Owners.redissons(node.redisson);
      assertEquals(
          Map.of(owner, 2L), rlock.holders(key), "RLOCK.INFO holders of a Redisson re-entry");
      long pttl = (Long) rlock.info(key).get("pttl");
      assertTrue(pttl > 0 && pttl <= Fleet.WATCHDOG_MS, "watchdog lease, got pttl " + pttl);
      assertNull(
          rlock.acquire(key, Owners.mine(), "LEASE", 5000), "rlock took a lock Redisson holds");
      lock.unlock();
      assertEquals(Map.of(owner, 1L), rlock.holders(key));
      lock.unlock();
      assertEquals(Map.of(), rlock.holders(key));
      assertEquals(1L, rlock.acquire(key, Owners.mine(), "LEASE", 5000));
      rlock.release(key, Owners.mine());
    }
  }

  @EachServer
  void anRlockHoldIsReadAndRespectedByRedisson(Fleet.Node node) throws Exception {
    RLock lock = node.redisson.getLock(key);
    try (Rlock rlock = node.rlock()) {
      String owner = Owners.mine();
      assertEquals(1L, rlock.acquire(key, owner, "LEASE", 10_000));
      assertEquals(2L, rlock.acquire(key, owner, "LEASE", 10_000));
      // Another Redisson thread: refused, and it reads the hold and its lease.
      boolean[] seen =
          Threads.start(
                  "redisson",
                  () ->
                      new boolean[] {lock.tryLock(), lock.isLocked(), lock.isHeldByCurrentThread()})
              .get(10, TimeUnit.SECONDS);
      assertFalse(seen[0], "Redisson took a lock rlock holds");
      assertTrue(seen[1], "isLocked");
      assertFalse(seen[2], "isHeldByCurrentThread on another thread");
      long ttl = lock.remainTimeToLive();
      assertTrue(ttl > 9_000 && ttl <= 10_000, "remainTimeToLive " + ttl);
      assertEquals(0, lock.getHoldCount(), "getHoldCount for a thread that holds nothing");
      assertEquals(1L, rlock.release(key, owner) + 1, "re-entry undone");
      assertEquals(Map.of(owner, 1L), rlock.holders(key));
      rlock.release(key, owner);
      assertFalse(lock.isLocked());
    }
  }

  /** CLIENTS.md C18: rlock with Redisson's own owner for this thread is the same holder. */
  @EachServer
  void redissonsOwnerIsOneHolderAcrossBoth(Fleet.Node node) throws Exception {
    RLock lock = node.redisson.getLock(key);
    try (Rlock rlock = node.rlock()) {
      String owner = Owners.redissons(node.redisson);
      lock.lock(20, TimeUnit.SECONDS);
      assertEquals(
          2L, rlock.acquire(key, owner, "LEASE", 20_000), "rlock re-enters Redisson's hold");
      assertEquals(2, lock.getHoldCount());
      assertTrue(lock.isHeldByCurrentThread());
      long ttl = lock.remainTimeToLive();
      assertTrue(ttl > 19_000 && ttl <= 20_000, "remainTimeToLive " + ttl);
      lock.unlock();
      assertEquals(Map.of(owner, 1L), rlock.holders(key));
      assertEquals(1L, rlock.release(key, owner));
      assertFalse(lock.isLocked());
    }
  }

  /** forceUnlock deletes an rlock hold, and the waiter blocked in the server gets it at once. */
  @EachServer
  void redissonsForceUnlockFreesAnRlockHoldForItsWaiter(Fleet.Node node) throws Exception {
    try (Rlock holder = node.rlock();
        Rlock waiter = node.rlock()) {
      assertEquals(1L, holder.acquire(key, "holder", "LEASE", 60_000));
      CompletableFuture<Long> granted =
          Threads.start(
              "waiter", () -> waiter.acquire(key, "waiter", "LEASE", 60_000, "BLOCK", 10_000));
      assertTrue(Threads.await(2_000, () -> holder.waiters(key).size() == 1));
      assertTrue(node.redisson.getLock(key).forceUnlock());
      assertEquals(1L, granted.get(1, TimeUnit.SECONDS));
      assertEquals(Map.of("waiter", 1L), holder.holders(key));
      assertEquals(1L, holder.forceRelease(key));
    }
  }

  /** A Redisson holder on its watchdog keeps the lock for several leases while rlock waits. */
  @EachServer
  void redissonsWatchdogKeepsItsHoldWhileRlockWaits(Fleet.Node node) throws Exception {
    CompletableFuture<String> held = new CompletableFuture<>();
    CompletableFuture<Void> unlock = new CompletableFuture<>();
    CompletableFuture<Void> holder =
        holdElsewhere(node, node.redisson.getLock(key), held, unlock);
    String holderOwner = held.get(5, TimeUnit.SECONDS);
    try (Rlock waiter = node.rlock();
        Rlock observer = node.rlock()) {
      checkWatchdogHold(key, holderOwner, waiter, observer, unlock);
    } finally {
      unlock.complete(null);
    }
    holder.get(5, TimeUnit.SECONDS);
  }

  private static void checkWatchdogHold(
      String key, String holderOwner, Rlock waiter, Rlock observer, CompletableFuture<Void> unlock)
      throws Exception {
    String owner = "rlock-waiter";
    long waiterId = waiter.clientId();
    CompletableFuture<Long> granted =
        Threads.start(
            "rlock-waiter", () -> waiter.acquire(key, owner, "LEASE", 30_000, "BLOCK", 20_000));
    assertTrue(Threads.await(2_000, () -> observer.waiters(key).size() == 1));
    Map<String, Object> entry = observer.waiters(key).get(0);
    assertEquals(owner, entry.get("owner"));
    assertEquals("lock", entry.get("kind"));
    assertEquals(waiterId, entry.get("client-id"));
    assertEquals(1L, observer.info(key).get("blocked"), () -> "RLOCK.INFO " + observer.info(key));
    Threads.sleep(Fleet.WATCHDOG_MS * 2 + 500);
    assertFalse(granted.isDone(), "the waiter was served while the Redisson holder renewed");
    assertEquals(Map.of(holderOwner, 1L), observer.holders(key));
    // Timed from before the holder is told: the hand-off measured includes its wake-up.
    long unlockedAt = System.nanoTime();
    unlock.complete(null);
    assertEquals(1L, granted.get(2, TimeUnit.SECONDS));
    long handoffMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - unlockedAt);
    assertTrue(handoffMs < 500, "served " + handoffMs + " ms after the unlock");
    assertEquals(Map.of(owner, 1L), observer.holders(key));
    observer.release(key, owner);
  }

  /** Three Redisson threads and three rlock callers loop on one lock: one holder at a time. */
  @EachServer
  void bothSidesExcludeEachOtherUnderContention(Fleet.Node node) throws Exception {
    List<Race.Caller> callers = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      callers.add(Race.redisson(node.redisson, key));
    }
    for (int i = 0; i < 3; i++) {
      callers.add(exactRlockCaller(node, key));
    }
    Referee referee = new Referee(1);
    long[] counts = Race.run(1_500, referee, callers);
    System.out.printf(
        "[%s] contention, 3 Redisson threads + 3 rlock BLOCK callers: %s%n",
        node.flavor, java.util.Arrays.toString(counts));
    assertEquals(0, referee.violations(), "two holders at once");
    for (long c : counts) {
      assertTrue(c > 0, "a caller starved: " + java.util.Arrays.toString(counts));
    }
    assertFalse(node.redisson.getLock(key).isLocked());
  }

  /**
   * An rlock caller that also checks, inside each hold, that its count is exactly 1 and re-enters
   * once.
   */
  private static Race.Caller exactRlockCaller(Fleet.Node node, String key) {
    return Race.on(
        () -> Race.Seat.of(node),
        (seat, referee) -> {
          Rlock conn = seat.conn();
          String owner = seat.owner();
          if (conn.acquire(key, owner, "LEASE", 10_000, "BLOCK", 10_000) == null) {
            throw new AssertionError("rlock waited 10 s");
          }
          referee.enter(1);
          assertEquals(Map.of(owner, 1L), conn.holders(key));
          assertEquals(2L, conn.acquire(key, owner, "LEASE", 10_000));
          assertEquals(0L, conn.release(key, owner));
          referee.leave(1);
          assertEquals(1L, conn.release(key, owner));
        });
  }
}
