package io.github.rlock.client;

import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.UUID;

/** How every call is encoded: the commands each option combination sends. No I/O. */
final class Plan {
  static final byte[] BLOCK = bytes("BLOCK");
  static final long DEFAULT_LEASE_MS = 30_000;
  static final long DEFAULT_SYNC_TIMEOUT_MS = 1_000;
  /** A call whose link broke is sent again, with its REQ id, this much later. */
  static final long RESEND_AFTER_MS = 100;
  /** How many keys one RLOCK.SCAN page asks for. */
  static final int SCAN_COUNT = 500;

  private static final SecureRandom RANDOM = new SecureRandom();
  /**
   * REQ ids: a random prefix per process and a counter. A SecureRandom read per call was a
   * synchronized, syscall-backed cost on every acquire and release; an id only has to be unique
   * (per owner and key), which the counter makes it within this process and the prefix across them.
   */
  private static final long REQ_PREFIX = RANDOM.nextLong();
  private static final java.util.concurrent.atomic.AtomicLong REQ_COUNTER =
      new java.util.concurrent.atomic.AtomicLong(RANDOM.nextLong());

  private Plan() {}

  static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** The client id of a Locks: Redisson's is a UUID too. */
  static String newClientId() {
    return UUID.randomUUID().toString();
  }

  /** Redisson's owner format: {@code <client-uuid>:<thread-id>}. */
  static String threadOwner(String clientId, long threadId) {
    return clientId + ":" + threadId;
  }

  /** A fresh id for one logical call (32 hex digits), sent unchanged on every resend. */
  static String newReq() {
    HexFormat hex = HexFormat.of();
    return hex.toHexDigits(REQ_PREFIX) + hex.toHexDigits(REQ_COUNTER.getAndIncrement());
  }

  /**
   * The REQ id of the release that gives back what the acquire {@code req} was granted when the
   * caller never got it: one id however often it is tried, so it is applied once.
   */
  static String giveBackReq(String req) {
    return "g" + req;
  }

  /** What a lock acquire sends, fixed when the handle is made. */
  record Acquire(byte[] key, Side side, long leaseMs, boolean fair, boolean fenced, boolean session) {}

  static Cmd acquire(Acquire a, byte[] owner, String req, long blockMs) {
    Cmd c = Cmd.of("RLOCK.ACQUIRE").key(a.key()).arg(owner);
    if (a.side() != null) {
      c.arg(a.side().name());
    }
    c.arg("LEASE").arg(a.leaseMs());
    if (blockMs >= 0) {
      c.arg("BLOCK").arg(blockMs);
    }
    if (a.fair()) {
      c.arg("FAIR");
    }
    if (a.fenced()) {
      c.arg("TOKEN");
    }
    if (a.session()) {
      c.arg("SESSION");
    }
    return c.arg("REQ").arg(req);
  }

  /**
   * The acquire pipeline: {@code RLOCK.ACQUIRE}, then {@code HGET} of the owner's field when fenced
   * (the token takes the count's place in the reply), then {@code WAIT replicas syncMs} when
   * acknowledgement is asked ({@code replicas} > 0).
   */
  static List<Cmd> acquirePipeline(Acquire a, byte[] owner, String req, long blockMs, long replicas, long syncMs) {
    List<Cmd> cmds = new ArrayList<>();
    cmds.add(acquire(a, owner, req, blockMs));
    if (a.fenced()) {
      cmds.add(holdCount(a.key(), owner, a.side()));
    }
    if (replicas > 0) {
      cmds.add(waitReplicas(replicas, syncMs));
    }
    return cmds;
  }

  /** The default acknowledgement (C15): one replica when the key's primary has any. */
  static int defaultReplicas(long attached) {
    return attached > 0 ? 1 : 0;
  }

  /** A multi-key call's names: each once, sorted bytewise, so every caller locks in one order. */
  static List<byte[]> multiKeys(List<byte[]> keys) {
    java.util.TreeSet<byte[]> sorted = new java.util.TreeSet<>(java.util.Arrays::compareUnsigned);
    sorted.addAll(keys);
    return List.copyOf(sorted);
  }

  static Cmd isLocked(byte[] key) {
    return Cmd.of("EXISTS").key(key);
  }

  static Cmd isHeldBy(byte[] key, byte[] owner, Side side) {
    return Cmd.of("HEXISTS").key(key).arg(field(owner, side));
  }

  static Cmd remainingLease(byte[] key) {
    return Cmd.of("PTTL").key(key);
  }

  static Cmd forceRelease(byte[] key) {
    return Cmd.of("RLOCK.FORCERELEASE").key(key);
  }

  static Cmd info(byte[] key) {
    return Cmd.of("RLOCK.INFO").key(key);
  }

  static Cmd waiters(byte[] key) {
    return Cmd.of("RLOCK.WAITERS").key(key);
  }

  /** One page of {@code RLOCK.SCAN}; {@code type} is sent upper-case. */
  static Cmd scan(long cursor, String match, String type) {
    Cmd c = Cmd.of("RLOCK.SCAN").arg(cursor).arg("COUNT").arg(SCAN_COUNT);
    if (match != null) {
      c.arg("MATCH").arg(match);
    }
    if (type != null) {
      c.arg("TYPE").arg(type.toUpperCase(java.util.Locale.ROOT));
    }
    return c;
  }

  static Cmd stats() {
    return Cmd.of("INFO").arg("rlock");
  }

  static Cmd top(int count) {
    return Cmd.of("RLOCK.TOP").arg("COUNT").arg(count);
  }

  static Cmd semTrySetPermits(byte[] key, int permits) {
    return Cmd.of("RSEM.TRYSETPERMITS").key(key).arg(permits);
  }

  static Cmd semAddPermits(byte[] key, int permits) {
    return Cmd.of("RSEM.ADDPERMITS").key(key).arg(permits);
  }

  static Cmd semAvailable(byte[] key) {
    return Cmd.of("RSEM.AVAILABLE").key(key);
  }

  static Cmd latchTrySetCount(byte[] key, long count) {
    return Cmd.of("RLATCH.TRYSETCOUNT").key(key).arg(count);
  }

  static Cmd latchCountDown(byte[] key) {
    return Cmd.of("RLATCH.COUNTDOWN").key(key);
  }

  static Cmd latchCount(byte[] key) {
    return Cmd.of("RLATCH.COUNT").key(key);
  }

  /**
   * {@code RLOCK.GUARD}: {@code command} runs only while {@code owner} holds {@code key} (on {@code
   * side}, and still as the hold of {@code token} when fenced), checked by the server in the same
   * turn.
   */
  static Cmd guard(byte[] key, byte[] owner, Side side, Long token, List<byte[]> command) {
    Cmd c = Cmd.of("RLOCK.GUARD").key(key).arg(owner);
    if (side != null) {
      c.arg(side.name());
    }
    if (token != null) {
      c.arg("TOKEN").arg(token);
    }
    c.arg("CALL");
    for (byte[] a : command) {
      c.arg(a);
    }
    return c;
  }

  /** The lock hash's field that counts an owner's holds. */
  static byte[] field(byte[] owner, Side side) {
    if (side != Side.WRITE) {
      return owner;
    }
    byte[] suffix = bytes(":write");
    byte[] out = new byte[owner.length + suffix.length];
    System.arraycopy(owner, 0, out, 0, owner.length);
    System.arraycopy(suffix, 0, out, owner.length, suffix.length);
    return out;
  }

  static Cmd holdCount(byte[] key, byte[] owner, Side side) {
    return Cmd.of("HGET").key(key).arg(field(owner, side));
  }

  static Cmd release(byte[] key, byte[] owner, Side side, String req) {
    Cmd c = Cmd.of("RLOCK.RELEASE").key(key).arg(owner);
    if (side != null) {
      c.arg(side.name());
    }
    return c.arg("REQ").arg(req);
  }

  static Cmd renew(byte[] key, byte[] owner, Side side, long leaseMs, String req) {
    Cmd c = Cmd.of("RLOCK.RENEW").key(key).arg(owner);
    if (side != null) {
      c.arg(side.name());
    }
    return c.arg("LEASE").arg(leaseMs).arg("REQ").arg(req);
  }

  static Cmd waitReplicas(long n, long timeoutMs) {
    return Cmd.of("WAIT").arg(n).arg(timeoutMs);
  }

  static Cmd macquire(byte[] owner, List<byte[]> keys, long leaseMs, long blockMs, boolean session, String req) {
    Cmd c = Cmd.of("RLOCK.MACQUIRE").arg(owner).arg(keys.size());
    for (byte[] k : keys) {
      c.key(k);
    }
    c.arg("LEASE").arg(leaseMs);
    if (blockMs >= 0) {
      c.arg("BLOCK").arg(blockMs);
    }
    if (session) {
      c.arg("SESSION");
    }
    return c.arg("REQ").arg(req);
  }

  static Cmd mrelease(byte[] owner, List<byte[]> keys, String req) {
    Cmd c = Cmd.of("RLOCK.MRELEASE").arg(owner).arg(keys.size());
    for (byte[] k : keys) {
      c.key(k);
    }
    return c.arg("REQ").arg(req);
  }

  static Cmd semAcquire(byte[] key, int permits, long blockMs, String req) {
    Cmd c = Cmd.of("RSEM.ACQUIRE").key(key).arg("PERMITS").arg(permits);
    if (blockMs >= 0) {
      c.arg("BLOCK").arg(blockMs);
    }
    return c.arg("REQ").arg(req);
  }

  static Cmd semRelease(byte[] key, int permits, String req) {
    return Cmd.of("RSEM.RELEASE").key(key).arg("PERMITS").arg(permits).arg("REQ").arg(req);
  }

  static Cmd semLease(byte[] key, long leaseMs, int permits, long blockMs, String req) {
    Cmd c = Cmd.of("RSEM.LEASE").key(key).arg("LEASE").arg(leaseMs).arg("PERMITS").arg(permits);
    if (blockMs >= 0) {
      c.arg("BLOCK").arg(blockMs);
    }
    return c.arg("REQ").arg(req);
  }

  static Cmd semReturn(byte[] key, byte[] id, String req) {
    return Cmd.of("RSEM.RETURN").key(key).arg(id).arg("REQ").arg(req);
  }

  static Cmd semRenew(byte[] key, byte[] id, long leaseMs) {
    return Cmd.of("RSEM.RENEW").key(key).arg(id).arg("LEASE").arg(leaseMs);
  }

  static Cmd latchAwait(byte[] key, long blockMs) {
    Cmd c = Cmd.of("RLATCH.AWAIT").key(key);
    if (blockMs >= 0) {
      c.arg("BLOCK").arg(blockMs);
    }
    return c;
  }

  /** The cluster slot of a key (CRC16 of its hash tag, or of the whole key). */
  static int slot(byte[] key) {
    int start = -1;
    int end = -1;
    for (int i = 0; i < key.length; i++) {
      if (key[i] == '{') {
        start = i;
        break;
      }
    }
    if (start >= 0) {
      for (int i = start + 1; i < key.length; i++) {
        if (key[i] == '}') {
          end = i;
          break;
        }
      }
    }
    int from = 0;
    int to = key.length;
    if (start >= 0 && end > start + 1) {
      from = start + 1;
      to = end;
    }
    int crc = 0;
    for (int i = from; i < to; i++) {
      crc ^= (key[i] & 0xff) << 8;
      for (int j = 0; j < 8; j++) {
        crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
        crc &= 0xffff;
      }
    }
    return crc % 16384;
  }

  /** Multi-key names must share one cluster slot: refused here, before anything is sent. */
  static void checkSameSlot(List<byte[]> keys) {
    int first = slot(keys.get(0));
    for (byte[] k : keys) {
      if (slot(k) != first) {
        throw new IllegalArgumentException(
            "multi-key names span several cluster slots; give them one hash tag, "
                + "e.g. {order:7}:stock and {order:7}:payment");
      }
    }
  }
}
