package io.github.rlock.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A lock in the server, reentrant per owner: by default the calling thread ({@code
 * <client-id>:<thread-id>}, Redisson's format), so {@code lock()} twice in one thread re-enters
 * and needs two {@code unlock()}s. Waits happen in the server; {@code Thread.interrupt()} and
 * {@code tryLock}'s timeout end them and leave nothing held.
 */
public class RlockLock implements Lock {
  final Locks locks;
  final String name;
  final byte[] key;
  final Side side;
  final LockOptions options;
  private final Plan.Acquire spec;

  RlockLock(Locks locks, String name, Side side, LockOptions options) {
    this.locks = locks;
    this.name = name;
    this.key = Checks.name(name, "name");
    this.side = side;
    this.options = options;
    long lease = options.lease != null ? Checks.leaseMs(options.lease) : locks.watchdogLeaseMs;
    this.spec = new Plan.Acquire(key, side, lease, options.fair, options.fenced, options.session);
  }

  /** @return the lock's key */
  public String getName() {
    return name;
  }

  byte[] owner() {
    return options.owner != null ? Checks.owner(options.owner) : locks.threadOwnerBytes();
  }

  /**
   * Tries once.
   *
   * @return the hold, or empty when another owner holds the lock
   */
  public Optional<Hold> acquire() {
    try {
      return Optional.ofNullable(acquireFor(-1));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.empty();
    }
  }

  /**
   * Waits in the server up to {@code wait}.
   *
   * @param wait zero tries once
   * @return the hold, or empty when not granted within the wait
   * @throws InterruptedException when the thread is interrupted: the wait is ended and whatever
   *     it was granted given back
   */
  public Optional<Hold> acquire(Duration wait) throws InterruptedException {
    return Optional.ofNullable(acquireFor(Checks.waitMs(wait)));
  }

  /**
   * Waits until granted, however long.
   *
   * @return the hold
   * @throws InterruptedException when the thread is interrupted
   */
  public Hold acquireForever() throws InterruptedException {
    return acquireFor(0);
  }

  /**
   * {@code blockMs}: -1 tries once, 0 forever, else the wait in ms. Returns null when not granted.
   */
  Hold acquireFor(long blockMs) throws InterruptedException {
    byte[] owner = owner();
    int replicas = options.syncReplicas != null ? options.syncReplicas : locks.replicasFor(key);
    long syncMs = Checks.leaseMs(options.syncTimeout);
    String req = Plan.newReq();
    List<Cmd> cmds = Plan.acquirePipeline(spec, owner, req, blockMs, replicas, syncMs);
    // Made only when a grant must be given back (a wait left, a replica short): rare.
    Locks.GiveBack back = grant -> List.of(Plan.release(key, owner, side, Plan.giveBackReq(req)));
    long sent = System.nanoTime();
    List<Object> replies;
    Transport.WaitConn pinned = null;
    if (blockMs < 0 && !spec.session()) {
      replies = locks.pipeline(key, cmds, true);
    } else {
      Locks.Waited w = locks.waitFor(key, cmds, blockMs, back, spec.session());
      replies = w.replies();
      pinned = w.pinned();
      if (blockMs != 0) {
        sent = Math.max(sent, System.nanoTime() - TimeUnit.MILLISECONDS.toNanos(replicas > 0 ? syncMs : 0));
      }
    }
    Replies.Grant grant;
    try {
      grant = Replies.grant(replies, spec.fenced(), replicas);
    } catch (RuntimeException e) {
      if (pinned != null) {
        pinned.discard();
      }
      throw e;
    }
    if (grant == null) {
      if (pinned != null) {
        pinned.discard();
      }
      return null;
    }
    long count = grant.holdCount() == null ? 0 : grant.holdCount();
    Long token = grant.token();
    long acked = grant.replicasAcked() == null ? 0 : grant.replicasAcked();
    if (replicas > 0) {
      if (acked < replicas) {
        locks.releaseQuietly(key, back.of(null));
        if (pinned != null) {
          pinned.discard();
        }
        throw new NotAcknowledgedException(
            "lock " + name + ": " + acked + " of " + replicas + " replicas acknowledged the grant within "
                + syncMs + " ms; it was released", acked);
      }
    }
    Renewal r = locks.watchdog.hold(List.of(key), owner, side, spec.leaseMs(), options.lease == null, sent);
    return new Hold(locks, List.of(key), owner, side, token, count, acked, r, pinned);
  }

  /**
   * Runs {@code body} under the lock, waiting in the server up to {@code wait}, and releases it
   * after. The body never runs unlocked.
   *
   * @param wait how long to wait; zero tries once
   * @param body what to run
   * @param <T> what it returns
   * @return what the body returned
   * @throws NotAcquiredException when the wait ended without a grant (the body did not run)
   * @throws InterruptedException when interrupted while waiting
   * @throws Exception what the body threw
   */
  public <T> T withLock(Duration wait, java.util.concurrent.Callable<T> body) throws Exception {
    java.util.Objects.requireNonNull(body, "body must not be null");
    try (Hold hold = acquire(wait).orElseThrow(
        () -> new NotAcquiredException("lock " + name + " was not acquired within " + wait))) {
      return body.call();
    }
  }

  /**
   * Runs {@code body} under the lock, waiting as long as it takes, and releases it after.
   *
   * @param body what to run
   * @param <T> what it returns
   * @return what the body returned
   * @throws InterruptedException when interrupted while waiting
   * @throws Exception what the body threw
   */
  public <T> T withLock(java.util.concurrent.Callable<T> body) throws Exception {
    java.util.Objects.requireNonNull(body, "body must not be null");
    try (Hold hold = acquireForever()) {
      return body.call();
    }
  }

  /** Waits until granted, whatever interrupts come (they are kept for the caller). */
  @Override
  public void lock() {
    boolean interrupted = false;
    try {
      while (true) {
        try {
          acquireFor(0);
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
    acquireFor(0);
  }

  @Override
  public boolean tryLock() {
    return acquire().isPresent();
  }

  @Override
  public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
    if (Thread.interrupted()) {
      throw new InterruptedException();
    }
    return acquireFor(Checks.waitMs(time, unit)) != null;
  }

  /**
   * Gives back one hold of the calling thread's owner (or the handle's owner).
   *
   * @throws IllegalMonitorStateException when that owner does not hold the lock
   */
  @Override
  public void unlock() {
    byte[] owner = owner();
    Cmd cmd = Plan.release(key, owner, side, Plan.newReq());
    boolean freed;
    try {
      freed = Replies.freed(locks.pipeline(key, List.of(cmd), true).get(0), key, owner);
    } catch (NotHeldException e) {
      Renewal r = locks.watchdog.find(List.of(key), owner, side);
      if (r != null) {
        locks.watchdog.released(r, true);
      }
      IllegalMonitorStateException ex =
          new IllegalMonitorStateException("attempt to unlock lock " + name + ", not locked by owner " + Locks.str(owner));
      ex.initCause(e);
      throw ex;
    }
    Renewal r = locks.watchdog.find(List.of(key), owner, side);
    if (r != null) {
      locks.watchdog.released(r, freed);
      if (freed) {
        // Session holds taken with lock(): their connections go with the last release.
        for (Transport.WaitConn c : r.sessions) {
          locks.sessions.remove(c);
          r.sessions.remove(c);
          c.discard();
        }
      }
    }
  }

  /** Refused, as Redisson refuses it. */
  @Override
  public Condition newCondition() {
    throw new UnsupportedOperationException("rlock locks have no conditions");
  }

  /** @return whether anyone holds the lock */
  public boolean isLocked() {
    return Replies.yes(locks.call(Plan.isLocked(key)));
  }

  /** @return the lease left, or empty when the lock is free (or has no expiry) */
  public Optional<Duration> remainingLease() {
    Long ms = Replies.remainingMs(locks.call(Plan.remainingLease(key)));
    return ms == null ? Optional.empty() : Optional.of(Duration.ofMillis(ms));
  }

  /** @return whether the calling thread's owner (or the handle's) holds it */
  public boolean isHeldByCurrentThread() {
    return Replies.yes(locks.call(Plan.isHeldBy(key, owner(), side)));
  }

  /** @return the calling thread's (or the handle's owner's) hold count */
  public int getHoldCount() {
    Object v = locks.call(Plan.holdCount(key, owner(), side));
    Long n = Replies.asLong(v);
    return n == null ? 0 : n.intValue();
  }

  /** @return whether a hold was removed, whoever held it */
  public boolean forceUnlock() {
    return locks.forceRelease(name);
  }
}
