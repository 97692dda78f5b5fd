package io.github.rlock.client;

/** The server's {@code NOTHELD}: a call on a hold the owner no longer has (released or lost). */
public class NotHeldException extends RlockException {
  private static final long serialVersionUID = 1L;
  private final String key;
  private final String owner;

  /** @param message the server's text */
  public NotHeldException(String message) {
    this(message, null, null);
  }

  /**
   * @param message the server's text
   * @param key the lock's key the call named (for a multi-key call, the first sent), or null
   * @param owner the owner the call named, or null
   */
  public NotHeldException(String message, String key, String owner) {
    super(key == null ? message : message + " (lock " + key + ", owner " + owner + ")");
    this.key = key;
    this.owner = owner;
  }

  /** @return the lock's key the call named, or null when not known */
  public String key() {
    return key;
  }

  /** @return the owner the call named, or null when not known */
  public String owner() {
    return owner;
  }
}
