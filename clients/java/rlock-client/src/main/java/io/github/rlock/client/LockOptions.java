package io.github.rlock.client;

import java.time.Duration;
import java.util.Objects;

/**
 * How a lock handle acquires: lease, fairness, fencing, session, replica sync and owner. Immutable;
 * each method returns a changed copy. {@code LockOptions.defaults()}: the watchdog renews a 30 s
 * lease, durable when a replica is attached, the calling thread is the owner.
 */
public final class LockOptions {
  final Duration lease;
  final boolean fair;
  final boolean fenced;
  final boolean session;
  final Integer syncReplicas;
  final Duration syncTimeout;
  final String owner;

  private LockOptions(
      Duration lease, boolean fair, boolean fenced, boolean session, Integer syncReplicas, Duration syncTimeout, String owner) {
    this.lease = lease;
    this.fair = fair;
    this.fenced = fenced;
    this.session = session;
    this.syncReplicas = syncReplicas;
    this.syncTimeout = syncTimeout;
    this.owner = owner;
  }

  /** @return the defaults */
  public static LockOptions defaults() {
    return new LockOptions(null, false, false, false, null, Duration.ofMillis(Plan.DEFAULT_SYNC_TIMEOUT_MS), null);
  }

  /**
   * A fixed lease: the hold ends after it unless released first; the watchdog does not renew it.
   *
   * @param lease more than zero
   * @return a changed copy
   */
  public LockOptions lease(Duration lease) {
    Checks.leaseMs(lease);
    return new LockOptions(lease, fair, fenced, session, syncReplicas, syncTimeout, owner);
  }

  /** @return a copy that takes the lock in arrival order with every fair caller (Redisson's fair queue) */
  public LockOptions fair() {
    return new LockOptions(lease, true, fenced, session, syncReplicas, syncTimeout, owner);
  }

  /** @return a copy whose holds carry a fencing token ({@link Hold#token()}) */
  public LockOptions fenced() {
    return new LockOptions(lease, fair, true, session, syncReplicas, syncTimeout, owner);
  }

  /** @return a copy whose holds end when their connection closes (the process dies) */
  public LockOptions session() {
    return new LockOptions(lease, fair, fenced, true, syncReplicas, syncTimeout, owner);
  }

  /**
   * How many replicas must acknowledge a grant ({@code WAIT}) before it is returned; 0 sends no
   * {@code WAIT}. Default: 1 when the server has a replica attached, else 0.
   *
   * @param n at least 0
   * @return a changed copy
   */
  public LockOptions syncReplicas(int n) {
    if (n < 0) {
      throw new IllegalArgumentException("syncReplicas must be >= 0, got " + n);
    }
    return new LockOptions(lease, fair, fenced, session, n, syncTimeout, owner);
  }

  /**
   * @param timeout how long a grant may wait for its replicas (default 1 s)
   * @return a changed copy
   */
  public LockOptions syncTimeout(Duration timeout) {
    Checks.leaseMs(timeout);
    return new LockOptions(lease, fair, fenced, session, syncReplicas, timeout, owner);
  }

  /**
   * An explicit owner for every hold of the handle, instead of the calling thread's.
   *
   * @param owner 1 to 1024 bytes
   * @return a changed copy
   */
  public LockOptions owner(String owner) {
    Checks.owner(owner);
    return new LockOptions(lease, fair, fenced, session, syncReplicas, syncTimeout, Objects.requireNonNull(owner));
  }
}
