package io.github.rlock.client;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.BiConsumer;
import java.util.function.Function;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.Connection;
import redis.clients.jedis.ConnectionPool;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.JedisPubSub;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * Jedis: connections borrowed from the caller's pools (Jedis never resends by itself). A wait
 * borrows one connection for itself and reads on a thread of the client's, so that the caller's
 * thread can be interrupted while it waits.
 */
final class JedisTransport extends NodeTransport {
  /** A connection borrowed from a pool, and how to give it back. */
  record Borrowed(Connection conn, Runnable giveBack) {}

  private final Function<String, java.util.function.Supplier<Borrowed>> pools;
  private final int db;
  private final long timeoutMs;
  private final ExecutorService readers =
      Executors.newCachedThreadPool(
          r -> {
            Thread t = new Thread(r, "rlock-jedis-wait");
            t.setDaemon(true);
            return t;
          });

  private JedisTransport(
      String seed, boolean cluster, Function<String, java.util.function.Supplier<Borrowed>> pools, int db, long timeoutMs) {
    super(seed, cluster);
    this.pools = pools;
    this.db = db;
    this.timeoutMs = timeoutMs;
    start();
  }

  static JedisTransport standalone(JedisPool pool) {
    Borrowed probe = borrowJedis(pool);
    String seed;
    int db;
    long timeout;
    try {
      seed = address(probe.conn());
      db = dbOf(probe.conn());
      timeout = probe.conn().getSoTimeout();
    } finally {
      probe.giveBack().run();
    }
    return new JedisTransport(seed, false, a -> () -> borrowJedis(pool), db, timeout);
  }

  static JedisTransport cluster(redis.clients.jedis.JedisCluster cluster) {
    var nodes = cluster.getClusterNodes();
    String seed = nodes.keySet().iterator().next();
    ConnectionPool first = nodes.get(seed);
    Connection c = first.getResource();
    long timeout;
    try {
      timeout = c.getSoTimeout();
    } finally {
      c.close();
    }
    return new JedisTransport(
        seed,
        true,
        a ->
            () -> {
              ConnectionPool p = cluster.getClusterNodes().get(a);
              if (p == null) {
                throw new LinkException("no pool for cluster node " + a, null);
              }
              Connection conn = p.getResource();
              return new Borrowed(conn, conn::close);
            },
        0,
        timeout);
  }

  private static Borrowed borrowJedis(JedisPool pool) {
    try {
      Jedis j = pool.getResource();
      return new Borrowed(j.getConnection(), j::close);
    } catch (JedisConnectionException e) {
      throw new LinkException("cannot connect: " + e.getMessage(), e);
    }
  }

  private static int dbOf(Connection c) {
    // CLIENT INFO's db=N field (Redis 6.2+).
    Object v = command(c, List.of(Cmd.of("CLIENT").arg("INFO"))).get(0);
    for (String f : String.valueOf(Replies.text(v)).trim().split(" ")) {
      if (f.startsWith("db=")) {
        return Integer.parseInt(f.substring(3));
      }
    }
    return 0;
  }

  private static String address(Connection c) {
    Object v = command(c, List.of(Cmd.of("CLIENT").arg("INFO"))).get(0);
    for (String f : String.valueOf(Replies.text(v)).trim().split(" ")) {
      if (f.startsWith("laddr=")) {
        return f.substring(6);
      }
    }
    throw new RlockException("CLIENT INFO gave no laddr");
  }

  private record Name(String name) implements ProtocolCommand {
    @Override
    public byte[] getRaw() {
      return name.getBytes(StandardCharsets.US_ASCII);
    }
  }

  /** Sends {@code cmds} in one write and reads every reply; server errors as values. */
  static List<Object> command(Connection c, List<Cmd> cmds) {
    try {
      for (Cmd cmd : cmds) {
        CommandArguments args = new CommandArguments(new Name(cmd.name));
        for (byte[] a : cmd.args) {
          args.add(a);
        }
        c.sendCommand(args);
      }
      List<Object> out = new ArrayList<>(cmds.size());
      for (Object o : c.getMany(cmds.size())) {
        out.add(reply(o));
      }
      return out;
    } catch (JedisConnectionException e) {
      c.setBroken();
      throw new LinkException("the connection failed: " + e.getMessage(), e);
    }
  }

  static Object reply(Object o) {
    if (o instanceof JedisDataException e) {
      return new ServerError(e.getMessage());
    }
    if (o instanceof List<?> l) {
      List<Object> out = new ArrayList<>(l.size());
      for (Object x : l) {
        out.add(reply(x));
      }
      return out;
    }
    return o;
  }

  @Override
  Node newNode(String host, int port) {
    String a = host + ":" + port;
    return new JedisNode(a, pools.apply(a));
  }

  @Override
  public int db() {
    return db;
  }

  @Override
  public long responseTimeoutMs() {
    return timeoutMs;
  }

  @Override
  public void close() {
    super.close();
    readers.shutdownNow();
  }

  private final class JedisNode implements Node {
    final String address;
    final java.util.function.Supplier<Borrowed> borrow;

    JedisNode(String address, java.util.function.Supplier<Borrowed> borrow) {
      this.address = address;
      this.borrow = borrow;
    }

    @Override
    public List<Object> pipeline(List<Cmd> cmds) {
      Borrowed b = borrow.get();
      try {
        return command(b.conn(), cmds);
      } finally {
        b.giveBack().run();
      }
    }

    @Override
    public WaitConn waitConn() {
      Borrowed b = borrow.get();
      try {
        long id = Replies.asLong(command(b.conn(), List.of(Cmd.of("CLIENT").arg("ID"))).get(0));
        return new JedisWait(address, b, id);
      } catch (RuntimeException e) {
        b.giveBack().run();
        throw e;
      }
    }

    @Override
    public Channels channels(BiConsumer<String, String> onMessage) {
      return new JedisChannels(onMessage);
    }

    /**
     * Jedis reads a subscription on a thread of its own that {@code SUBSCRIBE}s its first
     * channels: it is started by the first {@link #add}. Adds and removes are serialized here,
     * since they write to the connection that thread reads.
     */
    private final class JedisChannels implements Channels {
      private final java.util.Map<String, CompletableFuture<Void>> confirming = new java.util.concurrent.ConcurrentHashMap<>();
      private final JedisPubSub ps;
      private static final String KEEP_CHANNEL = "__rlock__:watchdog";
      private Borrowed b;

      JedisChannels(BiConsumer<String, String> onMessage) {
        ps =
            new JedisPubSub() {
              @Override
              public void onMessage(String channel, String message) {
                onMessage.accept(channel, message);
              }

              @Override
              public void onSubscribe(String channel, int count) {
                CompletableFuture<Void> f = confirming.remove(channel);
                if (f != null) {
                  f.complete(null);
                }
              }
            };
      }

      @Override
      public synchronized void add(List<String> channels) {
        List<CompletableFuture<Void>> fs = new ArrayList<>();
        for (String c : channels) {
          fs.add(confirming.computeIfAbsent(c, k -> new CompletableFuture<>()));
        }
        String[] names = channels.toArray(new String[0]);
        if (b == null) {
          // Jedis's reading thread ends when no channel is left: one that nothing publishes to
          // keeps it while the held keys' channels come and go.
          List<String> first = new ArrayList<>(channels);
          first.add(KEEP_CHANNEL);
          names = first.toArray(new String[0]);
          Borrowed started = borrow.get();
          b = started;
          String[] subscribing = names;
          Thread t =
              new Thread(
                  () -> {
                    try {
                      started.conn().setTimeoutInfinite();
                      ps.proceed(started.conn(), subscribing);
                    } catch (RuntimeException e) {
                      fs.forEach(f -> f.completeExceptionally(e));
                    } finally {
                      started.conn().setBroken();
                      started.giveBack().run();
                    }
                  },
                  "rlock-jedis-events");
          t.setDaemon(true);
          t.start();
        } else {
          ps.subscribe(names);
        }
        try {
          CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0])).get(timeoutMs, java.util.concurrent.TimeUnit.MILLISECONDS);
        } catch (Exception e) {
          throw new LinkException("could not subscribe: " + e, e);
        }
      }

      @Override
      public synchronized void remove(List<String> channels) {
        if (b != null && !channels.isEmpty()) {
          ps.unsubscribe(channels.toArray(new String[0]));
        }
      }

      @Override
      public synchronized void close() {
        if (b == null) {
          return;
        }
        try {
          ps.unsubscribe();
        } catch (RuntimeException e) {
          b.conn().disconnect();
        }
      }
    }

    @Override
    public void close() {}
  }

  private final class JedisWait extends Dedicated {
    final Borrowed borrowed;

    JedisWait(String address, Borrowed borrowed, long id) {
      super(address, id);
      this.borrowed = borrowed;
    }

    @Override
    public CompletableFuture<List<Object>> send(List<Cmd> cmds) {
      return CompletableFuture.supplyAsync(
          () -> {
            Connection c = borrowed.conn();
            int before = c.getSoTimeout();
            // The wait may outlast the pool's socket timeout: the caller bounds it instead.
            c.setTimeoutInfinite();
            try {
              return command(c, cmds);
            } finally {
              if (!c.isBroken()) {
                c.setSoTimeout(before);
              }
            }
          },
          readers);
    }

    @Override
    public void giveBack() {
      borrowed.giveBack().run();
    }

    @Override
    public void discard() {
      borrowed.conn().setBroken();
      try {
        borrowed.conn().disconnect();
      } catch (RuntimeException e) {
        // already gone
      }
      borrowed.giveBack().run();
    }
  }
}
