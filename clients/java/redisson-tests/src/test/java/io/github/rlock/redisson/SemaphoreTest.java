package io.github.rlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.rlock.testsupport.Threads;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;

/** Redisson's RSemaphore and RPermitExpirableSemaphore beside RSEM.*. */
class SemaphoreTest extends BothSides {
  private static final int PERMITS = 3;

  @EachServer
  void eachSideWakesTheOthersWaiters(Fleet.Node node) throws Exception {
    RSemaphore semaphore = node.redisson.getSemaphore(key);
    try (Rlock rlock = node.rlock();
        Rlock waiter = node.rlock()) {
      assertTrue(semaphore.trySetPermits(1));
      assertEquals(
          0L, rlock.integer("RSEM.TRYSETPERMITS", key, 5), "RSEM.TRYSETPERMITS over Redisson's");
      assertEquals(1L, rlock.integer("RSEM.AVAILABLE", key));
      assertEquals(1L, rlock.integer("RSEM.ACQUIRE", key));
      assertEquals(0, semaphore.availablePermits());
      // Redisson's waiter (pub/sub) woken by RSEM.RELEASE.
      CompletableFuture<Boolean> redissonWaiter =
          Threads.start("redisson", () -> semaphore.tryAcquire(5, TimeUnit.SECONDS));
      Threads.sleep(200);
      assertFalse(redissonWaiter.isDone());
      long released = System.nanoTime();
      assertEquals(1L, rlock.integer("RSEM.RELEASE", key));
      assertTrue(redissonWaiter.get(3, TimeUnit.SECONDS));
      System.out.printf(
          "[%s] Redisson semaphore waiter served %d ms after RSEM.RELEASE%n",
          node.flavor, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - released));
      // rlock's blocked waiter woken by Redisson's release (an INCRBY the module polls for).
      AtomicLong grantedAt = new AtomicLong();
      CompletableFuture<Long> rlockWaiter =
          Threads.start(
              "rlock",
              () -> {
                Long r = waiter.integer("RSEM.ACQUIRE", key, "BLOCK", 5_000);
                grantedAt.set(System.nanoTime());
                return r;
              });
      assertTrue(Threads.await(2_000, () -> rlock.waiters(key).size() == 1));
      assertEquals("permits", rlock.waiters(key).get(0).get("kind"));
      long redissonReleased = System.nanoTime();
      semaphore.release();
      assertEquals(1L, rlockWaiter.get(3, TimeUnit.SECONDS));
      long ms = TimeUnit.NANOSECONDS.toMillis(grantedAt.get() - redissonReleased);
      System.out.printf(
          "[%s] RSEM.ACQUIRE BLOCK served %d ms after Redisson's release%n", node.flavor, ms);
      assertTrue(ms < 500, "served " + ms + " ms after Redisson's release");
      assertEquals(1L, rlock.integer("RSEM.RELEASE", key));
      assertEquals(1, semaphore.availablePermits());
    }
  }

  @EachServer
  void capacityNeverExceededAndPermitsConserved(Fleet.Node node) throws Exception {
    try (Rlock rlock = node.rlock()) {
      assertEquals(1L, rlock.integer("RSEM.TRYSETPERMITS", key, PERMITS));
      assertEquals(PERMITS, node.redisson.getSemaphore(key).availablePermits());
      Referee referee = new Referee(PERMITS);
      List<Race.Caller> callers = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        callers.add(
            Race.on(
                () -> node.redisson.getSemaphore(key),
                (semaphore, r) -> {
                  int n = permitsOfThisThread();
                  if (!semaphore.tryAcquire(n, 10, TimeUnit.SECONDS)) {
                    throw new AssertionError("Redisson waited 10 s");
                  }
                  stayInside(r, n);
                  semaphore.release(n);
                }));
        callers.add(
            Race.on(
                node::rlock,
                (conn, r) -> {
                  int n = permitsOfThisThread();
                  if (conn.integer("RSEM.ACQUIRE", key, "PERMITS", n, "BLOCK", 10_000) == null) {
                    throw new AssertionError("rlock waited 10 s");
                  }
                  stayInside(r, n);
                  conn.integer("RSEM.RELEASE", key, "PERMITS", n);
                }));
      }
      long[] counts = Race.run(1_500, referee, callers);
      System.out.printf(
          "[%s] semaphore of %d, Redisson and rlock alternating: %s, most inside %d%n",
          node.flavor, PERMITS, Arrays.toString(counts), referee.most());
      assertEquals(0, referee.violations(), "more than " + PERMITS + " permits out");
      for (long c : counts) {
        assertTrue(c > 0, "a caller starved: " + Arrays.toString(counts));
      }
      assertEquals((long) PERMITS, rlock.integer("RSEM.AVAILABLE", key), "permits lost or made");
      assertEquals(PERMITS, node.redisson.getSemaphore(key).availablePermits());
    }
  }

  /** 1 or 2, by the thread: callers take different numbers of permits. */
  private static int permitsOfThisThread() {
    return 1 + (int) (Thread.currentThread().getId() % 2);
  }

  private static void stayInside(Referee referee, int permits) throws InterruptedException {
    referee.enter(permits);
    Thread.sleep(0, 300_000);
    referee.leave(permits);
  }

  @EachServer
  void leasedPermitsAreSharedBothWays(Fleet.Node node) throws Exception {
    RPermitExpirableSemaphore semaphore = node.redisson.getPermitExpirableSemaphore(key);
    try (Rlock rlock = node.rlock()) {
      assertTrue(semaphore.trySetPermits(2));
      String redissonId = semaphore.acquire(10, TimeUnit.SECONDS);
      List<Object> leased = rlock.array("RSEM.LEASE", key, "LEASE", 10_000);
      assertEquals(1, leased.size());
      String rlockId = (String) leased.get(0);
      assertEquals(32, rlockId.length(), "rlock shows ids as Redisson does: " + rlockId);
      assertNull(rlock.array("RSEM.LEASE", key, "LEASE", 10_000), "a third permit out of two");
      assertNull(semaphore.tryAcquire(), "Redisson took a third permit out of two");
      assertEquals(0L, rlock.integer("RSEM.AVAILABLE", key));
      assertEquals(0, semaphore.availablePermits());
      // Each side renews and gives back the other's lease.
      assertTrue(
          semaphore.updateLeaseTime(rlockId, 20, TimeUnit.SECONDS),
          "Redisson renews rlock's lease");
      assertEquals(
          1L,
          rlock.integer("RSEM.RENEW", key, redissonId, "LEASE", 20_000),
          "rlock renews Redisson's");
      semaphore.release(rlockId);
      assertEquals(1L, rlock.integer("RSEM.RETURN", key, redissonId));
      assertEquals(0L, rlock.integer("RSEM.RETURN", key, redissonId), "returned twice");
      assertEquals(2L, rlock.integer("RSEM.AVAILABLE", key));
      assertEquals(2, semaphore.availablePermits());
    }
  }

  /** A module lease that ends comes back by the module's timer and wakes Redisson's waiter. */
  @EachServer
  void anEndedRlockLeaseWakesARedissonWaiter(Fleet.Node node) throws Exception {
    RPermitExpirableSemaphore semaphore = node.redisson.getPermitExpirableSemaphore(key);
    try (Rlock rlock = node.rlock()) {
      assertTrue(semaphore.trySetPermits(1));
      assertEquals(1, rlock.array("RSEM.LEASE", key, "LEASE", 400).size());
      long leasedAt = System.nanoTime();
      CompletableFuture<String> waiter =
          Threads.start(
              "redisson", () -> semaphore.tryAcquire(5_000, 5_000, TimeUnit.MILLISECONDS));
      String id = waiter.get(6, TimeUnit.SECONDS);
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - leasedAt);
      System.out.printf(
          "[%s] Redisson permit waiter served %d ms after a 400 ms rlock lease began%n",
          node.flavor, ms);
      assertTrue(id != null && ms >= 350 && ms < 1_500, "served after " + ms + " ms: " + id);
      semaphore.release(id);
    }
  }
}
