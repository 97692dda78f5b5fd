#!/usr/bin/env bash
# `make dist`: every artifact a user installs, built from this checkout into dist/, each checked by
# its ecosystem's own tool (docs/PACKAGES.md):
#   rlock-<v>-linux-<arch>.tar.gz (+ .sha256)   the module and the `rlock` tool, with a README
#   rlock-client-<v>.crate                       cargo package (which builds the packaged source)
#   rlock_client-<v>-py3-none-any.whl, .tar.gz   python -m build, then twine check
#   rlock-client-<v>.tgz                         npm pack (prepack builds dist/), publint, attw
#   rlock-client-<v>.jar, rlock-spring-<v>.jar   mvn verify (clients/java, where present)
#   rlock-go-<v>.tar.gz                          go vet and go mod tidy -diff; the module's source (`replace` target)
# Usage: scripts/dist.sh [module crate python node java go]   (default: all that the tree has)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DIST=$ROOT/dist
PY=${DIST_PYTHON:-$ROOT/.venv/bin/python}
version=$(python3 scripts/versions.py --print)
arch=$(uname -m)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(module crate python node)
    [ -f clients/java/pom.xml ] && targets+=(java)
    [ -f clients/go/go.mod ] && targets+=(go)
fi
step() { printf '\ndist: %s\n' "$*"; }

python3 scripts/versions.py
mkdir -p "$DIST"

for target in "${targets[@]}"; do
    case "$target" in
    module)
        step "module and tool tarball"
        cargo build -q --release -p rlock -p rlock-cli
        name=rlock-$version-linux-$arch
        stage=$(mktemp -d)
        mkdir "$stage/$name"
        cp "${CARGO_TARGET_DIR:-target}/release/librlock.so" "${CARGO_TARGET_DIR:-target}/release/rlock" \
            LICENSE CHANGELOG.md "$stage/$name/"
        sed "s/@VERSION@/$version/g" scripts/dist/README-module.md >"$stage/$name/README.md"
        (cd "$stage/$name" && sha256sum librlock.so rlock >SHA256SUMS)
        tar -C "$stage" --owner=0 --group=0 --sort=name -czf "$DIST/$name.tar.gz" "$name"
        rm -rf "$stage"
        (cd "$DIST" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
        ;;
    crate)
        step "client crate (cargo package)"
        # The workspace's target dir: the packaged source's build reuses the compiled dependencies.
        cargo package -q -p rlock-client --allow-dirty
        cp "${CARGO_TARGET_DIR:-target}/package/rlock-client-$version.crate" "$DIST/"
        ;;
    python)
        step "Python wheel and sdist (python -m build, twine check)"
        rm -f "$DIST"/rlock_client-* "$DIST"/rlock-client-*.whl
        "$PY" -m build -q --sdist --wheel --outdir "$DIST" clients/python >/dev/null
        "$PY" -m twine check --strict "$DIST/rlock_client-$version"*
        ;;
    node)
        step "npm tarball (npm pack builds it; publint, attw)"
        (cd clients/node && npm ci -s --no-audit --no-fund && npm pack -s --pack-destination "$DIST" >/dev/null)
        tgz=$DIST/rlock-client-$version.tgz
        # grep reads the whole listing (no -q), so tar never dies of a closed pipe under pipefail.
        tar -tzf "$tgz" | grep '^package/dist/esm/index.js$' >/dev/null \
            || { echo "dist: $tgz has no dist/esm/index.js: packing did not build" >&2; exit 1; }
        (cd clients/node && npx --no-install publint --strict "$tgz" && npx --no-install attw --pack "$tgz" --format ascii)
        ;;
    java)
        step "Java jars (mvn verify)"
        (cd clients/java && mvn -B -q -DskipTests verify)
        cp "clients/java/rlock-client/target/rlock-client-$version.jar" \
            "clients/java/rlock-spring/target/rlock-spring-$version.jar" "$DIST/"
        ;;
    go)
        step "Go module (go vet, go mod tidy -diff, source archive)"
        (cd clients/go && go vet ./... && go mod tidy -diff && go mod verify >/dev/null)
        git archive --format=tar.gz --prefix="rlock-go-$version/" -o "$DIST/rlock-go-$version.tar.gz" HEAD:clients/go
        ;;
    *)
        echo "dist: no artifact called '$target' (module crate python node java go)" >&2
        exit 2
        ;;
    esac
done
step "done: $(cd "$DIST" && ls | tr '\n' ' ')"
