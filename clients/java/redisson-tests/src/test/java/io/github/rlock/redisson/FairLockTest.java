package io.github.rlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.rlock.testsupport.EachFlavor;
import io.github.rlock.testsupport.Flavor;
import io.github.rlock.testsupport.Threads;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.redisson.api.RLock;

/** Redisson's RFairLock and rlock's FAIR: one queue, first come first served across both. */
class FairLockTest {

  @EachFlavor
  void oneQueueServedInArrivalOrderWhoeverJoins(Flavor flavor) throws Exception {
    Fleet.Node node = Fleet.of(flavor);
    String key = Fleet.name("fair");
    List<String> served = Collections.synchronizedList(new ArrayList<>());
    List<String> queued = new ArrayList<>();
    List<CompletableFuture<Void>> joiners = new ArrayList<>();
    try (Rlock observer = node.rlock()) {
      assertEquals(1L, observer.acquire(key, "first-holder", "FAIR", "LEASE", 30_000));
      for (int i = 0; i < 4; i++) {
        String name = (i % 2 == 0 ? "redisson-" : "rlock-") + i;
        CompletableFuture<String> owner = new CompletableFuture<>();
        joiners.add(
            i % 2 == 0
                ? redissonJoiner(node, key, name, owner, served)
                : rlockJoiner(node, key, name, owner, served));
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

  private static CompletableFuture<Void> redissonJoiner(
      Fleet.Node node,
      String key,
      String name,
      CompletableFuture<String> owner,
      List<String> served) {
    return Threads.start(
        name,
        () -> {
          RLock lock = node.redisson.getFairLock(key);
          owner.complete(Owners.redissons(node.redisson));
          if (!lock.tryLock(15, 10, TimeUnit.SECONDS)) {
            throw new AssertionError(name + " not served in 15 s");
          }
          served.add(name);
          Threads.sleep(50);
          lock.unlock();
          return null;
        });
  }

  private static CompletableFuture<Void> rlockJoiner(
      Fleet.Node node,
      String key,
      String name,
      CompletableFuture<String> owner,
      List<String> served) {
    return Threads.start(
        name,
        () -> {
          try (Rlock conn = node.rlock()) {
            String me = Owners.mine();
            owner.complete(me);
            if (conn.acquire(key, me, "FAIR", "LEASE", 10_000, "BLOCK", 15_000) == null) {
              throw new AssertionError(name + " not served in 15 s");
            }
            served.add(name);
            Threads.sleep(50);
            conn.release(key, me);
          }
          return null;
        });
  }

  @SuppressWarnings("unchecked")
  private static List<Object> queue(Rlock conn, String key) {
    return (List<Object>) conn.info(key).get("queue");
  }
}
