package io.github.rlock.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The results file's pure writer, without a server. */
class ReportTest {
  private static final String INFO_SERVER =
      "# Server\r\nredis_version:7.2.4\r\nvalkey_version:9.1.2\r\n";
  private static final String INFO_MODULES =
      "# Modules\r\nmodule:name=rlock,ver=40100,api=1,filters=0,usedby=[],using=[],options=[]\r\n";

  @SuppressWarnings("unchecked")
  private static Map<String, Object> find(Map<String, Object> doc, String list, Object... kv) {
    return ((List<Map<String, Object>>) doc.get(list))
        .stream()
            .filter(
                r -> {
                  for (int i = 0; i < kv.length; i += 2) {
                    if (!kv[i + 1].equals(r.get((String) kv[i]))) {
                      return false;
                    }
                  }
                  return true;
                })
            .findFirst()
            .orElseThrow();
  }

  /** The median of the result that has these fields. */
  private static Object median(Map<String, Object> doc, Object... kv) {
    return find(doc, "results", kv).get("median");
  }

  /** The value of rlock-client's ratio to `baseline` in `scenario`. */
  private static Object ratio(Map<String, Object> doc, String scenario, String baseline) {
    return find(doc, "ratios", "scenario", scenario, "baseline", baseline).get("value");
  }

  @Test
  void mediansRatiosAndNulls() {
    Map<String, List<Double>> samples = new LinkedHashMap<>();
    samples.put("uncontended.rlock_client", List.of(900.0, 1100.0, 1000.0));
    samples.put("uncontended.raw_lettuce", List.of(1000.0, 1000.0, 1000.0));
    samples.put("uncontended.redisson", List.of(250.0, 250.0, 250.0));
    samples.put("uncontended.redis_lock_registry", List.of(0.0, 0.0, 0.0));
    samples.put("contended.rlock_client.per_s", List.of(3000.0, 5000.0));
    samples.put("contended.rlock_client.handoff_p50_ms", List.of(0.1, Double.NaN));
    samples.put("contended.rlock_client.handoff_p99_ms", List.of(Double.NaN, Double.NaN));
    samples.put("contended.redisson.per_s", List.of(1000.0, 1000.0));
    Report.Header header =
        new Report.Header(
            "2026-01-01 00:00 UTC",
            "test",
            "cpu",
            2,
            "0 0 0",
            true,
            "abc",
            false,
            Map.of(),
            "jdk",
            Map.of());
    Map<String, Object> doc =
        Report.document(
            header,
            List.of(new Report.Measured("valkey", true, INFO_SERVER, INFO_MODULES, 32, samples)));

    assertEquals("rlock-bench/1", doc.get("schema"));
    assertEquals(
        "Valkey 9.1.2 (redis_version 7.2.4)", find(doc, "servers", "id", "valkey").get("version"));
    assertEquals("40100", ((Map<?, ?>) doc.get("build")).get("module_version"));
    assertEquals(1000.0, median(doc, "scenario", "uncontended", "path", "rlock-client"));
    // A round without samples is left out of the median; none at all gives NaN, written null.
    assertEquals(0.1, median(doc, "path", "rlock-client", "metric", "latency_p50_ms"));
    Object p99 = median(doc, "path", "rlock-client", "metric", "latency_p99_ms");
    assertTrue(Double.isNaN((Double) p99));
    assertTrue(Json.write(doc).contains("\"median\": null"));
    assertEquals(4.0, ratio(doc, "uncontended", "Redisson RLock"));
    assertEquals(4.0, ratio(doc, "contended", "Redisson RLock"));
    assertNull(ratio(doc, "uncontended", "RedisLockRegistry"));
    assertEquals(
        Map.of("workers", 32, "hold_ms", 0),
        find(doc, "results", "scenario", "contended").get("setting"));
  }
}
