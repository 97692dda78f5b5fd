package io.github.rlock.client;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.CommandOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import io.lettuce.core.resource.ClientResources;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiConsumer;

/**
 * Lettuce: connections of a client of our own, made with the caller's address, credentials, TLS
 * and resources, with auto-reconnect off (Lettuce resends the commands a broken connection had in
 * flight once it reconnects, which a lock command must not be) and RESP2 (one reply shape).
 */
final class LettuceTransport extends NodeTransport {
  private final RedisClient client;
  private final RedisURI seed;
  private final long timeoutMs;

  LettuceTransport(ClientResources resources, ClientOptions options, RedisURI seed, boolean cluster) {
    super(seed.getHost() + ":" + seed.getPort(), cluster);
    this.seed = seed;
    this.timeoutMs = seed.getTimeout().toMillis();
    this.client = RedisClient.create(resources);
    this.client.setOptions(
        (options == null ? ClientOptions.builder() : options.mutate())
            .autoReconnect(false)
            .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
            .protocolVersion(ProtocolVersion.RESP2)
            .timeoutOptions(TimeoutOptions.builder().timeoutCommands(false).build())
            .build());
    start();
  }

  @Override
  Node newNode(String host, int port) {
    RedisURI uri = RedisURI.builder(seed).withHost(host).withPort(port).build();
    return new LettuceNode(uri);
  }

  @Override
  public int db() {
    return seed.getDatabase();
  }

  @Override
  public long responseTimeoutMs() {
    return timeoutMs;
  }

  @Override
  public void close() {
    super.close();
    client.shutdown(0, 2, TimeUnit.SECONDS);
  }

  /** A command name, its bytes made once: Lettuce asks for them on every command it encodes. */
  private record Keyword(String name, byte[] bytes) implements ProtocolKeyword {
    private static final java.util.Map<String, Keyword> KNOWN = new java.util.concurrent.ConcurrentHashMap<>();

    static Keyword of(String name) {
      Keyword k = KNOWN.get(name);
      return k != null ? k : KNOWN.computeIfAbsent(name, n -> new Keyword(n, n.getBytes(StandardCharsets.US_ASCII)));
    }

    @Override
    public byte[] getBytes() {
      return bytes;
    }
  }

  private static CompletableFuture<Object> dispatch(StatefulRedisConnection<byte[], byte[]> c, Cmd cmd) {
    CommandArgs<byte[], byte[]> args = new CommandArgs<>(ByteArrayCodec.INSTANCE);
    for (byte[] a : cmd.args) {
      args.add(a);
    }
    return c.async().dispatch(Keyword.of(cmd.name), new ReplyOutput(), args).toCompletableFuture();
  }

  /** Every reply of {@code futures}, server errors as values, within {@code timeoutMs} (0: none). */
  private static List<Object> await(List<CompletableFuture<Object>> futures, long timeoutMs) {
    // Not interruptible: a short command (a release above all) must not be left half done
    // because the calling thread was interrupted; the interrupt is kept for the caller.
    List<Object> out = new ArrayList<>(futures.size());
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    boolean interrupted = false;
    try {
      for (CompletableFuture<Object> f : futures) {
        while (true) {
          try {
            out.add(timeoutMs <= 0 ? f.get() : f.get(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS));
            break;
          } catch (ExecutionException e) {
            out.add(asReplyOrThrow(e.getCause()));
            break;
          } catch (TimeoutException e) {
            throw new LinkException("the server did not answer within " + timeoutMs + " ms", e);
          } catch (InterruptedException e) {
            interrupted = true;
          }
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
    return out;
  }

  private static Throwable unwrap(Throwable err) {
    return err instanceof java.util.concurrent.CompletionException && err.getCause() != null ? err.getCause() : err;
  }

  static Object asReplyOrThrow(Throwable cause) {
    if (cause instanceof RedisCommandExecutionException) {
      return new ServerError(cause.getMessage());
    }
    throw new LinkException("the connection failed: " + cause, cause);
  }

  private final class LettuceNode implements Node {
    private final RedisURI uri;
    private volatile StatefulRedisConnection<byte[], byte[]> shared;
    private final Deque<LettuceWait> idle = new ConcurrentLinkedDeque<>();

    LettuceNode(RedisURI uri) {
      this.uri = uri;
    }

    private StatefulRedisConnection<byte[], byte[]> shared() {
      StatefulRedisConnection<byte[], byte[]> c = shared;
      if (c == null || !c.isOpen()) {
        synchronized (this) {
          c = shared;
          if (c == null || !c.isOpen()) {
            c = connect();
            shared = c;
          }
        }
      }
      return c;
    }

    private StatefulRedisConnection<byte[], byte[]> connect() {
      // Not interruptible (Lettuce's connect() is): an interrupt is kept for the wait that
      // follows, which ends it and cleans up after itself.
      CompletableFuture<StatefulRedisConnection<byte[], byte[]>> f =
          client.connectAsync(ByteArrayCodec.INSTANCE, uri).toCompletableFuture();
      boolean interrupted = false;
      try {
        while (true) {
          try {
            return f.get(timeoutMs + 1000, TimeUnit.MILLISECONDS);
          } catch (InterruptedException e) {
            interrupted = true;
          } catch (ExecutionException | TimeoutException e) {
            f.thenAccept(StatefulRedisConnection::closeAsync);
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            throw new LinkException("cannot connect to " + uri.getHost() + ":" + uri.getPort() + ": " + cause.getMessage(), cause);
          }
        }
      } finally {
        if (interrupted) {
          Thread.currentThread().interrupt();
        }
      }
    }

    @Override
    public List<Object> pipeline(List<Cmd> cmds) {
      StatefulRedisConnection<byte[], byte[]> c = shared();
      List<CompletableFuture<Object>> fs = new ArrayList<>(cmds.size());
      for (Cmd cmd : cmds) {
        fs.add(dispatch(c, cmd));
      }
      try {
        return await(fs, timeoutMs);
      } catch (LinkException e) {
        c.closeAsync();
        throw e;
      }
    }

    @Override
    public WaitConn waitConn() {
      LettuceWait w = idle.pollFirst();
      if (w != null && w.conn.isOpen()) {
        return w;
      }
      StatefulRedisConnection<byte[], byte[]> c = connect();
      List<Object> id = await(List.of(dispatch(c, Cmd.of("CLIENT").arg("ID"))), timeoutMs);
      return new LettuceWait(this, c, Replies.asLong(id.get(0)));
    }

    @Override
    public Channels channels(BiConsumer<String, String> onMessage) {
      StatefulRedisPubSubConnection<String, String> ps = client.connectPubSub(StringCodec.UTF8, uri);
      ps.addListener(
          new RedisPubSubAdapter<>() {
            @Override
            public void message(String channel, String message) {
              onMessage.accept(channel, message);
            }
          });
      return new Channels() {
        @Override
        public void add(List<String> channels) {
          await(List.of(ps.async().subscribe(channels.toArray(new String[0])).toCompletableFuture().thenApply(v -> (Object) v)), timeoutMs);
        }

        @Override
        public void remove(List<String> channels) {
          ps.async().unsubscribe(channels.toArray(new String[0]));
        }

        @Override
        public void close() {
          ps.close();
        }
      };
    }

    @Override
    public void close() {
      StatefulRedisConnection<byte[], byte[]> c = shared;
      if (c != null) {
        c.closeAsync();
      }
      LettuceWait w;
      while ((w = idle.pollFirst()) != null) {
        w.discard();
      }
    }
  }

  private final class LettuceWait extends Dedicated {
    final LettuceNode node;
    final StatefulRedisConnection<byte[], byte[]> conn;

    LettuceWait(LettuceNode node, StatefulRedisConnection<byte[], byte[]> conn, long id) {
      super(node.uri.getHost() + ":" + node.uri.getPort(), id);
      this.node = node;
      this.conn = conn;
    }

    @Override
    public CompletableFuture<List<Object>> send(List<Cmd> cmds) {
      if (cmds.size() == 1) {
        // A plain wait: one stage on the command's own future, completed on the I/O thread.
        return dispatch(conn, cmds.get(0))
            .handle((v, err) -> java.util.Collections.singletonList(err == null ? v : asReplyOrThrow(unwrap(err))));
      }
      List<CompletableFuture<Object>> fs = new ArrayList<>(cmds.size());
      for (Cmd cmd : cmds) {
        fs.add(dispatch(conn, cmd));
      }
      return CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0]))
          .handle((v, err) -> await(fs, 0));
    }

    @Override
    public void giveBack() {
      if (conn.isOpen()) {
        node.idle.addFirst(this);
      }
    }

    @Override
    public void discard() {
      conn.closeAsync();
    }
  }

  /** Any reply as Long, byte[], List, null (RESP2), without knowing its shape in advance. */
  static final class ReplyOutput extends CommandOutput<byte[], byte[], Object> {
    // Made at the first array: most replies (an integer, a null) need neither.
    private Deque<List<Object>> open;
    private Deque<Integer> left;

    ReplyOutput() {
      super(ByteArrayCodec.INSTANCE, null);
    }

    private void add(Object v) {
      if (open == null || open.isEmpty()) {
        output = v;
        return;
      }
      open.peek().add(v);
      int n = left.pop() - 1;
      if (n > 0) {
        left.push(n);
      } else {
        open.pop();
      }
    }

    @Override
    public void set(ByteBuffer bytes) {
      if (bytes == null) {
        add(null);
        return;
      }
      byte[] b = new byte[bytes.remaining()];
      bytes.get(b);
      add(b);
    }

    @Override
    public void setSingle(ByteBuffer bytes) {
      set(bytes);
    }

    @Override
    public void set(long integer) {
      add(integer);
    }

    @Override
    public void set(double number) {
      add(number);
    }

    @Override
    public void set(boolean value) {
      add(value ? 1L : 0L);
    }

    @Override
    public void multi(int count) {
      if (count < 0) {
        add(null);
        return;
      }
      List<Object> list = new ArrayList<>(count);
      add(list);
      if (count > 0) {
        if (open == null) {
          open = new ArrayDeque<>();
          left = new ArrayDeque<>();
        }
        open.push(list);
        left.push(count);
      }
    }

    @Override
    public void multiArray(int count) {
      multi(count);
    }

    @Override
    public void multiSet(int count) {
      multi(count);
    }

    @Override
    public void multiPush(int count) {
      multi(count);
    }

    @Override
    public void multiMap(int count) {
      multi(count * 2);
    }
  }
}
