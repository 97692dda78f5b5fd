package io.github.rlock.client;

/** The base of every error this client raises for a lock call: a server error or a broken link. */
public class RlockException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** @param message what went wrong */
  public RlockException(String message) {
    super(message);
  }

  /**
   * @param message what went wrong
   * @param cause the driver's error
   */
  public RlockException(String message, Throwable cause) {
    super(message, cause);
  }
}
