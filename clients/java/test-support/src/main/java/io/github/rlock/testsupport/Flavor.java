package io.github.rlock.testsupport;

import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * A server the tests run on: Redis 7.0, Redis 8.2, Valkey 9. Its label is its name in lower case
 * (redis, redis8, valkey), its binary named by the variable {@code <NAME>_SERVER}.
 */
public enum Flavor {
  REDIS,
  REDIS8,
  VALKEY;

  public String label() {
    return name().toLowerCase(Locale.ROOT);
  }

  @Override
  public String toString() {
    return label();
  }

  /** The flavor labelled {@code label} (redis, redis8, valkey). */
  public static Flavor named(String label) {
    String wanted = label.trim().toLowerCase(Locale.ROOT);
    return Arrays.stream(values())
        .filter(f -> f.label().equals(wanted))
        .findFirst()
        .orElseThrow(
            () ->
                new IllegalArgumentException(
                    "no flavor named " + wanted + " (use redis, redis8, valkey or all)"));
  }

  /** The flavors to run: {@code RLOCK_FLAVORS} (comma-separated labels, or all), else all three. */
  public static List<Flavor> chosen() {
    String wanted = System.getenv("RLOCK_FLAVORS");
    if (wanted == null || wanted.isBlank() || wanted.trim().equals("all")) {
      return List.of(values());
    }
    List<Flavor> out = new ArrayList<>();
    for (String label : wanted.split(",")) {
      if (!label.isBlank()) {
        try {
          out.add(named(label));
        } catch (IllegalArgumentException e) {
          throw new IllegalArgumentException("RLOCK_FLAVORS: " + e.getMessage(), e);
        }
      }
    }
    return out;
  }

  /** The server binary, from {@code <NAME>_SERVER}. */
  public String binary() {
    String binaryVariable = name() + "_SERVER";
    String binary = System.getenv(binaryVariable);
    if (binary == null || !Files.isExecutable(Paths.get(binary))) {
      throw new IllegalStateException(
          label()
              + " server not found: set "
              + binaryVariable
              + " (source /opt/rlock-env/env.sh), or narrow RLOCK_FLAVORS");
    }
    return binary;
  }
}
