#!/usr/bin/env bash
# Issue 29's prototype benchmark: kc's front (Front/, docs/FRONT.md) serving `kc get`
# (a hit, a miss without a vault), `kc ls S`, `kc set` of an existing item, `kc rm` and
# `kc exec --env`, against the static C floor (raw_get.c),
# their keyctl peers and the full kc, and what a command it hands over pays for the extra
# exec (Tools/bench/front.py; docs/BENCHMARKS.md).
#   ROUNDS   interleaved pairs per row (default 300)
# Runs in a fresh session keyring, as the caller, and removes what it made.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/Tools/bench/out"
mkdir -p "$out"
export PATH="/opt/swift/usr/bin:$PATH"

swift build -c release --package-path "$root" --product kc >&2
bash "$root/Tools/build-front.sh" --release
bin=$(swift build -c release --package-path "$root" --show-bin-path)
[ -x "$bin/kc-front" ] || { echo "front.sh: no front was built (see above)" >&2; exit 1; }
cc -O2 -static -o "$out/raw_get" "$root/Tools/bench/raw_get.c" -lkeyutils
cc -O2 -static -o "$out/peak_rss" "$root/Tools/bench/peak_rss.c"

OUT="$out" FRONT="$bin/kc-front" KC="$bin/kc" RAW_GET="$out/raw_get" PEAK_RSS="$out/peak_rss" \
    keyctl session - python3 "$root/Tools/bench/front.py"
