package io.github.rlock.redisson;

import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.CommandOutput;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

/** Any RESP2 reply as plain Java: null, Long, String, or a (nested) List of them. */
final class ReplyOutput extends CommandOutput<String, String, Object> {
  private record Open(List<Object> list, int[] left) {}

  private final Deque<Open> open = new ArrayDeque<>();

  ReplyOutput() {
    super(StringCodec.UTF8, null);
  }

  private void add(Object value) {
    if (open.isEmpty()) {
      output = value;
      return;
    }
    Open top = open.peek();
    top.list.add(value);
    if (--top.left[0] == 0) {
      open.pop();
    }
  }

  @Override
  public void set(ByteBuffer bytes) {
    add(bytes == null ? null : StringCodec.UTF8.decodeValue(bytes));
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
  public void multi(int count) {
    if (count < 0) {
      add(null);
      return;
    }
    List<Object> list = new ArrayList<>(count);
    add(list);
    if (count > 0) {
      open.push(new Open(list, new int[] {count}));
    }
  }
}
