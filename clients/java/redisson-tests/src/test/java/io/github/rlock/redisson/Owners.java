package io.github.rlock.redisson;

import java.util.UUID;

/** Owner ids in Redisson's format, `<client-uuid>:<thread-id>`, for the rlock side. */
final class Owners {
  /** The rlock side's client id: one per test JVM, as a Redisson client has one. */
  static final String RLOCK_CLIENT = UUID.randomUUID().toString();

  /** The calling thread's owner on the rlock side. */
  static String mine() {
    return RLOCK_CLIENT + ":" + Thread.currentThread().getId();
  }

  /** The owner Redisson's RLock gives the calling thread. */
  static String redissons(org.redisson.api.RedissonClient redisson) {
    return redisson.getId() + ":" + Thread.currentThread().getId();
  }

  private Owners() {}
}
