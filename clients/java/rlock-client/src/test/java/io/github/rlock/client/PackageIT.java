package io.github.rlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarFile;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * C22, the package: run by Failsafe after {@code package}, on the jar Maven built (never
 * target/classes). A fresh program, compiled in an empty directory against that jar and the
 * drivers' classpath an application would have, takes and releases a fenced lock on each server
 * through each driver; the server's fencing counter shows it was the server's grant.
 */
class PackageIT extends ServerTestBase {
  static final String PROGRAM =
      """
      import io.github.rlock.client.Hold;
      import io.github.rlock.client.LockOptions;
      import io.github.rlock.client.Locks;
      import io.github.rlock.client.RlockLock;

      public class UseRlock {
        public static void main(String[] args) throws Exception {
          String driver = args[0];
          int port = Integer.parseInt(args[1]);
          String name = args[2];
          io.lettuce.core.RedisClient lettuce = null;
          redis.clients.jedis.JedisPool jedis = null;
          Locks locks;
          if (driver.equals("lettuce")) {
            lettuce = io.lettuce.core.RedisClient.create("redis://127.0.0.1:" + port);
            locks = Locks.create(lettuce);
          } else {
            jedis = new redis.clients.jedis.JedisPool("127.0.0.1", port);
            locks = Locks.create(jedis);
          }
          RlockLock lock = locks.lock(name, LockOptions.defaults().fenced());
          try (Hold hold = lock.acquire().orElseThrow()) {
            System.out.println("token " + hold.token());
            System.out.println("locked " + lock.isLocked());
          }
          System.out.println("released " + !lock.isLocked());
          locks.close();
          if (lettuce != null) {
            lettuce.shutdown();
          }
          if (jedis != null) {
            jedis.close();
          }
        }
      }
      """;

  static Path dir;
  static String classpath;

  /** The built jar: what Maven's package phase wrote. */
  static Path jar() {
    String p = System.getProperty("rlock.jar");
    assertTrue(p != null, "rlock.jar is set by Failsafe (run with mvn verify)");
    Path jar = Path.of(p);
    assertTrue(Files.isRegularFile(jar), "the built jar: " + jar);
    return jar;
  }

  @BeforeAll
  static void compileAgainstTheJar() throws Exception {
    Path jar = jar();
    try (JarFile j = new JarFile(jar.toFile())) {
      assertTrue(j.getEntry("io/github/rlock/client/Locks.class") != null, "the jar holds the client");
      assertTrue(j.getEntry("io/github/rlock/client/SpecTest.class") == null, "and no tests");
      assertTrue(
          j.getEntry("META-INF/maven/io.github.rlock/rlock-client/pom.xml") != null, "and its pom, for a repository");
      String version = j.getManifest() == null ? null : j.getManifest().getMainAttributes().getValue("Implementation-Version");
      assertTrue(version == null || version.equals(System.getProperty("rlock.version")), "version " + version);
    }
    String drivers = Files.readString(Path.of(System.getProperty("rlock.driverClasspath"))).trim();
    assertFalse(drivers.contains("junit"), "an application's classpath, not the tests'");
    assertTrue(drivers.contains("lettuce-core") && drivers.contains("jedis"), drivers);
    dir = Files.createTempDirectory("rlock-c22-");
    Files.writeString(dir.resolve("UseRlock.java"), PROGRAM);
    classpath = jar.toAbsolutePath() + java.io.File.pathSeparator + drivers;
    Result r = run(List.of(tool("javac"), "-cp", classpath, "-d", dir.toString(), dir.resolve("UseRlock.java").toString()));
    assertEquals(0, r.code, "javac against the jar:\n" + r.out);
  }

  @AfterAll
  static void removeDir() throws IOException {
    if (dir != null) {
      try (var files = Files.walk(dir)) {
        for (Path p : files.sorted(Collections.reverseOrder()).toList()) {
          Files.deleteIfExists(p);
        }
      }
    }
  }

  @ParameterizedTest(name = "C22 the built jar, used by a fresh program, takes and releases a lock [{0}] [{1}]")
  @MethodSource("targets")
  void c22_builtJarTakesAndReleasesALock(String flavor, Driver driver) throws Exception {
    Servers.Server s = shared(flavor);
    String key = name("c22");
    Result r =
        run(
            List.of(
                tool("java"),
                "-cp",
                classpath + java.io.File.pathSeparator + dir,
                "UseRlock",
                driver.toString(),
                Integer.toString(s.port),
                key));
    assertEquals(0, r.code, "the program:\n" + r.out);
    Matcher m = Pattern.compile("token (\\d+)").matcher(r.out);
    assertTrue(m.find(), r.out);
    assertTrue(r.out.contains("locked true"), r.out);
    assertTrue(r.out.contains("released true"), r.out);
    // The server's fencing counter for the key is the token the program was granted.
    assertEquals(m.group(1), value(s.call("GET", "redisson_lock_token:{" + key + "}")));
    assertEquals("0", value(s.call("EXISTS", key)), "released: the key is gone");
  }

  /** The value of a raw integer or bulk-string reply. */
  static String value(String raw) {
    String[] lines = raw.trim().split("\r\n");
    String last = lines[lines.length - 1];
    return lines.length == 1 && last.startsWith(":") ? last.substring(1) : last;
  }

  record Result(int code, String out) {}

  static String tool(String name) {
    return Path.of(System.getProperty("java.home"), "bin", name).toString();
  }

  static Result run(List<String> cmd) throws Exception {
    Process p = new ProcessBuilder(new ArrayList<>(cmd)).redirectErrorStream(true).start();
    byte[] out = p.getInputStream().readAllBytes();
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "finished within 60 s: " + cmd);
    return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8));
  }
}
