package io.github.rlock.client;

/** Which hold of a read-write lock: a read (shared) or the write (exclusive). */
enum Side {
  READ,
  WRITE
}
