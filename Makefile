# Shortcuts. `make build` builds the module (librlock.so) and the `rlock` command-line tool;
# `make run` starts redis-server with the module; `make test` runs every test.
# Both install what they need first (scripts/deps.sh: apt-get and pip, as root or through sudo).
PORT ?= 6379
CARGO ?= cargo
TARGET_DIR := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
RELEASE_MODULE := $(TARGET_DIR)/release/librlock.so
DEBUG_MODULE := $(TARGET_DIR)/debug/librlock.so
PY_VENV := .venv

.PHONY: dist build run test test-prepare test-workspace test-conformance test-quiet test-python bench-python test-node bench-node test-java bench-java test-go bench-go bench-report test-bench-report unit lint bench cost-check cost-baseline chaos deps prove-setup docker-test clean

# The `rlock` binary is what users put on a PATH: stripped, at most 10 MB (docs/CLI.md).
CLI_MAX_BYTES := 10485760
build:
	scripts/deps.sh build
	$(CARGO) build --release -p rlock -p rlock-cli
	@size=$$(stat -c %s $(TARGET_DIR)/release/rlock); \
	if [ "$$size" -gt $(CLI_MAX_BYTES) ]; then \
		echo "make build: target/release/rlock is $$size bytes, over $(CLI_MAX_BYTES) (docs/CLI.md)" >&2; exit 1; fi; \
	echo "rlock: $$size bytes"

run:
	scripts/deps.sh build redis
	$(CARGO) build --release -p rlock
	@if redis-cli -p $(PORT) PING >/dev/null 2>&1; then \
		echo "make run: port $(PORT) is taken (Debian's redis-server service?); try: make run PORT=6380" >&2; \
		exit 1; fi
	@echo
	@echo "rlock loaded on port $(PORT). Try, in another terminal:"
	@echo "    redis-cli -p $(PORT) RLOCK.ACQUIRE orders worker-1 LEASE 30000"
	@echo
	redis-server --port $(PORT) --save "" --appendonly no --loadmodule $(RELEASE_MODULE)

# `make test` prepares everything first (deps, lint, every build, the clients' packages), then
# runs two streams side by side on the 2 cores: the Rust workspace (module, cli and chaos
# crates, the Python example, the chaos slice) and the clients' conformance matrix (the Rust,
# Python and Node suites, scripts/conformance); the bench's tests and the cost check run last and
# alone, since timings and callgrind's counts of time-driven work move on a loaded machine. Each stream's output is
# printed whole when it ends.
TEST_DEPS := build redis redis8 valkey python pyvenv valgrind tmux node java go monitoring
test: test-prepare
	$(MAKE) --no-print-directory -j2 --output-sync=target test-workspace test-conformance
	$(MAKE) --no-print-directory test-quiet

test-prepare: $(PY_VENV)/.ready
	scripts/test-deps.sh
	scripts/deps.sh $(TEST_DEPS)
	python3 scripts/import_cycles.py --self-test
	python3 scripts/import_cycles.py src client/src cli/src
	python3 scripts/versions.py --self-test
	python3 scripts/versions.py
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) build -p rlock -p rlock-chaos -p rlock-bench
	$(CARGO) build --release -p rlock
	$(CARGO) test --workspace --no-run -q
	$(PY_VENV)/bin/pip install -q --disable-pip-version-check --no-deps --force-reinstall ./clients/python
	cd clients/python && ../../$(PY_VENV)/bin/mypy src/rlock_client
	cd clients/node && npm ci --no-audit --no-fund
	cd clients/go && go vet ./... && test -z "$$(gofmt -l .)" && go test -race -count=1 -run '^$$' ./... >/dev/null
	cd clients/go/bench && go vet ./... && test -z "$$(gofmt -l .)" && go test -count=1 ./...
	cd clients/java && mvn -B -q -DskipTests package
	$(MAKE) --no-print-directory dist
	$(MAKE) --no-print-directory test-bench-report

test-workspace:
	RLOCK_MODULE=$(DEBUG_MODULE) $(CARGO) test --workspace --exclude rlock-client --exclude rlock-bench --no-fail-fast
	RLOCK_MODULE=$(DEBUG_MODULE) python3 examples/python/run_example.py
	RLOCK_MODULE=$(DEBUG_MODULE) $(CARGO) run -q -p rlock-chaos -- $(CHAOS_SLICE_ARGS)

test-conformance:
	env $$(scripts/deps.sh --servers) RLOCK_MODULE=$(DEBUG_MODULE) RLOCK_DIST=$(CURDIR)/dist scripts/conformance

# What measures time or counts time-driven work runs alone, after the two streams: the bench's
# tests (its smoke run checks that nobody gets a lock before its lease ends, within 5 ms of a
# deadline estimated from the holder's reply, which a loaded machine delays) and the cost check.
test-quiet:
	RLOCK_MODULE=$(DEBUG_MODULE) $(CARGO) test -p rlock-bench --no-fail-fast
	$(MAKE) --no-print-directory cost-check

# The Python client (clients/python): a venv in .venv (git-ignored; scripts/conformance's
# default) with the package installed from the tree as `pip install ./clients/python` would,
# and its suite on the three servers (RLOCK_FLAVORS narrows them). PYTEST_ARGS passes more,
# e.g. PYTEST_ARGS="-k c06 -x".
PYTEST_ARGS ?=
$(PY_VENV)/.ready: clients/python/pyproject.toml scripts/dist/requirements.txt
	scripts/deps.sh pyvenv
	rm -rf $(PY_VENV)
	python3 -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install -q --disable-pip-version-check './clients/python[test,bench]' -r scripts/dist/requirements.txt
	touch $@

test-python: $(PY_VENV)/.ready
	scripts/deps.sh build redis redis8 valkey
	$(CARGO) build -p rlock
	$(PY_VENV)/bin/pip install -q --disable-pip-version-check --no-deps --force-reinstall ./clients/python
	cd clients/python && ../../$(PY_VENV)/bin/mypy src/rlock_client
	RLOCK_MODULE=$(DEBUG_MODULE) $(PY_VENV)/bin/pytest clients/python/tests -q $(PYTEST_ARGS)

# The Python client against what Python users run instead (redis-py's Lock, python-redis-lock)
# and against raw commands on the same connection: docs/BENCHMARKS.md, "The Python client".
bench-python: $(PY_VENV)/.ready
	scripts/deps.sh build redis redis8 valkey
	$(CARGO) build --release -p rlock
	$(PY_VENV)/bin/pip install -q --disable-pip-version-check --no-deps --force-reinstall ./clients/python
	RLOCK_MODULE=$(RELEASE_MODULE) $(PY_VENV)/bin/python clients/python/bench/bench.py $(BENCH_ARGS)

# The Node client (clients/node): its dependencies from the committed lockfile, the build, and
# its tests (node:test) on every server through node-redis and ioredis. NODE_TEST_ARGS goes to
# npm test (--junit=FILE, --test-name-pattern=...); RLOCK_FLAVORS narrows the servers.
NODE_TEST_ARGS ?=
test-node:
	scripts/deps.sh build redis redis8 valkey node
	$(CARGO) build -p rlock
	cd clients/node && npm ci --no-audit --no-fund
	cd clients/node && RLOCK_MODULE=$(DEBUG_MODULE) npm test -- $(NODE_TEST_ARGS)

# The Go client (clients/go): go vet, then its tests with -race on every server (the conformance
# cases are TestC01_... to TestC19_..., one subtest per server). GO_TEST_ARGS goes to go test
# (-run 'TestC0[1-8]', -v, -json); RLOCK_FLAVORS narrows the servers.
GO_TEST_ARGS ?=
test-go:
	scripts/deps.sh build redis redis8 valkey go
	$(CARGO) build -p rlock
	cd clients/go && go vet ./... && test -z "$$(gofmt -l .)"
	cd clients/go && env $$($(CURDIR)/scripts/deps.sh --servers) RLOCK_MODULE=$(DEBUG_MODULE) go test -race -count=1 ./... $(GO_TEST_ARGS)

# The Go client against raw commands on go-redis, redsync's Mutex and bsm/redislock
# (clients/go/bench, a module of its own): server on core 0, load on core 1, medians of rounds.
# GO_BENCH_ARGS: -rounds N, -seconds S (and the bench's other flags). FLAVOR is the
# server (default redis); BENCH_JSON is the results file (schema rlock-bench/1,
# bench/report/README.md; default target/bench-go.json).
GO_BENCH_ARGS ?=
bench-go:
	scripts/deps.sh build redis redis8 valkey go
	$(CARGO) build --release -p rlock
	mkdir -p $(TARGET_DIR)
	cd clients/go/bench && go build -o $(TARGET_DIR)/rlock-go-bench . && env $$($(CURDIR)/scripts/deps.sh --servers) RLOCK_MODULE=$(RELEASE_MODULE) $(TARGET_DIR)/rlock-go-bench $(GO_BENCH_ARGS) \
		$(if $(FLAVOR),-flavor $(FLAVOR)) -json $(abspath $(or $(BENCH_JSON),$(TARGET_DIR)/bench-go.json))

unit:
	$(CARGO) test -p rlock

# Every artifact a user installs, built from this checkout into dist/ and checked by its
# ecosystem's tool (scripts/dist.sh, docs/PACKAGES.md): the module and tool tarball with its
# checksum, the client crate, the Python wheel and sdist, the npm tarball, the Java jars and the
# Go module. DIST_TARGETS narrows them (module crate python node java go).
DIST_TARGETS ?=
dist: $(PY_VENV)/.ready
	scripts/deps.sh build node
	scripts/dist.sh $(DIST_TARGETS)

lint:
	python3 scripts/import_cycles.py src client/src cli/src
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench:
	scripts/deps.sh build redis redis8 valkey
	$(CARGO) build --release -p rlock
	RLOCK_MODULE=$(RELEASE_MODULE) $(CARGO) run --release -p rlock-bench -- $(BENCH_ARGS)

# The benchmark report (issue 42, bench/report/README.md): every benchmark with --json into
# docs/benchmarks/results/ (old results removed first, so no figure survives from an earlier
# run), then scripts/bench-report rewrites docs/BENCHMARKS.md and docs/benchmarks/*.svg. The
# module's bench runs on every server; each client's on BENCH_REPORT_FLAVORS, one after the
# other. A benchmark the machine cannot run (no target yet, a runtime missing, a failure) leaves
# no file and a line in note.md: the report says it was not measured. BENCH_REPORT_ARGS goes to
# `make bench`, BENCH_REPORT_CLIENT_ARGS to the Python and Node benches; Java and Go run their
# own defaults (3 rounds of 2 s; 5 of 1.5 s).
# The defaults fit the whole run in about 40 minutes on 2 cores (every scenario, server and
# library kept; bench/report/README.md, "How long it takes"): the module 3 rounds of 1 s and 2
# rounds of its 10,000 waiters instead of 5, 2 s and 3 (about 63 minutes alone); the Python and
# Node benches 3 rounds of 0.5 s.
BENCH_RESULTS := docs/benchmarks/results
BENCH_REPORT_FLAVORS ?= redis redis8 valkey
BENCH_REPORT_ARGS ?= --rounds 3 --secs 1 --waiter-rounds 2
BENCH_REPORT_CLIENT_ARGS ?= --rounds 3 --seconds 0.5
bench-report: $(PY_VENV)/.report-ready
	rm -f $(BENCH_RESULTS)/*.json $(BENCH_RESULTS)/note.md
	mkdir -p $(BENCH_RESULTS)
	echo "- Load average (1, 5, 15 min) when \`make bench-report\` started: $$(cut -d' ' -f1-3 /proc/loadavg), on $$(nproc) CPUs." > $(BENCH_RESULTS)/note.md
	echo "- Rounds and seconds: the module \`$(strip $(BENCH_REPORT_ARGS))\`; the Python and Node benches \`$(strip $(BENCH_REPORT_CLIENT_ARGS))\`; Java and Go their own defaults. Each suite's plan line below says what it ran." >> $(BENCH_RESULTS)/note.md
	echo "- Started at $$(date -u '+%H:%M UTC')." >> $(BENCH_RESULTS)/note.md
	@out=$(BENCH_RESULTS); skip() { echo "- $$1 did not run: $$2." >> $$out/note.md; echo "bench-report: $$1 not measured ($$2)" >&2; }; \
	$(MAKE) --no-print-directory bench BENCH_ARGS="--quiet --json $$out/module.json $(BENCH_REPORT_ARGS)" || skip '`make bench`' "it failed"; \
	for f in $(BENCH_REPORT_FLAVORS); do \
		$(MAKE) --no-print-directory bench-python BENCH_ARGS="--flavor $$f --json $$out/python-$$f.json $(BENCH_REPORT_CLIENT_ARGS)" || skip '`make bench-python`'" on $$f" "it failed"; \
		$(MAKE) --no-print-directory bench-node NODE_BENCH_ARGS="--flavor $$f --json ../../$$out/node-$$f.json $(BENCH_REPORT_CLIENT_ARGS)" || skip '`make bench-node`'" on $$f" "it failed or node is missing"; \
	done; \
	for lang in java go; do \
		if ! $(MAKE) -n bench-$$lang >/dev/null 2>&1; then skip "\`make bench-$$lang\`" "no such target in this tree"; continue; fi; \
		for f in $(BENCH_REPORT_FLAVORS); do \
			$(MAKE) --no-print-directory bench-$$lang FLAVOR=$$f BENCH_JSON=$(CURDIR)/$$out/$$lang-$$f.json || skip "\`make bench-$$lang\` on $$f" "it failed"; \
		done; \
	done
	echo "- Load average when it ended, at $$(date -u '+%H:%M UTC'): $$(cut -d' ' -f1-3 /proc/loadavg)." >> $(BENCH_RESULTS)/note.md
	scripts/bench-report --readme README.md

# The report's generator on the committed sample of real short runs: the report and the plots
# must rebuild from them byte for byte (bench/report/README.md).
test-bench-report: $(PY_VENV)/.report-ready
	$(PY_VENV)/bin/python bench/report/test_results.py
	scripts/bench-report --results bench/report/sample --out bench/report/sample/out --check

$(PY_VENV)/.report-ready: bench/report/requirements.txt $(PY_VENV)/.ready
	$(PY_VENV)/bin/pip install -q --disable-pip-version-check -r bench/report/requirements.txt
	touch $@

# The cost check: server instructions per uncontended pair on each path (plain, FAIR, TOKEN,
# REQ, READ, WRITE, RSEM.ACQUIRE/RELEASE, RSEM.LEASE/RETURN, a guarded SET), counted by callgrind on the release
# module, against bench/cost-baseline.toml; fails on a path more than 5 % above its baseline.
# `make cost-baseline` measures and rewrites the baseline: commit it in the same commit as the
# change that moved the numbers, saying why (docs/PROFILE.md, "Cost check").
cost-check:
	scripts/deps.sh build redis redis8 valkey valgrind
	$(CARGO) build --release -p rlock
	RLOCK_MODULE=$(RELEASE_MODULE) $(CARGO) run -q -p rlock-bench --bin rlock-cost -- $(COST_ARGS)

cost-baseline:
	scripts/deps.sh build redis redis8 valkey valgrind
	$(CARGO) build --release -p rlock
	RLOCK_MODULE=$(RELEASE_MODULE) $(CARGO) run -q -p rlock-bench --bin rlock-cost -- --update $(COST_ARGS)

# The chaos suite: random calls and faults on every server, checked histories (locks,
# read-write locks, semaphores, latches), the fuzzer and the keyspace churn. Default: 10
# minutes of load (restarts and failovers), 5 minutes of unplanned failovers (a primary
# killed and its standby promoted every 2 s), 2.5 minutes in a 3-primary cluster
# (resharding, manual failovers and takeovers of a killed primary's shard), 1,000,000 fuzzed
# calls, 160,000 churn calls and 2 minutes of the deadlock workload per server: about two
# hours in all on 2 cores. Any seed it prints reproduces: make chaos CHAOS_ARGS="--seed N".
# `make test` runs a short slice (12 s of load over the restarts and failovers phases, 6 s of
# unplanned failovers, 3 s in the cluster, the deadlock workload 4 s per server: about 4
# minutes on this loaded machine).
CHAOS_ARGS ?=
CHAOS_SLICE_ARGS ?= --seconds 12 --fuzz-calls 12000 --churn-calls 24000 --deadlock-seconds 4 --guard-seconds 4 --seed 20261123
chaos:
	scripts/deps.sh build redis redis8 valkey
	$(CARGO) build --release -p rlock -p rlock-chaos
	RLOCK_MODULE=$(RELEASE_MODULE) $(CARGO) run --release -q -p rlock-chaos -- $(CHAOS_ARGS)

# The Node client against raw commands on the same driver, redlock 4 and redis-semaphore's Mutex
# (docs/BENCHMARKS.md, "The Node client"): server on core 0, node on core 1, medians of rounds.
# NODE_BENCH_ARGS: --flavor redis|redis8|valkey, --rounds N, --seconds S.
NODE_BENCH_ARGS ?=
bench-node:
	scripts/deps.sh build redis redis8 valkey node
	$(CARGO) build --release -p rlock
	cd clients/node && npm ci --no-audit --no-fund && npm run build
	cd clients/node && RLOCK_MODULE=$(RELEASE_MODULE) node bench/bench.mjs $(NODE_BENCH_ARGS)

# The Java client (clients/java: the rlock-client jar, the Spring module and the Redisson suite,
# which runs the real Redisson beside rlock on the three servers): Maven fetches the pom's pinned
# dependencies from Maven Central. JAVA_TEST_ARGS goes to mvn (-Dtest=..., -pl rlock-client);
# RLOCK_FLAVORS narrows the servers.
JAVA_TEST_ARGS ?=
test-java:
	scripts/deps.sh build redis redis8 valkey java
	$(CARGO) build -p rlock
	cd clients/java && env $$(../../scripts/deps.sh --servers) RLOCK_MODULE=$(DEBUG_MODULE) mvn -B verify $(JAVA_TEST_ARGS)

# The Java client against raw Lettuce, Redisson's RLock and Spring's RedisLockRegistry
# (docs/BENCHMARKS.md): server on core 0, the JVM on core 1, medians of rounds.
# JAVA_BENCH_ARGS: --flavors redis,redis8,valkey, and clients/java/bench/run.sh's others.
# FLAVOR (redis, redis8 or valkey) runs that server alone; BENCH_JSON is the results file
# (schema rlock-bench/1, bench/report/README.md; default clients/java/bench/target/bench-java.json).
JAVA_BENCH_ARGS ?=
bench-java:
	scripts/deps.sh build redis redis8 valkey java
	$(CARGO) build --release -p rlock
	env $$(scripts/deps.sh --servers) RLOCK_MODULE=$(RELEASE_MODULE) clients/java/bench/run.sh $(JAVA_BENCH_ARGS) \
		$(if $(FLAVOR),--flavors $(FLAVOR)) $(if $(BENCH_JSON),--json $(abspath $(BENCH_JSON)))

deps:
	scripts/deps.sh build redis redis8 valkey python pyvenv valgrind tmux node java go monitoring

# Removes the packages the project installs, runs `make run` and `make test` in a fresh clone,
# restores them. Needs root; CI runs it.
prove-setup:
	scripts/prove-setup.sh

# Builds docker/Dockerfile with buildah on stand-in base images (debootstrap, this machine's Rust
# toolchain), runs the image's CMD and checks from the host that rlock answers; checks
# docker/compose.yaml. Needs root and the network; 3 minutes of CPU (README.md). CI runs it.
docker-test:
	scripts/deps.sh docker redis
	scripts/docker-test.sh

clean:
	$(CARGO) clean
