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
    assertEquals(
        1000.0,
        find(doc, "results", "scenario", "uncontended", "path", "rlock-client").get("median"));
    // A round without samples is left out of the median; none at all gives NaN, written null.
    assertEquals(
        0.1,
        find(doc, "results", "path", "rlock-client", "metric", "latency_p50_ms").get("median"));
    Object p99 =
        find(doc, "results", "path", "rlock-client", "metric", "latency_p99_ms").get("median");
    assertTrue(Double.isNaN((Double) p99));
    assertTrue(Json.write(doc).contains("\"median\": null"));
    assertEquals(
        4.0,
        find(doc, "ratios", "scenario", "uncontended", "baseline", "Redisson RLock").get("value"));
    assertEquals(
        4.0,
        find(doc, "ratios", "scenario", "contended", "baseline", "Redisson RLock").get("value"));
    assertNull(
        find(doc, "ratios", "scenario", "uncontended", "baseline", "RedisLockRegistry")
            .get("value"));
    assertEquals(
        Map.of("workers", 32, "hold_ms", 0),
        find(doc, "results", "scenario", "contended").get("setting"));
  }
}
