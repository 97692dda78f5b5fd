// C22, its package: `npm pack` from a tree without dist/ builds dist/ itself (prepack) into the
// tarball; publint and @arethetypeswrong/cli pass on that tarball; it installs into a fresh
// project beside ioredis and redis, imports as ESM and CommonJS, a user's program type-checks
// under `tsc --strict --target es2022` with @types/node and library checks on (no
// --skipLibCheck, no extra --lib) for nodenext and bundler resolution, and a lock is taken and
// released through the installed package, with each driver, against a real server.
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Server, DRIVERS, flavors } from "./helpers.mjs";

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const version = JSON.parse(readFileSync(path.join(pkg, "package.json"), "utf8")).version;
const mods = path.join(pkg, "node_modules");

function run(cmd, args, cwd, env = {}) {
  try {
    return execFileSync(cmd, args, { cwd, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } }).toString();
  } catch (e) {
    throw new Error(`${cmd} ${args.join(" ")} (in ${cwd}) failed:\n${e.stdout}${e.stderr}`);
  }
}

/** Packs the package from a copy of its sources without dist/, and installs the tarball into a fresh project. */
function packAndInstall(dir) {
  const src = path.join(dir, "src-tree");
  mkdirSync(src);
  for (const f of ["package.json", "package-lock.json", "README.md", "tsconfig.json", "tsconfig.cjs.json", "src", "scripts"]) cpSync(path.join(pkg, f), path.join(src, f), { recursive: true });
  // The build needs TypeScript, which `npm ci` put in this package's node_modules.
  symlinkSync(mods, path.join(src, "node_modules"));
  const out = run("npm", ["pack", "--silent", "--pack-destination", dir], src).trim().split("\n");
  const tgz = path.join(dir, out[out.length - 1]);
  const listed = run("tar", ["tzf", tgz], dir).split("\n");
  for (const f of ["package/dist/esm/index.js", "package/dist/esm/index.d.ts", "package/dist/cjs/index.js", "package/dist/cjs/index.d.ts", "package/dist/cjs/package.json", "package/README.md"]) {
    assert.ok(listed.includes(f), `the tarball lacks ${f}: ${listed.join(" ")}`);
  }
  const app = path.join(dir, "app");
  mkdirSync(app);
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "app", private: true, version: "1.0.0" }));
  run("npm", ["install", "--no-audit", "--no-fund", "--offline", "--no-save", tgz], app);
  // The drivers, TypeScript and @types/node come from this package's own node_modules (npm ci
  // put them there), copied in after the install (npm would prune them as extraneous), so the
  // fresh project needs no registry.
  const deps = ["redis", "@redis", "ioredis", "typescript", "@types", "cluster-key-slot", "debug", "denque", "lodash.defaults", "lodash.isarguments", "ms", "redis-errors", "redis-parser", "standard-as-callback", "undici-types", "@ioredis"];
  for (const d of deps) {
    try {
      cpSync(path.join(mods, d), path.join(app, "node_modules", d), { recursive: true });
    } catch {
      /* not every version has every one */
    }
  }
  // The ecosystem's checkers, on the tarball, and a user's program type-checked against it.
  run(process.execPath, [path.join(mods, "publint/src/cli.js"), "run", "--strict", tgz], pkg);
  run(process.execPath, [path.join(mods, "@arethetypeswrong/cli/dist/index.js"), tgz, "--format", "ascii"], pkg);
  cpSync(path.join(pkg, "test/pack/app.ts"), path.join(app, "app.ts"));
  const tsc = path.join(app, "node_modules/typescript/bin/tsc");
  for (const [module, resolution] of [["nodenext", "nodenext"], ["esnext", "bundler"]]) {
    run("node", [tsc, "--strict", "--noEmit", "--target", "es2022", "--module", module, "--moduleResolution", resolution, "--types", "node", "app.ts"], app);
  }
  return { tgz, app };
}

let packed;
let dir;

for (const flavor of flavors()) {
  describe(`the package on ${flavor}`, () => {
    let server;
    before(async () => {
      server = await Server.start(flavor);
      if (!packed) {
        dir = mkdtempSync(path.join(tmpdir(), "rlock-node-pack-"));
        packed = packAndInstall(dir);
      }
    });
    after(async () => {
      await server?.stop();
    });

    for (const driver of DRIVERS) {
      test(`[${driver}] C22 its package: npm pack builds dist/, publint and attw pass, it installs into a fresh project, imports as ESM and CJS, type-checks under tsc --strict (nodenext, bundler) with library checks on, and takes and releases a lock (${flavor})`, { timeout: 300_000 }, () => {
        // Packed, checked and type-checked once for the file (see packAndInstall): a failure there fails every test here.
        const { app } = packed;
        const installed = JSON.parse(readFileSync(path.join(app, "node_modules/rlock-client/package.json"), "utf8"));
        assert.equal(installed.version, version);
        const esm = run("node", ["--input-type=module", "-e", 'import { Locks, LockLostError, VERSION } from "rlock-client"; console.log(typeof Locks, typeof LockLostError, VERSION)'], app);
        assert.equal(esm.trim(), `function function ${version}`);
        const cjs = run("node", ["-e", 'const { Locks, NotAcquiredError, VERSION } = require("rlock-client"); console.log(typeof Locks, typeof NotAcquiredError, VERSION)'], app);
        assert.equal(cjs.trim(), `function function ${version}`);
        // A lock through the installed package, on a real server.
        const program = `
          import { Locks } from "rlock-client";
          const locks = await Locks.fromUrl(process.env.URL, { driver: process.env.DRIVER });
          const hold = await locks.lock("c22:" + process.env.DRIVER, { fenced: true }).acquire();
          const during = await locks.lock("c22:" + process.env.DRIVER).isLocked();
          const freed = await hold.release();
          const after = await locks.lock("c22:" + process.env.DRIVER).isLocked();
          await locks.close();
          console.log(JSON.stringify({ driver: locks.driver, token: hold.token, during, freed, after }));`;
        const out = JSON.parse(run("node", ["--input-type=module", "-e", program], app, { URL: server.url, DRIVER: driver }).trim());
        assert.equal(out.driver, driver);
        assert.ok(out.token >= 1, `token ${out.token}`);
        assert.deepEqual({ during: out.during, freed: out.freed, after: out.after }, { during: true, freed: true, after: false });
      });
    }
  });
}

process.on("exit", () => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});
