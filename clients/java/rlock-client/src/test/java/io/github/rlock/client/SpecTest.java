package io.github.rlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lettuce.core.RedisCommandExecutionException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * C21: every case of clients/spec/*.json through the pure core (Plan, Replies, Checks), once per
 * driver: each reply is first read the way that driver's transport reads it. A case the client
 * cannot express fails; nothing is skipped.
 */
class SpecTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** clients/spec, from this module's base directory (clients/java/rlock-client). */
  static Path specDir() {
    return Path.of(System.getProperty("basedir", System.getProperty("user.dir"))).resolve("../../spec").normalize();
  }

  /** Every *.json of clients/spec: a file this test has no reader for fails. */
  static Stream<Arguments> files() throws java.io.IOException {
    List<String> names;
    try (Stream<Path> s = Files.list(specDir())) {
      names = s.map(f -> f.getFileName().toString()).filter(n -> n.endsWith(".json")).sorted().toList();
    }
    assertTrue(names.size() >= 5, "clients/spec holds its five files: " + names);
    List<Arguments> out = new ArrayList<>();
    for (String f : names) {
      for (Driver d : Driver.values()) {
        out.add(Arguments.of(f, d));
      }
    }
    return out.stream();
  }

  @ParameterizedTest(name = "C21 the shared vectors: {0} [none] [{1}]")
  @MethodSource("files")
  void c21_sharedVectors(String file, Driver driver) throws Exception {
    JsonNode doc = JSON.readTree(Files.readString(specDir().resolve(file)));
    assertEquals(1, doc.path("format").asInt(), file + ": a format this test does not know");
    JsonNode cases = doc.get("cases");
    assertTrue(cases.size() > 0, file + " has no cases");
    List<String> failures = new ArrayList<>();
    for (JsonNode c : cases) {
      String id = c.get("id").asText();
      try {
        switch (file) {
          case "commands.json" -> commands(c);
          case "replies.json" -> replies(c, driver);
          case "errors.json" -> errors(c, driver);
          case "keyspace.json" -> keyspace(c, doc.get("loss_events"));
          case "refusals.json" -> refusal(c);
          default -> fail("no reader for " + file);
        }
      } catch (Throwable e) {
        failures.add(id + ": " + e);
      }
    }
    assertTrue(failures.isEmpty(), file + " [" + driver + "]:\n  " + String.join("\n  ", failures));
  }

  // ---- the calls ----

  /** What one call sends and how its replies are read: the same functions its face uses. */
  record Planned(List<Cmd> cmds, Function<List<Object>, Object> read) {}

  private static final String REQ = "r0123456789abcdef";

  static Planned plan(JsonNode c) {
    String call = c.get("call").asText();
    JsonNode a = c.path("args");
    int attached = c.path("context").path("attached_replicas").asInt(0);
    switch (call) {
      case "lock.acquire", "lock.scoped", "election.campaign" -> {
        boolean election = call.equals("election.campaign");
        byte[] key = Checks.name(text(a, "key"), "name");
        byte[] owner = Checks.owner(text(a, election ? "value" : "owner"));
        Side side = side(a);
        long leaseMs = a.has("lease_ms") ? Checks.leaseMs(Duration.ofMillis(integer(a, "lease_ms"))) : Plan.DEFAULT_LEASE_MS;
        boolean scoped = !call.equals("lock.acquire");
        long blockMs = blockMs(a, scoped ? 0 : -1);
        boolean fenced = election || bool(a, "fenced");
        Plan.Acquire spec = new Plan.Acquire(key, side, leaseMs, bool(a, "fair"), fenced, bool(a, "session"));
        long replicas;
        long syncMs = Plan.DEFAULT_SYNC_TIMEOUT_MS;
        if (a.has("sync_replicas")) {
          replicas = a.get("sync_replicas").get("n").asLong();
          syncMs = Checks.leaseMs(Duration.ofMillis(a.get("sync_replicas").get("timeout_ms").asLong()));
        } else {
          replicas = Plan.defaultReplicas(attached);
        }
        long n = replicas;
        long sync = syncMs;
        return new Planned(
            Plan.acquirePipeline(spec, owner, REQ, blockMs, replicas, syncMs),
            replies -> {
              Replies.Grant g = Replies.grant(replies, fenced, n);
              if (g == null) {
                if (scoped) {
                  // withLock's acquire(wait).orElseThrow(NotAcquiredException): the body never runs
                  throw new NotAcquiredException("not acquired");
                }
                return Map.of("granted", false);
              }
              if (n > 0 && g.replicasAcked() < n) {
                // RlockLock.acquireFor gives the grant back with this command, then raises
                Cmd back = Plan.release(key, owner, side, Plan.giveBackReq(REQ));
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("error", "NotAcknowledged");
                out.put("then_sends", List.of(back.words()));
                assertTrue(sync > 0);
                return out;
              }
              Map<String, Object> out = new HashMap<>();
              out.put("granted", true);
              out.put("hold_count", g.holdCount());
              out.put("token", g.token());
              out.put("replicas_acked", g.replicasAcked());
              return out;
            });
      }
      case "lock.release", "election.resign" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        byte[] owner = Checks.owner(text(a, call.equals("election.resign") ? "value" : "owner"));
        return new Planned(
            List.of(Plan.release(key, owner, side(a), REQ)), r -> Map.of("freed", Replies.freed(r.get(0), key, owner)));
      }
      case "lock.renew", "watchdog.renewal" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        long leaseMs = Checks.leaseMs(Duration.ofMillis(integer(a, "lease_ms")));
        Cmd cmd =
            a.has("permit")
                ? Plan.semRenew(key, Checks.name(text(a, "id"), "id"), leaseMs)
                : Plan.renew(key, Checks.owner(text(a, "owner")), side(a), leaseMs, REQ);
        if (call.equals("watchdog.renewal")) {
          return new Planned(
              List.of(cmd), r -> Map.of("outcome", Replies.renewal(r.get(0)).name().toLowerCase(java.util.Locale.ROOT)));
        }
        return new Planned(
            List.of(cmd),
            r -> {
              Replies.renewed(r.get(0), "lost");
              return Map.of("renewed", true);
            });
      }
      case "lock.is_locked" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        return new Planned(List.of(Plan.isLocked(key)), r -> Map.of("locked", Replies.yes(r.get(0))));
      }
      case "lock.is_held_by" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        byte[] owner = Checks.owner(text(a, "owner"));
        return new Planned(List.of(Plan.isHeldBy(key, owner, side(a))), r -> Map.of("held", Replies.yes(r.get(0))));
      }
      case "lock.hold_count" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        byte[] owner = Checks.owner(text(a, "owner"));
        return new Planned(
            List.of(Plan.holdCount(key, owner, side(a))),
            r -> {
              Long n = Replies.asLong(r.get(0));
              return Map.of("hold_count", n == null ? 0L : n);
            });
      }
      case "lock.remaining_lease" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        return new Planned(
            List.of(Plan.remainingLease(key)),
            r -> {
              Map<String, Object> out = new HashMap<>();
              out.put("remaining_ms", Replies.remainingMs(r.get(0)));
              return out;
            });
      }
      case "lock.force_release" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        return new Planned(List.of(Plan.forceRelease(key)), r -> Map.of("removed", Replies.yes(r.get(0))));
      }
      case "lock.info" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        return new Planned(List.of(Plan.info(key)), r -> Replies.info(r.get(0)));
      }
      case "multi.acquire", "multi.scoped", "multi.release" -> {
        JsonNode ks = a.get("keys");
        if (ks == null || !ks.isArray() || ks.isEmpty()) {
          throw new IllegalArgumentException("a multi-lock takes 1 to 1024 names");
        }
        List<byte[]> keys = new ArrayList<>();
        for (JsonNode k : ks) {
          keys.add(Checks.name(string(k, "name"), "name"));
        }
        keys = Plan.multiKeys(keys);
        byte[] owner = Checks.owner(text(a, "owner"));
        List<byte[]> sorted = keys;
        if (call.equals("multi.release")) {
          return new Planned(
              List.of(Plan.mrelease(owner, keys, REQ)), r -> Map.of("freed", Replies.mfreed(r.get(0), sorted.get(0), owner)));
        }
        long leaseMs = a.has("lease_ms") ? Checks.leaseMs(Duration.ofMillis(integer(a, "lease_ms"))) : Plan.DEFAULT_LEASE_MS;
        boolean scoped = call.equals("multi.scoped");
        long blockMs = blockMs(a, scoped ? 0 : -1);
        return new Planned(
            List.of(Plan.macquire(owner, keys, leaseMs, blockMs, bool(a, "session"), REQ)),
            r -> {
              boolean granted = Replies.ok(r.get(0)) != null;
              if (!granted && scoped) {
                throw new NotAcquiredException("not acquired");
              }
              return Map.of("granted", granted);
            });
      }
      case "semaphore.try_set_permits", "permits.try_set_permits" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        int permits = Checks.count(intValue(a, "permits"), "permits", 0, Integer.MAX_VALUE);
        return new Planned(List.of(Plan.semTrySetPermits(key, permits)), r -> Map.of("set", Replies.yes(r.get(0))));
      }
      case "semaphore.add_permits" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        int permits = Checks.count(intValue(a, "permits"), "permits", -Integer.MAX_VALUE, Integer.MAX_VALUE);
        return new Planned(List.of(Plan.semAddPermits(key, permits)), r -> Map.of("available", Replies.asLong(r.get(0))));
      }
      case "semaphore.available" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        return new Planned(List.of(Plan.semAvailable(key)), r -> Map.of("available", Replies.asLong(r.get(0))));
      }
      case "semaphore.acquire" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        int permits = Checks.count(intValue(a, "permits"), "permits", 1, Integer.MAX_VALUE);
        return new Planned(
            List.of(Plan.semAcquire(key, permits, blockMs(a, -1), REQ)), r -> Map.of("granted", Replies.ok(r.get(0)) != null));
      }
      case "semaphore.release" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        int permits = Checks.count(intValue(a, "permits"), "permits", 1, Integer.MAX_VALUE);
        return new Planned(List.of(Plan.semRelease(key, permits, REQ)), r -> Map.of("available", Replies.asLong(r.get(0))));
      }
      case "permits.acquire" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        long leaseMs = a.has("lease_ms") ? Checks.leaseMs(Duration.ofMillis(integer(a, "lease_ms"))) : Plan.DEFAULT_LEASE_MS;
        int permits = Checks.count(intValue(a, "permits"), "permits", 1, 1024);
        return new Planned(
            List.of(Plan.semLease(key, leaseMs, permits, blockMs(a, -1), REQ)),
            r -> {
              Object v = Replies.ok(r.get(0));
              if (v == null) {
                return Map.of("granted", false);
              }
              List<String> ids = new ArrayList<>();
              for (Object id : Replies.list(v)) {
                ids.add(Replies.text(id));
              }
              return Map.of("granted", true, "ids", ids);
            });
      }
      case "permits.release" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        byte[] id = Checks.name(text(a, "id"), "id");
        return new Planned(List.of(Plan.semReturn(key, id, REQ)), r -> Map.of("returned", Replies.yes(r.get(0))));
      }
      case "permits.renew" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        byte[] id = Checks.name(text(a, "id"), "id");
        long leaseMs = Checks.leaseMs(Duration.ofMillis(integer(a, "lease_ms")));
        return new Planned(List.of(Plan.semRenew(key, id, leaseMs)), r -> Map.of("renewed", Replies.yes(r.get(0))));
      }
      case "latch.try_set_count" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        long count = Checks.latchCount(integer(a, "count"));
        return new Planned(List.of(Plan.latchTrySetCount(key, count)), r -> Map.of("set", Replies.yes(r.get(0))));
      }
      case "latch.count_down" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        return new Planned(List.of(Plan.latchCountDown(key)), r -> Map.of("count", Replies.asLong(r.get(0))));
      }
      case "latch.count" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        return new Planned(List.of(Plan.latchCount(key)), r -> Map.of("count", Replies.asLong(r.get(0))));
      }
      case "latch.await_zero" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        return new Planned(List.of(Plan.latchAwait(key, blockMs(a, -1))), r -> Map.of("open", Replies.ok(r.get(0)) != null));
      }
      case "election.leader" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        return new Planned(
            List.of(Plan.info(key)),
            r -> {
              Map<String, Object> out = new HashMap<>();
              out.put(
                  "leader",
                  Election.leaderOf(Replies.info(r.get(0)))
                      .map(l -> Map.<String, Object>of("value", l.value(), "term", l.term()))
                      .orElse(null));
              return out;
            });
      }
      case "queries.waiters" -> {
        byte[] key = Checks.name(text(a, "key"), "name");
        return new Planned(List.of(Plan.waiters(key)), r -> Replies.waiters(r.get(0)));
      }
      case "queries.scan" -> {
        return new Planned(
            List.of(Plan.scan(0, a.has("match") ? text(a, "match") : null, a.has("type") ? text(a, "type") : null)),
            r -> Replies.scan(r.get(0)));
      }
      case "queries.stats" -> {
        return new Planned(List.of(Plan.stats()), r -> Replies.stats(Replies.text(r.get(0))));
      }
      case "queries.top" -> {
        int count = Checks.count(intValue(a, "count"), "count", 1, 1000);
        return new Planned(List.of(Plan.top(count)), r -> Replies.top(r.get(0)));
      }
      default -> throw new AssertionError("a call this client cannot express: " + call);
    }
  }

  // ---- the files ----

  static void commands(JsonNode c) {
    List<List<String>> sent = new ArrayList<>();
    for (Cmd cmd : plan(c).cmds()) {
      sent.add(cmd.words());
    }
    matchCommands(c.get("expect"), sent, new HashMap<>());
  }

  static void replies(JsonNode c, Driver driver) {
    Planned p = plan(c);
    List<Object> replies = new ArrayList<>();
    for (JsonNode r : c.get("replies")) {
      replies.add(reply(r, driver));
    }
    assertEquals(p.cmds().size(), replies.size(), "one reply per command sent");
    JsonNode expect = c.get("expect");
    Object got;
    try {
      got = p.read().apply(replies);
    } catch (RuntimeException e) {
      assertTrue(expect.has("error"), "raised " + e + ", expected " + expect);
      assertEquals(expect.get("error").asText(), errorClass(e), "raised " + e);
      return;
    }
    if (expect.has("then_sends")) {
      @SuppressWarnings("unchecked")
      Map<String, Object> m = (Map<String, Object>) got;
      assertEquals(expect.get("error").asText(), m.get("error"));
      Map<String, String> bound = new HashMap<>();
      bound.put("{req}", REQ);
      @SuppressWarnings("unchecked")
      List<List<String>> then = (List<List<String>>) m.get("then_sends");
      matchCommands(expect.get("then_sends"), then, bound);
      return;
    }
    assertEquals(normalize(JSON.convertValue(expect, Object.class)), normalize(got));
  }

  static void errors(JsonNode c, Driver driver) {
    Planned p = plan(c);
    List<Object> replies = new ArrayList<>();
    replies.add(reply(JSON.createObjectNode().put("error", c.get("error").asText()), driver));
    while (replies.size() < p.cmds().size()) {
      replies.add(null);
    }
    JsonNode expect = c.get("expect");
    try {
      Object got = p.read().apply(replies);
      fail("returned " + got + ", expected " + expect);
    } catch (RuntimeException e) {
      String cls = expect.get("class").asText();
      assertEquals(cls, errorClass(e), "raised " + e);
      switch (cls) {
        case "NotHeld" -> {
          NotHeldException n = (NotHeldException) e;
          assertEquals(expect.get("key").asText(), n.key());
          assertEquals(expect.get("owner").asText(), n.owner());
        }
        case "Deadlock" -> {
          List<Map<String, Object>> cycle = new ArrayList<>();
          for (DeadlockException.Wait w : ((DeadlockException) e).cycle()) {
            cycle.add(Map.of("owner", w.waiter(), "key", w.key(), "holder", w.holder(), "kept", w.kept()));
          }
          assertEquals(normalize(JSON.convertValue(expect.get("cycle"), Object.class)), normalize(cycle));
        }
        case "ServerError" -> assertEquals(expect.get("code").asText(), ((ServerException) e).code());
        default -> {}
      }
    }
  }

  static void keyspace(JsonNode c, JsonNode lossEvents) {
    List<String> events = new ArrayList<>();
    lossEvents.forEach(e -> events.add(e.asText()));
    assertEquals(events, Replies.LOSS_EVENTS, "the one list of loss events");
    JsonNode a = c.get("args");
    JsonNode expect = c.get("expect");
    switch (c.get("call").asText()) {
      case "keyspace.mode" -> {
        char mode = Replies.eventsOn(a.get("flags").asText());
        String got = mode == 'K' ? "keyspace" : mode == 'E' ? "keyevent" : null;
        assertEquals(expect.isNull() ? null : expect.asText(), got);
      }
      case "keyspace.channels" -> {
        char mode = a.get("mode").asText().equals("keyspace") ? 'K' : 'E';
        List<String> keys = new ArrayList<>();
        a.get("keys").forEach(k -> keys.add(k.asText()));
        assertEquals(JSON.convertValue(expect, Object.class), Replies.channels(mode, a.get("db").asInt(), keys));
      }
      case "keyspace.lost_key" -> {
        String got = Replies.lostKey(a.get("db").asInt(), a.get("channel").asText(), a.get("message").asText());
        assertEquals(expect.isNull() ? null : expect.asText(), got);
      }
      default -> throw new AssertionError("a call this client cannot express: " + c.get("call"));
    }
  }

  static void refusal(JsonNode c) {
    assertEquals("InvalidArgument", c.get("expect").get("class").asText());
    try {
      Planned p = plan(c);
      fail("not refused: would send " + p.cmds());
    } catch (IllegalArgumentException | NullPointerException e) {
      // Java's own argument errors, raised before anything is planned or sent
    }
  }

  // ---- helpers ----

  /** The class name the spec gives an exception of this client. */
  static String errorClass(Throwable e) {
    if (e instanceof NotAcquiredException) {
      return "NotAcquired";
    }
    if (e instanceof NotHeldException) {
      return "NotHeld";
    }
    if (e instanceof LostException) {
      return "Lost";
    }
    if (e instanceof DeadlockException) {
      return "Deadlock";
    }
    if (e instanceof NotAcknowledgedException) {
      return "NotAcknowledged";
    }
    if (e instanceof ServerException) {
      return "ServerError";
    }
    if (e instanceof IllegalArgumentException || e instanceof NullPointerException) {
      return "InvalidArgument";
    }
    if (e.getClass() == RlockException.class) {
      return "Unexpected";
    }
    return e.getClass().getName();
  }

  /** Checks sent commands against expected ones, binding {@code {req}}-style placeholders. */
  static void matchCommands(JsonNode expect, List<List<String>> sent, Map<String, String> bound) {
    assertEquals(expect.size(), sent.size(), "commands sent: " + sent);
    for (int i = 0; i < expect.size(); i++) {
      JsonNode e = expect.get(i);
      List<String> s = sent.get(i);
      assertEquals(e.size(), s.size(), "command " + i + ": " + s);
      for (int j = 0; j < e.size(); j++) {
        String want = e.get(j).asText();
        String got = s.get(j);
        if (want.matches("\\{req\\d*\\}")) {
          assertTrue(!got.isEmpty() && got.length() <= 64 && !got.contains("{") && !got.contains("}"), "a REQ id: " + got);
          String prev = bound.putIfAbsent(want, got);
          if (prev != null) {
            assertEquals(prev, got, want + " is the same id");
          } else {
            for (Map.Entry<String, String> b : bound.entrySet()) {
              if (!b.getKey().equals(want)) {
                assertTrue(!b.getValue().equals(got), want + " differs from " + b.getKey());
              }
            }
          }
        } else {
          assertEquals(want, got, "command " + i + " word " + j + ": " + s);
        }
      }
    }
  }

  /** A JSON reply as the driver's transport reads it off the wire. */
  static Object reply(JsonNode r, Driver driver) {
    if (driver == Driver.LETTUCE) {
      LettuceTransport.ReplyOutput out = new LettuceTransport.ReplyOutput();
      if (r.isObject() && r.has("error")) {
        return LettuceTransport.asReplyOrThrow(new RedisCommandExecutionException(r.get("error").asText()));
      }
      feed(out, r);
      return out.get();
    }
    return JedisTransport.reply(jedisValue(r));
  }

  private static void feed(LettuceTransport.ReplyOutput out, JsonNode r) {
    if (r.isNull()) {
      out.set((ByteBuffer) null);
    } else if (r.isIntegralNumber()) {
      out.set(r.asLong());
    } else if (r.isTextual()) {
      out.set(ByteBuffer.wrap(r.asText().getBytes(StandardCharsets.UTF_8)));
    } else if (r.isArray()) {
      out.multi(r.size());
      r.forEach(x -> feed(out, x));
    } else if (r.isObject() && r.has("map")) {
      out.multiMap(r.get("map").size());
      for (JsonNode kv : r.get("map")) {
        feed(out, kv.get(0));
        feed(out, kv.get(1));
      }
    } else {
      throw new AssertionError("a reply this test cannot give Lettuce: " + r);
    }
  }

  /** What Jedis's protocol reader yields: Long, byte[], List, null, JedisDataException. */
  private static Object jedisValue(JsonNode r) {
    if (r.isNull()) {
      return null;
    }
    if (r.isIntegralNumber()) {
      return r.asLong();
    }
    if (r.isTextual()) {
      return r.asText().getBytes(StandardCharsets.UTF_8);
    }
    if (r.isArray()) {
      List<Object> out = new ArrayList<>();
      r.forEach(x -> out.add(jedisValue(x)));
      return out;
    }
    if (r.has("error")) {
      return new JedisDataException(r.get("error").asText());
    }
    if (r.has("map")) {
      Map<Object, Object> out = new LinkedHashMap<>();
      for (JsonNode kv : r.get("map")) {
        out.put(jedisValue(kv.get(0)), jedisValue(kv.get(1)));
      }
      return out;
    }
    throw new AssertionError("a reply this test cannot give Jedis: " + r);
  }

  /** Numbers as Long, so that a result compares equal to the JSON expectation. */
  private static Object normalize(Object v) {
    if (v instanceof Map<?, ?> m) {
      Map<String, Object> out = new java.util.TreeMap<>();
      m.forEach((k, x) -> out.put(String.valueOf(k), normalize(x)));
      return out;
    }
    if (v instanceof List<?> l) {
      List<Object> out = new ArrayList<>();
      l.forEach(x -> out.add(normalize(x)));
      return out;
    }
    if (v instanceof Integer i) {
      return i.longValue();
    }
    return v;
  }

  private static Side side(JsonNode a) {
    if (!a.has("side")) {
      return null;
    }
    return switch (text(a, "side")) {
      case "read" -> Side.READ;
      case "write" -> Side.WRITE;
      default -> throw new IllegalArgumentException("side must be read or write");
    };
  }

  /** -1 tries once, 0 waits forever, else the wait: as each face turns its Duration into BLOCK. */
  private static long blockMs(JsonNode a, long absent) {
    if (!a.has("wait_ms")) {
      return absent;
    }
    JsonNode w = a.get("wait_ms");
    if (w.isTextual() && w.asText().equals("forever")) {
      return 0;
    }
    return Checks.waitMs(Duration.ofMillis(integer(a, "wait_ms")));
  }

  private static boolean bool(JsonNode a, String k) {
    return a.path(k).asBoolean(false);
  }

  /** A string argument; a value of another JSON type is refused as Java's conversion would. */
  private static String text(JsonNode a, String k) {
    JsonNode v = a.get(k);
    if (v == null || v.isNull()) {
      throw new NullPointerException(k + " must not be null");
    }
    return string(v, k);
  }

  private static String string(JsonNode v, String k) {
    if (v.isObject() && v.has("repeat")) {
      return v.get("repeat").asText().repeat(v.get("times").asInt());
    }
    if (!v.isTextual()) {
      throw new IllegalArgumentException(k + " must be a string, got " + v);
    }
    return v.asText();
  }

  private static long integer(JsonNode a, String k) {
    JsonNode v = a.get(k);
    if (v == null || !v.isIntegralNumber()) {
      throw new IllegalArgumentException(k + " must be an integer, got " + v);
    }
    return v.asLong();
  }

  private static int intValue(JsonNode a, String k) {
    return Math.toIntExact(integer(a, k));
  }
}
