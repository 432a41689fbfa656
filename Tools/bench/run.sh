#!/usr/bin/env bash
# Side-by-side speed of kc against its C floor, in one run (docs/BENCHMARKS.md):
#   1. a Keychain read in-process vs the raw libkeyutils search+search+read (raw_read.c),
#      with 1, 10, 100 and 1000 services and with 1000 items in one service;
#   2. `kc get` as a whole process vs `keyctl pipe` of the same key (hyperfine), and
#      every command a script calls in a loop vs its keyctl peer (commands.py);
#   3. the mount: `cat` and an open+read+close loop against tmpfs and a minimal C libfuse
#      filesystem, `ls -l` of 1000 items against tmpfs, the daemon's memory.
# Runs in a fresh session keyring and removes what it made.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/Tools/bench/out"
mkdir -p "$out"
export PATH="/opt/swift/usr/bin:$PATH"
bash "$root/Tools/install-deps.sh" --tests

swift build -c release --package-path "$root" --product kc >&2
swift build -c release --package-path "$root" --product kc-mountd >&2
swift build -c release --package-path "$root/Tools/bench" >&2
cc -O2 -o "$out/raw_read" "$root/Tools/bench/raw_read.c" -lkeyutils
cc -O2 -o "$out/minimal_fuse" "$root/Tools/bench/minimal_fuse.c" $(pkg-config --cflags --libs fuse3)
cc -O2 -o "$out/open_read_loop" "$root/Tools/bench/open_read_loop.c"

KC="$root/.build/release/kc" BENCH="$root/Tools/bench/.build/release/keychain-bench" RAW="$out/raw_read" \
    OUT="$out" ITERATIONS="${ITERATIONS:-20000}" ROUNDS="${ROUNDS:-5}" \
    keyctl session - bash "$root/Tools/bench/measure.sh"
echo
echo "## Every command a script calls in a loop, against keyctl (alternately, ${COMMAND_ROUNDS:-200} rounds)"
keyctl session - python3 "$root/Tools/bench/commands.py" "$root/.build/release/kc" "${COMMAND_ROUNDS:-200}"
echo
KC="$root/.build/release/kc" BENCH="$root/Tools/bench/.build/release/keychain-bench" MINIMAL="$out/minimal_fuse" \
    LOOP="$out/open_read_loop" OUT="$out" ITERATIONS="${ITERATIONS:-20000}" ROUNDS="${ROUNDS:-5}" \
    keyctl session - bash "$root/Tools/bench/measure_fuse.sh"
