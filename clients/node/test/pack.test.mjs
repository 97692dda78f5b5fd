// Done-when: `npm pack` gives a package that installs into a fresh project beside ioredis and
// redis, imports as ESM and CommonJS, and a user's program type-checks under tsc --strict
// (moduleResolution nodenext and bundler).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, stdio: ["ignore", "pipe", "pipe"] }).toString();

test("npm pack installs into a fresh project beside ioredis and redis; ESM, CJS and tsc --strict (nodenext, bundler) all work", { timeout: 240_000 }, () => {
  const dir = mkdtempSync(path.join(tmpdir(), "rlock-node-pack-"));
  try {
    const tgz = run("npm", ["pack", "--silent", "--pack-destination", dir], pkg).trim().split("\n").pop();
    const app = path.join(dir, "app");
    run("mkdir", ["-p", app]);
    writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "app", private: true, version: "1.0.0" }));
    run("npm", ["install", "--no-audit", "--no-fund", "--offline", "--no-save", path.join(dir, tgz)], app);
    // The drivers and TypeScript come from this package's own node_modules (npm ci put them
    // there), copied in after the install (npm would prune them as extraneous), so the fresh
    // project needs no registry.
    const mods = path.join(pkg, "node_modules");
    const deps = ["redis", "@redis", "ioredis", "typescript", "@types", "cluster-key-slot", "debug", "denque", "lodash.defaults", "lodash.isarguments", "ms", "redis-errors", "redis-parser", "standard-as-callback", "undici-types", "@ioredis"];
    for (const d of deps) {
      try {
        cpSync(path.join(mods, d), path.join(app, "node_modules", d), { recursive: true });
      } catch {
        /* not every version has every one */
      }
    }
    const installed = JSON.parse(readFileSync(path.join(app, "node_modules/rlock-client/package.json"), "utf8"));
    assert.equal(installed.version, "4.0.0");
    const esm = run("node", ["--input-type=module", "-e", 'import { Locks, LockLostError, VERSION } from "rlock-client"; console.log(typeof Locks, typeof LockLostError, VERSION)'], app);
    assert.equal(esm.trim(), "function function 4.0.0");
    const cjs = run("node", ["-e", 'const { Locks, NotAcquiredError, VERSION } = require("rlock-client"); console.log(typeof Locks, typeof NotAcquiredError, VERSION)'], app);
    assert.equal(cjs.trim(), "function function 4.0.0");
    cpSync(path.join(pkg, "test/pack/app.ts"), path.join(app, "app.ts"));
    const tsc = path.join(app, "node_modules/typescript/bin/tsc");
    for (const [module, resolution] of [["nodenext", "nodenext"], ["esnext", "bundler"], ["commonjs", "node10"]]) {
      const out = (() => {
        try {
          return run("node", [tsc, "--strict", "--noEmit", "--skipLibCheck", "--target", "es2022", "--lib", "es2022,esnext.disposable,dom", "--module", module, "--moduleResolution", resolution, "--types", "node", "app.ts"], app);
        } catch (e) {
          return `${e.stdout}${e.stderr}FAILED`;
        }
      })();
      assert.ok(!out.includes("FAILED"), `tsc --module ${module} --moduleResolution ${resolution}:\n${out}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
