package io.github.rlock.redisson;

import io.github.rlock.testsupport.Threads;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * Callers looping on one lock at once, each on a thread of its own. Every caller connects first;
 * the clock starts when all are ready, runs a warm-up that is not counted, then counts each
 * caller's acquisitions for the measured time.
 */
final class Race {
  private static final long WARM_UP_MS = 300;

  /** One caller: its set-up, one acquire-and-release, its tear-down. */
  interface Caller extends AutoCloseable {
    void prepare() throws Exception;

    void once(Referee referee) throws Exception;

    @Override
    default void close() {}
  }

  /** What a caller does while it holds: enter and leave the referee's section. */
  interface Inside {
    void run(Referee referee) throws Exception;
  }

  static final Inside ALONE =
      referee -> {
        referee.enter(1);
        referee.leave(1);
      };

  /** One acquire-and-release of a caller, on the handle it made on its thread. */
  interface Round<H> {
    void run(H handle, Referee referee) throws Exception;
  }

  /**
   * A caller whose handle `open` makes on the caller's own thread (owners are per thread), each
   * round `round` on it; the handle is closed at the end when it is AutoCloseable.
   */
  static <H> Caller on(Callable<H> open, Round<H> round) {
    return new Caller() {
      private H handle;

      @Override
      public void prepare() throws Exception {
        handle = open.call();
      }

      @Override
      public void once(Referee referee) throws Exception {
        round.run(handle, referee);
      }

      @Override
      public void close() {
        if (handle instanceof AutoCloseable closing) {
          try {
            closing.close();
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
        }
      }
    };
  }

  /** A Redisson thread on a plain RLock: tryLock (wait 10 s, lease 30 s), unlock. */
  static Caller redisson(RedissonClient client, String key) {
    return redisson(() -> client.getLock(key), ALONE);
  }

  /**
   * A Redisson thread on the lock `lockOf` gives (made on the thread): tryLock, `inside`, unlock.
   */
  static Caller redisson(Supplier<RLock> lockOf, Inside inside) {
    return on(
        lockOf::get,
        (lock, referee) -> {
          if (!lock.tryLock(10, 30, TimeUnit.SECONDS)) {
            throw new AssertionError("a Redisson thread waited 10 s");
          }
          try {
            inside.run(referee);
          } finally {
            lock.unlock();
          }
        });
  }

  /** An rlock caller's connection of its own and its owner, the thread's. */
  record Seat(Rlock conn, String owner) implements AutoCloseable {
    static Seat of(Fleet.Node node) {
      return new Seat(node.rlock(), Owners.mine());
    }

    @Override
    public void close() {
      conn.close();
    }
  }

  /** An rlock caller: RLOCK.ACQUIRE … [side] LEASE 30000 BLOCK 10000, `inside`, RLOCK.RELEASE. */
  static Caller rlock(Fleet.Node node, String key, List<String> side, Inside inside) {
    List<Object> options = new ArrayList<>(side);
    options.addAll(List.of("LEASE", 30_000, "BLOCK", 10_000));
    return on(
        () -> Seat.of(node),
        (seat, referee) -> {
          if (seat.conn().acquire(key, seat.owner(), options.toArray()) == null) {
            throw new AssertionError("an rlock caller waited 10 s");
          }
          try {
            inside.run(referee);
          } finally {
            seat.conn().release(key, seat.owner(), side.toArray());
          }
        });
  }

  static Caller rlock(Fleet.Node node, String key) {
    return rlock(node, key, List.of(), ALONE);
  }

  /** Acquisitions per caller in `runMs`, in the callers' order. */
  static long[] run(long runMs, Referee referee, List<Caller> callers) throws Exception {
    CountDownLatch ready = new CountDownLatch(callers.size());
    CountDownLatch go = new CountDownLatch(1);
    AtomicLong countFrom = new AtomicLong();
    AtomicLong until = new AtomicLong();
    List<CompletableFuture<Long>> results = new ArrayList<>();
    for (int i = 0; i < callers.size(); i++) {
      Caller caller = callers.get(i);
      results.add(
          Threads.start(
              "caller-" + i,
              () -> {
                try (caller) {
                  caller.prepare();
                  ready.countDown();
                  go.await();
                  long taken = 0;
                  long now;
                  while ((now = System.nanoTime()) < until.get()) {
                    caller.once(referee);
                    if (now >= countFrom.get()) {
                      taken++;
                    }
                  }
                  return taken;
                }
              }));
    }
    if (!ready.await(30, TimeUnit.SECONDS)) {
      throw new AssertionError("callers not ready in 30 s");
    }
    long start = System.nanoTime();
    countFrom.set(start + TimeUnit.MILLISECONDS.toNanos(WARM_UP_MS));
    until.set(countFrom.get() + TimeUnit.MILLISECONDS.toNanos(runMs));
    go.countDown();
    long[] counts = new long[results.size()];
    for (int i = 0; i < counts.length; i++) {
      counts[i] = results.get(i).get(runMs + 30_000, TimeUnit.MILLISECONDS);
    }
    return counts;
  }

  private Race() {}
}
