package io.github.rlock.client;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Objects;

/** Argument checks, made before anything is sent: the language's own exceptions. */
final class Checks {
  static final long MAX_MS = 1L << 40;
  static final int MAX_OWNER_BYTES = 1024;

  private Checks() {}

  static byte[] name(String name, String what) {
    Objects.requireNonNull(name, what + " must not be null");
    if (name.isEmpty()) {
      throw new IllegalArgumentException(what + " must not be empty");
    }
    return name.getBytes(StandardCharsets.UTF_8);
  }

  static byte[] owner(String owner) {
    byte[] b = name(owner, "owner");
    if (b.length > MAX_OWNER_BYTES) {
      throw new IllegalArgumentException("owner must be at most 1024 bytes, got " + b.length);
    }
    return b;
  }

  /** A lease: more than zero, at most 2^40 ms; rounded up to whole milliseconds. */
  static long leaseMs(Duration lease) {
    Objects.requireNonNull(lease, "lease must not be null");
    if (lease.isNegative() || lease.isZero()) {
      throw new IllegalArgumentException("lease must be > 0, got " + lease);
    }
    long ms = ceilMs(lease);
    if (ms > MAX_MS) {
      throw new IllegalArgumentException("lease is too long (at most 2^40 ms)");
    }
    return ms;
  }

  /**
   * A wait as the server's {@code BLOCK}: -1 for no wait (zero: try once), the milliseconds
   * otherwise (at least 1).
   */
  static long waitMs(Duration wait) {
    Objects.requireNonNull(wait, "wait must not be null");
    if (wait.isNegative()) {
      throw new IllegalArgumentException("wait must be >= 0, got " + wait);
    }
    if (wait.isZero()) {
      return -1;
    }
    long ms = ceilMs(wait);
    if (ms > MAX_MS) {
      throw new IllegalArgumentException("wait is too long (at most 2^40 ms); use lock() to wait forever");
    }
    return ms;
  }

  static long waitMs(long time, java.util.concurrent.TimeUnit unit) {
    Objects.requireNonNull(unit, "unit must not be null");
    if (time < 0) {
      throw new IllegalArgumentException("wait must be >= 0, got " + time + " " + unit);
    }
    return waitMs(Duration.ofNanos(unit.toNanos(time)));
  }

  static int count(int n, String what, int low, int high) {
    if (n < low || n > high) {
      throw new IllegalArgumentException(what + " must be from " + low + " to " + high + ", got " + n);
    }
    return n;
  }

  /** A guarded command: a name, then its arguments, none null. */
  static List<byte[]> command(String... command) {
    Objects.requireNonNull(command, "command must not be null");
    if (command.length == 0) {
      throw new IllegalArgumentException("command must name a command");
    }
    List<byte[]> out = new java.util.ArrayList<>(command.length);
    for (int i = 0; i < command.length; i++) {
      Objects.requireNonNull(command[i], "command word " + i + " must not be null");
      out.add(command[i].getBytes(StandardCharsets.UTF_8));
    }
    if (command[0].isBlank()) {
      throw new IllegalArgumentException("command must name a command, got \"" + command[0] + "\"");
    }
    return out;
  }

  /** A latch's count: at least 1. */
  static long latchCount(long count) {
    if (count < 1) {
      throw new IllegalArgumentException("count must be >= 1, got " + count);
    }
    return count;
  }

  private static long ceilMs(Duration d) {
    try {
      long ms = d.toMillis();
      return d.minusMillis(ms).isZero() ? Math.max(1, ms) : ms + 1;
    } catch (ArithmeticException e) {
      return Long.MAX_VALUE;
    }
  }
}
