package io.github.rlock.redisson;

import java.util.concurrent.atomic.AtomicInteger;

/** Counts who is inside a critical section; more than `capacity` at once is a violation. */
final class Referee {
  private final int capacity;
  private final AtomicInteger inside = new AtomicInteger();
  private final AtomicInteger most = new AtomicInteger();
  private final AtomicInteger violations = new AtomicInteger();

  Referee(int capacity) {
    this.capacity = capacity;
  }

  void enter(int weight) {
    int now = inside.addAndGet(weight);
    most.accumulateAndGet(now, Math::max);
    if (now > capacity) {
      violations.incrementAndGet();
    }
  }

  void leave(int weight) {
    inside.addAndGet(-weight);
  }

  int violations() {
    return violations.get();
  }

  int most() {
    return most.get();
  }
}
