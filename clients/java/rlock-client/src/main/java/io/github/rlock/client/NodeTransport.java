package io.github.rlock.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;

/**
 * What both drivers share: a node per server address, and in a cluster the slot map read with
 * {@code CLUSTER SLOTS}, so commands go straight to the primary that serves the key (the
 * drivers' own cluster routing resends on a redirect, which a lock command must not do blindly).
 */
abstract class NodeTransport implements Transport {
  /** One server: a shared connection for short commands, dedicated ones for waits. */
  interface Node extends AutoCloseable {
    List<Object> pipeline(List<Cmd> cmds);

    WaitConn waitConn();

    Channels channels(BiConsumer<String, String> onMessage);

    @Override
    void close();
  }

  /** What every wait connection knows: the node it is on, and its id there. */
  abstract static class Dedicated implements WaitConn {
    private final String address;
    private final long id;

    Dedicated(String address, long id) {
      this.address = address;
      this.id = id;
    }

    @Override
    public long clientId() {
      return id;
    }

    @Override
    public String address() {
      return address;
    }
  }

  private final boolean cluster;
  private final String seed;
  private final Map<String, Node> nodes = new ConcurrentHashMap<>();
  private volatile String[] slots;
  private volatile List<String> primaries;

  NodeTransport(String seed, boolean cluster) {
    this.seed = seed;
    this.cluster = cluster;
  }

  @Override
  public boolean cluster() {
    return cluster;
  }

  /** Makes the node for {@code host:port}. */
  abstract Node newNode(String host, int port);

  /** Must be called once the subclass is ready: reads the slot map of a cluster. */
  final void start() {
    if (cluster) {
      refresh();
    } else {
      primaries = List.of(seed);
    }
  }

  final Node node(String address) {
    return nodes.computeIfAbsent(
        address,
        a -> {
          int at = a.lastIndexOf(':');
          return newNode(a.substring(0, at), Integer.parseInt(a.substring(at + 1)));
        });
  }

  @Override
  public String nodeOf(byte[] key) {
    if (!cluster || key == null) {
      return cluster ? primaries.get(0) : seed;
    }
    String a = slots[Plan.slot(key)];
    return a != null ? a : primaries.get(0);
  }

  @Override
  public List<Object> pipeline(byte[] routeKey, List<Cmd> cmds) {
    return node(nodeOf(routeKey)).pipeline(cmds);
  }

  @Override
  public List<Object> pipelineAt(String address, List<Cmd> cmds) {
    return node(address).pipeline(cmds);
  }

  @Override
  public WaitConn waitConn(byte[] routeKey) {
    return node(nodeOf(routeKey)).waitConn();
  }

  @Override
  public List<String> primaries() {
    return primaries;
  }

  @Override
  public Channels channels(String address, BiConsumer<String, String> onMessage) {
    return node(address).channels(onMessage);
  }

  @Override
  public synchronized void refresh() {
    if (!cluster) {
      return;
    }
    List<String> known = new ArrayList<>();
    known.add(seed);
    if (primaries != null) {
      known.addAll(primaries);
    }
    RlockException last = null;
    for (String a : known) {
      try {
        Object reply = Replies.ok(node(a).pipeline(List.of(Cmd.of("CLUSTER").arg("SLOTS"))).get(0));
        String[] map = new String[16384];
        List<String> prim = new ArrayList<>();
        for (Object range : Replies.list(reply)) {
          List<?> r = (List<?>) range;
          int from = Replies.asLong(r.get(0)).intValue();
          int to = Replies.asLong(r.get(1)).intValue();
          List<?> master = (List<?>) r.get(2);
          String host = Replies.text(master.get(0));
          if (host == null || host.isEmpty() || host.equals("?")) {
            host = a.substring(0, a.lastIndexOf(':'));
          }
          String addr = host + ":" + Replies.asLong(master.get(1));
          for (int s = from; s <= to; s++) {
            map[s] = addr;
          }
          if (!prim.contains(addr)) {
            prim.add(addr);
          }
        }
        slots = map;
        primaries = List.copyOf(prim);
        return;
      } catch (RlockException e) {
        last = e;
      }
    }
    throw last != null ? last : new RlockException("no cluster node answered CLUSTER SLOTS");
  }

  @Override
  public void close() {
    for (Node n : nodes.values()) {
      try {
        n.close();
      } catch (RuntimeException e) {
        // closing: nothing left to tell
      }
    }
    nodes.clear();
  }
}
