package io.github.rlock.client;

/** Which hold of a read-write lock: a read (shared) or the write (exclusive). */
enum Side {
  READ,
  WRITE;

  /** Its name as bytes, for the watchdog's entry ids. */
  final byte[] bytes = name().getBytes(java.nio.charset.StandardCharsets.US_ASCII);
}
