package io.github.rlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.rlock.testsupport.Flavor;
import io.github.rlock.testsupport.Threads;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * Who wakes whom: Redisson's pub/sub waiters and rlock's blocked waiters on one lock, and the
 * shares each gets in a mixed fleet (docs/COMMANDS.md, "Sharing with Redisson clients").
 */
class WakeupTest extends BothSides {
  private static final long RUN_MS = 2_000;

  @EachServer
  void aRedissonWaiterIsWokenByAnRlockRelease(Fleet.Node node) throws Exception {
    try (Rlock rlock = node.rlock()) {
      assertEquals(1L, rlock.acquire(key, "rlock-holder", "LEASE", 60_000));
      AtomicLong grantedAt = new AtomicLong();
      RLock lock = node.redisson.getLock(key);
      CompletableFuture<Boolean> waiter =
          Threads.tryAndGiveBack(
              "redisson-waiter",
              () -> {
                boolean got = lock.tryLock(10, 10, TimeUnit.SECONDS);
                grantedAt.set(System.nanoTime());
                return got;
              },
              lock::unlock);
      String channel = "redisson_lock__channel:{" + key + "}";
      assertTrue(
          Threads.await(5_000, () -> subscribers(rlock, channel) >= 1),
          "Redisson never subscribed");
      Threads.sleep(50);
      long releasedAt = System.nanoTime();
      assertEquals(1L, rlock.release(key, "rlock-holder"));
      assertTrue(waiter.get(5, TimeUnit.SECONDS), "the Redisson waiter was not served");
      long ms = TimeUnit.NANOSECONDS.toMillis(grantedAt.get() - releasedAt);
      System.out.printf(
          "[%s] Redisson waiter served %d ms after an rlock release (lease left: 60 s)%n",
          node.flavor, ms);
      assertTrue(
          ms < 1_000, "woken " + ms + " ms after the release: by its own poll, not the message");
    }
  }

  @EachServer
  void anRlockWaiterIsWokenByARedissonUnlock(Fleet.Node node) throws Exception {
    RLock lock = node.redisson.getLock(key);
    lock.lock(60, TimeUnit.SECONDS);
    try (Rlock waiter = node.rlock();
        Rlock observer = node.rlock()) {
      AtomicLong grantedAt = new AtomicLong();
      CompletableFuture<Long> granted =
          Threads.start(
              "rlock-waiter",
              () -> {
                Long reply = waiter.acquire(key, "rlock-waiter", "LEASE", 10_000, "BLOCK", 10_000);
                grantedAt.set(System.nanoTime());
                return reply;
              });
      assertTrue(Threads.await(2_000, () -> observer.waiters(key).size() == 1));
      long unlockedAt = System.nanoTime();
      lock.unlock();
      assertEquals(1L, granted.get(5, TimeUnit.SECONDS));
      double ms = (grantedAt.get() - unlockedAt) / 1e6;
      System.out.printf(
          "[%s] rlock waiter served %.2f ms after a Redisson unlock%n", node.flavor, ms);
      assertTrue(ms < 100, "served " + ms + " ms after the unlock");
      assertEquals(Map.of("rlock-waiter", 1L), observer.holders(key));
      observer.release(key, "rlock-waiter");
    }
  }

  /*
   * The shares. docs/COMMANDS.md promises each listening connection "about the share of one
   * blocked client" (docs/BENCHMARKS.md scenario 9 measured Q ÷ B 1.17 to 1.50 with a Redisson-like
   * client written in Rust). With the real Redisson 3.52.0 in a JVM the figures are lower and a
   * second listening client does not get a share of its own (the 5 ms window is one per round,
   * split between all listeners): see the report printed by each test. These tests check the part
   * that holds, neither side starved (before the sharing rule: 1 acquisition in 1,531), and print
   * the measured shares; the stricter promise is the documented difference, not asserted.
   */
  private static final double NOT_STARVED = 0.05;

  @EachServer
  void oneRedissonThreadBesideThreeBlockedCallersIsNotStarved(Fleet.Node node) throws Exception {
    long[] counts = mixedFleet(node, 1, 1, 3);
    assertNeitherStarved(
        report(node.flavor, "1 Redisson client x 1 thread + 3 rlock BLOCK", counts, 1), counts);
  }

  /** Documents the difference: two listening connections split about one blocked client's share. */
  @EachServer
  void twoRedissonClientsBesideTwoBlockedCallersAreNotStarved(Fleet.Node node) throws Exception {
    long[] counts = mixedFleet(node, 2, 1, 2);
    assertNeitherStarved(
        report(node.flavor, "2 Redisson clients x 1 thread + 2 rlock BLOCK", counts, 2), counts);
  }

  /** The docs' limit: one pub/sub connection for all of a client's threads. */
  @EachServer
  void threeRedissonThreadsOnOneClientBesideThreeBlockedCallersAreNotStarved(Fleet.Node node)
      throws Exception {
    long[] counts = mixedFleet(node, 1, 3, 3);
    assertNeitherStarved(
        report(node.flavor, "1 Redisson client x 3 threads + 3 rlock BLOCK", counts, 3), counts);
  }

  private static void assertNeitherStarved(double[] ratio, long[] counts) {
    String seen = Arrays.toString(counts);
    assertTrue(
        ratio[0] >= NOT_STARVED,
        "Redisson starved: per caller / rlock mean " + ratio[0] + " " + seen);
    assertTrue(
        ratio[1] >= NOT_STARVED,
        "rlock starved: rlock mean / Redisson per caller " + ratio[1] + " " + seen);
  }

  /**
   * Acquisitions per caller, Redisson's first (client by client, thread by thread), then rlock's:
   * every caller loops lock, unlock with nothing in between, for RUN_MS.
   */
  private static long[] mixedFleet(
      Fleet.Node node, int redissonClients, int threadsPerClient, int rlockCallers)
      throws Exception {
    String key = Fleet.name("fleet");
    List<Race.Caller> callers = new ArrayList<>();
    for (int c = 0; c < redissonClients; c++) {
      RedissonClient client = c == 0 ? node.redisson : node.anotherRedisson();
      for (int t = 0; t < threadsPerClient; t++) {
        callers.add(Race.redisson(client, key));
      }
    }
    for (int r = 0; r < rlockCallers; r++) {
      callers.add(Race.rlock(node, key));
    }
    Referee referee = new Referee(1);
    long[] counts = Race.run(RUN_MS, referee, callers);
    assertEquals(0, referee.violations(), "two holders at once");
    assertFalse(node.redisson.getLock(key).isLocked());
    return counts;
  }

  static double minOverMax(long[] counts) {
    long min = Arrays.stream(counts).min().orElse(0);
    long max = Arrays.stream(counts).max().orElse(1);
    return max == 0 ? 0 : (double) min / max;
  }

  /**
   * Prints the shares; returns {Redisson per caller ÷ rlock mean, rlock mean ÷ Redisson per
   * caller}.
   */
  private static double[] report(Flavor flavor, String fleet, long[] counts, int redissonCallers) {
    long total = Arrays.stream(counts).sum();
    double redisson = Arrays.stream(counts, 0, redissonCallers).sum();
    double rlockMean = Arrays.stream(counts, redissonCallers, counts.length).average().orElse(0);
    System.out.printf(
        "[%s] shares, %s, hold 0, %d ms: per caller %s; Redisson share %.3f of %d; Redisson per"
            + " caller / rlock mean %.2f; min/max %.2f%n",
        flavor,
        fleet,
        RUN_MS,
        Arrays.toString(counts),
        redisson / total,
        total,
        redisson / redissonCallers / rlockMean,
        minOverMax(counts));
    double perRedisson = redisson / redissonCallers;
    return new double[] {perRedisson / rlockMean, rlockMean / Math.max(perRedisson, 1e-9)};
  }

  private static long subscribers(Rlock conn, String channel) {
    List<Object> reply = conn.array("PUBSUB", "NUMSUB", channel);
    return (Long) reply.get(1);
  }
}
