package io.github.rlock.client;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SslOptions;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.List;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.JedisPoolConfig;

/**
 * TLS for the tests, as module-tests/src/tls.rs does it: a CA, a server certificate it signed
 * (for 127.0.0.1 and localhost), and a second CA that signed nothing here; made with openssl.
 */
final class Tls {
  record Files(Path ca, Path serverCert, Path serverKey, Path otherCa) {}

  private static Files files;

  private Tls() {}

  static synchronized Files files() throws IOException, InterruptedException {
    if (files != null) {
      return files;
    }
    Path dir = java.nio.file.Files.createTempDirectory("rlock-java-tls-");
    dir.toFile().deleteOnExit();
    run(dir, "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=rlock test CA",
        "-keyout", "ca.key", "-out", "ca.pem");
    run(dir, "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=other CA",
        "-keyout", "other.key", "-out", "other.pem");
    run(dir, "openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
        "-out", "server.csr");
    java.nio.file.Files.writeString(dir.resolve("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    run(dir, "openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", "san.ext", "-out", "server.pem");
    files = new Files(dir.resolve("ca.pem"), dir.resolve("server.pem"), dir.resolve("server.key"), dir.resolve("other.pem"));
    return files;
  }

  private static void run(Path dir, String... cmd) throws IOException, InterruptedException {
    Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes());
    if (p.waitFor() != 0) {
      throw new IOException(String.join(" ", cmd) + ": " + out);
    }
  }

  /** Whether the flavor's binary has TLS built in: asked of the binary itself. */
  static boolean supports(String flavor) throws IOException, InterruptedException {
    Process p =
        new ProcessBuilder(Servers.binary(flavor), "--port", "0", "--tls-port", Integer.toString(Servers.freePort()),
                "--tls-cert-file", "/nonexistent/rlock-tls-probe.pem", "--tls-key-file", "/nonexistent/rlock-tls-probe.pem",
                "--save", "", "--appendonly", "no")
            .redirectErrorStream(true)
            .start();
    String out = new String(p.getInputStream().readAllBytes());
    p.waitFor();
    return !(out.contains("TLS support") || out.contains("connection type tls"));
  }

  static Locks connect(Driver driver, int port, Path ca, List<AutoCloseable> closing) throws Exception {
    switch (driver) {
      case LETTUCE -> {
        RedisClient client =
            RedisClient.create(RedisURI.builder().withHost("127.0.0.1").withPort(port).withSsl(true).withVerifyPeer(true)
                .withTimeout(Duration.ofSeconds(5)).build());
        client.setOptions(ClientOptions.builder().sslOptions(SslOptions.builder().jdkSslProvider().trustManager(ca.toFile()).build()).build());
        closing.add(client::shutdown);
        Locks locks = Locks.create(client);
        closing.add(0, locks);
        return locks;
      }
      case JEDIS -> {
        KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
        ks.load(null, null);
        try (InputStream in = java.nio.file.Files.newInputStream(ca)) {
          ks.setCertificateEntry("ca", (X509Certificate) CertificateFactory.getInstance("X.509").generateCertificate(in));
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(ks);
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, tmf.getTrustManagers(), null);
        JedisPoolConfig cfg = new JedisPoolConfig();
        cfg.setJmxEnabled(false);
        JedisPool pool = new JedisPool(cfg, "127.0.0.1", port, 5000, null, 0, null, true, ctx.getSocketFactory(), null, null);
        closing.add(pool::close);
        Locks locks = Locks.create(pool);
        closing.add(0, locks);
        return locks;
      }
      default -> throw new IllegalStateException();
    }
  }
}
