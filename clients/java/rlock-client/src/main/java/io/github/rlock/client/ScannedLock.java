package io.github.rlock.client;

import java.util.Map;

/**
 * One lock found by {@code RLOCK.SCAN}.
 *
 * @param key its name
 * @param type "lock" or "rwlock"
 * @param mode the read-write mode, or null
 * @param holders owner to hold count
 * @param pttl lease left in ms
 * @param waiters clients waiting
 */
public record ScannedLock(
    String key, String type, String mode, Map<String, Long> holders, long pttl, long waiters) {}
