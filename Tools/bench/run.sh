#!/usr/bin/env bash
# Issues 17 and 29's benchmark: every command a script calls in a loop against the keyctl (or
# plain) command doing the same kernel work, `kc get` against a static C program, the
# same at 1 to 1000 services and with 1000 items in one service, the mount against a
# minimal C libfuse filesystem with the same cache policy, and peak memory; one table
# of kc, peer and ratio, measured in one run (Tools/bench/table.py; docs/BENCHMARKS.md).
#   ROUNDS       whole-process rounds per row (default 200)
#   ITERATIONS   reads per in-process or open+read+close loop (default 20000)
#   LOOP_ROUNDS  such loops per row (default 5)
# Runs in a fresh session keyring, as the caller, and removes what it made.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/Tools/bench/out"
mkdir -p "$out"
export PATH="/opt/swift/usr/bin:$PATH"
bash "$root/Tools/install-deps.sh" --tests

swift build -c release --package-path "$root" --product kc >&2
swift build -c release --package-path "$root" --product kc-mountd >&2
swift build -c release --package-path "$root/Tools/bench" >&2
# kc as Tools/setup.sh installs it: the front, with the full kc beside it as kc-full
# (docs/FRONT.md); the full kc alone where this toolchain builds no front.
bash "$root/Tools/build-front.sh" --release
bin=$(swift build -c release --package-path "$root" --show-bin-path)
if [ -x "$bin/kc-front" ]; then kc="$bin/kc-front" front=1; else kc="$bin/kc" front=0; fi
echo "run.sh: kc is $kc" >&2
cc -O2 -o "$out/raw_read" "$root/Tools/bench/raw_read.c" -lkeyutils
cc -O2 -static -o "$out/raw_get" "$root/Tools/bench/raw_get.c" -lkeyutils
cc -O2 -o "$out/minimal_fuse" "$root/Tools/bench/minimal_fuse.c" $(pkg-config --cflags --libs fuse3)
cc -O2 -o "$out/open_read_loop" "$root/Tools/bench/open_read_loop.c"
cc -O2 -static -o "$out/peak_rss" "$root/Tools/bench/peak_rss.c"

KC="$kc" KC_FRONT="$front" BENCH="$root/Tools/bench/.build/release/keychain-bench" RAW="$out/raw_read" \
    RAW_GET="$out/raw_get" MINIMAL="$out/minimal_fuse" LOOP="$out/open_read_loop" PEAK_RSS="$out/peak_rss" \
    keyctl session - python3 "$root/Tools/bench/table.py"
