package io.github.rlock.redisson;

import io.github.rlock.testsupport.Flavor;
import io.github.rlock.testsupport.ServerProcess;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.protocol.ProtocolVersion;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Stream;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * A Redisson client and a Lettuce client on the shared server of each flavor (ServerProcess),
 * made the first time a test asks and shut down when the test JVM exits. Tests use names of their
 * own, so they share the servers.
 */
final class Fleet {
  /** Redisson's watchdog lease; short, so a test outlives several of them in a few seconds. */
  static final long WATCHDOG_MS = 1_500;

  /** A running server of one flavor and the clients on it. */
  static final class Node {
    final Flavor flavor;
    final int port;
    final RedissonClient redisson;
    final RedisClient lettuce;

    private Node(ServerProcess server) {
      this.flavor = server.flavor;
      this.port = server.port;
      this.redisson = redisson(port);
      this.lettuce = RedisClient.create(RedisURI.create("127.0.0.1", port));
      // The rlock side's connections block in the server: no resends behind the test's back,
      // and RESP2 so that INFO and WAITERS are flat arrays.
      this.lettuce.setOptions(
          ClientOptions.builder()
              .autoReconnect(false)
              .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
              .protocolVersion(ProtocolVersion.RESP2)
              .build());
      this.lettuce.setDefaultTimeout(Duration.ofSeconds(30));
    }

    /** A connection of its own, for one rlock caller (blocking calls never share one). */
    Rlock rlock() {
      return new Rlock(lettuce.connect());
    }

    /** A second Redisson client on the same server: another id, other pub/sub connections. */
    RedissonClient anotherRedisson() {
      RedissonClient other = redisson(port);
      synchronized (EXTRA) {
        EXTRA.add(other);
      }
      return other;
    }

    @Override
    public String toString() {
      return flavor.label();
    }

    private void stop() {
      redisson.shutdown();
      lettuce.shutdown();
    }
  }

  private static final Map<Flavor, Node> NODES = new EnumMap<>(Flavor.class);
  private static final List<RedissonClient> EXTRA = new ArrayList<>();

  static {
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  synchronized (EXTRA) {
                    EXTRA.forEach(RedissonClient::shutdown);
                  }
                  synchronized (NODES) {
                    NODES.values().forEach(Node::stop);
                  }
                }));
  }

  static Node of(Flavor flavor) {
    synchronized (NODES) {
      return NODES.computeIfAbsent(flavor, f -> new Node(ServerProcess.shared(f)));
    }
  }

  /** The node of each flavor of {@link Flavor#chosen}, made as each run comes to it. */
  static Stream<Node> nodes() {
    return Flavor.chosen().stream().map(Fleet::of);
  }

  /** A fresh name, unique in this run. */
  static String name(String what) {
    return what + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  private static RedissonClient redisson(int port) {
    Config config = new Config();
    config.setLockWatchdogTimeout(WATCHDOG_MS);
    config
        .useSingleServer()
        .setAddress("redis://127.0.0.1:" + port)
        .setConnectionMinimumIdleSize(2)
        .setConnectionPoolSize(16)
        .setSubscriptionConnectionMinimumIdleSize(1);
    return Redisson.create(config);
  }

  private Fleet() {}
}
