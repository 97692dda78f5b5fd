package io.github.rlock.testsupport;

import java.io.IOException;
import java.io.InputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A server of one flavor with the rlock module loaded, on a free port of 127.0.0.1, with no
 * persistence; its log in a directory of its own. Killed by {@link #close}, and in any case when
 * the JVM exits, however the tests ended.
 */
public final class ServerProcess implements AutoCloseable {
  private static final Set<Process> RUNNING = ConcurrentHashMap.newKeySet();
  private static final Map<Flavor, ServerProcess> SHARED = new EnumMap<>(Flavor.class);

  static {
    Runtime.getRuntime()
        .addShutdownHook(new Thread(() -> RUNNING.forEach(Process::destroyForcibly)));
  }

  public final Flavor flavor;
  public final int port;
  private final Process process;

  private ServerProcess(Flavor flavor, int port, Process process) {
    this.flavor = flavor;
    this.port = port;
    this.process = process;
  }

  /** {@code redis://127.0.0.1:<port>} */
  public String uri() {
    return "redis://127.0.0.1:" + port;
  }

  /**
   * One server per flavor for the whole JVM, with {@link #module()}, started when first asked
   * for: tests that use names of their own share it.
   */
  public static ServerProcess shared(Flavor flavor) {
    synchronized (SHARED) {
      return SHARED.computeIfAbsent(flavor, f -> start(f, module(), List.of()));
    }
  }

  /**
   * Starts a server of {@code flavor} loading {@code module}; {@code launcher} comes before the
   * server's command line (e.g. {@code taskset -c 0}), or is empty. Tries 8 free ports.
   */
  public static ServerProcess start(Flavor flavor, Path module, List<String> launcher) {
    String binary = flavor.binary();
    for (int attempt = 0; attempt < 8; attempt++) {
      int port = freePort();
      try {
        Path dir = Files.createTempDirectory("rlock-java-" + flavor.label() + "-");
        List<String> command = new ArrayList<>(launcher);
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
                "--logfile",
                dir.resolve("server.log").toString(),
                "--loadmodule",
                module.toAbsolutePath().toString()));
        Process process =
            new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("stdout.log").toFile())
                .start();
        RUNNING.add(process);
        if (answersPing(port, process)) {
          return new ServerProcess(flavor, port, process);
        }
        process.destroyForcibly();
        RUNNING.remove(process);
      } catch (IOException e) {
        throw new IllegalStateException("cannot start " + binary, e);
      }
    }
    throw new IllegalStateException("could not start " + flavor.label() + " on a free port");
  }

  /**
   * The module the tests load: {@code RLOCK_MODULE}, else {@code RLOCK_MODULE_PREBUILT}, else the
   * repository's {@code target/debug/librlock.so}.
   */
  public static Path module() {
    for (String variable : List.of("RLOCK_MODULE", "RLOCK_MODULE_PREBUILT")) {
      String set = System.getenv(variable);
      if (set != null && !set.isEmpty()) {
        return existing(Paths.get(set), variable + " names no file");
      }
    }
    Path dir = Paths.get("").toAbsolutePath();
    while (dir != null && !Files.exists(dir.resolve("Cargo.toml"))) {
      dir = dir.getParent();
    }
    if (dir == null) {
      throw new IllegalStateException(
          "rlock module not found: set RLOCK_MODULE=/path/to/librlock.so");
    }
    return existing(
        dir.resolve("target/debug/librlock.so"),
        "no debug build: run `cargo build -p rlock` or set RLOCK_MODULE=/path/to/librlock.so");
  }

  private static Path existing(Path module, String otherwise) {
    if (!Files.isRegularFile(module)) {
      throw new IllegalStateException(
          "rlock module not found at " + module.toAbsolutePath() + ": " + otherwise);
    }
    return module.toAbsolutePath().normalize();
  }

  @Override
  public void close() {
    process.destroyForcibly();
    RUNNING.remove(process);
  }

  private static int freePort() {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  private static boolean answersPing(int port, Process process) {
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (System.nanoTime() < deadline && process.isAlive()) {
      try (Socket socket = new Socket("127.0.0.1", port)) {
        socket.getOutputStream().write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
        InputStream in = socket.getInputStream();
        byte[] reply = new byte[7];
        int read = in.read(reply);
        if (read > 0 && new String(reply, 0, read, StandardCharsets.US_ASCII).startsWith("+PONG")) {
          return true;
        }
      } catch (IOException notYet) {
        // not listening yet
      }
      Threads.sleep(20);
    }
    return false;
  }
}
