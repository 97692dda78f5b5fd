// npm test: every test file under node:test, one file at a time (each starts its own servers),
// with the spec reporter on stdout; `--junit=FILE` also writes JUnit XML there (what
// scripts/conformance reads). Other arguments go to node --test (--test-name-pattern=...).
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";

const passed = [];
let junit;
for (const a of process.argv.slice(2)) {
  if (a.startsWith("--junit=")) junit = a.slice("--junit=".length);
  else passed.push(a);
}
const files = readdirSync("test")
  .filter((f) => f.endsWith(".test.mjs"))
  .sort()
  .map((f) => `test/${f}`);
const args = ["--test", "--test-concurrency=1", "--test-reporter=spec", "--test-reporter-destination=stdout"];
if (junit) args.push("--test-reporter=junit", `--test-reporter-destination=${junit}`);
const r = spawnSync(process.execPath, [...args, ...passed, ...files], { stdio: "inherit" });
process.exit(r.status ?? 1);
