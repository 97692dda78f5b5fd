package io.github.rlock.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.provider.Arguments;

/**
 * The base of the tests against real servers.
 *
 * <p><b>Naming scheme</b> (read from the Surefire XML by scripts/conformance): each conformance
 * case is one {@code @ParameterizedTest} per case whose invocation name is
 * <pre>  C&lt;nn&gt; &lt;what it shows&gt; [&lt;flavor&gt;] [&lt;driver&gt;]</pre>
 * with flavor one of {@code redis}, {@code redis8}, {@code valkey} and driver one of {@code
 * lettuce}, {@code jedis}; e.g. {@code C07 a long wait outlives socket timeouts [valkey] [jedis]}.
 * In the XML (target/surefire-reports/TEST-*.xml) each invocation is one {@code <testcase>} whose
 * name is the method, its parameter types, a space and that text:
 * <pre>  name="c07_longWaitOutlivesSocketTimeout(String, Driver) C07 a long wait outlives socket timeouts [valkey] [jedis]"</pre>
 * so the regular expression {@code \) (C\d\d) .* \[(redis|redis8|valkey)\] \[(lettuce|jedis)\]$}
 * reads case, flavor and driver; a {@code <skipped>} child marks a case the server cannot run
 * (C19 on a binary built without TLS). Tests that are no conformance case have display names
 * without a {@code C<nn>} prefix.
 *
 * <p>One server per flavor is shared by the tests of a class (started on first use, killed after
 * the class); tests that change a server's settings start their own.
 */
abstract class ServerTestBase {
  static final Map<String, Servers.Server> SHARED = new ConcurrentHashMap<>();
  final List<AutoCloseable> closing = new ArrayList<>();

  /** (flavor, driver) for every flavor of RLOCK_FLAVORS and both drivers. */
  static Stream<Arguments> targets() {
    List<Arguments> out = new ArrayList<>();
    for (String f : Servers.flavors()) {
      for (Driver d : Driver.values()) {
        out.add(Arguments.of(f, d));
      }
    }
    return out.stream();
  }

  static Servers.Server shared(String flavor) {
    return SHARED.computeIfAbsent(flavor, f -> new Servers.Server(f).start());
  }

  /** A server of this test's own, killed after it. */
  Servers.Server own(Servers.Server s) {
    closing.add(s);
    return s.start();
  }

  Locks locks(String flavor, Driver driver) {
    return locks(shared(flavor), driver, Locks.Options.defaults());
  }

  Locks locks(Servers.Server s, Driver driver, Locks.Options options) {
    return driver.connect(s.port, Duration.ofSeconds(5), options, closing);
  }

  /** Runs {@code body} on a thread of its own; its outcome is the future's. */
  static <T> java.util.concurrent.CompletableFuture<T> started(java.util.concurrent.Callable<T> body) {
    java.util.concurrent.CompletableFuture<T> f = new java.util.concurrent.CompletableFuture<>();
    Thread t =
        new Thread(
            () -> {
              try {
                f.complete(body.call());
              } catch (Throwable e) {
                f.completeExceptionally(e);
              }
            });
    t.start();
    return f;
  }

  /** Runs {@code body} on another thread (another owner) and returns what it returned. */
  static <T> T inThread(java.util.concurrent.Callable<T> body) throws Exception {
    return started(body).get(30, java.util.concurrent.TimeUnit.SECONDS);
  }

  /** Waits up to 5 s until {@code name} has {@code n} clients blocked on it. */
  static void awaitBlocked(Locks locks, String name, int n) throws InterruptedException {
    long end = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(5);
    while (locks.info(name).blocked() < n && System.nanoTime() < end) {
      Thread.sleep(5);
    }
  }

  /** A unique key name per test. */
  static String name(String what) {
    return what + ":" + java.util.UUID.randomUUID();
  }

  @AfterEach
  void closeAll() {
    for (AutoCloseable c : closing) {
      try {
        c.close();
      } catch (Exception e) {
        // closing
      }
    }
    closing.clear();
  }

  @AfterAll
  static void stopShared() {
    for (Servers.Server s : SHARED.values()) {
      s.close();
    }
    SHARED.clear();
  }
}
