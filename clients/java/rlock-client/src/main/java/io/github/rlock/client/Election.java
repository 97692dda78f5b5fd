package io.github.rlock.client;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * Leader election on a lock: the leader is the lock's holder, its value the owner, its term the
 * lock's fencing token. Values must be unique among candidates (the lock is reentrant per owner).
 */
public final class Election {
  /**
   * A leader as an observer sees it.
   *
   * @param value the value it campaigned with
   * @param term its term: the fencing token when it was elected
   */
  public record Leader(String value, long term) {}

  /** How often {@link #observe} reads the lock. */
  static final Duration POLL_EVERY = Duration.ofMillis(50);

  private final Locks locks;
  private final String name;

  Election(Locks locks, String name) {
    Checks.name(name, "name");
    this.locks = locks;
    this.name = name;
  }

  /**
   * Waits in the server until elected; the watchdog keeps the post until {@link Hold#release()}
   * (resign) or loss.
   *
   * @param value this candidate's value, unique, 1 to 1024 bytes
   * @param wait how long to wait; zero tries once
   * @return the leadership (its {@link Hold#token()} is the term), or empty
   * @throws InterruptedException when interrupted: nothing is left held
   */
  public Optional<Hold> campaign(String value, Duration wait) throws InterruptedException {
    RlockLock lock = locks.lock(name, LockOptions.defaults().owner(value).fenced());
    return unique(lock.acquire(wait), value);
  }

  /**
   * Campaigns until elected.
   *
   * @param value this candidate's value (its owner id), unique among candidates
   * @return the hold: release it to resign; {@code token()} is the term
   * @throws InterruptedException when interrupted while waiting
   */
  public Hold campaign(String value) throws InterruptedException {
    RlockLock lock = locks.lock(name, LockOptions.defaults().owner(value).fenced());
    return unique(Optional.of(lock.acquireForever()), value).orElseThrow();
  }

  private static Optional<Hold> unique(Optional<Hold> h, String value) {
    if (h.isPresent() && h.get().count() > 1) {
      h.get().release();
      throw new IllegalStateException("value " + value + " is already the leader's: values must be unique");
    }
    return h;
  }

  /** @return the leader now, or empty */
  public Optional<Leader> leader() {
    return leaderOf(locks.info(name));
  }

  /** The leader an {@code RLOCK.INFO} reply names: its one holder, and the token as the term. */
  static Optional<Leader> leaderOf(LockInfo info) {
    if (info.holders().isEmpty()) {
      return Optional.empty();
    }
    String value = info.holders().keySet().iterator().next();
    return Optional.of(new Leader(value, info.token() == null ? 0 : info.token()));
  }

  /**
   * Calls {@code onChange} with each change of leader (empty when the post is vacant), in order,
   * on a thread of its own, until the returned handle is closed.
   *
   * @param onChange called with each new leader
   * @return close it to stop observing
   */
  public AutoCloseable observe(Consumer<Optional<Leader>> onChange) {
    Objects.requireNonNull(onChange, "onChange must not be null");
    AtomicBoolean stop = new AtomicBoolean();
    Thread t =
        new Thread(
            () -> {
              Optional<Leader> last = null;
              while (!stop.get()) {
                try {
                  Optional<Leader> now = leader();
                  if (!now.equals(last)) {
                    last = now;
                    onChange.accept(now);
                  }
                } catch (RlockException e) {
                  // a server down: looked at again
                }
                Locks.sleepQuietly(POLL_EVERY.toMillis());
              }
            },
            "rlock-observe-" + name);
    t.setDaemon(true);
    t.start();
    return () -> stop.set(true);
  }
}
