package io.github.rlock.client;

/**
 * A grant that fewer replicas than asked acknowledged within the sync timeout ({@code WAIT}); the
 * client released it before raising this, so nothing is held.
 */
public class NotAcknowledgedException extends RlockException {
  private static final long serialVersionUID = 1L;
  private final long acked;

  /**
   * @param message which lock, how many replicas were asked for
   * @param acked how many acknowledged
   */
  public NotAcknowledgedException(String message, long acked) {
    super(message);
    this.acked = acked;
  }

  /** @return how many replicas acknowledged the grant in time */
  public long acked() {
    return acked;
  }
}
