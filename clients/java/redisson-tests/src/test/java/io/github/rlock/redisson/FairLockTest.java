package io.github.rlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.rlock.testsupport.Threads;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.redisson.api.RLock;

/** Redisson's RFairLock and rlock's FAIR: one queue, first come first served across both. */
class FairLockTest extends BothSides {
  @EachServer
  void oneQueueServedInArrivalOrderWhoeverJoins(Fleet.Node node) throws Exception {
    List<String> served = Collections.synchronizedList(new ArrayList<>());
    List<String> queued = new ArrayList<>();
    List<CompletableFuture<Void>> joiners = new ArrayList<>();
    try (Rlock observer = node.rlock()) {
      assertEquals(1L, observer.acquire(key, "first-holder", "FAIR", "LEASE", 30_000));
      for (int i = 0; i < 4; i++) {
        String name = (i % 2 == 0 ? "redisson-" : "rlock-") + i;
        CompletableFuture<String> owner = new CompletableFuture<>();
        joiners.add(joiner(node, key, name, i % 2 == 0, owner, served));
        String joined = owner.get(5, TimeUnit.SECONDS);
        queued.add(joined);
        int expected = i + 1;
        assertTrue(
            Threads.await(3_000, () -> queue(observer, key).size() == expected),
            () -> name + " not queued: " + queue(observer, key));
      }
      // RLOCK.INFO reads the one queue, Redisson's owners and rlock's, in arrival order.
      assertEquals(queued, queue(observer, key));
      // Only rlock's callers block in the server; Redisson's poll and are not listed.
      assertEquals(2, observer.waiters(key).size());
      assertEquals(1L, observer.release(key, "first-holder"));
      for (CompletableFuture<Void> joiner : joiners) {
        joiner.get(20, TimeUnit.SECONDS);
      }
      assertEquals(List.of("redisson-0", "rlock-1", "redisson-2", "rlock-3"), served);
      assertEquals(List.of(), queue(observer, key));
    }
  }

  /**
   * Joins the queue on a thread of its own, through Redisson's RFairLock or rlock's FAIR: tells
   * its owner, waits up to 15 s, notes that it was served, holds 50 ms and releases.
   */
  private static CompletableFuture<Void> joiner(
      Fleet.Node node,
      String key,
      String name,
      boolean redisson,
      CompletableFuture<String> owner,
      List<String> served) {
    return Threads.start(
        name,
        () -> {
          RLock theirs = node.redisson.getFairLock(key);
          try (Rlock conn = redisson ? null : node.rlock()) {
            String me = redisson ? Owners.redissons(node.redisson) : Owners.mine();
            owner.complete(me);
            boolean granted =
                redisson
                    ? theirs.tryLock(15, 10, TimeUnit.SECONDS)
                    : conn.acquire(key, me, "FAIR", "LEASE", 10_000, "BLOCK", 15_000) != null;
            if (!granted) {
              throw new AssertionError(name + " not served in 15 s");
            }
            served.add(name);
            Threads.sleep(50);
            if (redisson) {
              theirs.unlock();
            } else {
              conn.release(key, me);
            }
          }
          return null;
        });
  }

  @SuppressWarnings("unchecked")
  private static List<Object> queue(Rlock conn, String key) {
    return (List<Object>) conn.info(key).get("queue");
  }
}
