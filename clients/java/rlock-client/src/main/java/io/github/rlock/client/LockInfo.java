package io.github.rlock.client;

import java.util.List;
import java.util.Map;

/**
 * {@code RLOCK.INFO}: who holds a lock and how often, the lease left, the fair queue, the fencing
 * counter, the mode of a read-write lock, and how many clients are blocked on it.
 *
 * @param holders owner to hold count
 * @param pttl milliseconds of lease left, or null when free
 * @param queue the fair queue, head first
 * @param token the fencing counter, or null
 * @param blocked clients blocked here
 * @param mode "read" or "write" for a read-write lock, else null
 */
public record LockInfo(
    Map<String, Long> holders, Long pttl, List<String> queue, Long token, long blocked, String mode) {
  /** @return whether anyone holds it */
  public boolean locked() {
    return !holders.isEmpty();
  }
}
