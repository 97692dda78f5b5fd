package io.github.rlock.client;

import java.util.List;

/**
 * The server's {@code DEADLOCK}: waiting would close a cycle of owners. {@link #cycle()} names
 * who waits for which key held by whom.
 */
public class DeadlockException extends RlockException {
  private static final long serialVersionUID = 1L;

  /**
   * One edge of the cycle.
   *
   * @param waiter the owner that waits
   * @param key the key it waits for
   * @param holder the owner that holds (or keeps) the key
   * @param kept true when the holder keeps the key for a multi-key wait rather than holds it
   */
  public record Wait(String waiter, String key, String holder, boolean kept) {}

  private final transient List<Wait> cycle;

  /**
   * @param message the server's text
   * @param cycle the cycle read from it
   */
  public DeadlockException(String message, List<Wait> cycle) {
    super(message);
    this.cycle = List.copyOf(cycle);
  }

  /** @return the waits that make the cycle, in the server's order */
  public List<Wait> cycle() {
    return cycle;
  }
}
