#!/usr/bin/env bash
# Issue 29: the credential helpers' `get` served by kc's front (Front/CredentialHelpers.swift,
# docs/FRONT.md), against `keyctl pipe`, the static C floor (raw_get.c), a static C program
# making the front's own calls (raw_git_get.c) and the full kc
# (Tools/bench/front_helpers.py; docs/BENCHMARKS.md).
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
[ -x "$bin/kc-front" ] || { echo "front_helpers.sh: no front was built (see above)" >&2; exit 1; }
cc -O2 -static -o "$out/raw_get" "$root/Tools/bench/raw_get.c" -lkeyutils
cc -O2 -static -o "$out/raw_git_get" "$root/Tools/bench/raw_git_get.c" -lkeyutils

FRONT="$bin/kc-front" KC="$bin/kc" RAW_GET="$out/raw_get" RAW_GIT_GET="$out/raw_git_get" \
    keyctl session - python3 "$root/Tools/bench/front_helpers.py"
