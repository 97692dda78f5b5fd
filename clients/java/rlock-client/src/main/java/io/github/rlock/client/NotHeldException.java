package io.github.rlock.client;

/** The server's {@code NOTHELD}: a release of a hold the owner does not have. */
public class NotHeldException extends RlockException {
  private static final long serialVersionUID = 1L;

  /** @param message the server's text */
  public NotHeldException(String message) {
    super(message);
  }
}
