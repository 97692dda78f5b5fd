package io.github.rlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** C14 (cluster), C15 (replicas), C19 (TLS): deployments of their own. */
class DeploymentCasesTest extends ServerTestBase {
  private static final Map<String, List<Servers.Server>> CLUSTERS = new ConcurrentHashMap<>();

  /** Three primaries, no replicas, slots split as module-tests/src/cluster.rs splits them. */
  static List<Servers.Server> cluster(String flavor) {
    return CLUSTERS.computeIfAbsent(
        flavor,
        f -> {
          List<Servers.Server> nodes = new ArrayList<>();
          try {
            for (int i = 0; i < 3; i++) {
              Servers.Server s = new Servers.Server(f).with("cluster-enabled", "yes").with("cluster-node-timeout", "5000");
              s.with("cluster-config-file", s.dir.resolve("nodes.conf").toString());
              nodes.add(s.start());
            }
            int[][] ranges = {{0, 5460}, {5461, 10922}, {10923, 16383}};
            for (int i = 0; i < 3; i++) {
              nodes.get(i).call("CLUSTER", "ADDSLOTSRANGE", Integer.toString(ranges[i][0]), Integer.toString(ranges[i][1]));
            }
            for (int i = 1; i < 3; i++) {
              nodes.get(0).call("CLUSTER", "MEET", "127.0.0.1", Integer.toString(nodes.get(i).port));
            }
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (System.nanoTime() < end) {
              boolean ok = true;
              for (Servers.Server s : nodes) {
                String info = s.call("CLUSTER", "INFO");
                ok &= info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3");
              }
              if (ok) {
                return nodes;
              }
              Thread.sleep(100);
            }
          } catch (Exception e) {
            nodes.forEach(Servers.Server::close);
            throw new IllegalStateException(e);
          }
          nodes.forEach(Servers.Server::close);
          throw new IllegalStateException("the cluster did not come up");
        });
  }

  @AfterAll
  static void stopClusters() {
    for (List<Servers.Server> nodes : CLUSTERS.values()) {
      nodes.forEach(Servers.Server::close);
    }
    CLUSTERS.clear();
  }

  @ParameterizedTest(name = "C14 cluster: C01, C02, C12 on 3 primaries, cross-slot names refused client-side [{0}] [{1}]")
  @MethodSource("targets")
  void c14_cluster(String flavor, Driver driver) throws Exception {
    List<Servers.Server> nodes = cluster(flavor);
    Locks locks = driver.connectCluster(nodes.get(0).port, Locks.Options.defaults(), closing);
    // C01 on keys spread over the three primaries.
    for (int i = 0; i < 6; i++) {
      RlockLock lock = locks.lock(name("c14-" + i));
      lock.lock();
      lock.lock();
      assertEquals(2, lock.getHoldCount());
      assertFalse(ServerTestBase.<Boolean>inThread(() -> lock.tryLock()));
      lock.unlock();
      lock.unlock();
      assertFalse(lock.isLocked());
    }
    // C02: a waiter blocked in the server is granted at the release.
    String n = name("c14w");
    RlockLock lock = locks.lock(n);
    lock.lock();
    CompletableFuture<Long> granted = new CompletableFuture<>();
    new Thread(() -> {
      try {
        Optional<Hold> h = lock.acquire(Duration.ofSeconds(5));
        granted.complete(System.nanoTime());
        h.ifPresent(Hold::release);
      } catch (Throwable e) {
        granted.completeExceptionally(e);
      }
    }).start();
    awaitBlocked(locks, n, 1);
    long released = System.nanoTime();
    lock.unlock();
    long ms = TimeUnit.NANOSECONDS.toMillis(granted.get(5, TimeUnit.SECONDS) - released);
    assertTrue(ms < 50, "granted " + ms + " ms after the release");
    // C12 on the cluster: read-write, multi-key in one slot, semaphore, latch.
    String rw = name("c14rw");
    Hold r = locks.readWriteLock(rw).readLock().acquire().orElseThrow();
    assertFalse(ServerTestBase.<Boolean>inThread(() -> locks.readWriteLock(rw).writeLock().acquire().isPresent()));
    r.release();
    String tag = "{" + name("c14m") + "}";
    Hold all = locks.multiLock(tag + ":a", tag + ":b").acquire().orElseThrow();
    assertTrue(locks.info(tag + ":b").locked());
    all.release();
    Semaphore sem = locks.semaphore(name("c14s"));
    assertTrue(sem.trySetPermits(1));
    assertTrue(sem.tryAcquire(1));
    assertFalse(sem.tryAcquire(1));
    sem.release(1);
    io.github.rlock.client.CountDownLatch latch = locks.countDownLatch(name("c14l"));
    latch.trySetCount(1);
    latch.countDown();
    assertTrue(latch.awaitZero(Duration.ofMillis(100)));
    // Names in different slots: refused before anything is sent.
    for (Servers.Server s : nodes) {
      s.call("CONFIG", "RESETSTAT");
    }
    assertThrows(IllegalArgumentException.class, () -> locks.multiLock("c14-x", "c14-y"));
    for (Servers.Server s : nodes) {
      assertFalse(s.call("INFO", "commandstats").contains("cmdstat_rlock.macquire"));
    }
    assertTrue(locks.scan(null, null).isEmpty(), "every lock of the case was released, on every primary");
  }

  @ParameterizedTest(name = "C15 durable by default: WAIT for a replica, none with syncReplicas 0, NotAcknowledged [{0}] [{1}]")
  @MethodSource("targets")
  void c15_durableByDefault(String flavor, Driver driver) throws Exception {
    Servers.Server primary = own(new Servers.Server(flavor));
    Servers.Server replica = own(new Servers.Server(flavor).with("replicaof", "127.0.0.1 " + primary.port));
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!primary.call("INFO", "replication").contains("connected_slaves:1") && System.nanoTime() < end) {
      Thread.sleep(50);
    }
    while (!replica.call("INFO", "replication").contains("master_link_status:up") && System.nanoTime() < end) {
      Thread.sleep(50);
    }
    Locks locks = locks(primary, driver, Locks.Options.defaults());
    primary.call("CONFIG", "RESETSTAT");
    Hold h = locks.lock(name("c15")).acquire().orElseThrow();
    assertTrue(h.replicasAcked() >= 1, "acked " + h.replicasAcked());
    assertTrue(primary.call("INFO", "commandstats").contains("cmdstat_wait:calls=1"));
    h.release();
    primary.call("CONFIG", "RESETSTAT");
    Hold fast = locks.lock(name("c15n"), LockOptions.defaults().syncReplicas(0)).acquire().orElseThrow();
    assertEquals(0, fast.replicasAcked());
    assertFalse(primary.call("INFO", "commandstats").contains("cmdstat_wait"));
    fast.release();
    // A replica that does not answer: the grant is released and NotAcknowledged raised.
    new ProcessBuilder("kill", "-STOP", Long.toString(replica.pid())).start().waitFor();
    try {
      String n = name("c15x");
      RlockLock lock = locks.lock(n, LockOptions.defaults().syncTimeout(Duration.ofMillis(200)));
      NotAcknowledgedException e = assertThrows(NotAcknowledgedException.class, () -> lock.acquire());
      assertEquals(0, e.acked());
      assertFalse(locks.info(n).locked(), "the unacknowledged grant was released");
    } finally {
      new ProcessBuilder("kill", "-CONT", Long.toString(replica.pid())).start().waitFor();
    }
  }

  @ParameterizedTest(name = "C19 TLS: rediss with a given CA, a wrong CA refused [{0}] [{1}]")
  @MethodSource("targets")
  void c19_tls(String flavor, Driver driver) throws Exception {
    Tls.Files files = Tls.files();
    org.junit.jupiter.api.Assumptions.assumeTrue(
        Tls.supports(flavor), flavor + "'s server binary is built without TLS: the case cannot run on it");
    Servers.Server s =
        own(new Servers.Server(flavor)
            .with("tls-port", "0")
            .with("tls-cert-file", files.serverCert().toString())
            .with("tls-key-file", files.serverKey().toString())
            .with("tls-ca-cert-file", files.ca().toString())
            .with("tls-auth-clients", "no"));
    int tlsPort = Integer.parseInt(s.config.get("tls-port"));
    Locks locks = Tls.connect(driver, tlsPort, files.ca(), closing);
    String n = name("c19");
    Hold h = locks.lock(n).acquire().orElseThrow();
    assertEquals(1L, locks.info(n).holders().get(h.owner()));
    h.release();
    assertFalse(locks.info(n).locked());
    assertThrows(RuntimeException.class, () -> Tls.connect(driver, tlsPort, files.otherCa(), closing).lock(name("c19x")).acquire());
  }
}
