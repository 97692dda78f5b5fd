package io.github.rlock.client;

/** A server error this client has no class of its own for (WRONGTYPE, OOM, NOPERM, ...). */
public class ServerException extends RlockException {
  private static final long serialVersionUID = 1L;
  private final String code;

  /**
   * @param code the error's code: the text before the first space
   * @param message the whole error line
   */
  public ServerException(String code, String message) {
    super(message);
    this.code = code;
  }

  /** @return the error's code, e.g. {@code WRONGTYPE} */
  public String code() {
    return code;
  }
}
