package io.github.rlock.spring;

import io.github.rlock.client.Hold;
import io.github.rlock.client.LockOptions;
import io.github.rlock.client.Locks;
import io.github.rlock.client.NotHeldException;
import io.github.rlock.client.RlockLock;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ConcurrentModificationException;
import java.util.Deque;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import org.springframework.integration.support.locks.ExpirableLockRegistry;
import org.springframework.integration.support.locks.RenewableLockRegistry;

/**
 * A Spring Integration {@link org.springframework.integration.support.locks.LockRegistry} on rlock:
 * the bean that replaces {@code RedisLockRegistry}. Lock keys are Strings, stored as {@code
 * <registryKey>:<lockKey>} as {@code RedisLockRegistry} names them; waits happen in the server,
 * first come first served, and each lock is reentrant per thread, its owner {@code
 * <client-id>:<thread-id>}.
 *
 * <pre>{@code
 * @Bean
 * LockRegistry lockRegistry(Locks locks) {
 *   return new RlockLockRegistry(locks, "orders");        // was: new RedisLockRegistry(factory, "orders")
 * }
 * }</pre>
 *
 * <p>Two lease modes: without {@code expireAfter} the {@link Locks} watchdog renews every hold
 * until it is released (a crashed process loses its holds after the watchdog lease); with it, as
 * {@code RedisLockRegistry}, each hold lasts {@code expireAfter} unless {@link #renewLock renewed}.
 */
public final class RlockLockRegistry implements ExpirableLockRegistry, RenewableLockRegistry {
  private final Locks locks;
  private final String registryKey;
  private final LockOptions options;
  private final Map<String, RegistryLock> cache = new ConcurrentHashMap<>();

  /**
   * Holds renewed by the watchdog of {@code locks} until released.
   *
   * @param locks the rlock client
   * @param registryKey the prefix of every lock's key
   */
  public RlockLockRegistry(Locks locks, String registryKey) {
    this(locks, registryKey, LockOptions.defaults());
  }

  /**
   * Holds that last {@code expireAfter} ms unless renewed, as {@code RedisLockRegistry}'s.
   *
   * @param locks the rlock client
   * @param registryKey the prefix of every lock's key
   * @param expireAfter the lease of each hold, in ms, more than 0
   */
  public RlockLockRegistry(Locks locks, String registryKey, long expireAfter) {
    this(locks, registryKey, leaseOf(expireAfter));
  }

  private RlockLockRegistry(Locks locks, String registryKey, LockOptions options) {
    this.locks = Objects.requireNonNull(locks, "locks must not be null");
    if (registryKey == null || registryKey.isEmpty()) {
      throw new IllegalArgumentException("registryKey must not be empty");
    }
    this.registryKey = registryKey;
    this.options = options;
  }

  private static LockOptions leaseOf(long expireAfter) {
    if (expireAfter <= 0) {
      throw new IllegalArgumentException("expireAfter must be more than 0 ms, got " + expireAfter);
    }
    return LockOptions.defaults().lease(Duration.ofMillis(expireAfter));
  }

  /**
   * @param lockKey a non-empty String
   * @return the one lock of this registry for that key
   */
  @Override
  public Lock obtain(Object lockKey) {
    String path = path(lockKey);
    RegistryLock lock =
        cache.computeIfAbsent(
            path, p -> new RegistryLock(locks.lock(registryKey + ":" + p, options)));
    lock.lastUsed = System.currentTimeMillis();
    return lock;
  }

  /** Forgets the locks not used for {@code age} ms that no thread of this process holds. */
  @Override
  public void expireUnusedOlderThan(long age) {
    long now = System.currentTimeMillis();
    cache.entrySet().removeIf(e -> !e.getValue().heldHere() && now - e.getValue().lastUsed > age);
  }

  /**
   * Renews the calling thread's hold of {@code lockKey} for its lease (the watchdog's, or {@code
   * expireAfter}).
   *
   * @throws IllegalStateException when this registry has no such lock or the thread holds none
   * @throws io.github.rlock.client.LostException when the server no longer has the hold
   */
  @Override
  public void renewLock(Object lockKey) {
    String path = path(lockKey);
    RegistryLock lock = cache.get(path);
    if (lock == null) {
      throw new IllegalStateException("Could not found mutex at " + path);
    }
    Hold hold = lock.latest();
    if (hold == null) {
      throw new IllegalStateException("The current thread is not holding mutex at " + path);
    }
    hold.renew();
  }

  private static String path(Object lockKey) {
    if (!(lockKey instanceof String path)) {
      throw new IllegalArgumentException(
          "lockKey must be a String, got "
              + (lockKey == null ? "null" : lockKey.getClass().getName()));
    }
    if (path.isEmpty()) {
      throw new IllegalArgumentException("lockKey must not be empty");
    }
    return path;
  }

  @Override
  public String toString() {
    return "RlockLockRegistry[" + registryKey + "]";
  }

  /** One key's lock: the server's hold per thread, and the holds this process took, per thread. */
  private static final class RegistryLock implements Lock {
    private final RlockLock lock;
    private final Map<Long, Deque<Hold>> holds = new ConcurrentHashMap<>();
    volatile long lastUsed;

    RegistryLock(RlockLock lock) {
      this.lock = lock;
    }

    @SuppressWarnings("deprecation")
    private static long thread() {
      return Thread.currentThread().getId();
    }

    boolean heldHere() {
      return holds.values().stream().anyMatch(d -> !d.isEmpty());
    }

    Hold latest() {
      Deque<Hold> mine = holds.get(thread());
      return mine == null ? null : mine.peek();
    }

    private boolean took(Hold hold) {
      if (hold != null) {
        holds.computeIfAbsent(thread(), t -> new ArrayDeque<>()).push(hold);
      }
      return hold != null;
    }

    @Override
    public void lock() {
      boolean interrupted = false;
      try {
        while (true) {
          try {
            took(lock.acquireForever());
            return;
          } catch (InterruptedException e) {
            interrupted = true;
          }
        }
      } finally {
        if (interrupted) {
          Thread.currentThread().interrupt();
        }
      }
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
      if (Thread.interrupted()) {
        throw new InterruptedException();
      }
      took(lock.acquireForever());
    }

    @Override
    public boolean tryLock() {
      return took(lock.acquire().orElse(null));
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
      if (Thread.interrupted()) {
        throw new InterruptedException();
      }
      return took(lock.acquire(Duration.ofNanos(unit.toNanos(Math.max(time, 0)))).orElse(null));
    }

    /**
     * @throws IllegalStateException when the calling thread holds none (as RedisLockRegistry)
     * @throws ConcurrentModificationException when its hold ran out in the server before this call
     *     (as RedisLockRegistry): the work it guarded may have overlapped another holder's
     */
    @Override
    public void unlock() {
      Deque<Hold> mine = holds.get(thread());
      Hold hold = mine == null ? null : mine.poll();
      if (hold == null) {
        throw new IllegalStateException("You do not own lock at " + lock.getName());
      }
      if (mine.isEmpty()) {
        holds.remove(thread());
      }
      try {
        hold.release();
      } catch (NotHeldException e) {
        ConcurrentModificationException lost =
            new ConcurrentModificationException(
                "Lock was released in the store due to expiration. "
                    + "The integrity of data protected by this lock may have been compromised.");
        lost.initCause(e);
        throw lost;
      }
    }

    /** Refused, as RedisLockRegistry refuses it. */
    @Override
    public Condition newCondition() {
      throw new UnsupportedOperationException("Conditions are not supported");
    }

    @Override
    public String toString() {
      return "RlockLock [lockKey=" + lock.getName() + "]";
    }
  }
}
