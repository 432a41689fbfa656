#!/usr/bin/env bash
# Builds kc's front (Front/ and the keyring core, docs/FRONT.md) with Embedded Swift,
# linked statically against libkeyutils: no Swift runtime to set up before main, so a
# `kc get` it serves costs what a static C program costs. SwiftPM cannot build it (its
# link adds the full runtime).
#
#   Tools/build-front.sh [--release]
#
# Writes BIN/kc-front, BIN being SwiftPM's folder of the debug (default) or release
# build, and links BIN/kc-full to BIN/kc: the front executes the `kc-full` beside it,
# which here is the full kc that SwiftPM built. (Installed, `kc` is the front and
# `kc-full` the full kc.)
#
# Where this toolchain has no Embedded Swift for this machine, or there is no static
# libkeyutils or libc to link, it says so and exits 0 without a front: the front's tests
# then skip. A front that does not compile is an error (exit 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
configuration=debug
[ "${1:-}" = "--release" ] && configuration=release
bin=$(swift build --package-path "$root" -c "$configuration" --show-bin-path)
work=$(mktemp -d "${TMPDIR:-/tmp}/kc-front.XXXXXX")
trap 'rm -rf "$work"' EXIT
skip() {
    echo "build-front: no front built: $1 (its tests skip)" >&2
    rm -f "$bin/kc-front"
    exit 0
}

# Can this toolchain compile Embedded Swift for this machine at all?
embedded=(-enable-experimental-feature Embedded -wmo -parse-as-library)
printf '@_cdecl("main") func main() -> Int32 { 0 }\n' > "$work/probe.swift"
swiftc "${embedded[@]}" -c "$work/probe.swift" -o "$work/probe.o" 2> "$work/probe.log" \
    || skip "this Swift toolchain cannot compile Embedded Swift here ($(grep -m1 'error' "$work/probe.log" || head -1 "$work/probe.log"))"
compiler=$(command -v cc || command -v gcc || command -v clang || true)
[ -n "$compiler" ] || skip "no C compiler to link with"
"$compiler" -static -o "$work/probe" "$work/probe.o" -lkeyutils 2> "$work/link.log" \
    || skip "no static libkeyutils or libc to link against (libkeyutils-dev, libc6-dev): $(head -1 "$work/link.log")"

# The front is its own files and the keyring core (Sources/KeyringCore), the same files
# SwiftPM builds into the full kc, compiled as one module over the C module map that
# Keyrings uses (Sources/CKeyutils).
swiftc "${embedded[@]}" -Osize -I "$root/Sources/CKeyutils" -c "$root"/Sources/KeyringCore/*.swift "$root"/Front/*.swift -o "$work/front.o"
mkdir -p "$bin"
"$compiler" -static -s -o "$bin/kc-front" "$work/front.o" -lkeyutils
ln -sfn kc "$bin/kc-full"
echo "build-front: $bin/kc-front ($(stat -c %s "$bin/kc-front") bytes), executing $bin/kc-full -> kc" >&2
