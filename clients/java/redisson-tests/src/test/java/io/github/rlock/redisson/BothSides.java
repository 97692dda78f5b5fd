package io.github.rlock.redisson;

import io.github.rlock.testsupport.Threads;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import org.redisson.api.RLock;

/**
 * A test of Redisson and rlock side by side. JUnit makes an instance per run, so each run (each
 * flavor) has a name of its own, {@link #key}, for the lock, semaphore or latch both sides use.
 */
abstract class BothSides {
  final String key = Fleet.name(getClass().getSimpleName());

  /**
   * A Redisson thread that takes `lock` (on the node's client), completes `held` with its owner,
   * keeps the lock until `release` completes and then unlocks it.
   */
  static CompletableFuture<Void> holdElsewhere(
      Fleet.Node node, RLock lock, CompletableFuture<String> held, Future<?> release) {
    return Threads.start(
        "redisson-holder",
        () -> {
          lock.lock();
          held.complete(Owners.redissons(node.redisson));
          release.get();
          lock.unlock();
          return null;
        });
  }
}
