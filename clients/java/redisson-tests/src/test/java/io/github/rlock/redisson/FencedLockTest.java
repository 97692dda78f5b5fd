package io.github.rlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.redisson.api.RFencedLock;

/** Redisson's RFencedLock tokens and rlock's TOKEN: one counter, rising across both. */
class FencedLockTest extends BothSides {
  @EachServer
  void tokensRiseAcrossBothSides(Fleet.Node node) throws Exception {
    RFencedLock fenced = node.redisson.getFencedLock(key);
    List<Long> tokens = new ArrayList<>();
    try (Rlock rlock = node.rlock()) {
      for (int round = 0; round < 5; round++) {
        tokens.add(fenced.lockAndGetToken());
        assertEquals(
            tokens.get(tokens.size() - 1), rlock.info(key).get("token"), "RLOCK.INFO token");
        fenced.unlock();
        Long token = rlock.acquire(key, "rlock-holder", "TOKEN", "LEASE", 10_000);
        tokens.add(token);
        assertEquals(token, fenced.getToken(), "Redisson's getToken reads rlock's");
        // rlock's re-entry keeps its token while the counter has not moved.
        assertEquals(token, rlock.acquire(key, "rlock-holder", "TOKEN", "LEASE", 10_000));
        rlock.release(key, "rlock-holder");
        rlock.release(key, "rlock-holder");
        // A plain rlock acquire (no TOKEN) still moves the counter once it exists.
        rlock.acquire(key, "rlock-plain", "LEASE", 10_000);
        rlock.release(key, "rlock-plain");
        tokens.add((Long) rlock.info(key).get("token"));
      }
      // A Redisson re-entry INCRs again; rlock's next token is above it.
      long first = fenced.lockAndGetToken();
      long reentered = fenced.lockAndGetToken();
      assertTrue(reentered > first, "Redisson's re-entry token " + reentered + " after " + first);
      tokens.add(first);
      tokens.add(reentered);
      fenced.unlock();
      fenced.unlock();
      tokens.add(rlock.acquire(key, "rlock-holder", "TOKEN", "LEASE", 10_000));
      rlock.release(key, "rlock-holder");
    }
    for (int i = 1; i < tokens.size(); i++) {
      assertTrue(tokens.get(i) > tokens.get(i - 1), "tokens not rising: " + tokens);
    }
  }
}
