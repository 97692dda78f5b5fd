package io.github.rlock.bench;

import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * A JSON writer for the results file: maps, lists, strings, numbers, booleans and null. A number
 * that is not finite (a figure with no samples, a division by zero) is written as null, as the
 * schema asks.
 */
final class Json {
  static String write(Object value) {
    StringBuilder s = new StringBuilder();
    write(s, value, "");
    return s.append('\n').toString();
  }

  private static void write(StringBuilder s, Object v, String indent) {
    String inner = indent + "  ";
    if (v == null) {
      s.append("null");
    } else if (v instanceof Map<?, ?> map) {
      if (map.isEmpty()) {
        s.append("{}");
        return;
      }
      s.append("{\n");
      Iterator<? extends Map.Entry<?, ?>> it = map.entrySet().iterator();
      while (it.hasNext()) {
        Map.Entry<?, ?> e = it.next();
        s.append(inner);
        string(s, String.valueOf(e.getKey()));
        s.append(": ");
        write(s, e.getValue(), inner);
        s.append(it.hasNext() ? ",\n" : "\n");
      }
      s.append(indent).append('}');
    } else if (v instanceof List<?> list) {
      if (list.isEmpty()) {
        s.append("[]");
        return;
      }
      s.append("[\n");
      for (int i = 0; i < list.size(); i++) {
        s.append(inner);
        write(s, list.get(i), inner);
        s.append(i + 1 < list.size() ? ",\n" : "\n");
      }
      s.append(indent).append(']');
    } else if (v instanceof Double d) {
      // Double.toString is the shortest text that reads back as the same double, so the
      // generator's checks of medians and ratios see exactly the values computed here.
      s.append(Double.isFinite(d) ? Double.toString(d) : "null");
    } else if (v instanceof Number || v instanceof Boolean) {
      s.append(v);
    } else {
      string(s, v.toString());
    }
  }

  private static void string(StringBuilder s, String text) {
    s.append('"');
    for (char c : text.toCharArray()) {
      switch (c) {
        case '"' -> s.append("\\\"");
        case '\\' -> s.append("\\\\");
        case '\n' -> s.append("\\n");
        case '\r' -> s.append("\\r");
        case '\t' -> s.append("\\t");
        default -> {
          if (c < 0x20) {
            s.append(String.format("\\u%04x", (int) c));
          } else {
            s.append(c);
          }
        }
      }
    }
    s.append('"');
  }

  private Json() {}
}
