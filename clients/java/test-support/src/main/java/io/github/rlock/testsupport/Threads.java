package io.github.rlock.testsupport;

import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/** Work on threads of its own: Redisson and rlock owners are per thread. */
public final class Threads {
  /** Runs {@code work} on a daemon thread named {@code name}; its outcome is the future's. */
  public static <T> CompletableFuture<T> start(String name, Callable<T> work) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return work.call();
          } catch (Exception e) {
            throw new CompletionException(e);
          }
        },
        task -> {
          Thread thread = new Thread(task, name);
          thread.setDaemon(true);
          thread.start();
        });
  }

  /**
   * On a thread of its own: {@code attempt} to take something and, when it was granted, {@code
   * giveBack} at once. Completes with whether it was granted.
   */
  public static CompletableFuture<Boolean> tryAndGiveBack(
      String name, Callable<Boolean> attempt, Runnable giveBack) {
    return start(
        name,
        () -> {
          boolean granted = attempt.call();
          if (granted) {
            giveBack.run();
          }
          return granted;
        });
  }

  /** Polls until `condition` holds; false if `timeoutMs` passes first. */
  public static boolean await(long timeoutMs, BooleanSupplier condition) {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    while (System.nanoTime() < deadline) {
      if (condition.getAsBoolean()) {
        return true;
      }
      sleep(5);
    }
    return condition.getAsBoolean();
  }

  public static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private Threads() {}
}
