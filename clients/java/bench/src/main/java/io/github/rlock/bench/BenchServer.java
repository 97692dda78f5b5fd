package io.github.rlock.bench;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * A server with the module on a free port, pinned to CPU 0 when `taskset` is there; killed on
 * close.
 */
final class BenchServer implements AutoCloseable {
  final String flavor;
  final int port;
  final boolean pinned;
  private final Process process;

  private BenchServer(String flavor, int port, boolean pinned, Process process) {
    this.flavor = flavor;
    this.port = port;
    this.pinned = pinned;
    this.process = process;
  }

  static BenchServer start(String flavor, String module) throws IOException, InterruptedException {
    String variable =
        switch (flavor) {
          case "redis" -> "REDIS_SERVER";
          case "redis8" -> "REDIS8_SERVER";
          case "valkey" -> "VALKEY_SERVER";
          default ->
              throw new IllegalArgumentException(
                  "no flavor " + flavor + " (redis, redis8, valkey)");
        };
    String binary = System.getenv(variable);
    if (binary == null || !Files.isExecutable(Paths.get(binary))) {
      throw new IllegalStateException("set " + variable + " (source /opt/rlock-env/env.sh)");
    }
    boolean pin =
        Runtime.getRuntime().availableProcessors() >= 1
            && Files.isExecutable(Paths.get("/usr/bin/taskset"));
    for (int attempt = 0; attempt < 8; attempt++) {
      int port;
      try (ServerSocket probe = new ServerSocket(0)) {
        port = probe.getLocalPort();
      }
      Path dir = Files.createTempDirectory("rlock-bench-" + flavor + "-");
      List<String> command = new ArrayList<>();
      if (pin) {
        command.addAll(List.of("/usr/bin/taskset", "-c", "0"));
      }
      command.addAll(
          List.of(
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
              Paths.get(module).toAbsolutePath().toString()));
      Process process =
          new ProcessBuilder(command)
              .redirectErrorStream(true)
              .redirectOutput(dir.resolve("server.log").toFile())
              .start();
      for (int i = 0; i < 500 && process.isAlive(); i++) {
        try (Socket s = new Socket("127.0.0.1", port)) {
          return new BenchServer(flavor, port, pin, process);
        } catch (IOException notYet) {
          Thread.sleep(20);
        }
      }
      process.destroyForcibly();
    }
    throw new IllegalStateException("could not start " + flavor);
  }

  @Override
  public void close() {
    process.destroyForcibly();
  }
}
