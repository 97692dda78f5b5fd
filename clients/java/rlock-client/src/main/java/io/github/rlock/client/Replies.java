package io.github.rlock.client;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What replies mean, without a server. A reply is what a transport reads: {@code Long}, {@code
 * byte[]}, {@code List<Object>}, {@code null} or a {@link ServerError}.
 */
final class Replies {
  private Replies() {}

  /** The reply itself, or its error raised as this client's exception. */
  static Object ok(Object v) {
    if (v instanceof ServerError e) {
      throw e.toException();
    }
    return v;
  }

  static Long asLong(Object v) {
    v = ok(v);
    if (v == null) {
      return null;
    }
    if (v instanceof Long l) {
      return l;
    }
    if (v instanceof byte[] b) {
      String s = text(b);
      try {
        return Long.parseLong(s);
      } catch (NumberFormatException e) {
        throw new RlockException("expected an integer reply, got " + s);
      }
    }
    throw new RlockException("expected an integer reply, got " + v);
  }

  static String text(Object v) {
    if (v == null) {
      return null;
    }
    if (v instanceof byte[] b) {
      return new String(b, StandardCharsets.UTF_8);
    }
    return String.valueOf(v);
  }

  /** A flat array of field, value pairs as a map with text keys, in order. */
  static Map<String, Object> pairs(Object v) {
    Map<String, Object> out = new LinkedHashMap<>();
    if (v instanceof Map<?, ?> m) {
      for (Map.Entry<?, ?> e : m.entrySet()) {
        out.put(text(e.getKey()), e.getValue());
      }
    } else if (v instanceof List<?> l) {
      for (int i = 0; i + 1 < l.size(); i += 2) {
        out.put(text(l.get(i)), l.get(i + 1));
      }
    }
    return out;
  }

  static List<?> list(Object v) {
    v = ok(v);
    return v instanceof List<?> l ? l : List.of();
  }

  /** The error's code: the text before the first space. */
  static String code(String msg) {
    int sp = msg.indexOf(' ');
    return sp < 0 ? msg : msg.substring(0, sp);
  }

  /**
   * The family's exception for a server error it knows, a {@link ServerException} with its code
   * otherwise (a DEADLOCK whose text is not a cycle stays one).
   */
  static RlockException serverError(String msg) {
    String code = code(msg);
    if (code.equals("NOTHELD")) {
      return new NotHeldException(msg, null, null);
    }
    if (code.equals("STALETOKEN")) {
      return new StaleTokenException(msg, null, null);
    }
    if (code.equals("DEADLOCK")) {
      List<DeadlockException.Wait> cycle = parseCycle(msg);
      if (!cycle.isEmpty()) {
        return new DeadlockException(msg, cycle);
      }
    }
    return new ServerException(code, msg);
  }

  /** A reply the contract does not allow: a protocol violation, never a grant. */
  static RlockException unexpected(String what, Object v) {
    return new RlockException("unexpected reply to " + what + ": " + (v instanceof byte[] ? text(v) : v));
  }

  /**
   * The reply of a call that names one hold ({@code key}, {@code owner}): its error raised, with a
   * NOTHELD (STALETOKEN) naming that hold.
   */
  static Object okFor(Object v, byte[] key, byte[] owner) {
    if (v instanceof ServerError e) {
      RlockException x = e.toException();
      if (x instanceof StaleTokenException) {
        throw new StaleTokenException(e.message(), text(key), text(owner));
      }
      if (x instanceof NotHeldException) {
        throw new NotHeldException(e.message(), text(key), text(owner));
      }
      throw x;
    }
    return v;
  }

  /**
   * A guarded command's reply: the inner command's, bulk strings as text (UTF-8), arrays as lists;
   * NOTHELD and STALETOKEN name the hold; the inner command's own error as a {@link
   * ServerException}.
   */
  static Object guarded(Object v, byte[] key, byte[] owner) {
    return texts(okFor(v, key, owner));
  }

  private static Object texts(Object v) {
    if (v instanceof byte[] b) {
      return text(b);
    }
    if (v instanceof ServerError e) {
      return e.toException();
    }
    if (v instanceof List<?> l) {
      List<Object> out = new ArrayList<>(l.size());
      for (Object x : l) {
        out.add(texts(x));
      }
      return out;
    }
    return v;
  }

  /** What an acquire pipeline was granted: the hold count, the token (fenced) and the acks (WAIT). */
  record Grant(Long holdCount, Long token, Long replicasAcked) {}

  /**
   * Reads an acquire pipeline's replies ({@link Plan#acquirePipeline}): null when not granted, the
   * grant otherwise (its {@code replicasAcked} may be fewer than asked: the caller gives it back).
   */
  static Grant grant(List<Object> replies, boolean fenced, long replicas) {
    Object first = ok(replies.get(0));
    if (first == null) {
      return null;
    }
    Long n = asLong(first);
    if (n < 1) {
      throw unexpected("RLOCK.ACQUIRE", first);
    }
    Long count = fenced ? asLong(replies.get(1)) : n;
    Long token = fenced ? n : null;
    Long acked = null;
    if (replicas > 0) {
      Long a = asLong(replies.get(replies.size() - 1));
      acked = a == null ? 0 : a;
    }
    return new Grant(count, token, acked);
  }

  /** A release's reply: whether the lock is free now (1) or a re-entry was undone (0). */
  static boolean freed(Object v, byte[] key, byte[] owner) {
    Long n = asLong(okFor(v, key, owner));
    if (n == null || n < 0 || n > 1) {
      throw unexpected("RLOCK.RELEASE", n);
    }
    return n == 1;
  }

  /** A multi-key release's reply: how many of the locks are free now. */
  static long mfreed(Object v, byte[] firstKey, byte[] owner) {
    Long n = asLong(okFor(v, firstKey, owner));
    if (n == null || n < 0) {
      throw unexpected("RLOCK.MRELEASE", n);
    }
    return n;
  }

  /**
   * An explicit renewal's reply: returns when renewed; {@link LostException} when refused (0) or
   * when the key is no lock of ours (WRONGTYPE); another error raised as it is.
   */
  static void renewed(Object v, String lost) {
    switch (renewal(v)) {
      case RENEWED -> {}
      case LOST -> throw new LostException(lost);
      case RETRY -> ok(v);
    }
  }

  /** What one renewal's reply means to the watchdog. */
  enum Renewed {
    RENEWED,
    LOST,
    RETRY
  }

  /**
   * 1 renewed; 0 or a refusal (WRONGTYPE: the key is no lock of ours now) lost; any other error
   * (LOADING, BUSY, an internal error) says nothing of the hold: asked again.
   */
  static Renewed renewal(Object v) {
    if (v instanceof ServerError e) {
      return switch (code(e.message())) {
        case "WRONGTYPE", "NOTHELD" -> Renewed.LOST;
        default -> Renewed.RETRY;
      };
    }
    return v instanceof Long l && l == 1 ? Renewed.RENEWED : Renewed.LOST;
  }

  /** {@code PTTL}: the milliseconds left, or null (no key, or no expiry). */
  static Long remainingMs(Object v) {
    Long n = asLong(v);
    return n == null || n < 0 ? null : n;
  }

  /** An integer reply that says yes (1) or no (0). */
  static boolean yes(Object v) {
    Long n = asLong(v);
    return n != null && n == 1;
  }

  private static final String QUOTED = "\"((?:[^\"\\\\]|\\\\.)*)\"";
  private static final Pattern WAIT =
      Pattern.compile(QUOTED + " waits for " + QUOTED + " (held by|kept for) " + QUOTED);

  /** {@code DEADLOCK "b" waits for "k1" held by "a"; ...} as its waits. */
  static List<DeadlockException.Wait> parseCycle(String msg) {
    List<DeadlockException.Wait> out = new ArrayList<>();
    Matcher m = WAIT.matcher(msg);
    while (m.find()) {
      out.add(
          new DeadlockException.Wait(
              unescape(m.group(1)), unescape(m.group(2)), unescape(m.group(4)), m.group(3).equals("kept for")));
    }
    return out;
  }

  static String unescape(String s) {
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\\' && i + 1 < s.length()) {
        char n = s.charAt(i + 1);
        if (n == 'x' && i + 3 < s.length()) {
          out.append((char) Integer.parseInt(s.substring(i + 2, i + 4), 16));
          i += 3;
          continue;
        }
        out.append(n);
        i++;
        continue;
      }
      out.append(c);
    }
    return out.toString();
  }

  /** Whether a {@code CLIENT LIST} line shows a client blocked in {@code command}. */
  static boolean blockedIn(String line, String command) {
    String flags = "";
    String cmd = "";
    for (String f : line.trim().split(" ")) {
      int eq = f.indexOf('=');
      if (eq < 0) {
        continue;
      }
      String k = f.substring(0, eq);
      if (k.equals("flags")) {
        flags = f.substring(eq + 1);
      } else if (k.equals("cmd")) {
        cmd = f.substring(eq + 1);
      }
    }
    return flags.contains("b") && cmd.equalsIgnoreCase(command);
  }

  /**
   * Every event that can end a hold, and none that a client's own work sends for a hold that
   * stands (clients/spec/keyspace.json's loss_events, in its order).
   */
  static final List<String> LOSS_EVENTS =
      List.of(
          "rlock.release",
          "rlock.expire",
          "rlock.forcerelease",
          "rlock.sessionend",
          "rsem.return",
          "rsem.reclaim",
          "del",
          "expired",
          "evicted",
          "rename_from",
          "move_from",
          "hdel",
          "hexpired",
          "set",
          "restore",
          "rename_to",
          "copy_to",
          "sortstore",
          "sunionstore",
          "sinterstore",
          "sdiffstore",
          "zunionstore",
          "zinterstore",
          "zdiffstore",
          "zrangestore",
          "georadiusstore",
          "geosearchstore",
          "overwritten",
          "type_changed");

  private static final Set<String> LOSS_EVENT_SET = Set.copyOf(LOSS_EVENTS);

  /**
   * How {@code notify-keyspace-events} publishes the module's events: 'K' on each key's channel,
   * 'E' on each event's channel, 0 not at all. The module's events are class {@code d} (in
   * {@code A}); K wins over E, whose channels carry every key of the database.
   */
  static char eventsOn(String flags) {
    if (!flags.contains("d") && !flags.contains("A")) {
      return 0;
    }
    return flags.contains("K") ? 'K' : flags.contains("E") ? 'E' : 0;
  }

  static String keyspaceChannel(int db, String key) {
    return "__keyspace@" + db + "__:" + key;
  }

  /** The channels to subscribe: one per held key ('K'), or one per loss event ('E'). */
  static List<String> channels(char mode, int db, List<String> keys) {
    List<String> out = new ArrayList<>();
    if (mode == 'K') {
      for (String k : keys) {
        out.add(keyspaceChannel(db, k));
      }
    } else if (mode == 'E') {
      for (String ev : LOSS_EVENTS) {
        out.add("__keyevent@" + db + "__:" + ev);
      }
    }
    return out;
  }

  /** The key a pub/sub message of database {@code db} says may have been lost, or null. */
  static String lostKey(int db, String channel, String message) {
    String space = "__keyspace@" + db + "__:";
    String event = "__keyevent@" + db + "__:";
    if (channel.startsWith(space)) {
      return LOSS_EVENT_SET.contains(message) ? channel.substring(space.length()) : null;
    }
    if (channel.startsWith(event)) {
      return LOSS_EVENT_SET.contains(channel.substring(event.length())) ? message : null;
    }
    return null;
  }

  /** The replication line {@code connected_slaves:N} of {@code INFO replication}. */
  static int connectedReplicas(String info) {
    for (String line : info.split("\r?\n")) {
      if (line.startsWith("connected_slaves:")) {
        return Integer.parseInt(line.substring("connected_slaves:".length()).trim());
      }
    }
    return 0;
  }

  /** {@code INFO rlock} as a map: numbers as Long or Double, the rest as String. */
  static Map<String, Object> stats(String s) {
    Map<String, Object> out = new LinkedHashMap<>();
    for (String line : s.split("\r?\n")) {
      if (line.isEmpty() || line.startsWith("#") || !line.contains(":")) {
        continue;
      }
      int at = line.indexOf(':');
      String k = line.substring(0, at);
      String v = line.substring(at + 1);
      try {
        out.put(k, Long.parseLong(v));
      } catch (NumberFormatException e) {
        try {
          out.put(k, Double.parseDouble(v));
        } catch (NumberFormatException e2) {
          out.put(k, v);
        }
      }
    }
    return out;
  }

  static LockInfo info(Object v) {
    Map<String, Object> d = pairs(ok(v));
    Map<String, Long> holders = new LinkedHashMap<>();
    for (Map.Entry<String, Object> e : pairs(d.get("holders")).entrySet()) {
      holders.put(e.getKey(), asLong(e.getValue()));
    }
    Long pttl = asLong(d.get("pttl"));
    Long token;
    try {
      token = asLong(d.get("token"));
    } catch (RlockException e) {
      token = null;
    }
    List<String> queue = new ArrayList<>();
    for (Object q : list(d.get("queue"))) {
      queue.add(text(q));
    }
    Long blocked = asLong(d.get("blocked"));
    return new LockInfo(
        holders,
        pttl == null || pttl < 0 ? null : pttl,
        queue,
        token,
        blocked == null ? 0 : blocked,
        text(d.get("mode")));
  }

  static List<Waiter> waiters(Object v) {
    List<Waiter> out = new ArrayList<>();
    for (Object e : list(v)) {
      Map<String, Object> d = pairs(e);
      Long permits = asLong(d.get("permits"));
      Long session = asLong(d.get("session"));
      Long timeout = asLong(d.get("timeout-ms"));
      Long waited = asLong(d.get("waited-ms"));
      out.add(
          new Waiter(
              asLong(d.get("client-id")),
              d.get("client-name") == null ? "" : text(d.get("client-name")),
              text(d.get("kind")),
              text(d.get("owner")),
              permits,
              session != null && session != 0,
              timeout == null ? 0 : timeout,
              waited == null ? 0 : waited));
    }
    return out;
  }

  /** One page of {@code RLOCK.SCAN}: the next cursor and the entries. */
  record ScanPage(long cursor, List<ScannedLock> locks) {}

  static ScanPage scan(Object v) {
    List<?> l = list(v);
    long cursor = asLong(l.get(0));
    List<ScannedLock> out = new ArrayList<>();
    for (Object e : list(l.get(1))) {
      Map<String, Object> d = pairs(e);
      Map<String, Long> holders = new LinkedHashMap<>();
      for (Map.Entry<String, Object> h : pairs(d.get("holders")).entrySet()) {
        holders.put(h.getKey(), asLong(h.getValue()));
      }
      Long pttl = asLong(d.get("pttl"));
      Long waiters = asLong(d.get("waiters"));
      out.add(
          new ScannedLock(
              text(d.get("key")),
              text(d.get("type")),
              text(d.get("mode")),
              holders,
              pttl == null ? 0 : pttl,
              waiters == null ? 0 : waiters));
    }
    return new ScanPage(cursor, out);
  }

  static List<Map<String, Object>> top(Object v) {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Object e : list(v)) {
      Map<String, Object> d = new LinkedHashMap<>();
      for (Map.Entry<String, Object> f : pairs(e).entrySet()) {
        d.put(f.getKey(), f.getValue() instanceof byte[] b ? text(b) : f.getValue());
      }
      out.add(d);
    }
    return out;
  }
}
