package io.github.rlock.client;

import java.util.concurrent.locks.ReadWriteLock;

/**
 * A read-write lock in Redisson's {@code RReadWriteLock} layout: readers share it, a writer holds
 * it alone. Both locks are reentrant per thread, as {@link RlockLock}.
 */
public final class RlockReadWriteLock implements ReadWriteLock {
  private final RlockLock read;
  private final RlockLock write;

  RlockReadWriteLock(Locks locks, String name, LockOptions options) {
    this.read = new RlockLock(locks, name, Side.READ, options);
    this.write = new RlockLock(locks, name, Side.WRITE, options);
  }

  /** @return the shared side */
  @Override
  public RlockLock readLock() {
    return read;
  }

  /** @return the exclusive side */
  @Override
  public RlockLock writeLock() {
    return write;
  }
}
