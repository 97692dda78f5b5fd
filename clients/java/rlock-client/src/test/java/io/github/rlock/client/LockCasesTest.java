package io.github.rlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** C01-C08, C11, C17: one lock's cases, on every server and both drivers. */
class LockCasesTest extends ServerTestBase {

  @ParameterizedTest(name = "C01 acquire, re-enter through the same handle, release [{0}] [{1}]")
  @MethodSource("targets")
  void c01_acquireReenterRelease(String flavor, Driver driver) throws Exception {
    Locks locks = locks(flavor, driver);
    RlockLock lock = locks.lock(name("c01"));
    lock.lock();
    lock.lock();
    assertEquals(2, lock.getHoldCount());
    assertFalse(ServerTestBase.<Boolean>inThread(() -> lock.tryLock()), "a second owner (another thread) is refused");
    lock.unlock();
    assertEquals(1, lock.getHoldCount());
    assertTrue(lock.isLocked());
    lock.unlock();
    assertFalse(lock.isLocked());
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertTrue(inThread(() -> {
      boolean got = lock.tryLock();
      lock.unlock();
      return got;
    }));
  }

  @ParameterizedTest(name = "C02 wait in the server, granted within 50 ms, in arrival order [{0}] [{1}]")
  @MethodSource("targets")
  void c02_waitInServer(String flavor, Driver driver) throws Exception {
    Locks locks = locks(flavor, driver);
    String n = name("c02");
    RlockLock lock = locks.lock(n);
    lock.lock();
    List<Integer> order = Collections.synchronizedList(new ArrayList<>());
    List<Long> grantedAt = Collections.synchronizedList(new ArrayList<>());
    List<Thread> threads = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      int me = i;
      Thread t =
          new Thread(
              () -> {
                try {
                  if (lock.tryLock(10, TimeUnit.SECONDS)) {
                    grantedAt.add(System.nanoTime());
                    order.add(me);
                    Thread.sleep(20);
                    lock.unlock();
                  }
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
              });
      t.start();
      threads.add(t);
      // Each waiter blocked in the server before the next: arrival order is known.
      awaitBlocked(locks, n, i + 1);
      assertEquals(i + 1, locks.info(n).blocked());
    }
    long released = System.nanoTime();
    lock.unlock();
    for (Thread t : threads) {
      t.join(15_000);
    }
    assertEquals(List.of(0, 1, 2), order);
    long ms = TimeUnit.NANOSECONDS.toMillis(grantedAt.get(0) - released);
    assertTrue(ms < 50, "the first waiter was granted " + ms + " ms after the release");
  }

  @ParameterizedTest(name = "C03 a wait that ends returns empty, tryLock false [{0}] [{1}]")
  @MethodSource("targets")
  void c03_waitThatEnds(String flavor, Driver driver) throws Exception {
    Locks locks = locks(flavor, driver);
    RlockLock lock = locks.lock(name("c03"));
    lock.lock();
    long t0 = System.nanoTime();
    Optional<Hold> got = inThread(() -> lock.acquire(Duration.ofMillis(200)));
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertTrue(got.isEmpty());
    assertTrue(ms >= 190, "waited " + ms + " ms");
    assertFalse(inThread(() -> lock.tryLock(100, TimeUnit.MILLISECONDS)));
    assertFalse(inThread(() -> lock.acquire().isPresent()));
    AtomicInteger ran = new AtomicInteger();
    java.util.concurrent.ExecutionException scoped =
        assertThrows(java.util.concurrent.ExecutionException.class,
            () -> inThread(() -> lock.withLock(Duration.ofMillis(50), ran::incrementAndGet)));
    assertTrue(scoped.getCause() instanceof NotAcquiredException, scoped.toString());
    assertEquals(0, ran.get(), "the body never runs unlocked");
    assertEquals(1, lock.getHoldCount());
    lock.unlock();
    assertFalse(lock.isLocked());
  }

  @ParameterizedTest(name = "C04 renewal keeps a hold for 3 leases, same token [{0}] [{1}]")
  @MethodSource("targets")
  void c04_renewal(String flavor, Driver driver) throws Exception {
    Locks locks = locks(shared(flavor), driver, Locks.Options.defaults().watchdogLease(Duration.ofMillis(600)));
    String n = name("c04");
    Hold hold = locks.lock(n, LockOptions.defaults().fenced()).acquire().orElseThrow();
    Thread.sleep(1900);
    hold.checkNotLost();
    LockInfo info = locks.info(n);
    assertEquals(1L, info.holders().get(hold.owner()));
    assertEquals(hold.token(), info.token());
    long renewals = locks.watchdogCounts()[0];
    // One renewal per lease/3 (200 ms): about 9 in 1.9 s, never more than one per period.
    assertTrue(renewals >= 6 && renewals <= 10, "renewals: " + renewals);
    hold.release();
    assertFalse(locks.info(n).locked());
  }

  @ParameterizedTest(name = "C05 loss is told within lease/3, within 100 ms with keyspace events [{0}] [{1}]")
  @MethodSource("targets")
  void c05_lossIsTold(String flavor, Driver driver) throws Exception {
    // Without events: the watchdog's renewal (lease 900 ms, every 300 ms) tells it.
    Locks locks = locks(shared(flavor), driver, Locks.Options.defaults().watchdogLease(Duration.ofMillis(900)));
    String n = name("c05");
    Hold hold = locks.lock(n).acquire().orElseThrow();
    Thread.sleep(50);
    long t0 = System.nanoTime();
    assertTrue(locks.forceRelease(n));
    LostException lost = hold.lost().get(2, TimeUnit.SECONDS);
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertNotNull(lost);
    assertTrue(ms <= 300 + 50, "told after " + ms + " ms");
    assertThrows(LostException.class, hold::checkNotLost);

    // With notify-keyspace-events Kd: within 100 ms, the lease long (30 s).
    Servers.Server s = own(new Servers.Server(flavor).with("notify-keyspace-events", "Kd"));
    Locks evented = locks(s, driver, Locks.Options.defaults());
    String m = name("c05e");
    Hold h2 = evented.lock(m).acquire().orElseThrow();
    // The watchdog subscribes the held key's own channel (no pattern) once it sees the hold.
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    String channel = "__keyspace@0__:" + m;
    while (!s.call("PUBSUB", "NUMSUB", channel).endsWith(":1\r\n") && System.nanoTime() < until) {
      Thread.sleep(10);
    }
    assertTrue(s.call("PUBSUB", "NUMPAT").startsWith(":0"), "no pattern subscription");
    assertTrue(s.call("PUBSUB", "NUMSUB", channel).endsWith(":1\r\n"), "the held key's channel is subscribed");
    long t1 = System.nanoTime();
    assertTrue(evented.forceRelease(m));
    h2.lost().get(2, TimeUnit.SECONDS);
    long ms2 = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t1);
    assertTrue(ms2 < 100, "told after " + ms2 + " ms with events");

    // A key no longer held is unsubscribed a moment later; a new hold subscribes it again and is
    // told of its loss as fast.
    until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!s.call("PUBSUB", "NUMSUB", channel).endsWith(":0\r\n") && System.nanoTime() < until) {
      Thread.sleep(20);
    }
    assertTrue(s.call("PUBSUB", "NUMSUB", channel).endsWith(":0\r\n"), "the lost key's channel is unsubscribed");
    Hold h3 = evented.lock(m).acquire().orElseThrow();
    until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!s.call("PUBSUB", "NUMSUB", channel).endsWith(":1\r\n") && System.nanoTime() < until) {
      Thread.sleep(10);
    }
    long t2 = System.nanoTime();
    assertTrue(evented.forceRelease(m));
    h3.lost().get(2, TimeUnit.SECONDS);
    long ms3 = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t2);
    assertTrue(ms3 < 100, "told after " + ms3 + " ms with events, subscribed again");
  }

  @ParameterizedTest(name = "C06 cancelled waits leave nothing: 40 Thread.interrupt() around grants [{0}] [{1}]")
  @MethodSource("targets")
  void c06_cancelledWaitsLeaveNothing(String flavor, Driver driver) throws Exception {
    Locks locks = locks(flavor, driver);
    String n = name("c06");
    RlockLock lock = locks.lock(n);
    Random random = new Random(6);
    AtomicInteger granted = new AtomicInteger();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    // A holder hands the lock on and off, so that grants happen while the interrupts come.
    Thread holder =
        new Thread(
            () -> {
              for (int i = 0; i < 30; i++) {
                try {
                  if (lock.tryLock(2, TimeUnit.SECONDS)) {
                    Servers.sleep(3);
                    lock.unlock();
                  }
                } catch (InterruptedException e) {
                  return;
                } catch (Throwable e) {
                  failure.set(e);
                }
              }
            });
    holder.start();
    List<Thread> waiters = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      boolean forever = i % 2 == 0;
      Thread t =
          new Thread(
              () -> {
                try {
                  boolean got;
                  if (forever) {
                    lock.lockInterruptibly();
                    got = true;
                  } else {
                    got = lock.tryLock(5, TimeUnit.SECONDS);
                  }
                  if (got) {
                    granted.incrementAndGet();
                    lock.unlock();
                  }
                } catch (InterruptedException e) {
                  // given up: must leave nothing held
                } catch (Throwable e) {
                  failure.set(e);
                }
              });
      t.start();
      waiters.add(t);
      Thread.sleep(random.nextInt(6));
      if (i >= 2) {
        waiters.get(i - 2).interrupt();
      }
    }
    for (Thread t : waiters) {
      t.interrupt();
    }
    for (Thread t : waiters) {
      t.join(20_000);
      assertFalse(t.isAlive());
    }
    holder.join(30_000);
    if (failure.get() != null) {
      throw new AssertionError(failure.get());
    }
    LockInfo info = locks.info(n);
    assertTrue(info.holders().isEmpty(), "orphaned holds: " + info.holders());
    assertEquals(0, info.blocked());
  }

  @ParameterizedTest(name = "C07 a long wait outlives socket timeouts [{0}] [{1}]")
  @MethodSource("targets")
  void c07_longWaitOutlivesSocketTimeout(String flavor, Driver driver) throws Exception {
    Locks locks = driver.connect(shared(flavor).port, Duration.ofSeconds(1), Locks.Options.defaults(), closing);
    String n = name("c07");
    RlockLock lock = locks.lock(n);
    lock.lock();
    CompletableFuture<Optional<Hold>> waiter = started(() -> lock.acquire(Duration.ofSeconds(5)));
    Thread.sleep(1600);
    lock.unlock();
    Hold h = waiter.get(10, TimeUnit.SECONDS).orElseThrow();
    assertEquals(1, h.count());
    assertEquals(1L, locks.info(n).holders().get(h.owner()));
    h.release();
    assertFalse(locks.info(n).locked());
  }

  @ParameterizedTest(name = "C08 no double effect on retry: a cut connection resends the same REQ id [{0}] [{1}]")
  @MethodSource("targets")
  void c08_noDoubleEffectOnRetry(String flavor, Driver driver) throws Exception {
    Servers.Server s = shared(flavor);
    Locks locks = locks(flavor, driver);
    String n = name("c08");
    RlockLock lock = locks.lock(n);
    lock.lock();
    CompletableFuture<Optional<Hold>> waiter = started(() -> lock.acquire(Duration.ofSeconds(10)));
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    List<Waiter> ws;
    while ((ws = locks.waiters(n)).isEmpty() && System.nanoTime() < end) {
      Thread.sleep(5);
    }
    assertEquals(1, ws.size());
    // Cut the waiting connection: the client sends the acquire again with the same REQ id.
    assertTrue(s.call("CLIENT", "KILL", "ID", Long.toString(ws.get(0).clientId())).startsWith(":1"));
    end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while ((ws = locks.waiters(n)).isEmpty() && System.nanoTime() < end) {
      Thread.sleep(5);
    }
    assertEquals(1, ws.size(), "the wait was sent again");
    lock.unlock();
    Hold h = waiter.get(10, TimeUnit.SECONDS).orElseThrow();
    assertEquals(1, h.count());
    assertEquals(1L, locks.info(n).holders().get(h.owner()));
    // One REQ record for the waiter's acquire: the resend used the first one's id.
    int acquires = 0;
    for (String k : s.bulks(s.call("KEYS", "rlock_request:{" + n + "}:*"))) {
      if (s.call("GET", k).contains("A:1:" + h.owner())) {
        acquires++;
      }
    }
    assertEquals(1, acquires);
    h.release();
    assertFalse(locks.info(n).locked());
    // A release sent twice with one REQ id gives back one hold.
    Hold a = locks.lock(n).acquire().orElseThrow();
    Hold b = locks.lock(n).acquire().orElseThrow();
    assertEquals(2, b.count());
    Cmd release = Plan.release(n.getBytes(), a.owner().getBytes(), null, Plan.newReq());
    assertEquals(0L, Replies.asLong(locks.pipeline(n.getBytes(), List.of(release), true).get(0)));
    assertEquals(0L, Replies.asLong(locks.pipeline(n.getBytes(), List.of(release), true).get(0)));
    assertEquals(1L, locks.info(n).holders().get(a.owner()));
    lock.unlock();
    assertFalse(locks.info(n).locked());
  }

  @ParameterizedTest(name = "C08 a connection reset during acquire or release: the resend applies once [{0}] [{1}]")
  @MethodSource("targets")
  void c08_resetDuringAcquireOrRelease(String flavor, Driver driver) throws Exception {
    CutProxy proxy = new CutProxy(shared(flavor).port);
    closing.add(proxy);
    Locks locks = driver.connect(proxy.port(), Duration.ofSeconds(2), Locks.Options.defaults(), closing);
    String n = name("c08r");
    RlockLock lock = locks.lock(n);
    lock.lock();
    lock.lock();
    proxy.cutAfter("RLOCK.RELEASE");
    lock.unlock(); // the reply is lost; sent again with its REQ id: one hold given back
    assertEquals(1, proxy.cuts);
    assertEquals(1, lock.getHoldCount());
    proxy.cutAfter("RLOCK.ACQUIRE");
    assertTrue(lock.tryLock()); // the reply is lost; sent again: one re-entry
    assertEquals(2, proxy.cuts);
    assertEquals(2, lock.getHoldCount());
    lock.unlock();
    lock.unlock();
    assertFalse(lock.isLocked());
  }

  @ParameterizedTest(name = "a dead server fails a call within its wait plus the response timeout [{0}] [{1}]")
  @MethodSource("targets")
  void deadServerFailsInTime(String flavor, Driver driver) throws Exception {
    Servers.Server s = own(new Servers.Server(flavor));
    Locks locks = driver.connect(s.port, Duration.ofSeconds(1), Locks.Options.defaults(), closing);
    String n = name("dead");
    RlockLock lock = locks.lock(n, LockOptions.defaults().syncReplicas(0));
    Hold h = lock.acquire().orElseThrow();
    new ProcessBuilder("kill", "-STOP", Long.toString(s.pid())).start().waitFor();
    try {
      long t0 = System.nanoTime();
      assertThrows(LinkException.class, () -> lock.acquire(Duration.ofMillis(500)));
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(ms < 500 + 1000 + 1000, "failed after " + ms + " ms");
      t0 = System.nanoTime();
      assertThrows(LinkException.class, h::release);
      ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      // A release is sent up to 3 times (with its REQ id), each bounded by the response timeout.
      assertTrue(ms < 3 * 1000 + 1000, "failed after " + ms + " ms");
    } finally {
      new ProcessBuilder("kill", "-CONT", Long.toString(s.pid())).start().waitFor();
    }
  }

  @ParameterizedTest(name = "C11 deadlock: two holders crossing, the cycle names both [{0}] [{1}]")
  @MethodSource("targets")
  void c11_deadlock(String flavor, Driver driver) throws Exception {
    Locks locks = locks(flavor, driver);
    String k1 = name("c11a");
    String k2 = name("c11b");
    // This thread holds k2 first; the other takes k1, then waits for k2.
    RlockLock l2 = locks.lock(k2);
    l2.lock();
    CountDownLatch done = new CountDownLatch(1);
    AtomicReference<String> ownerA = new AtomicReference<>();
    Thread a =
        new Thread(
            () -> {
              RlockLock l1 = locks.lock(k1);
              l1.lock();
              ownerA.set(locks.owner());
              try {
                if (locks.lock(k2).tryLock(10, TimeUnit.SECONDS)) {
                  locks.lock(k2).unlock();
                }
                done.await();
              } catch (Exception e) {
                // released below
              } finally {
                l1.unlock();
              }
            });
    a.start();
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (locks.waiters(k2).isEmpty() && System.nanoTime() < end) {
      Thread.sleep(5);
    }
    DeadlockException e = assertThrows(DeadlockException.class, () -> locks.lock(k1).tryLock(5, TimeUnit.SECONDS));
    String me = locks.owner();
    assertTrue(e.cycle().stream().anyMatch(w -> w.waiter().equals(me) && w.key().equals(k1) && w.holder().equals(ownerA.get())), e.getMessage());
    assertTrue(e.cycle().stream().anyMatch(w -> w.waiter().equals(ownerA.get()) && w.key().equals(k2) && w.holder().equals(me)), e.getMessage());
    l2.unlock();
    done.countDown();
    a.join(10_000);
    assertFalse(locks.info(k1).locked() || locks.info(k2).locked());
  }

  @ParameterizedTest(name = "C17 bad input raises before anything is sent [{0}] [{1}]")
  @MethodSource("targets")
  void c17_badInput(String flavor, Driver driver) throws Exception {
    Servers.Server s = own(new Servers.Server(flavor));
    Locks locks = locks(s, driver, Locks.Options.defaults());
    s.call("CONFIG", "RESETSTAT");
    assertThrows(IllegalArgumentException.class, () -> locks.lock(""));
    assertThrows(NullPointerException.class, () -> locks.lock(null));
    assertThrows(IllegalArgumentException.class, () -> LockOptions.defaults().lease(Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> LockOptions.defaults().lease(Duration.ofMillis(-1)));
    RlockLock lock = locks.lock("c17");
    assertThrows(IllegalArgumentException.class, () -> lock.acquire(Duration.ofMillis(-1)));
    assertThrows(IllegalArgumentException.class, () -> lock.tryLock(-1, TimeUnit.SECONDS));
    assertThrows(NullPointerException.class, () -> lock.tryLock(1, null));
    assertThrows(NullPointerException.class, () -> lock.acquire(null));
    assertThrows(IllegalArgumentException.class, () -> LockOptions.defaults().owner("x".repeat(1025)));
    assertThrows(IllegalArgumentException.class, () -> LockOptions.defaults().owner(""));
    assertThrows(IllegalArgumentException.class, () -> locks.semaphore("s").tryAcquire(0));
    assertThrows(IllegalArgumentException.class, () -> locks.countDownLatch("l").trySetCount(0));
    assertThrows(IllegalArgumentException.class, () -> locks.multiLock());
    assertThrows(IllegalArgumentException.class, () -> locks.multiLock("a", ""));
    assertThrows(IllegalArgumentException.class, () -> locks.permitExpirableSemaphore("p").tryAcquire(Duration.ZERO));
    assertThrows(UnsupportedOperationException.class, lock::newCondition);
    String stats = s.call("INFO", "commandstats");
    assertFalse(stats.contains("cmdstat_rlock"), stats);
    assertFalse(stats.contains("cmdstat_rsem"), stats);
    assertFalse(stats.contains("cmdstat_rlatch"), stats);
  }
}
