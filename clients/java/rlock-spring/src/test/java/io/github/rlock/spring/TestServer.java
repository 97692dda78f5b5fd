package io.github.rlock.spring;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A server with the module loaded per flavor (`RLOCK_FLAVORS`: redis, redis8, valkey; default all),
 * on a free port, started when first asked for and killed when the test JVM exits.
 */
final class TestServer {
  private static final Map<String, Integer> PORTS = new ConcurrentHashMap<>();
  private static final List<Process> PROCESSES = new ArrayList<>();

  static {
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  synchronized (PROCESSES) {
                    PROCESSES.forEach(Process::destroyForcibly);
                  }
                }));
  }

  static List<String> flavors() {
    String wanted = System.getenv("RLOCK_FLAVORS");
    if (wanted == null || wanted.isBlank() || wanted.equals("all")) {
      return List.of("redis", "redis8", "valkey");
    }
    return List.of(wanted.split(","));
  }

  static synchronized String uri(String flavor) {
    return "redis://127.0.0.1:" + PORTS.computeIfAbsent(flavor, TestServer::start);
  }

  /**
   * The module: RLOCK_MODULE, else RLOCK_MODULE_PREBUILT, else the repository's
   * target/debug/librlock.so (as rlock-client's tests find it).
   */
  static String module() {
    for (String v : new String[] {System.getenv("RLOCK_MODULE"), System.getenv("RLOCK_MODULE_PREBUILT")}) {
      if (v != null && !v.isEmpty() && Files.isRegularFile(Paths.get(v))) {
        return Paths.get(v).toAbsolutePath().toString();
      }
    }
    Path p = Paths.get("").toAbsolutePath();
    while (p != null && !Files.exists(p.resolve("Cargo.toml"))) {
      p = p.getParent();
    }
    Path built = p == null ? null : p.resolve("target/debug/librlock.so");
    if (built == null || !Files.isRegularFile(built)) {
      throw new IllegalStateException(
          "rlock module not found: set RLOCK_MODULE (or RLOCK_MODULE_PREBUILT), or build it (cargo build -p rlock)");
    }
    return built.toString();
  }

  private static int start(String flavor) {
    String variable =
        switch (flavor) {
          case "redis" -> "REDIS_SERVER";
          case "redis8" -> "REDIS8_SERVER";
          case "valkey" -> "VALKEY_SERVER";
          default -> throw new IllegalArgumentException("RLOCK_FLAVORS: no flavor " + flavor);
        };
    String binary = System.getenv(variable);
    if (binary == null) {
      throw new IllegalStateException("set " + variable + " (source /opt/rlock-env/env.sh)");
    }
    String module = module();
    for (int attempt = 0; attempt < 8; attempt++) {
      try {
        int port;
        try (ServerSocket probe = new ServerSocket(0)) {
          port = probe.getLocalPort();
        }
        Path dir = Files.createTempDirectory("rlock-spring-");
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
                    "--loadmodule",
                    Paths.get(module).toAbsolutePath().toString())
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("server.log").toFile())
                .start();
        synchronized (PROCESSES) {
          PROCESSES.add(process);
        }
        for (int i = 0; i < 500 && process.isAlive(); i++) {
          try (java.net.Socket s = new java.net.Socket("127.0.0.1", port)) {
            return port;
          } catch (IOException notYet) {
            Thread.sleep(20);
          }
        }
        process.destroyForcibly();
      } catch (IOException | InterruptedException e) {
        throw new IllegalStateException("cannot start " + binary, e);
      }
    }
    throw new IllegalStateException("could not start " + flavor);
  }

  private TestServer() {}
}
