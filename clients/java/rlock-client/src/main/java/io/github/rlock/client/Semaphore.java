package io.github.rlock.client;

import java.time.Duration;
import java.util.List;

/**
 * A counting semaphore in Redisson's {@code RSemaphore} layout. Permits have no owner: anyone may
 * give them back. Waits happen in the server, in arrival order.
 */
public final class Semaphore {
  private final Locks locks;
  private final byte[] key;

  Semaphore(Locks locks, String name) {
    this.locks = locks;
    this.key = Checks.name(name, "name");
  }

  /**
   * @param permits 0 or more
   * @return true if set, false if the semaphore existed
   */
  public boolean trySetPermits(int permits) {
    Checks.count(permits, "permits", 0, Integer.MAX_VALUE);
    return Replies.asLong(locks.call(Plan.semTrySetPermits(key, permits))) == 1;
  }

  /**
   * @param permits added (negative takes away)
   * @return the permits available now
   */
  public long addPermits(int permits) {
    Checks.count(permits, "permits", -Integer.MAX_VALUE, Integer.MAX_VALUE);
    return Replies.asLong(locks.call(Plan.semAddPermits(key, permits)));
  }

  /** @return the permits available now */
  public long availablePermits() {
    return Replies.asLong(locks.call(Plan.semAvailable(key)));
  }

  /**
   * Takes {@code permits} at once if there are enough.
   *
   * @param permits 1 or more
   * @return whether they were taken
   */
  public boolean tryAcquire(int permits) {
    try {
      return acquireFor(permits, -1);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /**
   * @param permits 1 or more
   * @param wait how long to wait in the server
   * @return whether they were taken within the wait
   * @throws InterruptedException when interrupted: nothing is left taken
   */
  public boolean tryAcquire(int permits, Duration wait) throws InterruptedException {
    return acquireFor(permits, Checks.waitMs(wait));
  }

  /**
   * Waits however long for {@code permits}.
   *
   * @param permits 1 or more
   * @throws InterruptedException when interrupted: nothing is left taken
   */
  public void acquire(int permits) throws InterruptedException {
    acquireFor(permits, 0);
  }

  private boolean acquireFor(int permits, long blockMs) throws InterruptedException {
    Checks.count(permits, "permits", 1, Integer.MAX_VALUE);
    String req = Plan.newReq();
    Cmd cmd = Plan.semAcquire(key, permits, blockMs, req);
    Cmd giveBack = Plan.semRelease(key, permits, Plan.giveBackReq(req));
    Object v;
    if (blockMs < 0) {
      v = locks.pipeline(key, List.of(cmd), true).get(0);
    } else {
      v = locks.waitFor(key, List.of(cmd), blockMs, grant -> List.of(giveBack), false).replies().get(0);
    }
    return Replies.ok(v) != null;
  }

  /**
   * @param permits given back, 1 or more
   * @return the permits available now
   */
  public long release(int permits) {
    Checks.count(permits, "permits", 1, Integer.MAX_VALUE);
    return Replies.asLong(Replies.ok(locks.pipeline(key, List.of(Plan.semRelease(key, permits, Plan.newReq())), true).get(0)));
  }
}
