package io.github.rlock.client;

/**
 * The server's {@code STALETOKEN}: a guarded write refused because a newer fencing token was
 * granted on the lock since this hold's; the hold is gone for the purpose of writing.
 */
public class StaleTokenException extends NotHeldException {
  private static final long serialVersionUID = 1L;

  /**
   * @param message the server's text
   * @param key the lock's key, or null
   * @param owner the owner, or null
   */
  public StaleTokenException(String message, String key, String owner) {
    super(message, key, owner);
  }
}
