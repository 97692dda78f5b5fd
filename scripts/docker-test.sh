#!/usr/bin/env bash
# make docker-test: builds docker/Dockerfile with buildah, without a Docker engine or an image
# registry, runs the image's own CMD and checks from the host that the module answers.
#
# The base images are stand-ins made here, under the names the Dockerfile uses, and the build
# never pulls (--pull=never):
#   debian:bookworm-slim  debootstrap --variant=minbase bookworm from Debian's mirror
#                         (DEBIAN_MIRROR), with the policy-rc.d of Docker's Debian images
#   rust:1-bookworm       that, with gcc, libc6-dev, ca-certificates (and this machine's own
#                         authorities) and this machine's Rust toolchain (rustc --print sysroot)
#                         in /usr/local
# Everything, images included, lives in a buildah storage directory of its own, removed at the
# end. Needs root (debootstrap, buildah's chroot isolation) and the network (Debian's mirror,
# crates.io). Usage: scripts/docker-test.sh [--keep | --reuse DIR]
#   --keep: leave the storage in /tmp; --reuse DIR: run and check the image built in a storage
#   kept before, without building anything (and keep it)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
keep=no reuse=
case "${1:-}" in
--keep) keep=yes ;;
--reuse) reuse=${2:?--reuse DIR}; keep=yes ;;
esac

if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null; then exec sudo -n --preserve-env=PATH,DEBIAN_MIRROR "$0" "$@"; fi
    echo "docker-test: needs root (debootstrap and buildah's chroot isolation)" >&2
    exit 1
fi
step() { printf '\ndocker-test: %s (%ss)\n' "$*" "$SECONDS"; }
fail() { echo "docker-test: $*" >&2; exit 1; }

if [ -n "$reuse" ]; then work=$reuse; else work=$(mktemp -d /tmp/rlock-docker.XXXXXX); fi
bh() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }
server_pid=
cleanup() {
    local status=$?
    if [ -n "$server_pid" ]; then
        redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
        for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    bh rm --all >/dev/null 2>&1 || true
    if [ "$keep" = no ]; then
        # vfs leaves nothing mounted once its containers are gone; unmount anyway, then remove.
        grep -o " $work[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
        rm -rf "$work"
    else
        echo "docker-test: storage kept in $work"
    fi
    exit "$status"
}
trap cleanup EXIT

build() {
step "stand-in debian:bookworm-slim: debootstrap --variant=minbase bookworm"
ctr=$(bh from scratch)
mnt=$(bh mount "$ctr")
debootstrap --variant=minbase bookworm "$mnt" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; fail "debootstrap failed"; }
# As in Docker's Debian images: no service starts when a package is installed.
printf '#!/bin/sh\nexit 101\n' >"$mnt/usr/sbin/policy-rc.d"
chmod 755 "$mnt/usr/sbin/policy-rc.d"
rm -rf "$mnt"/var/cache/apt/archives/*.deb "$mnt"/var/lib/apt/lists/*
bh umount "$ctr" >/dev/null
bh config --cmd bash "$ctr"
bh commit -q --rm "$ctr" docker.io/library/debian:bookworm-slim >/dev/null

step "stand-in rust:1-bookworm: gcc and this machine's Rust toolchain ($(rustc --version))"
sysroot=$(rustc --print sysroot)
[ -x "$sysroot/bin/cargo" ] || fail "no cargo in $sysroot/bin (rustup component add cargo)"
ctr=$(bh from --pull=never docker.io/library/debian:bookworm-slim)
mnt=$(bh mount "$ctr")
cp -a "$sysroot/bin/." "$mnt/usr/local/bin/"
cp -a "$sysroot/lib/." "$mnt/usr/local/lib/"
# The machine's own certificate authorities (a proxy in front of crates.io may sign with one):
# ca-certificates' installation below adds them to the bundle cargo reads.
mkdir -p "$mnt/usr/local/share/ca-certificates"
cp /usr/local/share/ca-certificates/*.crt "$mnt/usr/local/share/ca-certificates/" 2>/dev/null || true
bh umount "$ctr" >/dev/null
bh run --isolation chroot "$ctr" -- sh -c 'apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
       gcc libc6-dev ca-certificates >/dev/null && rm -rf /var/lib/apt/lists/*'
bh commit -q --rm "$ctr" docker.io/library/rust:1-bookworm >/dev/null

step "buildah bud -f docker/Dockerfile --pull=never"
bh bud --isolation chroot --pull=never -f docker/Dockerfile -t localhost/rlock:docker-test . \
    >"$work/build.log" 2>&1 || { tail -80 "$work/build.log" >&2; fail "the build failed"; }
grep -E '^\[[0-9]/[0-9]\] (STEP|COMMIT)' "$work/build.log" || true
}
[ -n "$reuse" ] || build

step "running the image's CMD"
bh inspect --type image localhost/rlock:docker-test >"$work/image.json"
mapfile -t argv < <(python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)["OCIv1"]["config"]["Cmd"]))' <"$work/image.json")
echo "CMD ${argv[*]}"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ctr=$(bh from --pull=never localhost/rlock:docker-test)
# The host's network (chroot isolation): --port moves the server off 6379 to a free port.
bh run --isolation chroot "$ctr" -- "${argv[@]}" --port "$port" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$port" PING 2>/dev/null)" = PONG ] && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; fail "the server exited"; }
    sleep 0.1
done

step "checking the server in the image from the host (port $port)"
want_version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
IFS=. read -r x y z <<<"$want_version"
want_ver=$((x * 10000 + y * 100 + z))
info=$(redis-cli -p "$port" INFO server | tr -d '\r')
redis_version=$(sed -n 's/^redis_version://p' <<<"$info")
readme_redis=$(sed -n 's/.*The image runs Debian 12.s Redis \([0-9.]*\).*/\1/p' README.md)
[ -n "$readme_redis" ] || fail "README.md does not say which Redis the image runs"
case "$redis_version" in "$readme_redis".*) ;; *) fail "Redis $redis_version in the image, README says $readme_redis" ;; esac
modules=$(redis-cli -p "$port" MODULE LIST | tr '\n' ' ')
grep -q "name rlock ver $want_ver " <<<"$modules " || fail "MODULE LIST: $modules, want rlock ver $want_ver"
rlock_version=$(redis-cli -p "$port" INFO rlock | tr -d '\r' | sed -n 's/^rlock_version://p')
[ "$rlock_version" = "$want_version" ] || fail "INFO rlock: rlock_version $rlock_version, want $want_version"
[ "$(redis-cli -p "$port" RLOCK.ACQUIRE docker-test owner-1 LEASE 5000)" = 1 ] || fail "RLOCK.ACQUIRE"
[ -z "$(redis-cli -p "$port" RLOCK.ACQUIRE docker-test owner-2)" ] || fail "RLOCK.ACQUIRE by another owner: not null"
[ "$(redis-cli -p "$port" RLOCK.RELEASE docker-test owner-1)" = 1 ] || fail "RLOCK.RELEASE"
[ "$(redis-cli -p "$port" CONFIG GET appendonly | tail -1)" = yes ] || fail "the CMD's --appendonly yes"
echo "Redis $redis_version (README: $readme_redis), rlock $rlock_version (MODULE LIST ver $want_ver): RLOCK.ACQUIRE / RLOCK.RELEASE answered"

step "checking docker/compose.yaml (docker-compose config)"
docker-compose -f docker/compose.yaml config -q
[ "$(docker-compose -f docker/compose.yaml config --services | sort | tr '\n' ' ')" = "redis replica " ] \
    || fail "compose.yaml: services redis and replica"

step "done: the image builds from docker/Dockerfile and serves rlock"
