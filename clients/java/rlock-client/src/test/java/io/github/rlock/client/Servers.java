package io.github.rlock.client;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Servers for the tests: Redis 7.0, Redis 8.2 and Valkey 9 (REDIS_SERVER, REDIS8_SERVER,
 * VALKEY_SERVER), started with the module (RLOCK_MODULE, else RLOCK_MODULE_PREBUILT, else the
 * repo's target/debug/librlock.so) on free ports, and killed at the end. RLOCK_FLAVORS=redis,
 * redis8,valkey narrows them.
 */
final class Servers {
  static final List<String> ALL = List.of("redis", "redis8", "valkey");

  private Servers() {}

  /** Every server started, killed when the JVM exits however the tests ended. */
  private static final java.util.Set<Process> RUNNING = java.util.concurrent.ConcurrentHashMap.newKeySet();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> RUNNING.forEach(Process::destroyForcibly)));
  }

  static List<String> flavors() {
    String s = System.getenv().getOrDefault("RLOCK_FLAVORS", "").trim();
    if (s.isEmpty() || s.equals("all")) {
      return ALL;
    }
    List<String> out = new ArrayList<>();
    for (String f : s.split(",")) {
      f = f.trim();
      if (!f.isEmpty()) {
        if (!ALL.contains(f)) {
          throw new IllegalArgumentException("RLOCK_FLAVORS: unknown flavor " + f);
        }
        out.add(f);
      }
    }
    return out;
  }

  static Path repo() {
    Path p = Path.of("").toAbsolutePath();
    while (p != null && !Files.exists(p.resolve("Cargo.toml"))) {
      p = p.getParent();
    }
    return p;
  }

  static String module() {
    for (String v : new String[] {System.getenv("RLOCK_MODULE"), System.getenv("RLOCK_MODULE_PREBUILT")}) {
      if (v != null && !v.isEmpty() && Files.isRegularFile(Path.of(v))) {
        return v;
      }
    }
    Path p = repo().resolve("target/debug/librlock.so");
    if (Files.isRegularFile(p)) {
      return p.toString();
    }
    throw new IllegalStateException("rlock module not found: build it (cargo build -p rlock) or set RLOCK_MODULE");
  }

  static String binary(String flavor) {
    String env =
        switch (flavor) {
          case "redis" -> "REDIS_SERVER";
          case "redis8" -> "REDIS8_SERVER";
          case "valkey" -> "VALKEY_SERVER";
          default -> throw new IllegalArgumentException(flavor);
        };
    String p = System.getenv(env);
    if (p == null && flavor.equals("redis") && Files.isRegularFile(Path.of("/usr/bin/redis-server"))) {
      p = "/usr/bin/redis-server";
    }
    if (p == null || !Files.isRegularFile(Path.of(p))) {
      throw new IllegalStateException(flavor + " server not found: set " + env + " or narrow RLOCK_FLAVORS");
    }
    return p;
  }

  static int freePort() {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** One server process with the module. */
  static final class Server implements AutoCloseable {
    final String flavor;
    final Map<String, String> config = new LinkedHashMap<>();
    final Path dir;
    int port;
    Process proc;

    Server(String flavor) {
      this.flavor = flavor;
      try {
        this.dir = Files.createTempDirectory("rlock-java-" + flavor + "-");
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
    }

    Server with(String key, String value) {
      config.put(key, value);
      return this;
    }

    List<String> args() {
      Map<String, String> cfg = new LinkedHashMap<>();
      cfg.put("port", Integer.toString(port));
      cfg.put("bind", "127.0.0.1");
      cfg.put("daemonize", "no");
      cfg.put("save", "");
      cfg.put("appendonly", "no");
      cfg.put("repl-diskless-sync-delay", "0");
      cfg.put("dir", dir.toString());
      cfg.put("logfile", dir.resolve("server.log").toString());
      cfg.put("enable-debug-command", "yes");
      cfg.putAll(config);
      List<String> out = new ArrayList<>();
      out.add(binary(flavor));
      for (Map.Entry<String, String> e : cfg.entrySet()) {
        out.add("--" + e.getKey());
        if (e.getKey().equals("replicaof")) {
          out.addAll(List.of(e.getValue().split(" ")));
        } else {
          out.add(e.getValue());
        }
      }
      out.add("--loadmodule");
      out.add(module());
      return out;
    }

    Server start() {
      for (int i = 0; i < 8; i++) {
        port = freePort();
        if (config.containsKey("tls-port")) {
          config.put("tls-port", Integer.toString(freePort()));
        }
        launch();
        if (waitUp()) {
          return this;
        }
        stop();
      }
      throw new IllegalStateException(flavor + " did not start: " + logTail());
    }

    private void launch() {
      try {
        proc = new ProcessBuilder(args()).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        RUNNING.add(proc);
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
    }

    private boolean waitUp() {
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (System.nanoTime() < end) {
        if (!proc.isAlive()) {
          return false;
        }
        try {
          if (ping()) {
            return true;
          }
        } catch (IOException e) {
          // not yet
        }
        sleep(30);
      }
      return false;
    }

    boolean ping() throws IOException {
      return call("PING").startsWith("+PONG");
    }

    /** One command on a socket of its own; the raw RESP reply. */
    String call(String... args) throws IOException {
      try (Socket s = new Socket("127.0.0.1", port)) {
        s.setSoTimeout(10_000);
        StringBuilder b = new StringBuilder("*" + args.length + "\r\n");
        for (String a : args) {
          b.append('$').append(a.getBytes(java.nio.charset.StandardCharsets.UTF_8).length).append("\r\n").append(a).append("\r\n");
        }
        s.getOutputStream().write(b.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
        s.getOutputStream().flush();
        byte[] buf = new byte[65536];
        int n = s.getInputStream().read(buf);
        if (n <= 0) {
          throw new IOException("no reply");
        }
        String out = new String(buf, 0, n, java.nio.charset.StandardCharsets.UTF_8);
        // A bulk reply may come in pieces: read until its announced length is in.
        if (out.startsWith("$")) {
          int len = Integer.parseInt(out.substring(1, out.indexOf("\r\n")));
          while (len >= 0 && out.getBytes(java.nio.charset.StandardCharsets.UTF_8).length < out.indexOf("\r\n") + 2 + len + 2) {
            int m = s.getInputStream().read(buf);
            if (m <= 0) {
              break;
            }
            out += new String(buf, 0, m, java.nio.charset.StandardCharsets.UTF_8);
          }
        }
        return out;
      }
    }

    /** The bulk strings of an array reply. */
    List<String> bulks(String reply) {
      List<String> out = new ArrayList<>();
      String[] lines = reply.split("\r\n");
      for (int i = 1; i < lines.length; i++) {
        if (lines[i].startsWith("$") && i + 1 < lines.length) {
          out.add(lines[++i]);
        }
      }
      return out;
    }

    String url() {
      return "redis://127.0.0.1:" + port;
    }

    String logTail() {
      try {
        String s = Files.readString(dir.resolve("server.log"));
        return s.substring(Math.max(0, s.length() - 2000));
      } catch (IOException e) {
        return "";
      }
    }

    long pid() {
      return proc.pid();
    }

    void stop() {
      if (proc != null && proc.isAlive()) {
        proc.destroy();
        try {
          if (!proc.waitFor(10, TimeUnit.SECONDS)) {
            proc.destroyForcibly().waitFor();
          }
        } catch (InterruptedException e) {
          proc.destroyForcibly();
          Thread.currentThread().interrupt();
        }
      }
    }

    /** Stops (SIGTERM: the AOF is flushed) and starts again on the same port and directory. */
    void restart() {
      stop();
      launch();
      if (!waitUp()) {
        throw new IllegalStateException(flavor + " did not restart: " + logTail());
      }
    }

    @Override
    public void close() {
      stop();
      try (var files = Files.walk(dir)) {
        files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      } catch (IOException e) {
        // left in /tmp
      }
    }
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
