package io.github.rlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.rlock.testsupport.Threads;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.redisson.api.RCountDownLatch;

/** Redisson's RCountDownLatch beside RLATCH.*: a latch opened by either side. */
class LatchTest extends BothSides {
  @EachServer
  void redissonOpensALatchRlockWaitsOn(Fleet.Node node) throws Exception {
    RCountDownLatch latch = node.redisson.getCountDownLatch(key);
    try (Rlock rlock = node.rlock();
        Rlock waiter = node.rlock()) {
      assertTrue(latch.trySetCount(2));
      assertEquals(0L, rlock.integer("RLATCH.TRYSETCOUNT", key, 5));
      assertEquals(2L, rlock.integer("RLATCH.COUNT", key));
      CompletableFuture<Long> passed =
          Threads.start("rlock", () -> waiter.integer("RLATCH.AWAIT", key, "BLOCK", 5_000));
      assertTrue(Threads.await(2_000, () -> rlock.waiters(key).size() == 1));
      latch.countDown();
      assertEquals(
          1L, rlock.integer("RLATCH.COUNT", key), "RLATCH.COUNT after Redisson's countDown");
      assertEquals(0L, rlock.integer("RLATCH.COUNTDOWN", key), "rlock's count-down opens it");
      assertEquals(1L, passed.get(2, TimeUnit.SECONDS));
      assertEquals(0L, latch.getCount());
    }
  }

  @EachServer
  void rlockOpensALatchRedissonWaitsOn(Fleet.Node node) throws Exception {
    RCountDownLatch latch = node.redisson.getCountDownLatch(key);
    try (Rlock rlock = node.rlock();
        Rlock waiter = node.rlock()) {
      assertEquals(1L, rlock.integer("RLATCH.TRYSETCOUNT", key, 2));
      assertFalse(latch.trySetCount(5));
      assertEquals(2L, latch.getCount());
      CompletableFuture<Boolean> redissonWaiter =
          Threads.start("redisson", () -> latch.await(5, TimeUnit.SECONDS));
      CompletableFuture<Long> rlockWaiter =
          Threads.start("rlock", () -> waiter.integer("RLATCH.AWAIT", key, "BLOCK", 5_000));
      Threads.sleep(200);
      assertEquals(1L, rlock.integer("RLATCH.COUNTDOWN", key));
      assertFalse(redissonWaiter.isDone());
      latch.countDown();
      long opened = System.nanoTime();
      assertTrue(redissonWaiter.get(2, TimeUnit.SECONDS));
      assertEquals(1L, rlockWaiter.get(2, TimeUnit.SECONDS));
      System.out.printf(
          "[%s] Redisson latch waiter passed %d ms after the last count-down%n",
          node.flavor, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - opened));
      assertEquals(0L, rlock.integer("RLATCH.COUNT", key));
      assertEquals(1L, rlock.integer("RLATCH.AWAIT", key));
    }
  }
}
