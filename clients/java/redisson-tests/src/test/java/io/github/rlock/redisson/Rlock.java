package io.github.rlock.redisson;

import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.ArrayOutput;
import io.lettuce.core.output.CommandOutput;
import io.lettuce.core.output.IntegerOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The rlock side, as raw commands on one Lettuce connection of its own: a blocking call holds the
 * connection until the server replies, so each waiting caller gets one. Owners are Redisson's
 * format, `<uuid>:<thread-id>`.
 */
final class Rlock implements AutoCloseable {
  private record Keyword(String name) implements ProtocolKeyword {
    @Override
    public byte[] getBytes() {
      return name.getBytes(StandardCharsets.US_ASCII);
    }
  }

  private final StatefulRedisConnection<String, String> connection;

  Rlock(StatefulRedisConnection<String, String> connection) {
    this.connection = connection;
  }

  /**
   * Lettuce's ArrayOutput, except that a nil reply (RSEM.LEASE with no permit free) reads as null
   * rather than as a list holding null.
   */
  private static final class ArrayOrNil extends ArrayOutput<String, String> {
    private boolean array;

    ArrayOrNil() {
      super(StringCodec.UTF8);
    }

    @Override
    public void multi(int count) {
      array = true;
      super.multi(count);
    }

    @Override
    public List<Object> get() {
      return array ? super.get() : null;
    }
  }

  private <T> T send(CommandOutput<String, String, T> output, String command, Object... args) {
    CommandArgs<String, String> commandArgs = new CommandArgs<>(StringCodec.UTF8);
    for (Object arg : args) {
      commandArgs.add(arg.toString());
    }
    return connection.sync().dispatch(new Keyword(command), output, commandArgs);
  }

  /** A command whose reply is one integer or null. */
  Long integer(String command, Object... args) {
    return send(new IntegerOutput<>(StringCodec.UTF8), command, args);
  }

  /** A command whose reply is an array (strings, integers, arrays), or null. */
  List<Object> array(String command, Object... args) {
    return send(new ArrayOrNil(), command, args);
  }

  Long acquire(String key, String owner, Object... options) {
    return integer("RLOCK.ACQUIRE", prepend(key, owner, options));
  }

  long release(String key, String owner, Object... options) {
    return integer("RLOCK.RELEASE", prepend(key, owner, options));
  }

  long forceRelease(String key) {
    return integer("RLOCK.FORCERELEASE", key);
  }

  /** RLOCK.INFO as field -> value; `holders` as owner -> count. */
  Map<String, Object> info(String key) {
    Map<String, Object> info = pairs(array("RLOCK.INFO", key));
    Object holders = info.get("holders");
    if (holders instanceof List<?> flat) {
      info.put("holders", pairs(flat));
    }
    return info;
  }

  @SuppressWarnings("unchecked")
  Map<String, Long> holders(String key) {
    return (Map<String, Long>) (Map<?, ?>) info(key).get("holders");
  }

  /** RLOCK.WAITERS, each entry as field -> value, in serving order. */
  List<Map<String, Object>> waiters(String key) {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Object entry : array("RLOCK.WAITERS", key)) {
      out.add(pairs((List<?>) entry));
    }
    return out;
  }

  /** The server's id for this connection, to find it in RLOCK.WAITERS. */
  long clientId() {
    return connection.sync().clientId();
  }

  String get(String key) {
    return connection.sync().get(key);
  }

  private static Map<String, Object> pairs(List<?> flat) {
    Map<String, Object> map = new LinkedHashMap<>();
    for (int i = 0; i + 1 < flat.size(); i += 2) {
      map.put(String.valueOf(flat.get(i)), flat.get(i + 1));
    }
    return map;
  }

  private static Object[] prepend(String key, String owner, Object[] options) {
    Object[] all = new Object[options.length + 2];
    all[0] = key;
    all[1] = owner;
    System.arraycopy(options, 0, all, 2, options.length);
    return all;
  }

  @Override
  public void close() {
    connection.close();
  }
}
