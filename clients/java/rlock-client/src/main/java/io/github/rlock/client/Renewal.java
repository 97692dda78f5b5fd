package io.github.rlock.client;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * What the watchdog knows of one owner's hold on a key (all its re-entries), or of one
 * multi-key hold: how to renew it, when it falls due, and the future told of its loss. The
 * schedule is pure: {@link #schedule} puts renewals on a grid of a third of the lease from the
 * watchdog's start, so holds of one lease fall due together and are renewed in one pipeline.
 */
final class Renewal {
  final List<byte[]> keys;
  final byte[] owner;
  final Side side;
  final long leaseMs;
  final boolean renew;
  final CompletableFuture<LostException> lost = new CompletableFuture<>();
  /** The connections of its session holds (SESSION): closed once the hold is given back. */
  final List<Transport.WaitConn> sessions = new java.util.concurrent.CopyOnWriteArrayList<>();
  /** Its key in the watchdog's entries ({@link Watchdog#id}), set when the watchdog takes it. */
  String id;
  int holds;
  long basisNanos;
  long nextDueNanos;

  Renewal(List<byte[]> keys, byte[] owner, Side side, long leaseMs, boolean renew, long basisNanos) {
    this.keys = keys;
    this.owner = owner;
    this.side = side;
    this.leaseMs = leaseMs;
    this.renew = renew;
    this.basisNanos = basisNanos;
  }

  long periodNanos() {
    return leaseMs * 1_000_000L / 3;
  }

  /** The next renewal: the first point after {@code now} on the grid from {@code anchor}. */
  void schedule(long anchorNanos, long nowNanos) {
    long period = Math.max(1, periodNanos());
    nextDueNanos = anchorNanos + ((nowNanos - anchorNanos) / period + 1) * period;
  }

  /** When it must be looked at next: its renewal, or the end of a fixed lease. */
  long dueAt() {
    return renew ? nextDueNanos : basisNanos + leaseMs * 1_000_000L;
  }

  List<Cmd> renewals() {
    java.util.ArrayList<Cmd> out = new java.util.ArrayList<>();
    for (byte[] k : keys) {
      out.add(Plan.renew(k, owner, side, leaseMs, Plan.newReq()));
    }
    return out;
  }
}
