package io.github.rlock.client;

/** The connection broke or the server did not answer in time: whether the command ran is unknown. */
public class LinkException extends RlockException {
  private static final long serialVersionUID = 1L;

  /**
   * @param message what happened
   * @param cause the driver's error
   */
  public LinkException(String message, Throwable cause) {
    super(message, cause);
  }
}
