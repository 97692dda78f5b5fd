package io.github.rlock.client;

/** A wait ended without a grant, where the call has no other way to say so (a scoped call). */
public class NotAcquiredException extends RlockException {
  private static final long serialVersionUID = 1L;

  /** @param message which lock and how long it waited */
  public NotAcquiredException(String message) {
    super(message);
  }
}
