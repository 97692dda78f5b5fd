package io.github.rlock.client;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One granted acquire: close it (try-with-resources) or {@link #release()} it to give it back. It
 * remembers its owner, so it may be released from another thread.
 */
public final class Hold implements AutoCloseable {
  private final Locks locks;
  private final List<byte[]> keys;
  private final byte[] owner;
  private final Side side;
  private final Long token;
  private final long count;
  private final long replicasAcked;
  private final Renewal renewal;
  private final Transport.WaitConn session;
  private final AtomicBoolean released = new AtomicBoolean();

  Hold(Locks locks, List<byte[]> keys, byte[] owner, Side side, Long token, long count, long replicasAcked,
      Renewal renewal, Transport.WaitConn session) {
    this.locks = locks;
    this.keys = keys;
    this.owner = owner;
    this.side = side;
    this.token = token;
    this.count = count;
    this.replicasAcked = replicasAcked;
    this.renewal = renewal;
    this.session = session;
    if (session != null) {
      locks.sessions.add(session);
      renewal.sessions.add(session);
    }
  }

  /** @return the fencing token of a fenced lock, or null */
  public Long token() {
    return token;
  }

  /** @return the owner's hold count once this hold was granted */
  public long count() {
    return count;
  }

  /** @return how many replicas acknowledged the grant ({@code WAIT}); 0 when none was asked */
  public long replicasAcked() {
    return replicasAcked;
  }

  /** @return the owner this hold belongs to */
  public String owner() {
    return Locks.str(owner);
  }

  /**
   * Completes (with the reason) when the hold is lost: its lease ran out, it was force-released,
   * its key deleted. Never completes for a hold released normally.
   *
   * @return the future
   */
  public CompletableFuture<LostException> lost() {
    return renewal.lost;
  }

  /** @return whether the hold is known to be lost */
  public boolean isLost() {
    return renewal.lost.isDone();
  }

  /** Raises {@link LostException} if the hold is lost. */
  public void checkNotLost() {
    if (renewal.lost.isDone()) {
      throw renewal.lost.join();
    }
  }

  /**
   * Runs {@code command} on the server only while this hold stands, checked there in the same turn
   * ({@code RLOCK.GUARD} with the hold's key, owner, side and, when fenced, token): a write made
   * after the lease ran out, a force release, or a newer grant never lands. Sent once, never
   * resent. The command's keys must be in the lock's cluster slot (a hash tag: {@code orders} and
   * {@code {orders}:data}).
   *
   * @param command the command's name and arguments, e.g. {@code "SET", "{orders}:data", "v"}
   * @return the command's reply: a {@code String}, {@code Long}, {@code List} or null
   * @throws StaleTokenException when a newer fencing token was granted since this hold's
   * @throws NotHeldException when the owner no longer holds the lock (nothing ran)
   * @throws ServerException the command's own error
   * @throws IllegalArgumentException when the command is empty (nothing is sent)
   * @throws IllegalStateException when this hold was released, or holds several locks
   */
  public Object guard(String... command) {
    List<byte[]> words = Checks.command(command);
    if (released.get()) {
      throw new IllegalStateException("the hold was released: nothing was sent");
    }
    if (keys.size() != 1) {
      throw new IllegalStateException("a multi-lock hold guards no single lock: guard through one lock's hold");
    }
    Cmd cmd = Plan.guard(keys.get(0), owner, side, token, words);
    return Replies.guarded(locks.pipeline(keys.get(0), List.of(cmd), false).get(0), keys.get(0), owner);
  }

  /**
   * Renews the lease now (the watchdog does it anyway for a hold without a fixed lease).
   *
   * @throws LostException when the hold is gone
   */
  public void renew() {
    List<Object> replies = locks.pipeline(keys.get(0), renewal.renewals(), true);
    for (Object v : replies) {
      Replies.renewed(v, "lock " + Locks.str(keys.get(0)) + " is no longer held by " + owner());
    }
  }

  /**
   * Gives this hold back (one re-entry). A second call does nothing.
   *
   * @throws NotHeldException when the server says the owner no longer holds it (lost)
   */
  public void release() {
    if (!released.compareAndSet(false, true)) {
      return;
    }
    String req = Plan.newReq();
    Cmd cmd = keys.size() == 1 ? Plan.release(keys.get(0), owner, side, req) : Plan.mrelease(owner, keys, req);
    boolean freed = true;
    try {
      Object v = locks.pipeline(keys.get(0), List.of(cmd), true).get(0);
      freed = keys.size() == 1 ? Replies.freed(v, keys.get(0), owner) : Replies.mfreed(v, keys.get(0), owner) == keys.size();
    } finally {
      locks.watchdog.released(renewal, freed);
      if (session != null) {
        // A session hold's connection is its own: closing it ends nothing more than this hold.
        locks.sessions.remove(session);
        renewal.sessions.remove(session);
        session.discard();
      }
    }
  }

  /** Same as {@link #release()}. */
  @Override
  public void close() {
    release();
  }
}
