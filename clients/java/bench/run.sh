#!/usr/bin/env bash
# make bench-java: rlock-client against the same commands sent raw on Lettuce, Redisson's RLock and
# Spring Integration's RedisLockRegistry, each figure a ratio of paths run in one round on one
# server. The server runs on CPU 0 (the bench starts it under `taskset -c 0`), the load on CPU 1.
#
#   clients/java/bench/run.sh [--flavors redis,valkey] [--rounds 3] [--run-ms 2000] [--threads 32] [--json PATH]
#
# --json PATH (default clients/java/bench/target/bench-java.json): the results file, in the schema
# rlock-bench/1 of bench/report/README.md; a relative PATH is from the current directory.
# RLOCK_MODULE: the module to load (default: the workspace's release build). REDIS_SERVER,
# REDIS8_SERVER, VALKEY_SERVER: the servers (source /opt/rlock-env/env.sh, or the Makefile's).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
export RLOCK_MODULE="${RLOCK_MODULE:-$root/target/release/librlock.so}"
if [[ ! -f "$RLOCK_MODULE" ]]; then
  echo "run.sh: no module at $RLOCK_MODULE (cargo build --release -p rlock, or set RLOCK_MODULE)" >&2
  exit 1
fi
# The command as run, for the results file.
export RLOCK_BENCH_COMMAND="clients/java/bench/run.sh${*:+ $*}"

# Build the client, the Spring module and the bench in one reactor, and write the bench's classpath.
mvn -q -f "$here/../pom.xml" -pl bench -am -DskipTests package \
  dependency:build-classpath -Dmdep.outputFile="$here/target/classpath.txt"

pin=()
if command -v taskset >/dev/null && [[ "$(nproc)" -ge 2 ]]; then
  pin=(taskset -c 1)
  export RLOCK_BENCH_PINNED=1
fi
# The default --json comes first: a --json among the arguments replaces it.
exec "${pin[@]}" java -Drlock.root="$root" -cp "$here/target/classes:$(cat "$here/target/classpath.txt")" \
  io.github.rlock.bench.Bench --json "$here/target/bench-java.json" "$@"
