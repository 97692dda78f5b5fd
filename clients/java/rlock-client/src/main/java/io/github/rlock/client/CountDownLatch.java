package io.github.rlock.client;

import java.time.Duration;
import java.util.List;

/** A count-down latch in Redisson's {@code RCountDownLatch} layout; waits happen in the server. */
public final class CountDownLatch {
  private final Locks locks;
  private final byte[] key;

  CountDownLatch(Locks locks, String name) {
    this.locks = locks;
    this.key = Checks.name(name, "name");
  }

  /**
   * @param count 1 or more
   * @return true if set, false if the latch had a count
   */
  public boolean trySetCount(long count) {
    Checks.latchCount(count);
    return Replies.yes(locks.call(Plan.latchTrySetCount(key, count)));
  }

  /** @return the count now */
  public long countDown() {
    return Replies.asLong(locks.call(Plan.latchCountDown(key)));
  }

  /** @return the count now; 0 when the latch has none */
  public long getCount() {
    return Replies.asLong(locks.call(Plan.latchCount(key)));
  }

  /**
   * Waits until the count is zero, up to {@code wait}.
   *
   * @param wait how long; zero looks once
   * @return whether it opened within the wait
   * @throws InterruptedException when interrupted
   */
  public boolean awaitZero(Duration wait) throws InterruptedException {
    long block = Checks.waitMs(wait);
    Cmd cmd = Plan.latchAwait(key, block);
    Object v =
        block < 0
            ? locks.pipeline(key, List.of(cmd), true).get(0)
            : locks.waitFor(key, List.of(cmd), block, grant -> List.of(), false).replies().get(0);
    return Replies.ok(v) != null;
  }

  /**
   * Waits however long for the count to reach zero.
   *
   * @throws InterruptedException when interrupted
   */
  public void awaitZero() throws InterruptedException {
    Cmd cmd = Plan.latchAwait(key, 0);
    Replies.ok(locks.waitFor(key, List.of(cmd), 0, grant -> List.of(), false).replies().get(0));
  }
}
