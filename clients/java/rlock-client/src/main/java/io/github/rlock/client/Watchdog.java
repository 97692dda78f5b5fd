package io.github.rlock.client;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One per {@link Locks}: one thread renews every due hold, one pipeline per server, a third of a
 * lease after its last renewal, and tells loss (a renewal answered 0, a fixed lease run out).
 * With keyspace events on, a held key's loss event makes it look at once, so loss is told within
 * one event instead of a third of a lease.
 */
final class Watchdog implements AutoCloseable {
  private final Locks locks;
  private final ScheduledExecutorService thread;
  private final Map<String, Renewal> entries = new ConcurrentHashMap<>();
  private final long anchor = System.nanoTime();
  /** Per server: whether it publishes keyspace events, and what is subscribed there. */
  private final Map<String, Events> events = new ConcurrentHashMap<>();
  /** Whether some server publishes per-key events (K): released keys are then unsubscribed. */
  private volatile boolean perKey;
  private final java.util.concurrent.atomic.AtomicBoolean sweepPending = new java.util.concurrent.atomic.AtomicBoolean();
  /** How long a key's channel outlives its last hold: a busy lock is not subscribed anew each grant. */
  static final long UNSUBSCRIBE_AFTER_MS = 1_000;
  private ScheduledFuture<?> next;
  private long nextAt = Long.MAX_VALUE;
  final AtomicLong renewals = new AtomicLong();
  final AtomicLong rounds = new AtomicLong();

  Watchdog(Locks locks) {
    this.locks = locks;
    this.thread =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "rlock-watchdog");
              t.setDaemon(true);
              return t;
            });
  }

  /**
   * The entry's map key: every key, the owner and the side, each ended by a zero byte, as one
   * Latin-1 string (one copy of the bytes: it is made on every acquire and release).
   */
  static String id(List<byte[]> keys, byte[] owner, Side side) {
    byte[] sideName = side == null ? NO_SIDE : side.bytes;
    int n = owner.length + 1 + sideName.length;
    for (byte[] k : keys) {
      n += k.length + 1;
    }
    byte[] b = new byte[n];
    int at = 0;
    for (byte[] k : keys) {
      System.arraycopy(k, 0, b, at, k.length);
      at += k.length + 1;
    }
    System.arraycopy(owner, 0, b, at, owner.length);
    at += owner.length + 1;
    System.arraycopy(sideName, 0, b, at, sideName.length);
    return new String(b, StandardCharsets.ISO_8859_1);
  }

  private static final byte[] NO_SIDE = new byte[0];

  /**
   * Counts one more hold of (keys, owner, side), granted at {@code basis}; returns its entry
   * (new, or the standing one a re-entry adds to).
   */
  Renewal hold(List<byte[]> keys, byte[] owner, Side side, long leaseMs, boolean renew, long basis) {
    String id = id(keys, owner, side);
    Renewal r;
    synchronized (this) {
      r = entries.get(id);
      if (r == null || r.lost.isDone()) {
        r = new Renewal(keys, owner, side, leaseMs, renew, basis);
        r.id = id;
        r.schedule(anchor, System.nanoTime());
        entries.put(id, r);
        watchEvents(keys);
      } else {
        r.basisNanos = Math.max(r.basisNanos, basis);
      }
      r.holds++;
      wakeBy(r.dueAt());
    }
    return r;
  }

  /** One hold of the entry given back; {@code freed}: the server says none is left. */
  synchronized void released(Renewal r, boolean freed) {
    r.holds--;
    if (freed || r.holds <= 0) {
      entries.remove(r.id, r);
      sweepLater();
    }
  }

  /** The entry of (keys, owner, side), or null. */
  Renewal find(List<byte[]> keys, byte[] owner, Side side) {
    return entries.get(id(keys, owner, side));
  }

  int size() {
    return entries.size();
  }

  private synchronized void wakeBy(long dueNanos) {
    if (dueNanos >= nextAt && next != null && !next.isDone()) {
      return;
    }
    if (next != null) {
      next.cancel(false);
    }
    nextAt = dueNanos;
    long delay = Math.max(0, dueNanos - System.nanoTime());
    next = thread.schedule(this::round, delay, TimeUnit.NANOSECONDS);
  }

  /** Renews what is due now (or every entry of {@code onlyKey} that an event named). */
  private void round() {
    synchronized (this) {
      nextAt = Long.MAX_VALUE;
      next = null;
    }
    try {
      check(null);
    } catch (RuntimeException e) {
      // A failed round (a node down) must not end the renewals: the next round tries again.
    }
    long due = Long.MAX_VALUE;
    for (Renewal r : entries.values()) {
      due = Math.min(due, r.dueAt());
    }
    if (due != Long.MAX_VALUE) {
      wakeBy(Math.max(due, System.nanoTime() + 1_000_000));
    }
  }

  private void check(String onlyKey) {
    long now = System.nanoTime();
    Map<String, List<Renewal>> byNode = new HashMap<>();
    for (Renewal r : entries.values()) {
      boolean named = onlyKey != null && r.keys.stream().anyMatch(k -> new String(k, StandardCharsets.UTF_8).equals(onlyKey));
      if (!named && (onlyKey != null || r.dueAt() > now)) {
        continue;
      }
      if (!r.renew) {
        if (now >= r.dueAt()) {
          lose(r, "its lease of " + r.leaseMs + " ms ran out");
          continue;
        }
        if (!named) {
          continue;
        }
      }
      byNode.computeIfAbsent(locks.transport.nodeOf(r.keys.get(0)), a -> new ArrayList<>()).add(r);
    }
    if (byNode.isEmpty()) {
      return;
    }
    rounds.incrementAndGet();
    for (Map.Entry<String, List<Renewal>> e : byNode.entrySet()) {
      List<Cmd> cmds = new ArrayList<>();
      for (Renewal r : e.getValue()) {
        cmds.addAll(r.renew ? r.renewals() : infoOf(r));
      }
      long sent = System.nanoTime();
      List<Object> replies;
      try {
        replies = locks.transport.pipelineAt(e.getKey(), cmds);
      } catch (RlockException err) {
        // Unreachable: looked at again at the next due time; a lease that ran out meanwhile
        // answers 0 then.
        for (Renewal r : e.getValue()) {
          r.schedule(anchor, System.nanoTime());
        }
        continue;
      }
      int i = 0;
      for (Renewal r : e.getValue()) {
        boolean held = true;
        boolean retry = false;
        for (int k = 0; k < r.keys.size(); k++, i++) {
          Object v = replies.get(i);
          Replies.Renewed outcome = Replies.renewal(v);
          if (r.renew) {
            held &= outcome != Replies.Renewed.LOST;
            retry |= outcome == Replies.Renewed.RETRY;
          } else {
            held &= !(v instanceof Long l && l == 0);
          }
        }
        if (!held) {
          lose(r, "it was released by another, its key deleted or its lease ran out");
          continue;
        }
        if (retry) {
          // The server cannot answer yet (loading, busy): asked again at the next due time.
          r.schedule(anchor, System.nanoTime());
          continue;
        }
        if (r.renew) {
          renewals.addAndGet(r.keys.size());
          r.basisNanos = sent;
          r.schedule(anchor, System.nanoTime());
        }
      }
    }
  }

  /** For a fixed lease named by an event: whether the owner's field is still there. */
  private static List<Cmd> infoOf(Renewal r) {
    List<Cmd> out = new ArrayList<>();
    for (byte[] k : r.keys) {
      out.add(Cmd.of("HEXISTS").key(k).arg(Plan.field(r.owner, r.side)));
    }
    return out;
  }

  private void lose(Renewal r, String why) {
    synchronized (this) {
      entries.remove(r.id, r);
      sweepLater();
    }
    r.lost.complete(new LostException("lock " + new String(r.keys.get(0), StandardCharsets.UTF_8) + " was lost: " + why));
  }

  /** A server's keyspace events: its mode (0 while unknown or off) and its subscription. */
  private static final class Events {
    volatile char mode;
    volatile Transport.Channels channels;
    volatile int db;
    /** The keys whose channels are subscribed (K), touched on the watchdog's thread only. */
    final java.util.Set<String> keys = ConcurrentHashMap.newKeySet();
  }

  /**
   * Keyspace events of the keys' server, if it publishes them. The first hold on a server asks
   * which (CONFIG GET); with K, each held key's channel {@code __keyspace@<db>__:<key>} is
   * subscribed (never the whole database's: a busy server would send every key's events), with
   * E the loss events' channels once. The subscribing runs on the watchdog's thread.
   */
  private void watchEvents(List<byte[]> keys) {
    String address = locks.transport.nodeOf(keys.get(0));
    Events ev = events.get(address);
    if (ev == null) {
      Events fresh = new Events();
      ev = events.putIfAbsent(address, fresh);
      if (ev == null) {
        thread.execute(() -> discover(address, fresh));
        return;
      }
    }
    if (ev.mode == 'K') {
      for (byte[] k : keys) {
        String key = new String(k, StandardCharsets.UTF_8);
        if (!ev.keys.contains(key)) {
          Events on = ev;
          thread.execute(() -> follow(on, key));
        }
      }
    }
  }

  private void discover(String address, Events ev) {
    try {
      Object flags = Replies.list(
              locks.transport.pipelineAt(address, List.of(Cmd.of("CONFIG").arg("GET").arg("notify-keyspace-events"))).get(0))
          .get(1);
      char mode = Replies.eventsOn(Replies.text(flags));
      if (mode == 0) {
        return;
      }
      int db = locks.transport.db();
      ev.db = db;
      ev.channels =
          locks.transport.channels(
              address,
              (channel, message) -> {
                String lost = Replies.lostKey(db, channel, message);
                if (lost != null) {
                  thread.execute(() -> checkKey(lost));
                }
              });
      if (mode == 'E') {
        ev.channels.add(Replies.channels('E', db, List.of()));
        ev.mode = 'E';
        return;
      }
      // The mode first, then the keys held now: a hold that comes meanwhile sees the mode.
      ev.mode = 'K';
      perKey = true;
      for (String key : heldKeys(address)) {
        follow(ev, key);
      }
    } catch (RuntimeException e) {
      // No events (CONFIG refused, a node down): the renewals still tell loss within lease/3.
    }
  }

  /**
   * Subscribes a held key's channel, then looks at the key once: a loss before the subscription
   * stood sent its event to nobody.
   */
  private void follow(Events ev, String key) {
    if (!ev.keys.add(key)) {
      return;
    }
    try {
      ev.channels.add(Replies.channels('K', ev.db, List.of(key)));
    } catch (RuntimeException e) {
      ev.keys.remove(key);
      return;
    }
    checkKey(key);
  }

  /** The keys (as text) of the holds on {@code address}, or on every server when null. */
  private java.util.Set<String> heldKeys(String address) {
    java.util.Set<String> out = new java.util.HashSet<>();
    for (Renewal r : entries.values()) {
      for (byte[] k : r.keys) {
        if (address == null || address.equals(locks.transport.nodeOf(k))) {
          out.add(new String(k, StandardCharsets.UTF_8));
        }
      }
    }
    return out;
  }

  private void sweepLater() {
    if (perKey && sweepPending.compareAndSet(false, true)) {
      try {
        thread.schedule(this::sweep, UNSUBSCRIBE_AFTER_MS, TimeUnit.MILLISECONDS);
      } catch (java.util.concurrent.RejectedExecutionException e) {
        // closed
      }
    }
  }

  /** Unsubscribes the channels of keys no longer held (on the watchdog's thread). */
  private void sweep() {
    sweepPending.set(false);
    java.util.Set<String> held = heldKeys(null);
    for (Events ev : events.values()) {
      if (ev.mode != 'K') {
        continue;
      }
      List<String> gone = new ArrayList<>();
      for (String key : ev.keys) {
        if (!held.contains(key)) {
          gone.add(key);
        }
      }
      if (gone.isEmpty()) {
        continue;
      }
      ev.keys.removeAll(gone);
      try {
        ev.channels.remove(Replies.channels('K', ev.db, gone));
      } catch (RuntimeException e) {
        // the connection is gone: nothing is subscribed any more
      }
      // A hold taken meanwhile saw its key still subscribed: it is followed again.
      java.util.Set<String> now = heldKeys(null);
      for (String key : gone) {
        if (now.contains(key)) {
          follow(ev, key);
        }
      }
    }
  }

  private void checkKey(String key) {
    try {
      check(key);
    } catch (RuntimeException e) {
      // told at the next renewal instead
    }
  }

  @Override
  public void close() {
    thread.shutdownNow();
    for (Events ev : events.values()) {
      Transport.Channels c = ev.channels;
      if (c != null) {
        try {
          c.close();
        } catch (RuntimeException e) {
          // closing
        }
      }
    }
  }
}
