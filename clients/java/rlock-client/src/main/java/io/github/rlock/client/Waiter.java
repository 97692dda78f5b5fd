package io.github.rlock.client;

/**
 * One client blocked on a key ({@code RLOCK.WAITERS}).
 *
 * @param clientId the server's client id
 * @param clientName its name, or ""
 * @param kind what it waits for
 * @param owner the owner it waits as, or null
 * @param permits permits asked for, or null
 * @param session whether it asked for a session hold
 * @param timeoutMs its BLOCK
 * @param waitedMs how long it has waited
 */
public record Waiter(
    Long clientId,
    String clientName,
    String kind,
    String owner,
    Long permits,
    boolean session,
    long timeoutMs,
    long waitedMs) {}
