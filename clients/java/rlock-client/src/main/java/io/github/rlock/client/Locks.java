package io.github.rlock.client;

import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPool;

/**
 * Locks, semaphores, latches and elections on one server or cluster: the factory of handles, the
 * owner of one watchdog and of the connections the client uses.
 *
 * <pre>{@code
 * Locks locks = Locks.create(RedisClient.create("redis://127.0.0.1:6379"));
 * RlockLock lock = locks.lock("orders");
 * lock.lock();
 * try { ... } finally { lock.unlock(); }
 * }</pre>
 *
 * <p>Commands go on connections of the client's own, made with the given client's address,
 * credentials and TLS settings, which never resend a lock command behind its back. Waits run in
 * the server ({@code BLOCK}) on connections of their own. Close it to stop the watchdog and close
 * those connections; the caller's client stays open.
 */
public final class Locks implements AutoCloseable {
  final Transport transport;
  final String clientId;
  final Watchdog watchdog;
  final long watchdogLeaseMs;
  private final Map<String, long[]> replicas = new ConcurrentHashMap<>();
  /** The connections of session holds: closing the Locks closes them, which ends the holds. */
  final java.util.Set<Transport.WaitConn> sessions = ConcurrentHashMap.newKeySet();

  /** Settings of a {@link Locks}. */
  public static final class Options {
    String clientId;
    long watchdogLeaseMs = Plan.DEFAULT_LEASE_MS;

    /** @return the defaults: a fresh client id, a 30 s watchdog lease */
    public static Options defaults() {
      return new Options();
    }

    /**
     * The client id of thread owners ({@code <client-id>:<thread-id>}). Give Redisson's {@code
     * getId()} to share thread owners with a Redisson client in the same process: a lock its
     * {@code RLock} holds in a thread is re-entered by this client's lock in that thread.
     *
     * @param id the id
     * @return this
     */
    public Options clientId(String id) {
      Checks.owner(id + ":0");
      this.clientId = id;
      return this;
    }

    /**
     * @param lease the lease the watchdog keeps renewing (default 30 s)
     * @return this
     */
    public Options watchdogLease(java.time.Duration lease) {
      this.watchdogLeaseMs = Checks.leaseMs(lease);
      return this;
    }
  }

  Locks(Transport transport, Options options) {
    this.transport = transport;
    this.clientId = options.clientId != null ? options.clientId : Plan.newClientId();
    this.watchdogLeaseMs = options.watchdogLeaseMs;
    this.watchdog = new Watchdog(this);
  }

  /**
   * On Lettuce, standalone.
   *
   * @param client the application's client; its URI, options (TLS) and resources are used
   * @return the factory
   */
  public static Locks create(RedisClient client) {
    return create(client, Options.defaults());
  }

  /**
   * @param client the application's client
   * @param options client id, watchdog lease
   * @return the factory
   */
  public static Locks create(RedisClient client, Options options) {
    Objects.requireNonNull(client, "client must not be null");
    RedisURI uri = (RedisURI) field(RedisClient.class, client, "redisURI");
    if (uri == null) {
      throw new IllegalArgumentException("the RedisClient has no URI: use Locks.create(client, uri, options)");
    }
    return create(client, uri, options);
  }

  /**
   * @param client the application's client (resources and options)
   * @param uri the server
   * @param options client id, watchdog lease
   * @return the factory
   */
  public static Locks create(AbstractRedisClient client, RedisURI uri, Options options) {
    Objects.requireNonNull(client, "client must not be null");
    Objects.requireNonNull(uri, "uri must not be null");
    return new Locks(
        new LettuceTransport(client.getResources(), clientOptions(client), uri, client instanceof RedisClusterClient),
        Objects.requireNonNull(options, "options must not be null"));
  }

  /**
   * On Lettuce, a Redis Cluster.
   *
   * @param client the application's cluster client; its first seed URI is used
   * @return the factory
   */
  public static Locks create(RedisClusterClient client) {
    return create(client, Options.defaults());
  }

  /**
   * @param client the application's cluster client
   * @param options client id, watchdog lease
   * @return the factory
   */
  public static Locks create(RedisClusterClient client, Options options) {
    Objects.requireNonNull(client, "client must not be null");
    @SuppressWarnings("unchecked")
    Iterable<RedisURI> uris = (Iterable<RedisURI>) field(RedisClusterClient.class, client, "initialUris");
    Iterator<RedisURI> it = uris.iterator();
    return create(client, it.next(), options);
  }

  /**
   * On Jedis, standalone: connections are borrowed from the pool.
   *
   * @param pool the application's pool
   * @return the factory
   */
  public static Locks create(JedisPool pool) {
    return create(pool, Options.defaults());
  }

  /**
   * @param pool the application's pool
   * @param options client id, watchdog lease
   * @return the factory
   */
  public static Locks create(JedisPool pool, Options options) {
    Objects.requireNonNull(pool, "pool must not be null");
    return new Locks(JedisTransport.standalone(pool), Objects.requireNonNull(options, "options must not be null"));
  }

  /**
   * On Jedis, a Redis Cluster: connections are borrowed from its node pools.
   *
   * @param cluster the application's cluster client
   * @return the factory
   */
  public static Locks create(JedisCluster cluster) {
    return create(cluster, Options.defaults());
  }

  /**
   * @param cluster the application's cluster client
   * @param options client id, watchdog lease
   * @return the factory
   */
  public static Locks create(JedisCluster cluster, Options options) {
    Objects.requireNonNull(cluster, "cluster must not be null");
    return new Locks(JedisTransport.cluster(cluster), Objects.requireNonNull(options, "options must not be null"));
  }

  private static io.lettuce.core.ClientOptions clientOptions(AbstractRedisClient client) {
    io.lettuce.core.ClientOptions o = client.getOptions();
    if (o instanceof io.lettuce.core.cluster.ClusterClientOptions c) {
      // Plain options for the per-node connections: cluster routing is the client's own.
      return io.lettuce.core.ClientOptions.builder()
          .sslOptions(c.getSslOptions())
          .socketOptions(c.getSocketOptions())
          .build();
    }
    return o;
  }

  private static Object field(Class<?> type, Object target, String name) {
    try {
      Field f = type.getDeclaredField(name);
      f.setAccessible(true);
      return f.get(target);
    } catch (ReflectiveOperationException | RuntimeException e) {
      throw new IllegalStateException("cannot read the client's " + name + " (" + e + "); pass the URI", e);
    }
  }

  // ------------------------------------------------------------------ owners and handles

  /** @return this client's id, the first part of its thread owners */
  public String clientId() {
    return clientId;
  }

  /** @return the calling thread's owner id, {@code <client-id>:<thread-id>} (Redisson's format) */
  @SuppressWarnings("deprecation")
  public String owner() {
    return Plan.threadOwner(clientId, Thread.currentThread().getId());
  }

  /**
   * The calling thread's owner as checked bytes, made once per thread: every lock call sends it,
   * and a thread's id never changes.
   */
  private final ThreadLocal<byte[]> threadOwner = ThreadLocal.withInitial(() -> Checks.owner(owner()));

  byte[] threadOwnerBytes() {
    return threadOwner.get();
  }

  /**
   * A reentrant lock whose owner is the calling thread; the watchdog renews its holds.
   *
   * @param name the lock's key
   * @return the handle
   */
  public RlockLock lock(String name) {
    return new RlockLock(this, name, null, LockOptions.defaults());
  }

  /**
   * @param name the lock's key
   * @param options lease, fair, fenced, session, replicas, owner
   * @return the handle
   */
  public RlockLock lock(String name, LockOptions options) {
    return new RlockLock(this, name, null, Objects.requireNonNull(options, "options must not be null"));
  }

  /**
   * A fair lock: granted in arrival order among every fair caller (Redisson's {@code RFairLock}).
   *
   * @param name the lock's key
   * @return the handle
   */
  public RlockLock fairLock(String name) {
    return lock(name, LockOptions.defaults().fair());
  }

  /**
   * @param name the lock's key (Redisson's {@code RReadWriteLock} layout)
   * @return the read-write lock
   */
  public RlockReadWriteLock readWriteLock(String name) {
    return new RlockReadWriteLock(this, name, LockOptions.defaults());
  }

  /**
   * All-or-nothing over several locks ({@code RLOCK.MACQUIRE}); in a cluster the names must share
   * a slot (a hash tag), refused here otherwise.
   *
   * @param names the locks' keys
   * @return the handle
   */
  public MultiLock multiLock(String... names) {
    return new MultiLock(this, List.of(names), LockOptions.defaults());
  }

  /**
   * @param names the locks' keys
   * @param options lease, session, owner
   * @return the handle
   */
  public MultiLock multiLock(List<String> names, LockOptions options) {
    return new MultiLock(this, names, options);
  }

  /**
   * @param name the semaphore's key (Redisson's {@code RSemaphore} layout)
   * @return the semaphore
   */
  public Semaphore semaphore(String name) {
    return new Semaphore(this, name);
  }

  /**
   * @param name the semaphore's key (Redisson's {@code RPermitExpirableSemaphore} layout)
   * @return the semaphore whose permits expire
   */
  public PermitExpirableSemaphore permitExpirableSemaphore(String name) {
    return new PermitExpirableSemaphore(this, name);
  }

  /**
   * @param name the latch's key (Redisson's {@code RCountDownLatch} layout)
   * @return the latch
   */
  public CountDownLatch countDownLatch(String name) {
    return new CountDownLatch(this, name);
  }

  /**
   * @param name the election's lock
   * @return the election
   */
  public Election election(String name) {
    return new Election(this, name);
  }

  // ------------------------------------------------------------------ operator queries

  /**
   * @param name a lock's key
   * @return its holders, lease, queue, token
   */
  public LockInfo info(String name) {
    byte[] key = Checks.name(name, "name");
    return Replies.info(call(Plan.info(key)));
  }

  /**
   * @param name a lock's key
   * @return whether a hold was removed
   */
  public boolean forceRelease(String name) {
    byte[] key = Checks.name(name, "name");
    return Replies.yes(call(Plan.forceRelease(key)));
  }

  /**
   * @param name a key
   * @return the clients blocked on it
   */
  public List<Waiter> waiters(String name) {
    byte[] key = Checks.name(name, "name");
    return Replies.waiters(call(Plan.waiters(key)));
  }

  /**
   * Every lock on every primary.
   *
   * @param match a glob, or null
   * @param type "lock", "rwlock" or null for both
   * @return the locks found
   */
  public List<ScannedLock> scan(String match, String type) {
    if (type != null && !type.equalsIgnoreCase("lock") && !type.equalsIgnoreCase("rwlock")) {
      throw new IllegalArgumentException("type must be \"lock\", \"rwlock\" or null");
    }
    List<ScannedLock> out = new ArrayList<>();
    for (String node : transport.primaries()) {
      long cursor = 0;
      do {
        Cmd c = Plan.scan(cursor, match, type);
        Replies.ScanPage page = Replies.scan(transport.pipelineAt(node, List.of(c)).get(0));
        out.addAll(page.locks());
        cursor = page.cursor();
      } while (cursor != 0);
    }
    return out;
  }

  /** @return {@code INFO rlock} per primary: address to field to value */
  public Map<String, Map<String, Object>> stats() {
    Map<String, Map<String, Object>> out = new LinkedHashMap<>();
    for (String node : transport.primaries()) {
      Object v = Replies.ok(transport.pipelineAt(node, List.of(Plan.stats())).get(0));
      out.put(node, Replies.stats(Replies.text(v)));
    }
    return out;
  }

  /**
   * @param count how many, 1 to 1000
   * @return the most contended keys over every primary ({@code RLOCK.TOP})
   */
  public List<Map<String, Object>> top(int count) {
    Checks.count(count, "count", 1, 1000);
    List<Map<String, Object>> out = new ArrayList<>();
    for (String node : transport.primaries()) {
      out.addAll(Replies.top(transport.pipelineAt(node, List.of(Plan.top(count))).get(0)));
    }
    out.sort(
        (a, b) -> {
          long wa = a.get("waiters") instanceof Long l ? l : 0;
          long wb = b.get("waiters") instanceof Long l ? l : 0;
          return Long.compare(wb, wa);
        });
    return out.size() > count ? out.subList(0, count) : out;
  }

  /** How many renewals the watchdog sent, and in how many rounds (for tests and metrics). */
  long[] watchdogCounts() {
    return new long[] {watchdog.renewals.get(), watchdog.rounds.get()};
  }

  @Override
  public void close() {
    watchdog.close();
    for (Transport.WaitConn c : sessions) {
      c.discard();
    }
    sessions.clear();
    transport.close();
  }

  // ------------------------------------------------------------------ plumbing

  Object call(Cmd cmd) {
    return Replies.ok(pipeline(cmd.routeKey(), List.of(cmd), false).get(0));
  }

  /**
   * {@code cmds} on the server of {@code key}. {@code resend}: a broken link sends them once
   * more (they carry REQ ids, so the server applies them at most once). A MOVED reply reads the
   * slots again and sends them to the new node.
   */
  List<Object> pipeline(byte[] key, List<Cmd> cmds, boolean resend) {
    for (int attempt = 0; ; attempt++) {
      List<Object> out;
      try {
        out = transport.pipeline(key, cmds);
      } catch (LinkException e) {
        if (!resend || attempt >= 2) {
          throw e;
        }
        sleepQuietly(Plan.RESEND_AFTER_MS);
        continue;
      }
      if (attempt < 3 && moved(out)) {
        transport.refresh();
        continue;
      }
      return out;
    }
  }

  private static boolean moved(List<Object> replies) {
    for (Object v : replies) {
      if (v instanceof ServerError e && (e.message().startsWith("MOVED") || e.message().startsWith("ASK"))) {
        return true;
      }
    }
    return false;
  }

  /** 1 when the key's server has a replica attached (looked up at most once a second). */
  int replicasFor(byte[] key) {
    String node = transport.nodeOf(key);
    long now = System.nanoTime();
    long[] seen = replicas.get(node);
    if (seen == null || now - seen[0] > 1_000_000_000L) {
      Object v = Replies.ok(transport.pipelineAt(node, List.of(Cmd.of("INFO").arg("replication"))).get(0));
      seen = new long[] {now, Replies.connectedReplicas(Replies.text(v))};
      replicas.put(node, seen);
    }
    return Plan.defaultReplicas(seen[1]);
  }

  /** The outcome of one wait: the replies, and the connection when it is pinned (a session). */
  record Waited(List<Object> replies, Transport.WaitConn pinned) {}

  /**
   * Sends {@code cmds} on a wait connection; the first may block in the server up to {@code
   * blockMs} (0 forever, -1 not at all). A broken link sends them again with the same REQ id and
   * the wait that is left. If the calling thread is interrupted, or the server does not answer
   * within the wait plus the response timeout, the wait is ended in the server and whatever it
   * was granted is given back ({@code giveBack}, one REQ id however often tried): nothing is left
   * held by nobody.
   */
  Waited waitFor(byte[] key, List<Cmd> cmds, long blockMs, GiveBack giveBack, boolean pin) throws InterruptedException {
    long start = System.nanoTime();
    long deadline = blockMs == 0 ? Long.MAX_VALUE : start + TimeUnit.MILLISECONDS.toNanos(Math.max(blockMs, 0));
    List<Cmd> sending = new ArrayList<>(cmds);
    for (int tries = 0; ; tries++) {
      Transport.WaitConn conn = transport.waitConn(key);
      CompletableFuture<List<Object>> f = conn.send(sending);
      List<Object> replies;
      try {
        if (blockMs == 0) {
          replies = f.get();
        } else {
          long bound = deadline - System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(transport.responseTimeoutMs());
          replies = f.get(Math.max(bound, 1), TimeUnit.NANOSECONDS);
        }
      } catch (InterruptedException e) {
        abandon(key, conn, f, sending.get(0), giveBack);
        throw e;
      } catch (TimeoutException e) {
        // The server is down or stuck: the caller is told now, the clean-up goes on apart.
        Cmd sent = sending.get(0);
        Thread cleanup = new Thread(() -> abandon(key, conn, f, sent, giveBack), "rlock-abandon");
        cleanup.setDaemon(true);
        cleanup.start();
        throw new LinkException(
            "the server did not answer a wait of " + blockMs + " ms within " + transport.responseTimeoutMs() + " ms more", e);
      } catch (ExecutionException e) {
        conn.discard();
        long left = deadline - System.nanoTime();
        if (tries >= 3 || (blockMs != 0 && left <= 0)) {
          // Whether the last try was granted is unknown: ask once more with its REQ id.
          giveBackLater(key, sending.get(0), giveBack);
          throw new LinkException("the wait's connection broke: " + e.getCause().getMessage(), e.getCause());
        }
        sleepQuietly(Plan.RESEND_AFTER_MS);
        if (blockMs > 0 && sending.get(0).has(Plan.BLOCK)) {
          sending.set(0, sending.get(0).withBlock(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()))));
        }
        continue;
      }
      if (moved(replies.subList(0, 1)) && tries < 3) {
        conn.giveBack();
        transport.refresh();
        continue;
      }
      if (pin) {
        return new Waited(replies, conn);
      }
      conn.giveBack();
      return new Waited(replies, null);
    }
  }

  /**
   * The caller left a wait: end it in the server ({@code CLIENT KILL ID}: nothing the connection
   * sent can run any more), then read what it got. A grant read is given back; if nothing was
   * read, the same call is sent again with its REQ id and a 1 ms wait: a grant the first one got
   * is replayed, and given back with the rest.
   */
  private void abandon(byte[] key, Transport.WaitConn conn, CompletableFuture<List<Object>> f, Cmd sent, GiveBack giveBack) {
    if (!f.isDone()) {
      try {
        transport.pipelineAt(conn.address(), List.of(Cmd.of("CLIENT").arg("KILL").arg("ID").arg(conn.clientId())));
      } catch (RlockException e) {
        // the node is down: the resend below fails too, and the grant (if any) lapses with its lease
      }
    }
    List<Object> got = null;
    try {
      got = f.get(transport.responseTimeoutMs(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      // killed before a reply: unknown, asked again below
    }
    conn.discard();
    if (got != null) {
      if (granted(got.get(0))) {
        releaseQuietly(key, giveBack.of(got.get(0)));
      }
      return;
    }
    giveBackLater(key, sent, giveBack);
  }

  /** Sends {@code sent} again with its REQ id (a 1 ms wait) and gives back what it gets. */
  private void giveBackLater(byte[] key, Cmd sent, GiveBack giveBack) {
    Cmd again = sent.has(Plan.BLOCK) ? sent.withBlock(1) : sent;
    boolean interrupted = Thread.interrupted();
    try {
      for (int attempt = 0; attempt < 3; attempt++) {
        Transport.WaitConn c = null;
        try {
          c = transport.waitConn(key);
          List<Object> r = c.send(List.of(again)).get(transport.responseTimeoutMs() + 1000, TimeUnit.MILLISECONDS);
          c.giveBack();
          if (granted(r.get(0))) {
            releaseQuietly(key, giveBack.of(r.get(0)));
          }
          return;
        } catch (InterruptedException e) {
          interrupted = true;
          if (c != null) {
            c.discard();
          }
        } catch (ExecutionException | TimeoutException | RlockException e) {
          if (c != null) {
            c.discard();
          }
          sleepQuietly(Plan.RESEND_AFTER_MS);
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** What gives back a grant (its reply) that its caller never got: REQ ids fixed in advance. */
  @FunctionalInterface
  interface GiveBack {
    List<Cmd> of(Object grant);
  }

  void releaseQuietly(byte[] key, List<Cmd> release) {
    try {
      pipeline(key, release, true);
    } catch (RlockException e) {
      // the lease frees it
    }
  }

  static boolean granted(Object v) {
    return v != null && !(v instanceof ServerError) && !(v instanceof Long l && l == 0);
  }

  static void sleepQuietly(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  static String str(byte[] b) {
    return new String(b, StandardCharsets.UTF_8);
  }
}
