package io.github.rlock.client;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;

/**
 * The only I/O the client does, in two implementations (Lettuce, Jedis). Replies come back as
 * {@code Long}, {@code byte[]}, {@code List<Object>}, {@code null} or {@link ServerError}; a broken
 * link or a reply that does not come in time raises {@link LinkException}. No implementation sends
 * a command twice by itself.
 */
interface Transport extends AutoCloseable {
  /**
   * Sends {@code cmds} in one go to the node that serves {@code routeKey} (any node when null),
   * on a shared connection, and reads every reply within the response timeout.
   */
  List<Object> pipeline(byte[] routeKey, List<Cmd> cmds);

  /** The same on the node at {@code address} ("host:port"). */
  List<Object> pipelineAt(String address, List<Cmd> cmds);

  /** A connection of its own, for one wait at a time: from the idle ones or new. */
  WaitConn waitConn(byte[] routeKey);

  /** Every primary's address. */
  List<String> primaries();

  /** The address of the node that serves {@code key}. */
  String nodeOf(byte[] key);

  /** After a MOVED reply: reads the cluster's slots again. */
  void refresh();

  /** The database index of a standalone server (0 in a cluster). */
  int db();

  /** Whether this is a cluster (multi-key names must then share one slot). */
  boolean cluster();

  /** How long a short command may take before it is given up. */
  long responseTimeoutMs();

  /**
   * A pub/sub connection of its own to {@code address}, subscribed to no channel yet; {@code
   * onMessage} gets (channel, message) of the channels {@link Channels#add added} to it.
   */
  Channels channels(String address, BiConsumer<String, String> onMessage);

  /** One pub/sub connection whose channels ({@code SUBSCRIBE}) change while it lives. */
  interface Channels extends AutoCloseable {
    /** Subscribes to {@code channels}: returns once the server confirmed it. */
    void add(List<String> channels);

    /** Unsubscribes from {@code channels}. */
    void remove(List<String> channels);

    @Override
    void close();
  }

  @Override
  void close();

  /** One dedicated connection. */
  interface WaitConn {
    /** The server's {@code CLIENT ID} of this connection. */
    long clientId();

    /** The node it is connected to. */
    String address();

    /**
     * Sends {@code cmds} in one write; the future completes with every reply, or exceptionally
     * with a {@link LinkException}. Nothing is resent.
     */
    CompletableFuture<List<Object>> send(List<Cmd> cmds);

    /** Healthy and idle: back to the pool of wait connections. */
    void giveBack();

    /** Closes it (a wait given up, a link broken, a session hold ended). */
    void discard();
  }
}
