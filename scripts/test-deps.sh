#!/usr/bin/env bash
# Tests scripts/deps.sh's libclang check against fake library trees: it must find libclang
# where clang-sys would, and never take libclang-cpp (another library) for it.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

expect() { # expect present|missing <LIBCLANG_PATH> <what>
    local want=$1 path=$2 what=$3 got=missing
    if LIBCLANG_PATH=$path scripts/deps.sh --check build 2>/dev/null; then got=present; fi
    if [ "$got" = "$want" ]; then passed=$((passed + 1)); else
        failed=$((failed + 1)); echo "FAIL: $what: deps.sh says libclang is $got, want $want"; fi
}
tree() { # tree <dir> <files...>: empty files, parents made
    local dir=$1 f; shift
    for f in "$@"; do mkdir -p "$(dirname "$dir/$f")"; : >"$dir/$f"; done
}

tree "$tmp/cpp-only" libclang-cpp.so.14 libclang-cpp.so clang/14.0.6/include/stddef.h
expect missing "$tmp/cpp-only" "only libclang-cpp (the false positive that broke fresh builds)"
tree "$tmp/no-headers" libclang.so.1
expect missing "$tmp/no-headers" "libclang without clang's builtin headers"
tree "$tmp/versioned" libclang-14.so.1 clang/14.0.6/include/stddef.h
expect present "$tmp/versioned" "libclang-14.so.1 with headers"
tree "$tmp/plain" libclang.so libclang-cpp.so.14 clang/14.0.6/include/stddef.h
expect present "$tmp/plain" "libclang.so with headers"
expect present "$tmp/plain/libclang.so" "LIBCLANG_PATH naming the library file"
expect missing "$tmp/plain/libclang-cpp.so.14" "LIBCLANG_PATH naming libclang-cpp"
expect missing "$tmp/does-not-exist" "LIBCLANG_PATH naming nothing"

echo "deps check: $passed passed, $failed failed"
[ "$failed" = 0 ]
