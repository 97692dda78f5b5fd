package io.github.rlock.client;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One command as the bytes it sends: the name, then the arguments. {@code keyAt} is the index (in
 * {@link #args}) of the key that routes it in a cluster, or -1.
 */
final class Cmd {
  final String name;
  final List<byte[]> args = new ArrayList<>();
  int keyAt = -1;

  Cmd(String name) {
    this.name = name;
  }

  static Cmd of(String name) {
    return new Cmd(name);
  }

  Cmd key(byte[] key) {
    if (keyAt < 0) {
      keyAt = args.size();
    }
    args.add(key);
    return this;
  }

  Cmd arg(byte[] b) {
    args.add(b);
    return this;
  }

  Cmd arg(String s) {
    args.add(s.getBytes(StandardCharsets.UTF_8));
    return this;
  }

  Cmd arg(long n) {
    return arg(Long.toString(n));
  }

  /** The routing key, or null for a command without one. */
  byte[] routeKey() {
    return keyAt < 0 ? null : args.get(keyAt);
  }

  /** A copy whose {@code BLOCK} argument says {@code ms}. */
  Cmd withBlock(long ms) {
    Cmd c = new Cmd(name);
    c.keyAt = keyAt;
    boolean next = false;
    for (byte[] a : args) {
      c.args.add(next ? Long.toString(ms).getBytes(StandardCharsets.UTF_8) : a);
      next = Arrays.equals(a, Plan.BLOCK);
    }
    return c;
  }

  boolean has(byte[] word) {
    for (byte[] a : args) {
      if (Arrays.equals(a, word)) {
        return true;
      }
    }
    return false;
  }

  /** Every argument, the name first, as text (for tests and messages). */
  List<String> words() {
    List<String> out = new ArrayList<>();
    out.add(name);
    for (byte[] a : args) {
      out.add(new String(a, StandardCharsets.UTF_8));
    }
    return out;
  }

  @Override
  public String toString() {
    return String.join(" ", words());
  }
}
