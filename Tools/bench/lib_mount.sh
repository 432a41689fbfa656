#!/usr/bin/env bash
# Issue 29's library read and the mount's `ls -l` rows of Tools/bench/run.sh, alone
# (Tools/bench/lib_mount.py; docs/BENCHMARKS.md). Builds the release kc and kc-mountd, the
# in-process benchmark, raw_read.c and minimal_fuse.c, and runs both rows in a fresh
# session keyring. BEFORE_KC and BEFORE_BENCH (another build's kc and keychain-bench,
# kc-mountd beside that kc) add that build to each row, interleaved.
#   ITERATIONS, LOOP_ROUNDS, LS_ROUNDS   as in lib_mount.py
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/Tools/bench/out"
mkdir -p "$out"
export PATH="/opt/swift/usr/bin:$PATH"

swift build -c release --package-path "$root" --product kc >&2
swift build -c release --package-path "$root" --product kc-mountd >&2
swift build -c release --package-path "$root/Tools/bench" >&2
cc -O2 -o "$out/raw_read" "$root/Tools/bench/raw_read.c" -lkeyutils
cc -O2 -o "$out/minimal_fuse" "$root/Tools/bench/minimal_fuse.c" $(pkg-config --cflags --libs fuse3)

KC="$root/.build/release/kc" BENCH="$root/Tools/bench/.build/release/keychain-bench" RAW="$out/raw_read" \
    MINIMAL="$out/minimal_fuse" keyctl session - python3 "$root/Tools/bench/lib_mount.py"
