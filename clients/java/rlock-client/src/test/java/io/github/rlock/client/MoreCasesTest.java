package io.github.rlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/** C09, C10, C12, C13, C16, C18: sessions, fencing, the other synchronizers, election, owners. */
class MoreCasesTest extends ServerTestBase {

  @ParameterizedTest(name = "C09 session holds end when the holder connection dies [{0}] [{1}]")
  @MethodSource("targets")
  void c09_sessionHolds(String flavor, Driver driver) throws Exception {
    Servers.Server s = shared(flavor);
    Locks holder = locks(s, driver, Locks.Options.defaults());
    Locks other = locks(flavor, driver);
    String n = name("c09");
    Hold h = holder.lock(n, LockOptions.defaults().session()).acquire().orElseThrow();
    assertTrue(other.info(n).locked());
    // The holder's process dies: its connections close without a release.
    long t0 = System.nanoTime();
    holder.close();
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
    while (other.info(n).locked() && System.nanoTime() < end) {
      Thread.sleep(2);
    }
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertFalse(other.info(n).locked(), "still held after " + ms + " ms");
    assertTrue(ms < 500, "freed after " + ms + " ms");
    assertEquals(1, h.count());
    // lock()/unlock() with SESSION: the session connection goes with the last unlock.
    Locks again = locks(s, driver, Locks.Options.defaults());
    RlockLock session = again.lock(n, LockOptions.defaults().session());
    session.lock();
    session.lock();
    session.unlock();
    assertEquals(2, again.sessions.size(), "kept while the lock is held");
    session.unlock();
    assertEquals(0, again.sessions.size());
    assertFalse(other.info(n).locked());
  }

  @ParameterizedTest(name = "C10 fencing tokens rise across holders and an AOF restart [{0}] [{1}]")
  @MethodSource("targets")
  void c10_fencing(String flavor, Driver driver) throws Exception {
    Servers.Server s = own(new Servers.Server(flavor).with("appendonly", "yes").with("appendfsync", "always"));
    String n = name("c10");
    long last = 0;
    Locks locks = locks(s, driver, Locks.Options.defaults());
    for (int i = 0; i < 3; i++) {
      Hold h = locks.lock(n, LockOptions.defaults().fenced()).acquire().orElseThrow();
      assertTrue(h.token() > last, h.token() + " after " + last);
      last = h.token();
      h.release();
    }
    locks.close();
    s.restart();
    Locks again = locks(s, driver, Locks.Options.defaults());
    Hold h = again.lock(n, LockOptions.defaults().fenced()).acquire().orElseThrow();
    assertTrue(h.token() > last, h.token() + " after the restart, " + last + " before");
    h.release();
  }

  @ParameterizedTest(name = "C12 other synchronizers: read-write, multi, semaphores, latch [{0}] [{1}]")
  @MethodSource("targets")
  void c12_otherSynchronizers(String flavor, Driver driver) throws Exception {
    Locks locks = locks(flavor, driver);
    // Read-write: readers share, the writer is alone.
    String rw = name("c12rw");
    RlockReadWriteLock rwl = locks.readWriteLock(rw);
    Hold r1 = rwl.readLock().acquire().orElseThrow();
    assertTrue(ServerTestBase.<Boolean>inThread(() -> {
      Optional<Hold> r2 = rwl.readLock().acquire();
      r2.ifPresent(Hold::release);
      return r2.isPresent();
    }), "readers share");
    assertFalse(ServerTestBase.<Boolean>inThread(() -> rwl.writeLock().acquire().isPresent()), "no writer beside a reader");
    r1.release();
    Hold w = rwl.writeLock().acquire().orElseThrow();
    assertFalse(ServerTestBase.<Boolean>inThread(() -> rwl.readLock().acquire().isPresent()), "no reader beside the writer");
    w.release();

    // Multi: all or none.
    String tag = "{" + name("c12m") + "}";
    String a = tag + ":a";
    String b = tag + ":b";
    String c = tag + ":c";
    Hold one = locks.lock(b, LockOptions.defaults().owner("other")).acquire().orElseThrow();
    assertTrue(locks.multiLock(a, b, c).acquire().isEmpty());
    assertFalse(locks.info(a).locked(), "nothing taken");
    assertFalse(locks.info(c).locked(), "nothing taken");
    one.release();
    Hold all = locks.multiLock(a, b, c).acquire(Duration.ofSeconds(1)).orElseThrow();
    assertTrue(locks.info(a).locked() && locks.info(b).locked() && locks.info(c).locked());
    all.release();
    assertFalse(locks.info(a).locked() || locks.info(b).locked() || locks.info(c).locked());

    // Semaphore: never above N.
    Semaphore sem = locks.semaphore(name("c12s"));
    assertTrue(sem.trySetPermits(3));
    AtomicInteger inside = new AtomicInteger();
    AtomicInteger most = new AtomicInteger();
    List<Thread> ts = new ArrayList<>();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    for (int i = 0; i < 8; i++) {
      Thread t = new Thread(() -> {
        try {
          for (int k = 0; k < 5; k++) {
            if (sem.tryAcquire(1, Duration.ofSeconds(5))) {
              most.accumulateAndGet(inside.incrementAndGet(), Math::max);
              Thread.sleep(2);
              inside.decrementAndGet();
              sem.release(1);
            }
          }
        } catch (Throwable e) {
          failure.set(e);
        }
      });
      t.start();
      ts.add(t);
    }
    for (Thread t : ts) {
      t.join(30_000);
    }
    if (failure.get() != null) {
      throw new AssertionError(failure.get());
    }
    assertTrue(most.get() <= 3 && most.get() >= 2, "most inside: " + most.get());
    assertEquals(3, sem.availablePermits());

    // Permit leases expire.
    PermitExpirableSemaphore pes = locks.permitExpirableSemaphore(name("c12p"));
    assertTrue(pes.trySetPermits(1));
    String id = pes.tryAcquire(Duration.ofMillis(200)).orElseThrow();
    assertTrue(pes.tryAcquire(Duration.ofMillis(200)).isEmpty());
    assertEquals(32, id.length());
    Optional<String> after = pes.tryAcquire(Duration.ofSeconds(2), Duration.ofSeconds(5));
    assertTrue(after.isPresent(), "the leased permit came back when its lease ended");
    assertTrue(pes.release(after.get()));
    assertFalse(pes.release(id), "an ended lease is not released");

    // Latch opens at zero.
    io.github.rlock.client.CountDownLatch latch = locks.countDownLatch(name("c12l"));
    assertTrue(latch.trySetCount(2));
    CompletableFuture<Boolean> opened = started(() -> latch.awaitZero(Duration.ofSeconds(5)));
    Thread.sleep(50);
    assertEquals(1, latch.countDown());
    assertFalse(opened.isDone());
    assertEquals(0, latch.countDown());
    assertTrue(opened.get(5, TimeUnit.SECONDS));
    assertEquals(0, latch.getCount());
  }

  @ParameterizedTest(name = "C13 election: one leader of 4, resign hands over, observe in order [{0}] [{1}]")
  @MethodSource("targets")
  void c13_election(String flavor, Driver driver) throws Exception {
    Locks locks = locks(flavor, driver);
    Election election = locks.election(name("c13"));
    List<Optional<Election.Leader>> seen = Collections.synchronizedList(new ArrayList<>());
    AutoCloseable observing = election.observe(seen::add);
    closing.add(0, observing);
    List<CompletableFuture<Hold>> posts = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      String value = "node-" + i;
      CompletableFuture<Hold> f = started(() -> election.campaign(value, Duration.ofSeconds(10)).orElseThrow());
      posts.add(f);
    }
    List<String> leaders = new ArrayList<>();
    for (int round = 0; round < 4; round++) {
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      while (posts.stream().filter(CompletableFuture::isDone).count() < round + 1 && System.nanoTime() < end) {
        Thread.sleep(5);
      }
      List<CompletableFuture<Hold>> won = posts.stream().filter(CompletableFuture::isDone).toList();
      assertEquals(round + 1, won.size(), "one leader at a time");
      Hold leader = won.stream().map(CompletableFuture::join).filter(h -> !leaders.contains(h.owner())).findFirst().orElseThrow();
      assertEquals(leader.owner(), election.leader().orElseThrow().value());
      assertEquals(leader.token(), election.leader().orElseThrow().term());
      leaders.add(leader.owner());
      Thread.sleep(120); // the observer polls every 50 ms
      leader.release(); // resign: the next candidate is served
    }
    Thread.sleep(120);
    List<String> observed = new ArrayList<>();
    for (Optional<Election.Leader> l : seen) {
      l.ifPresent(x -> observed.add(x.value()));
    }
    assertEquals(leaders, observed);
  }

  @ParameterizedTest(name = "C16 one watchdog renews 1000 holds in batches [{0}] [{1}]")
  @MethodSource("targets")
  void c16_oneWatchdog(String flavor, Driver driver) throws Exception {
    Locks locks = locks(shared(flavor), driver, Locks.Options.defaults().watchdogLease(Duration.ofMillis(1500)));
    String base = name("c16");
    List<Hold> holds = new ArrayList<>();
    for (int i = 0; i < 1000; i++) {
      holds.add(locks.lock(base + ":" + i, LockOptions.defaults().owner("o" + i)).acquire().orElseThrow());
    }
    long before = Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("rlock-watchdog")).count();
    Thread.sleep(1200);
    long[] counts = locks.watchdogCounts();
    assertTrue(counts[0] >= 1000, "renewals " + counts[0]);
    assertTrue(counts[1] * 100 <= counts[0], "rounds " + counts[1] + " for " + counts[0] + " renewals: batched");
    long threads = Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("rlock-watchdog")).count();
    // Other tests' Locks may be closing in the background; this one adds exactly one thread.
    assertTrue(threads <= before && before >= 1, before + " then " + threads);
    for (Hold h : holds) {
      h.checkNotLost();
      h.release();
    }
  }

  @ParameterizedTest(name = "C18 owners: threads re-enter, cross into Deadlock, release from another thread, Redisson re-entered [{0}] [{1}]")
  @MethodSource("targets")
  void c18_owners(String flavor, Driver driver) throws Exception {
    Servers.Server s = shared(flavor);
    Config cfg = new Config();
    cfg.useSingleServer().setAddress("redis://127.0.0.1:" + s.port).setConnectionMinimumIdleSize(1).setConnectionPoolSize(2)
        .setSubscriptionConnectionMinimumIdleSize(1).setSubscriptionConnectionPoolSize(1);
    cfg.setThreads(2).setNettyThreads(2);
    RedissonClient redisson = Redisson.create(cfg);
    closing.add(redisson::shutdown);
    Locks locks = locks(s, driver, Locks.Options.defaults().clientId(redisson.getId()));
    String n = name("c18");

    // Nested on one lock in one thread re-enters.
    RlockLock lock = locks.lock(n);
    Hold outer = lock.acquire().orElseThrow();
    Hold inner = lock.acquire().orElseThrow();
    assertEquals(2, inner.count());
    // Released from another thread: the hold remembers its owner.
    inThread(() -> {
      inner.release();
      outer.release();
      return null;
    });
    assertFalse(locks.info(n).locked());

    // Redisson's RLock in this thread, same client id: re-entered, not waited for.
    RLock rl = redisson.getLock(n);
    rl.lock();
    assertTrue(lock.tryLock(), "re-entered the hold Redisson's RLock took in this thread");
    assertEquals(2, rl.getHoldCount());
    lock.unlock();
    assertEquals(1, rl.getHoldCount());
    rl.unlock();
    assertFalse(rl.isLocked());

    // Two threads crossing two locks with default owners: one gets Deadlock.
    String k1 = name("c18a");
    String k2 = name("c18b");
    java.util.concurrent.CyclicBarrier both = new java.util.concurrent.CyclicBarrier(2);
    List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
    Runnable crossing1 = () -> cross(locks, k1, k2, both, errors);
    Runnable crossing2 = () -> cross(locks, k2, k1, both, errors);
    Thread t1 = new Thread(crossing1);
    Thread t2 = new Thread(crossing2);
    t1.start();
    t2.start();
    t1.join(15_000);
    t2.join(15_000);
    assertEquals(1, errors.stream().filter(e -> e instanceof DeadlockException).count(), errors.toString());
    assertFalse(locks.info(k1).locked() || locks.info(k2).locked());
  }

  private static void cross(Locks locks, String first, String second, java.util.concurrent.CyclicBarrier both, List<Throwable> errors) {
    RlockLock a = locks.lock(first);
    a.lock();
    try {
      both.await();
      RlockLock b = locks.lock(second);
      if (b.tryLock(5, TimeUnit.SECONDS)) {
        b.unlock();
      }
    } catch (Throwable e) {
      errors.add(e);
    } finally {
      a.unlock();
    }
  }

  @ParameterizedTest(name = "operator queries: info, waiters, scan, stats, top [{0}] [{1}]")
  @MethodSource("targets")
  void operatorQueries(String flavor, Driver driver) throws Exception {
    Locks locks = locks(flavor, driver);
    String n = name("ops");
    Hold h = locks.lock(n).acquire().orElseThrow();
    assertEquals(1L, locks.info(n).holders().get(h.owner()));
    assertTrue(locks.scan(n, null).stream().anyMatch(l -> l.key().equals(n)));
    assertTrue(locks.stats().values().iterator().next().containsKey("rlock_tracked_locks"));
    assertTrue(locks.waiters(n).isEmpty());
    locks.top(5);
    h.release();
    assertThrows(IllegalMonitorStateException.class, () -> locks.lock(n).unlock());
  }
}
