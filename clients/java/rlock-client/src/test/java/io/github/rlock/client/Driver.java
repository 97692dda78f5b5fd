package io.github.rlock.client;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.time.Duration;
import java.util.List;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.JedisPoolConfig;

/** The two drivers a test runs on; each makes a {@link Locks} on a test server. */
enum Driver {
  LETTUCE,
  JEDIS;

  @Override
  public String toString() {
    return name().toLowerCase(java.util.Locale.ROOT);
  }

  /** A Locks on the cluster whose first node listens on {@code port}. */
  Locks connectCluster(int port, Locks.Options options, List<AutoCloseable> closing) {
    switch (this) {
      case LETTUCE -> {
        io.lettuce.core.cluster.RedisClusterClient client =
            io.lettuce.core.cluster.RedisClusterClient.create(RedisURI.builder().withHost("127.0.0.1").withPort(port).withTimeout(Duration.ofSeconds(5)).build());
        closing.add(client::shutdown);
        Locks locks = Locks.create(client, options);
        closing.add(0, locks);
        return locks;
      }
      case JEDIS -> {
        redis.clients.jedis.JedisCluster cluster =
            new redis.clients.jedis.JedisCluster(new redis.clients.jedis.HostAndPort("127.0.0.1", port), 5000);
        closing.add(cluster::close);
        Locks locks = Locks.create(cluster, options);
        closing.add(0, locks);
        return locks;
      }
      default -> throw new IllegalStateException();
    }
  }

  /**
   * A Locks on {@code port}, whose driver's command/socket timeout is {@code timeout}; what must
   * be closed after the test goes into {@code closing}.
   */
  Locks connect(int port, Duration timeout, Locks.Options options, List<AutoCloseable> closing) {
    switch (this) {
      case LETTUCE -> {
        RedisClient client = RedisClient.create(RedisURI.builder().withHost("127.0.0.1").withPort(port).withTimeout(timeout).build());
        closing.add(client::shutdown);
        Locks locks = Locks.create(client, options);
        closing.add(0, locks);
        return locks;
      }
      case JEDIS -> {
        JedisPoolConfig cfg = new JedisPoolConfig();
        cfg.setMaxTotal(256);
        cfg.setJmxEnabled(false);
        JedisPool pool = new JedisPool(cfg, "127.0.0.1", port, (int) timeout.toMillis());
        closing.add(pool::close);
        Locks locks = Locks.create(pool, options);
        closing.add(0, locks);
        return locks;
      }
      default -> throw new IllegalStateException();
    }
  }
}
