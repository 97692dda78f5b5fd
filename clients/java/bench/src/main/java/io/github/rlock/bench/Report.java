package io.github.rlock.bench;

import io.github.rlock.client.Locks;
import io.lettuce.core.RedisClient;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Stream;
import org.redisson.Redisson;
import org.springframework.integration.redis.util.RedisLockRegistry;

/**
 * The run in the schema `rlock-bench/1` of bench/report/README.md. {@link #document} is pure: it
 * turns the rounds measured on each server into the results file. {@link Header#now} reads what the
 * run is made of (the machine, the build) before the first server starts.
 */
final class Report {
  /** One path of one scenario: its key in the samples, its name in tables, what it calls. */
  private record Contender(String scenario, String key, String path, String label, String role) {}

  /** A metric of the contended scenario: its suffix in the samples and its name in the schema. */
  private record Metric(String suffix, String metric, String unit, String better) {}

  private static final String UNCONTENDED = "uncontended";
  private static final String CONTENDED = "contended";

  private static final List<Metric> CONTENDED_METRICS =
      List.of(
          new Metric(".per_s", "handoffs_per_sec", "hand-offs/s", "higher"),
          new Metric(".acquisitions_per_s", "acquisitions_per_sec", "acquisitions/s", "higher"),
          new Metric(".min_over_max", "fairness", "min/max per worker", "higher"),
          new Metric(".handoff_p50_ms", "latency_p50_ms", "ms", "lower"),
          new Metric(".handoff_p99_ms", "latency_p99_ms", "ms", "lower"));

  /** What the run is made of, read once before it starts. */
  record Header(
      String date,
      String command,
      String cpu,
      int nproc,
      String loadBefore,
      boolean benchPinned,
      String commit,
      boolean dirty,
      Map<String, String> versions,
      String runtime,
      Map<String, Object> plan) {

    static Header now(int rounds, long runMs, int threads, long warmUpMs) throws IOException {
      String root = System.getProperty("rlock.root", "../../..");
      Map<String, Object> plan = new LinkedHashMap<>();
      plan.put("rounds", rounds);
      plan.put("seconds", runMs / 1000.0);
      plan.put("workers", threads);
      plan.put("hold_ms", 0);
      plan.put("warm_up_ms", warmUpMs);
      Map<String, String> versions = new LinkedHashMap<>();
      versions.put("rlock-client", version(Locks.class, "io.github.rlock", "rlock-client"));
      versions.put("Lettuce", version(RedisClient.class, "io.lettuce", "lettuce-core"));
      versions.put("Redisson", version(Redisson.class, "org.redisson", "redisson"));
      versions.put(
          "Spring Integration",
          version(
              RedisLockRegistry.class,
              "org.springframework.integration",
              "spring-integration-redis"));
      List<String> cpuinfo = Files.readAllLines(Paths.get("/proc/cpuinfo"));
      return new Header(
          ZonedDateTime.now(ZoneOffset.UTC)
              .format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")),
          System.getenv().getOrDefault("RLOCK_BENCH_COMMAND", "Bench"),
          cpuinfo.stream()
              .filter(l -> l.startsWith("model name"))
              .map(l -> l.substring(l.indexOf(':') + 1).trim())
              .findFirst()
              .orElse("?"),
          // Not availableProcessors(): run.sh pins this JVM to one CPU.
          (int) cpuinfo.stream().filter(l -> l.startsWith("processor")).count(),
          String.join(
              " ",
              List.of(Files.readString(Paths.get("/proc/loadavg")).trim().split("\\s+"))
                  .subList(0, 3)),
          System.getenv("RLOCK_BENCH_PINNED") != null,
          git(root, "rev-parse", "--short", "HEAD").trim(),
          !git(root, "status", "--porcelain", "--", "src", "clients/java").isBlank(),
          versions,
          System.getProperty("java.runtime.name") + " " + Runtime.version(),
          plan);
    }
  }

  /** One server's rounds: every sample by name, in round order, and what the server said. */
  record Measured(
      String flavor,
      boolean serverPinned,
      String serverInfo,
      String modulesInfo,
      int workers,
      Map<String, List<Double>> samples) {}

  private static final List<Contender> PATHS =
      List.of(
          new Contender(
              UNCONTENDED,
              "uncontended.rlock_client",
              "rlock-client",
              "rlock-client Lock.tryLock()/unlock() over Lettuce",
              "rlock"),
          new Contender(
              UNCONTENDED,
              "uncontended.raw_lettuce",
              "raw RLOCK.* on Lettuce",
              "RLOCK.ACQUIRE and RLOCK.RELEASE with REQ, dispatched on one Lettuce connection",
              "rlock"),
          new Contender(
              UNCONTENDED,
              "uncontended.redisson",
              "Redisson RLock",
              "Redisson RLock.tryLock()/unlock()",
              "baseline"),
          new Contender(
              UNCONTENDED,
              "uncontended.redis_lock_registry",
              "RedisLockRegistry",
              "Spring Integration RedisLockRegistry lock tryLock()/unlock()",
              "baseline"),
          new Contender(
              CONTENDED,
              "contended.rlock_client",
              "rlock-client",
              "rlock-client Lock.lock()/unlock() over Lettuce (BLOCK in the server)",
              "rlock"),
          new Contender(
              CONTENDED,
              "contended.rlock_lock_registry",
              "RlockLockRegistry",
              "rlock-spring RlockLockRegistry lock()/unlock(), one registry per worker",
              "rlock"),
          new Contender(
              CONTENDED,
              "contended.redisson",
              "Redisson RLock",
              "Redisson RLock.lock()/unlock(), one client",
              "baseline"),
          new Contender(
              CONTENDED,
              "contended.redis_lock_registry",
              "RedisLockRegistry",
              "Spring Integration RedisLockRegistry lock()/unlock(), one registry per worker",
              "baseline"));

  /** The ratios the run reports: {scenario, path key, baseline key}, on the primary metric. */
  private static final List<String[]> RATIOS =
      List.of(
          new String[] {UNCONTENDED, "uncontended.rlock_client", "uncontended.raw_lettuce"},
          new String[] {UNCONTENDED, "uncontended.rlock_client", "uncontended.redisson"},
          new String[] {UNCONTENDED, "uncontended.rlock_client", "uncontended.redis_lock_registry"},
          new String[] {CONTENDED, "contended.rlock_client", "contended.redisson"},
          new String[] {CONTENDED, "contended.rlock_client", "contended.redis_lock_registry"},
          new String[] {
            CONTENDED, "contended.rlock_lock_registry", "contended.redis_lock_registry"
          });

  /** The median of the finite values, NaN when there are none. */
  static double median(List<Double> values) {
    double[] v =
        values.stream()
            .mapToDouble(Double::doubleValue)
            .filter(Double::isFinite)
            .sorted()
            .toArray();
    if (v.length == 0) {
      return Double.NaN;
    }
    return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  }

  static Map<String, Object> document(Header h, List<Measured> runs) {
    Map<String, Object> d = new LinkedHashMap<>();
    d.put("schema", "rlock-bench/1");
    d.put("suite", "java");
    d.put("language", "Java");
    d.put("title", "The Java client against Redisson and Spring Integration's RedisLockRegistry");
    d.put("command", h.command());
    d.put("date", h.date());
    boolean serverPinned = runs.stream().allMatch(Measured::serverPinned);
    d.put(
        "machine",
        ordered(
            "cpu", h.cpu(),
            "nproc", h.nproc(),
            "load_before", h.loadBefore(),
            "pinning",
                (serverPinned ? "server on CPU 0" : "server not pinned (no taskset)")
                    + (h.benchPinned() ? ", the JVM on CPU 1 (taskset)" : ", the JVM not pinned")));
    StringBuilder client = new StringBuilder();
    h.versions()
        .forEach(
            (k, v) -> client.append(client.isEmpty() ? "" : ", ").append(k).append(' ').append(v));
    d.put(
        "build",
        ordered(
            "commit", h.commit(),
            "dirty", h.dirty(),
            "module_version",
                runs.stream()
                    .map(m -> moduleVersion(m.modulesInfo()))
                    .distinct()
                    .reduce((a, b) -> a + ", " + b)
                    .orElse("?"),
            "client", client.toString(),
            "runtime", h.runtime()));
    d.put("plan", h.plan());
    List<Object> servers = new ArrayList<>();
    for (Measured m : runs) {
      servers.add(ordered("id", m.flavor(), "version", serverVersion(m.serverInfo())));
    }
    d.put("servers", servers);
    int workers = runs.isEmpty() ? 0 : runs.get(0).workers();
    d.put(
        "scenarios",
        List.of(
            ordered(
                "id", UNCONTENDED,
                "title", "Uncontended acquire+release pairs (one thread, one key)",
                "primary_metric", "pairs_per_sec"),
            ordered(
                "id",
                CONTENDED,
                "title",
                "Contended: " + workers + " workers on one lock, hold 0",
                "primary_metric",
                "handoffs_per_sec")));
    List<Object> paths = new ArrayList<>();
    for (Contender p : PATHS) {
      paths.add(
          ordered(
              "scenario", p.scenario(), "path", p.path(), "label", p.label(), "role", p.role()));
    }
    d.put("paths", paths);
    List<Object> results = new ArrayList<>();
    List<Object> ratios = new ArrayList<>();
    for (Measured m : runs) {
      for (Contender p : PATHS) {
        if (p.scenario().equals(UNCONTENDED)) {
          results.add(result(m, p, "", new Metric("", "pairs_per_sec", "pairs/s", "higher")));
        } else {
          for (Metric metric : CONTENDED_METRICS) {
            results.add(result(m, p, metric.suffix(), metric));
          }
        }
      }
      for (String[] r : RATIOS) {
        String suffix = r[0].equals(CONTENDED) ? ".per_s" : "";
        double a = median(m.samples().getOrDefault(r[1] + suffix, List.of()));
        double b = median(m.samples().getOrDefault(r[2] + suffix, List.of()));
        ratios.add(
            ordered(
                "scenario", r[0],
                "server", m.flavor(),
                "setting", setting(r[0], m),
                "metric", r[0].equals(CONTENDED) ? "handoffs_per_sec" : "pairs_per_sec",
                "path", pathOf(r[1]),
                "baseline", pathOf(r[2]),
                "value", Double.isFinite(a) && Double.isFinite(b) && b > 0 ? a / b : null));
      }
    }
    d.put("results", results);
    d.put("ratios", ratios);
    d.put("not_measured", List.of());
    return d;
  }

  private static Map<String, Object> result(Measured m, Contender p, String suffix, Metric metric) {
    List<Double> rounds = m.samples().getOrDefault(p.key() + suffix, List.of());
    return ordered(
        "scenario", p.scenario(),
        "server", m.flavor(),
        "setting", setting(p.scenario(), m),
        "path", p.path(),
        "metric", metric.metric(),
        "unit", metric.unit(),
        "better", metric.better(),
        "rounds", rounds,
        "median", median(rounds));
  }

  private static Map<String, Object> setting(String scenario, Measured m) {
    return scenario.equals(CONTENDED) ? ordered("workers", m.workers(), "hold_ms", 0) : Map.of();
  }

  private static String pathOf(String key) {
    return PATHS.stream().filter(p -> p.key().equals(key)).findFirst().orElseThrow().path();
  }

  /** `Redis 7.0.15`, or `Valkey 9.1.2 (redis_version 7.2.4)`, from INFO server. */
  static String serverVersion(String info) {
    String redis = field(info, "redis_version");
    String valkey = field(info, "valkey_version");
    return valkey != null
        ? "Valkey " + valkey + " (redis_version " + redis + ")"
        : "Redis " + (redis == null ? "?" : redis);
  }

  /** The rlock module's `ver`, from INFO modules (`module:name=rlock,ver=40100,...`). */
  static String moduleVersion(String info) {
    return info.lines()
        .filter(l -> l.startsWith("module:name=rlock,"))
        .flatMap(l -> Stream.of(l.substring("module:".length()).split(",")))
        .filter(kv -> kv.startsWith("ver="))
        .map(kv -> kv.substring(4).trim())
        .findFirst()
        .orElse("?");
  }

  private static String field(String info, String name) {
    return info.lines()
        .filter(l -> l.startsWith(name + ":"))
        .map(l -> l.substring(name.length() + 1).trim())
        .findFirst()
        .orElse(null);
  }

  private static Map<String, Object> ordered(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put((String) kv[i], kv[i + 1]);
    }
    return m;
  }

  /** A library's version: the pom.properties Maven packs in its jar, else its manifest's. */
  private static String version(Class<?> c, String group, String artifact) {
    String pom = "/META-INF/maven/" + group + "/" + artifact + "/pom.properties";
    try (InputStream in = c.getResourceAsStream(pom)) {
      if (in != null) {
        Properties p = new Properties();
        p.load(in);
        return p.getProperty("version", "?");
      }
    } catch (IOException e) {
      // Fall back to the manifest.
    }
    String v = c.getPackage().getImplementationVersion();
    return v == null ? "?" : v;
  }

  private static String git(String root, String... args) {
    List<String> command = new ArrayList<>(List.of("git", "-C", root));
    command.addAll(List.of(args));
    try {
      Process p = new ProcessBuilder(command).redirectErrorStream(false).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      return p.waitFor() == 0 ? out : "?";
    } catch (IOException e) {
      return "?";
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return "?";
    }
  }

  private Report() {}
}
