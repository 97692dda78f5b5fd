package io.github.rlock.bench;

import io.github.rlock.client.Locks;
import io.github.rlock.spring.RlockLockRegistry;
import io.github.rlock.testsupport.Flavor;
import io.github.rlock.testsupport.ServerProcess;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.IntegerOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.function.IntFunction;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.integration.redis.util.RedisLockRegistry;

/**
 * `make bench-java`: every figure a ratio between paths run in the same round on the same server.
 * The server runs on CPU 0, this process on CPU 1 (run.sh). Each figure is the median of the
 * rounds.
 *
 * <ul>
 *   <li>uncontended: acquire+release pairs/s on one thread, rlock-client ÷ the same commands sent
 *       raw on Lettuce (target ≥ 0.85); Redisson's RLock and RedisLockRegistry beside them;
 *   <li>contended: THREADS threads on one lock, hold 0: acquisitions/s, min/max acquisitions per
 *       thread, and the hand-off latency (a holder's unlock call to the next holder's lock return),
 *       rlock-client ÷ Redisson RLock (target ≥ 2×), RlockLockRegistry ÷ RedisLockRegistry.
 * </ul>
 */
public final class Bench {
  private static final long WARM_UP_MS = 500;
  private static final int MAX_SAMPLES = 200_000;

  private record Options(
      List<Flavor> flavors, int rounds, long runMs, int threads, Path json, Path module) {}

  /**
   * One contended run: hand-offs/s (acquisitions by another thread than the last holder: a lock
   * that lets its releaser barge back in makes many acquisitions and few hand-offs),
   * acquisitions/s, min/max acquisitions per thread, hand-off p50 and p99 in ms.
   */
  private record Contended(
      double perSecond,
      double acquisitionsPerSecond,
      double fairness,
      double p50Ms,
      double p99Ms) {}

  public static void main(String[] argv) throws Exception {
    Options o = parse(argv);
    Report.Header header = Report.Header.now(o.rounds, o.runMs, o.threads, WARM_UP_MS);
    List<Report.Measured> runs = new ArrayList<>();
    StringBuilder table = new StringBuilder();
    // The server on CPU 0 when taskset is there; run.sh puts this JVM on CPU 1.
    boolean pinned = Files.isExecutable(Paths.get("/usr/bin/taskset"));
    List<String> launcher = pinned ? List.of("/usr/bin/taskset", "-c", "0") : List.of();
    for (Flavor flavor : o.flavors) {
      try (ServerProcess server = ServerProcess.start(flavor, o.module, launcher)) {
        Report.Measured measured = runFlavor(server, pinned, o);
        runs.add(measured);
        table.append(table(flavor.label(), figures(measured)));
      }
    }
    System.out.print(table);
    Path json = o.json.toAbsolutePath();
    Files.createDirectories(json.getParent());
    Files.writeString(json, Json.write(Report.document(header, runs)));
    System.out.println("results: " + json);
  }

  private static Report.Measured runFlavor(ServerProcess server, boolean pinned, Options o)
      throws Exception {
    String uri = server.uri();
    RedisClient lettuce = RedisClient.create(uri);
    Locks locks = Locks.create(lettuce);
    Config config = new Config();
    config
        .useSingleServer()
        .setAddress(uri)
        .setConnectionPoolSize(o.threads + 8)
        .setConnectionMinimumIdleSize(o.threads);
    RedissonClient redisson = Redisson.create(config);
    LettuceConnectionFactory factory =
        new LettuceConnectionFactory(new RedisStandaloneConfiguration("127.0.0.1", server.port));
    factory.afterPropertiesSet();
    factory.start();
    StatefulRedisConnection<String, String> raw = lettuce.connect();
    Map<String, List<Double>> samples = new LinkedHashMap<>();
    String serverInfo = raw.sync().info("server");
    String modulesInfo = raw.sync().info("modules");
    try {
      // Round 0 warms the JIT and the connections up and is not counted. Each round runs
      // the paths in a rotated order, so that no path always runs first or last.
      for (int round = 0; round <= o.rounds; round++) {
        String r = "r" + round;
        Map<String, List<Double>> into = round == 0 ? new LinkedHashMap<>() : samples;
        List<Step> paths =
            new ArrayList<>(
                List.of(
                    () -> uncontended(into, o, "rlock_client", lockOf(locks.lock("u:client:" + r))),
                    () ->
                        uncontended(
                            into, o, "raw_lettuce", rawPair(raw, "u:raw:" + r, locks.owner())),
                    () ->
                        uncontended(
                            into, o, "redisson", lockOf(redisson.getLock("u:redisson:" + r))),
                    () -> {
                      RedisLockRegistry single =
                          new RedisLockRegistry(factory, "u:spring:" + r, 60_000);
                      uncontended(into, o, "redis_lock_registry", lockOf(single.obtain("k")));
                      single.destroy();
                    },
                    // Contended: one lock, o.threads threads, hold 0. Each thread of the Spring
                    // paths has a registry of its own, as a process would.
                    () -> contended(into, o, "rlock_client", i -> locks.lock("c:client:" + r)),
                    () ->
                        contended(into, o, "redisson", i -> redisson.getLock("c:redisson:" + r)),
                    () ->
                        contended(
                            into,
                            o,
                            "rlock_lock_registry",
                            i -> new RlockLockRegistry(locks, "c:rlockspring:" + r).obtain("k")),
                    () -> {
                      List<RedisLockRegistry> registries = new ArrayList<>();
                      contended(
                          into,
                          o,
                          "redis_lock_registry",
                          i -> {
                            RedisLockRegistry registry =
                                new RedisLockRegistry(factory, "c:spring:" + r, 60_000);
                            synchronized (registries) {
                              registries.add(registry);
                            }
                            return registry.obtain("k");
                          });
                      registries.forEach(RedisLockRegistry::destroy);
                    }));
        java.util.Collections.rotate(paths, round);
        for (Step path : paths) {
          path.run();
        }
        System.err.printf(
            "%s: round %d of %d done%s%n",
            server.flavor.label(), round, o.rounds, round == 0 ? " (warm-up, not counted)" : "");
      }
    } finally {
      raw.close();
      locks.close();
      lettuce.shutdown();
      redisson.shutdown();
      factory.destroy();
    }
    return new Report.Measured(
        server.flavor.label(), pinned, serverInfo, modulesInfo, o.threads, samples);
  }

  /** The medians of a server's rounds, for the table. */
  private static Map<String, Object> figures(Report.Measured m) {
    Map<String, Object> figures = new LinkedHashMap<>();
    figures.put("pinned", m.serverPinned());
    m.samples().forEach((name, values) -> figures.put(name, Report.median(values)));
    return figures;
  }

  private static void add(Map<String, List<Double>> samples, String name, double value) {
    samples.computeIfAbsent(name, n -> new ArrayList<>()).add(value);
  }

  /** Measures `pair` on this thread as the uncontended path `path`. */
  private static void uncontended(
      Map<String, List<Double>> samples, Options o, String path, Pair pair) throws Exception {
    add(samples, "uncontended." + path, pairs(o.runMs, pair));
  }

  /** Measures the contended path `path`, thread i on `lockFor(i)`, and keeps its five figures. */
  private static void contended(
      Map<String, List<Double>> samples, Options o, String path, IntFunction<Lock> lockFor)
      throws Exception {
    Contended c = contended(o, lockFor);
    String name = "contended." + path;
    add(samples, name + ".per_s", c.perSecond);
    add(samples, name + ".acquisitions_per_s", c.acquisitionsPerSecond);
    add(samples, name + ".min_over_max", c.fairness);
    add(samples, name + ".handoff_p50_ms", c.p50Ms);
    add(samples, name + ".handoff_p99_ms", c.p99Ms);
  }

  /** One measured path of a round. */
  private interface Step {
    void run() throws Exception;
  }

  /** One pair: take the lock and give it back. */
  private interface Pair {
    void run() throws Exception;
  }

  private static Pair lockOf(Lock lock) {
    return () -> {
      if (!lock.tryLock()) {
        throw new IllegalStateException("uncontended lock refused");
      }
      lock.unlock();
    };
  }

  private record Keyword(String name) implements ProtocolKeyword {
    @Override
    public byte[] getBytes() {
      return name.getBytes(StandardCharsets.US_ASCII);
    }
  }

  /** The commands rlock-client sends for tryLock()/unlock(), raw on a Lettuce connection. */
  private static Pair rawPair(
      StatefulRedisConnection<String, String> conn, String key, String owner) {
    SecureRandom random = new SecureRandom();
    Keyword acquire = new Keyword("RLOCK.ACQUIRE");
    Keyword release = new Keyword("RLOCK.RELEASE");
    byte[] id = new byte[16];
    return () -> {
      CommandArgs<String, String> lease =
          new CommandArgs<>(StringCodec.UTF8).addKey(key).add(owner).add("LEASE").add(30_000);
      if (withReq(conn, acquire, lease, random, id) == null) {
        throw new IllegalStateException("uncontended lock refused");
      }
      CommandArgs<String, String> mine = new CommandArgs<>(StringCodec.UTF8).addKey(key).add(owner);
      withReq(conn, release, mine, random, id);
    };
  }

  /** Sends `command` with `args` and a fresh REQ id, as rlock-client does; its integer reply. */
  private static Long withReq(
      StatefulRedisConnection<String, String> conn,
      Keyword command,
      CommandArgs<String, String> args,
      SecureRandom random,
      byte[] id) {
    random.nextBytes(id);
    args.add("REQ").add(HexFormat.of().formatHex(id));
    return conn.sync().dispatch(command, new IntegerOutput<>(StringCodec.UTF8), args);
  }

  /** Pairs per second on this thread, after a warm-up. */
  private static double pairs(long runMs, Pair pair) throws Exception {
    long warm = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WARM_UP_MS);
    while (System.nanoTime() < warm) {
      pair.run();
    }
    long start = System.nanoTime();
    long end = start + TimeUnit.MILLISECONDS.toNanos(runMs);
    long n = 0;
    while (System.nanoTime() < end) {
      pair.run();
      n++;
    }
    return n / ((System.nanoTime() - start) / 1e9);
  }

  /** Threads looping lock, unlock on one lock; `lockFor(i)` is called on thread i. */
  private static Contended contended(Options o, IntFunction<Lock> lockFor) throws Exception {
    int n = o.threads;
    CountDownLatch ready = new CountDownLatch(n);
    CountDownLatch go = new CountDownLatch(1);
    long[] window = new long[2];
    long[] counts = new long[n];
    long[] handoffs = new long[n];
    long[][] latencies = new long[n][];
    int[] latencyCount = new int[n];
    // The last release: when its unlock was called, and by which thread.
    long[] released = {0L, -1L};
    List<CompletableFuture<Void>> threads = new ArrayList<>();
    for (int t = 0; t < n; t++) {
      int me = t;
      CompletableFuture<Void> done = new CompletableFuture<>();
      threads.add(done);
      Thread thread =
          new Thread(
              () -> {
                try {
                  Lock lock = lockFor.apply(me);
                  long[] mine = new long[MAX_SAMPLES / n];
                  latencies[me] = mine;
                  ready.countDown();
                  go.await();
                  long now;
                  while ((now = System.nanoTime()) < window[1]) {
                    lock.lock();
                    long granted = System.nanoTime();
                    long releasedAt;
                    long releasedBy;
                    synchronized (released) {
                      releasedAt = released[0];
                      releasedBy = released[1];
                    }
                    if (now >= window[0]) {
                      counts[me]++;
                      if (releasedBy >= 0 && releasedBy != me) {
                        handoffs[me]++;
                        if (latencyCount[me] < mine.length) {
                          mine[latencyCount[me]++] = granted - releasedAt;
                        }
                      }
                    }
                    synchronized (released) {
                      released[0] = System.nanoTime();
                      released[1] = me;
                    }
                    lock.unlock();
                  }
                  done.complete(null);
                } catch (Throwable e) {
                  done.completeExceptionally(e);
                }
              },
              "contender-" + t);
      thread.setDaemon(true);
      thread.start();
    }
    if (!ready.await(60, TimeUnit.SECONDS)) {
      throw new IllegalStateException("contenders not ready");
    }
    long start = System.nanoTime();
    window[0] = start + TimeUnit.MILLISECONDS.toNanos(WARM_UP_MS);
    window[1] = window[0] + TimeUnit.MILLISECONDS.toNanos(o.runMs);
    go.countDown();
    for (CompletableFuture<Void> t : threads) {
      t.get(o.runMs + 120_000, TimeUnit.MILLISECONDS);
    }
    long total = Arrays.stream(counts).sum();
    long min = Arrays.stream(counts).min().orElse(0);
    long max = Arrays.stream(counts).max().orElse(1);
    int all = Arrays.stream(latencyCount).sum();
    long[] merged = new long[all];
    int at = 0;
    for (int t = 0; t < n; t++) {
      System.arraycopy(latencies[t], 0, merged, at, latencyCount[t]);
      at += latencyCount[t];
    }
    Arrays.sort(merged);
    double p50 = all == 0 ? Double.NaN : merged[all / 2] / 1e6;
    double p99 = all == 0 ? Double.NaN : merged[Math.min(all - 1, (int) (all * 0.99))] / 1e6;
    double seconds = o.runMs / 1000.0;
    return new Contended(
        Arrays.stream(handoffs).sum() / seconds,
        total / seconds,
        max == 0 ? 0 : (double) min / max,
        p50,
        p99);
  }

  /** A figure of the table: its name, its suffix in the samples, and the target of its ratio. */
  private record Figure(String name, String suffix, boolean lowerIsBetter, String target) {}

  private static final List<Figure> CONTENDED_FIGURES =
      List.of(
          new Figure("contended hand-offs/s", ".per_s", false, "≥ 2"),
          new Figure("contended acquisitions/s", ".acquisitions_per_s", false, ""),
          new Figure("fairness min/max per thread", ".min_over_max", false, "rlock ≥ 0.9"),
          new Figure("hand-off p50 ms", ".handoff_p50_ms", true, "rlock < 1 ms"),
          new Figure("hand-off p99 ms", ".handoff_p99_ms", true, ""));

  private static String table(String flavor, Map<String, Object> f) {
    StringBuilder s = new StringBuilder();
    s.append(
        String.format(
            Locale.ROOT, "%n## %s (server pinned to CPU 0: %s)%n%n", flavor, f.get("pinned")));
    s.append("| figure | rlock | baseline | ratio | target |\n|---|---:|---:|---:|---|\n");
    // {baseline path, its name, the target of rlock-client's ratio to it}
    for (String[] b :
        new String[][] {
          {"raw_lettuce", "raw Lettuce", "≥ 0.85"},
          {"redisson", "Redisson RLock", ""},
          {"redis_lock_registry", "RedisLockRegistry", ""}
        }) {
      Figure pairs = new Figure("uncontended pairs/s", "", false, b[2]);
      String names = "rlock-client ÷ " + b[1];
      s.append(compare(f, pairs, "uncontended.rlock_client", "uncontended." + b[0], names));
    }
    for (String[] pair :
        new String[][] {
          {"rlock_client", "redisson", "rlock-client ÷ Redisson RLock"},
          {"rlock_lock_registry", "redis_lock_registry", "RlockLockRegistry ÷ RedisLockRegistry"}
        }) {
      for (Figure figure : CONTENDED_FIGURES) {
        s.append(compare(f, figure, "contended." + pair[0], "contended." + pair[1], pair[2]));
      }
    }
    return s.toString();
  }

  /** One row: the path's figure, the baseline's, and their ratio (above 1: rlock is better). */
  private static String compare(
      Map<String, Object> f, Figure figure, String path, String baseline, String names) {
    String a = path + figure.suffix();
    String b = baseline + figure.suffix();
    return row(
        figure.name() + ", " + names,
        f.get(a),
        f.get(b),
        figure.lowerIsBetter() ? div(f, b, a) : div(f, a, b),
        figure.target());
  }

  private static double div(Map<String, Object> f, String a, String b) {
    return (double) f.get(a) / (double) f.get(b);
  }

  private static String row(
      String name, Object rlock, Object baseline, Object ratio, String target) {
    return String.format(
        Locale.ROOT,
        "| %s | %s | %s | %s | %s |%n",
        name,
        num(rlock),
        num(baseline),
        num(ratio),
        target);
  }

  private static String num(Object v) {
    double d = (double) v;
    if (Double.isNaN(d) || Double.isInfinite(d)) {
      return "n/a";
    }
    return d >= 100
        ? String.format(Locale.ROOT, "%,.0f", d)
        : String.format(Locale.ROOT, "%.3f", d);
  }

  private static Options parse(String[] argv) {
    List<Flavor> flavors = List.of(Flavor.REDIS, Flavor.VALKEY);
    int rounds = 3;
    long runMs = 2_000;
    int threads = 32;
    Path json = Paths.get("target/bench-java.json");
    for (int i = 0; i < argv.length; i++) {
      String value = i + 1 < argv.length ? argv[i + 1] : null;
      switch (argv[i]) {
        case "--flavors" -> flavors = Arrays.stream(value.split(",")).map(Flavor::named).toList();
        case "--rounds" -> rounds = Integer.parseInt(value);
        case "--run-ms" -> runMs = Long.parseLong(value);
        case "--threads" -> threads = Integer.parseInt(value);
        case "--json" -> json = Paths.get(value);
        default ->
            throw new IllegalArgumentException(
                "unknown option "
                    + argv[i]
                    + " (--flavors redis,redis8,valkey --rounds N --run-ms MS --threads N --json"
                    + " PATH)");
      }
      i++;
    }
    Path module =
        Paths.get(
            System.getenv().getOrDefault("RLOCK_MODULE", "../../../target/release/librlock.so"));
    if (!Files.isRegularFile(module)) {
      throw new IllegalStateException("rlock module not found at " + module + ": set RLOCK_MODULE");
    }
    return new Options(flavors, rounds, runMs, threads, json, module);
  }

  private Bench() {}
}
