package io.github.rlock.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.rlock.client.LockInfo;
import io.github.rlock.client.Locks;
import io.github.rlock.testsupport.EachFlavor;
import io.github.rlock.testsupport.Flavor;
import io.github.rlock.testsupport.ServerProcess;
import io.github.rlock.testsupport.Threads;
import io.lettuce.core.RedisClient;
import java.time.Duration;
import java.util.ConcurrentModificationException;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.AfterEach;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.integration.support.locks.LockRegistry;

class RlockLockRegistryTest {
  private RedisClient client;
  private Locks one;
  private Locks two;

  private void connect(Flavor flavor) {
    client = RedisClient.create(ServerProcess.shared(flavor).uri());
    one = Locks.create(client);
    two = Locks.create(client);
  }

  @AfterEach
  void close() {
    if (one != null) {
      one.close();
      two.close();
      client.shutdown();
    }
  }

  private static String registryKey() {
    return "registry-" + UUID.randomUUID().toString().substring(0, 8);
  }

  /** Runs on a thread of its own: locks belong to threads. */
  private static <T> T elsewhere(java.util.concurrent.Callable<T> work) throws Exception {
    return Threads.start("elsewhere", work).get(10, TimeUnit.SECONDS);
  }

  @EachFlavor
  void obtainGivesOneLockPerKeyAndRefusesBadKeys(Flavor flavor) {
    connect(flavor);
    RlockLockRegistry registry = new RlockLockRegistry(one, registryKey());
    assertSame(registry.obtain("a"), registry.obtain("a"));
    assertNotSame(registry.obtain("a"), registry.obtain("b"));
    assertThrows(IllegalArgumentException.class, () -> registry.obtain(42));
    assertThrows(IllegalArgumentException.class, () -> registry.obtain(""));
    assertThrows(IllegalArgumentException.class, () -> registry.obtain(null));
    assertThrows(IllegalArgumentException.class, () -> new RlockLockRegistry(one, "r", 0));
    assertThrows(UnsupportedOperationException.class, () -> registry.obtain("a").newCondition());
  }

  @EachFlavor
  void twoProcessesExcludeEachOtherAndTheWaiterIsServed(Flavor flavor) throws Exception {
    connect(flavor);
    String prefix = registryKey();
    Lock mine = new RlockLockRegistry(one, prefix).obtain("orders");
    Lock theirs = new RlockLockRegistry(two, prefix).obtain("orders");
    mine.lock();
    LockInfo info = one.info(prefix + ":orders");
    assertTrue(info.locked(), "the key is <registryKey>:<lockKey>, as RedisLockRegistry's");
    assertFalse(elsewhere(() -> theirs.tryLock()));
    assertFalse(elsewhere(() -> theirs.tryLock(100, TimeUnit.MILLISECONDS)));
    CompletableFuture<Long> waited =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                long start = System.nanoTime();
                if (!theirs.tryLock(5, TimeUnit.SECONDS)) {
                  return -1L;
                }
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                theirs.unlock();
                return ms;
              } catch (InterruptedException e) {
                throw new IllegalStateException(e);
              }
            });
    Thread.sleep(300);
    mine.unlock();
    long ms = waited.get(5, TimeUnit.SECONDS);
    assertTrue(ms >= 250 && ms < 2_000, "the waiter got it after " + ms + " ms");
  }

  @EachFlavor
  void reentrantPerThreadAndOnlyTheHolderUnlocks(Flavor flavor) throws Exception {
    connect(flavor);
    String prefix = registryKey();
    Lock lock = new RlockLockRegistry(one, prefix).obtain("k");
    lock.lock();
    assertTrue(lock.tryLock());
    assertEquals(2L, one.info(prefix + ":k").holders().values().iterator().next());
    IllegalStateException notMine =
        assertThrows(
            IllegalStateException.class,
            () -> {
              try {
                elsewhere(
                    () -> {
                      lock.unlock();
                      return null;
                    });
              } catch (java.util.concurrent.ExecutionException e) {
                throw e.getCause();
              }
            });
    assertTrue(notMine.getMessage().startsWith("You do not own lock at"));
    lock.unlock();
    lock.unlock();
    assertFalse(one.info(prefix + ":k").locked());
    assertThrows(IllegalStateException.class, lock::unlock);
  }

  @EachFlavor
  void aHoldThatRanOutIsReportedOnUnlock(Flavor flavor) throws Exception {
    connect(flavor);
    Lock lock = new RlockLockRegistry(one, registryKey(), 200).obtain("k");
    lock.lock();
    Thread.sleep(400);
    assertThrows(ConcurrentModificationException.class, lock::unlock);
  }

  @EachFlavor
  void renewLockKeepsAFixedLeaseHold(Flavor flavor) throws Exception {
    connect(flavor);
    String prefix = registryKey();
    RlockLockRegistry registry = new RlockLockRegistry(one, prefix, 500);
    Lock theirs = new RlockLockRegistry(two, prefix, 500).obtain("k");
    assertThrows(IllegalStateException.class, () -> registry.renewLock("k"), "no such lock yet");
    Lock lock = registry.obtain("k");
    assertThrows(IllegalStateException.class, () -> registry.renewLock("k"), "not held");
    lock.lock();
    for (int i = 0; i < 4; i++) {
      Thread.sleep(250);
      registry.renewLock("k");
    }
    assertFalse(elsewhere(() -> theirs.tryLock()), "the renewed hold ran out");
    lock.unlock();
    assertTrue(
        elsewhere(
            () -> {
              boolean got = theirs.tryLock();
              theirs.unlock();
              return got;
            }));
  }

  @EachFlavor
  void theWatchdogKeepsAHoldWithoutExpireAfter(Flavor flavor) throws Exception {
    connect(flavor);
    try (Locks shortLease =
        Locks.create(client, Locks.Options.defaults().watchdogLease(Duration.ofMillis(600)))) {
      String prefix = registryKey();
      Lock lock = new RlockLockRegistry(shortLease, prefix).obtain("k");
      lock.lock();
      Thread.sleep(1_500);
      Lock theirs = new RlockLockRegistry(two, prefix).obtain("k");
      assertFalse(elsewhere(() -> theirs.tryLock()), "the watchdog did not renew");
      lock.unlock();
    }
  }

  @EachFlavor
  void expireUnusedKeepsHeldLocks(Flavor flavor) throws Exception {
    connect(flavor);
    RlockLockRegistry registry = new RlockLockRegistry(one, registryKey());
    Lock held = registry.obtain("held");
    Lock idle = registry.obtain("idle");
    held.lock();
    Thread.sleep(5);
    registry.expireUnusedOlderThan(0);
    assertSame(held, registry.obtain("held"));
    assertNotSame(idle, registry.obtain("idle"));
    held.unlock();
  }

  /** The switch: one bean; the service that uses LockRegistry does not change. */
  @Configuration
  static class Config {
    static Locks locks;

    @Bean
    LockRegistry lockRegistry() {
      return new RlockLockRegistry(locks, "service");
    }
  }

  @EachFlavor
  void aSpringServiceRunsUnderTheLockThroughExecuteLocked(Flavor flavor) throws Exception {
    connect(flavor);
    Config.locks = one;
    try (AnnotationConfigApplicationContext context =
        new AnnotationConfigApplicationContext(Config.class)) {
      LockRegistry registry = context.getBean(LockRegistry.class);
      String seen =
          registry.executeLocked("job", () -> one.info("service:job").locked() ? "locked" : "free");
      assertEquals("locked", seen);
      assertFalse(one.info("service:job").locked());
      String timed = registry.executeLocked("job", Duration.ofSeconds(1), () -> "ran");
      assertEquals("ran", timed);
    }
  }
}
