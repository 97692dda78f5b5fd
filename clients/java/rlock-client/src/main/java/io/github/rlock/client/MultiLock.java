package io.github.rlock.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * All-or-nothing over several reentrant locks ({@code RLOCK.MACQUIRE}): every lock is taken in one
 * step, or none. In a cluster the names must share a slot (a hash tag such as {@code {order:7}}),
 * refused here before anything is sent.
 */
public final class MultiLock {
  private final Locks locks;
  private final List<byte[]> keys;
  private final LockOptions options;
  private final long leaseMs;

  MultiLock(Locks locks, List<String> names, LockOptions options) {
    java.util.Objects.requireNonNull(names, "names must not be null");
    if (names.isEmpty() || names.size() > 1024) {
      throw new IllegalArgumentException("a multi-lock takes 1 to 1024 names, got " + names.size());
    }
    List<byte[]> ks = new ArrayList<>();
    for (String n : names) {
      ks.add(Checks.name(n, "name"));
    }
    ks = Plan.multiKeys(ks);
    if (locks.transport.cluster()) {
      // A standalone server takes any names; a cluster would answer CROSSSLOT.
      Plan.checkSameSlot(ks);
    }
    if (options.fair || options.fenced) {
      throw new IllegalArgumentException("a multi-lock is neither fair nor fenced");
    }
    this.locks = locks;
    this.keys = List.copyOf(ks);
    this.options = options;
    this.leaseMs = options.lease != null ? Checks.leaseMs(options.lease) : locks.watchdogLeaseMs;
  }

  /**
   * Tries once.
   *
   * @return the hold over every lock, or empty
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
   * @param wait how long to wait in the server; zero tries once
   * @return the hold over every lock, or empty when not all were granted within the wait
   * @throws InterruptedException when interrupted: the wait ends, nothing is left held
   */
  public Optional<Hold> acquire(Duration wait) throws InterruptedException {
    return Optional.ofNullable(acquireFor(Checks.waitMs(wait)));
  }

  /**
   * Runs {@code body} holding all the locks, waiting as long as it takes, and releases them after.
   *
   * @param body what to run
   * @param <T> what it returns
   * @return what the body returned
   * @throws Exception what the body threw, or InterruptedException while waiting
   */
  public <T> T withLock(java.util.concurrent.Callable<T> body) throws Exception {
    java.util.Objects.requireNonNull(body, "body must not be null");
    try (Hold hold = acquireFor(0)) {
      return body.call();
    }
  }

  /**
   * Runs {@code body} holding all the locks, waiting up to {@code wait} (zero tries once).
   *
   * @param wait how long to wait
   * @param body what to run
   * @param <T> what it returns
   * @return what the body returned
   * @throws NotAcquiredException when the wait ended without a grant (the body did not run)
   * @throws Exception what the body threw, or InterruptedException while waiting
   */
  public <T> T withLock(Duration wait, java.util.concurrent.Callable<T> body) throws Exception {
    java.util.Objects.requireNonNull(body, "body must not be null");
    try (Hold hold = acquire(wait).orElseThrow(() -> new NotAcquiredException("the multi-lock was not acquired within " + wait))) {
      return body.call();
    }
  }

  private Hold acquireFor(long blockMs) throws InterruptedException {
    byte[] owner = Checks.owner(options.owner != null ? options.owner : locks.owner());
    String req = Plan.newReq();
    Cmd cmd = Plan.macquire(owner, keys, leaseMs, blockMs, options.session, req);
    Cmd giveBack = Plan.mrelease(owner, keys, Plan.giveBackReq(req));
    long sent = System.nanoTime();
    List<Object> replies;
    Transport.WaitConn pinned = null;
    if (blockMs < 0 && !options.session) {
      replies = locks.pipeline(keys.get(0), List.of(cmd), true);
    } else {
      Locks.Waited w = locks.waitFor(keys.get(0), List.of(cmd), blockMs, grant -> List.of(giveBack), options.session);
      replies = w.replies();
      pinned = w.pinned();
      sent = System.nanoTime();
    }
    Object first = replies.get(0);
    if (first == null || first instanceof ServerError) {
      if (pinned != null) {
        pinned.discard();
      }
      Replies.ok(first);
      return null;
    }
    Renewal r = locks.watchdog.hold(keys, owner, null, leaseMs, options.lease == null, sent);
    return new Hold(locks, keys, owner, null, null, Replies.asLong(first), 0, r, pinned);
  }
}
