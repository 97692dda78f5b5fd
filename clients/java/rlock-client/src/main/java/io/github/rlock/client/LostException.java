package io.github.rlock.client;

/** A hold is gone: its lease ran out, it was force-released, its key deleted or its session ended. */
public class LostException extends RlockException {
  private static final long serialVersionUID = 1L;

  /** @param message which lock and why */
  public LostException(String message) {
    super(message);
  }
}
