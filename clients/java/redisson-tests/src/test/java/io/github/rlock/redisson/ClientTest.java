package io.github.rlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.rlock.client.Hold;
import io.github.rlock.client.LockInfo;
import io.github.rlock.client.Locks;
import io.github.rlock.client.RlockLock;
import io.github.rlock.testsupport.Threads;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.redisson.api.RLock;

/** The rlock-client jar (io.github.rlock.client) beside Redisson's RLock on one name. */
class ClientTest extends BothSides {
  private static Locks locks(Fleet.Node node, Locks.Options options) {
    return Locks.create(
        node.lettuce, io.lettuce.core.RedisURI.create("127.0.0.1", node.port), options);
  }

  @EachServer
  void anRlockLockAndRedissonsExcludeEachOtherAndWakeEachOther(Fleet.Node node) throws Exception {
    RLock theirs = node.redisson.getLock(key);
    try (Locks locks = locks(node, Locks.Options.defaults())) {
      RlockLock mine = locks.lock(key);
      mine.lock();
      assertEquals(Map.of(locks.owner(), 1L), locks.info(key).holders());
      CompletableFuture<Boolean> redissonWaiter =
          Threads.tryAndGiveBack(
              "redisson", () -> theirs.tryLock(5, 10, TimeUnit.SECONDS), theirs::unlock);
      Threads.sleep(200);
      assertFalse(redissonWaiter.isDone(), "Redisson went in beside an rlock-client hold");
      mine.unlock();
      assertTrue(
          redissonWaiter.get(3, TimeUnit.SECONDS), "Redisson's waiter not woken by unlock()");
      // And the other way: Redisson holds, RlockLock.tryLock waits in the server.
      CompletableFuture<Void> release = new CompletableFuture<>();
      CompletableFuture<String> held = new CompletableFuture<>();
      CompletableFuture<Void> holder = holdElsewhere(node, theirs, held, release);
      held.get(5, TimeUnit.SECONDS);
      assertFalse(mine.tryLock(), "rlock-client went in beside a Redisson hold");
      CompletableFuture<Boolean> rlockWaiter =
          Threads.tryAndGiveBack("rlock", () -> mine.tryLock(5, TimeUnit.SECONDS), mine::unlock);
      assertTrue(Threads.await(2_000, () -> locks.waiters(key).size() == 1));
      release.complete(null);
      assertTrue(rlockWaiter.get(3, TimeUnit.SECONDS));
      holder.get(3, TimeUnit.SECONDS);
      assertFalse(locks.info(key).locked());
    }
  }

  /**
   * CLIENTS.md C18: with Redisson's client id, a thread's RLock hold and RlockLock are one hold.
   */
  @EachServer
  void withRedissonsClientIdAThreadsHoldIsReentered(Fleet.Node node) throws Exception {
    RLock theirs = node.redisson.getLock(key);
    try (Locks locks = locks(node, Locks.Options.defaults().clientId(node.redisson.getId()))) {
      RlockLock mine = locks.lock(key);
      theirs.lock();
      assertTrue(mine.tryLock(), "rlock-client waited for its own thread's Redisson hold");
      assertEquals(2, theirs.getHoldCount());
      assertEquals(2, mine.getHoldCount());
      mine.unlock();
      assertEquals(1, theirs.getHoldCount());
      theirs.unlock();
      assertFalse(mine.isLocked());
    }
  }

  /** Redisson's forceUnlock of an rlock-client hold: the hold learns it is lost within lease/3. */
  @EachServer
  void redissonsForceUnlockIsToldToTheRlockHolder(Fleet.Node node) throws Exception {
    try (Locks locks =
        locks(node, Locks.Options.defaults().watchdogLease(Duration.ofMillis(1_500)))) {
      Hold hold = locks.lock(key).acquire().orElseThrow();
      LockInfo info = locks.info(key);
      assertTrue(info.pttl() > 0 && info.pttl() <= 1_500, "watchdog lease " + info.pttl());
      long forced = System.nanoTime();
      assertTrue(node.redisson.getLock(key).forceUnlock());
      hold.lost().get(2, TimeUnit.SECONDS);
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - forced);
      System.out.printf(
          "[%s] rlock-client told of Redisson's forceUnlock after %d ms (lease 1500 ms)%n",
          node.flavor, ms);
      assertTrue(ms <= 1_500 / 3 + 200, "told after " + ms + " ms");
    }
  }
}
