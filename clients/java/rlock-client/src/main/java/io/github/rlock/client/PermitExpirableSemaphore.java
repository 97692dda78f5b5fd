package io.github.rlock.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A semaphore whose permits are leased, in Redisson's {@code RPermitExpirableSemaphore} layout:
 * each permit taken has an id and comes back by itself when its lease ends.
 */
public final class PermitExpirableSemaphore {
  private final Locks locks;
  private final byte[] key;
  private final Semaphore counts;

  PermitExpirableSemaphore(Locks locks, String name) {
    this.locks = locks;
    this.key = Checks.name(name, "name");
    this.counts = new Semaphore(locks, name);
  }

  /**
   * @param permits 0 or more
   * @return true if set, false if the semaphore existed
   */
  public boolean trySetPermits(int permits) {
    return counts.trySetPermits(permits);
  }

  /**
   * @param permits added (negative takes away)
   * @return the permits available now
   */
  public long addPermits(int permits) {
    return counts.addPermits(permits);
  }

  /** @return the permits available now, ended leases counted */
  public long availablePermits() {
    return counts.availablePermits();
  }

  /**
   * Leases one permit if one is free.
   *
   * @param lease how long it lasts
   * @return its id, or empty
   */
  public Optional<String> tryAcquire(Duration lease) {
    try {
      List<String> ids = leaseFor(lease, 1, -1);
      return ids == null ? Optional.empty() : Optional.of(ids.get(0));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.empty();
    }
  }

  /**
   * @param wait how long to wait in the server
   * @param lease how long the permit lasts
   * @return its id, or empty when none came within the wait
   * @throws InterruptedException when interrupted: nothing is left leased
   */
  public Optional<String> tryAcquire(Duration wait, Duration lease) throws InterruptedException {
    List<String> ids = leaseFor(lease, 1, Checks.waitMs(wait));
    return ids == null ? Optional.empty() : Optional.of(ids.get(0));
  }

  /**
   * @param lease how long the permits last
   * @param permits how many, 1 to 1024
   * @param wait how long to wait in the server
   * @return their ids, or empty
   * @throws InterruptedException when interrupted: nothing is left leased
   */
  public Optional<List<String>> tryAcquire(Duration lease, int permits, Duration wait) throws InterruptedException {
    return Optional.ofNullable(leaseFor(lease, permits, Checks.waitMs(wait)));
  }

  private List<String> leaseFor(Duration lease, int permits, long blockMs) throws InterruptedException {
    long leaseMs = Checks.leaseMs(lease);
    Checks.count(permits, "permits", 1, 1024);
    String req = Plan.newReq();
    Cmd cmd = Plan.semLease(key, leaseMs, permits, blockMs, req);
    Object v;
    if (blockMs < 0) {
      v = locks.pipeline(key, List.of(cmd), true).get(0);
    } else {
      v =
          locks
              .waitFor(
                  key,
                  List.of(cmd),
                  blockMs,
                  grant -> {
                    List<Cmd> back = new ArrayList<>();
                    for (Object id : Replies.list(grant)) {
                      back.add(Plan.semReturn(key, (byte[]) id, Plan.newReq()));
                    }
                    return back;
                  },
                  false)
              .replies()
              .get(0);
    }
    v = Replies.ok(v);
    if (v == null) {
      return null;
    }
    List<String> ids = new ArrayList<>();
    for (Object id : Replies.list(v)) {
      ids.add(Replies.text(id));
    }
    return ids;
  }

  /**
   * @param id a leased permit's id
   * @return true if it was given back, false when it was not leased (any more)
   */
  public boolean release(String id) {
    byte[] b = Checks.name(id, "id");
    return Replies.asLong(Replies.ok(locks.pipeline(key, List.of(Plan.semReturn(key, b, Plan.newReq())), true).get(0))) == 1;
  }

  /**
   * @param id a leased permit's id
   * @param lease its new lease, from now
   * @return true if renewed, false when it was not leased (any more)
   */
  public boolean renew(String id, Duration lease) {
    byte[] b = Checks.name(id, "id");
    return Replies.asLong(locks.call(Plan.semRenew(key, b, Checks.leaseMs(lease)))) == 1;
  }
}
