# Shortcuts. `make run` starts redis-server with the module; `make test` runs every test.
PORT ?= 6379
CARGO ?= cargo
RELEASE_MODULE := target/release/librlock.so
DEBUG_MODULE := target/debug/librlock.so

.PHONY: build run test unit lint bench deps clean

build:
	scripts/deps.sh build
	$(CARGO) build --release -p rlock

run: build
	scripts/deps.sh redis
	@echo
	@echo "rlock loaded on port $(PORT). Try, in another terminal:"
	@echo "    redis-cli -p $(PORT) RLOCK.ACQUIRE orders worker-1 LEASE 30000"
	@echo
	redis-server --port $(PORT) --save "" --appendonly no --loadmodule $(CURDIR)/$(RELEASE_MODULE)

test:
	scripts/deps.sh build redis valkey python
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) build -p rlock
	RLOCK_MODULE=$(CURDIR)/$(DEBUG_MODULE) $(CARGO) test --workspace
	RLOCK_MODULE=$(CURDIR)/$(DEBUG_MODULE) python3 examples/python/run_example.py

unit:
	$(CARGO) test -p rlock

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench:
	scripts/deps.sh build redis valkey
	$(CARGO) build --release -p rlock
	RLOCK_MODULE=$(CURDIR)/$(RELEASE_MODULE) $(CARGO) run --release -p rlock-bench -- $(BENCH_ARGS)

clean:
	$(CARGO) clean
