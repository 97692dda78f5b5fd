package io.github.rlock.redisson;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.protocol.ProtocolVersion;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Stream;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * One server per flavor with the module loaded, started on a free port the first time a test asks
 * for it and killed when the test JVM exits, with a Redisson client and a Lettuce client on it.
 * Tests use names of their own, so they share the servers.
 */
final class Fleet {
  /** Redisson's watchdog lease; short, so a test outlives several of them in a few seconds. */
  static final long WATCHDOG_MS = 1_500;

  enum Flavor {
    REDIS("redis", "REDIS_SERVER"),
    REDIS8("redis8", "REDIS8_SERVER"),
    VALKEY("valkey", "VALKEY_SERVER");

    final String label;
    final String binaryVariable;

    Flavor(String label, String binaryVariable) {
      this.label = label;
      this.binaryVariable = binaryVariable;
    }

    @Override
    public String toString() {
      return label;
    }
  }

  /**
   * The flavors to run: `RLOCK_FLAVORS` (comma-separated: redis, redis8, valkey), else all three.
   */
  static Stream<Flavor> flavors() {
    String wanted = System.getenv("RLOCK_FLAVORS");
    if (wanted == null || wanted.isBlank() || wanted.equals("all")) {
      return Arrays.stream(Flavor.values());
    }
    List<Flavor> out = new ArrayList<>();
    for (String name : wanted.split(",")) {
      String label = name.trim().toLowerCase(Locale.ROOT);
      out.add(
          Arrays.stream(Flavor.values())
              .filter(f -> f.label.equals(label))
              .findFirst()
              .orElseThrow(
                  () ->
                      new IllegalArgumentException(
                          "RLOCK_FLAVORS: no flavor named "
                              + label
                              + " (use redis, redis8, valkey or all)")));
    }
    return out.stream();
  }

  /** A running server of one flavor and the clients on it. */
  static final class Node {
    final Flavor flavor;
    final int port;
    final RedissonClient redisson;
    final RedisClient lettuce;
    private final Process process;

    private Node(Flavor flavor, int port, Process process) {
      this.flavor = flavor;
      this.port = port;
      this.process = process;
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

    private void stop() {
      try {
        redisson.shutdown();
        lettuce.shutdown();
      } finally {
        process.destroyForcibly();
      }
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
      return NODES.computeIfAbsent(flavor, Fleet::start);
    }
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

  private static Node start(Flavor flavor) {
    String binary = System.getenv(flavor.binaryVariable);
    if (binary == null || !Files.isExecutable(Paths.get(binary))) {
      throw new IllegalStateException(
          flavor.label
              + " server not found: set "
              + flavor.binaryVariable
              + " (source /opt/rlock-env/env.sh), or narrow RLOCK_FLAVORS");
    }
    Path module = modulePath();
    for (int attempt = 0; attempt < 8; attempt++) {
      int port = freePort();
      Path dir;
      try {
        dir = Files.createTempDirectory("rlock-java-" + flavor.label + "-");
        Process process =
            new ProcessBuilder(
                    binary,
                    "--port",
                    Integer.toString(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    dir.toString(),
                    "--logfile",
                    dir.resolve("server.log").toString(),
                    "--loadmodule",
                    module.toString())
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("stdout.log").toFile())
                .start();
        if (waitForPing(port, process)) {
          return new Node(flavor, port, process);
        }
        process.destroyForcibly();
      } catch (IOException e) {
        throw new IllegalStateException("cannot start " + binary, e);
      }
    }
    throw new IllegalStateException("could not start " + flavor.label + " on a free port");
  }

  /** `RLOCK_MODULE`, else `RLOCK_MODULE_PREBUILT`, else the workspace's debug build. */
  private static Path modulePath() {
    String set = System.getenv("RLOCK_MODULE");
    if (set == null || set.isEmpty()) {
      set = System.getenv("RLOCK_MODULE_PREBUILT");
    }
    Path path = set != null && !set.isEmpty() ? Paths.get(set) : Paths.get("../../../target/debug/librlock.so");
    if (!Files.isRegularFile(path)) {
      throw new IllegalStateException(
          "rlock module not found at "
              + path.toAbsolutePath()
              + ": run `cargo build -p rlock` or set RLOCK_MODULE=/path/to/librlock.so");
    }
    return path.toAbsolutePath().normalize();
  }

  private static int freePort() {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  private static boolean waitForPing(int port, Process process) {
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (System.nanoTime() < deadline && process.isAlive()) {
      try (Socket socket = new Socket("127.0.0.1", port)) {
        OutputStream out = socket.getOutputStream();
        out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
        InputStream in = socket.getInputStream();
        byte[] reply = new byte[7];
        int read = in.read(reply);
        if (read > 0 && new String(reply, 0, read, StandardCharsets.US_ASCII).startsWith("+PONG")) {
          return true;
        }
      } catch (IOException notYet) {
        // not listening yet
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return false;
  }

  private Fleet() {}
}
