package io.github.rlock.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A TCP proxy in front of a test server that cuts a connection right after it forwarded a
 * command containing an armed marker: the server runs it, the client never hears the reply. What
 * a reset connection does to a lock call in the middle.
 */
final class CutProxy implements AutoCloseable {
  private final ServerSocket listener;
  private final int target;
  private final AtomicReference<String> armed = new AtomicReference<>();
  private final List<Socket> open = new CopyOnWriteArrayList<>();
  volatile int cuts;

  CutProxy(int target) throws IOException {
    this.target = target;
    this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    Thread t = new Thread(this::accept, "cut-proxy");
    t.setDaemon(true);
    t.start();
  }

  int port() {
    return listener.getLocalPort();
  }

  /** The next command containing {@code marker} is forwarded, then its connection is cut. */
  void cutAfter(String marker) {
    armed.set(marker);
  }

  private void accept() {
    while (!listener.isClosed()) {
      try {
        Socket client = listener.accept();
        Socket server = new Socket(InetAddress.getLoopbackAddress(), target);
        open.add(client);
        open.add(server);
        java.util.concurrent.atomic.AtomicBoolean cut = new java.util.concurrent.atomic.AtomicBoolean();
        pump(client, server, true, cut);
        pump(server, client, false, cut);
      } catch (IOException e) {
        return;
      }
    }
  }

  private void pump(Socket from, Socket to, boolean watch, java.util.concurrent.atomic.AtomicBoolean cut) {
    Thread t =
        new Thread(
            () -> {
              byte[] buf = new byte[65536];
              try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                int n;
                while ((n = in.read(buf)) > 0) {
                  String marker = armed.get();
                  boolean last = watch && marker != null
                      && new String(buf, 0, n, StandardCharsets.ISO_8859_1).contains(marker)
                      && armed.compareAndSet(marker, null);
                  if (last) {
                    cut.set(true); // no reply of this pair reaches the client from now on
                  } else if (cut.get()) {
                    return;
                  }
                  out.write(buf, 0, n);
                  out.flush();
                  if (last) {
                    // The server has the command (it runs what it read before the close); the
                    // client never hears the reply.
                    cuts++;
                    Thread.sleep(20);
                    return;
                  }
                }
              } catch (IOException | InterruptedException e) {
                // cut or closed
              } finally {
                try {
                  from.close();
                  to.close();
                } catch (IOException e) {
                  // closed
                }
              }
            },
            "cut-proxy-pump");
    t.setDaemon(true);
    t.start();
  }

  @Override
  public void close() throws IOException {
    listener.close();
    for (Socket s : open) {
      s.close();
    }
  }
}
