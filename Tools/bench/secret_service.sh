#!/usr/bin/env bash
# Issue 27's "Speed": kc-secretd against gnome-keyring-daemon, side by side, in one run, one
# markdown table (docs/BENCHMARKS.md, "The Secret Service"):
#   - the three calls of one lookup (OpenSession with DH, SearchItems by service and
#     username, GetSecrets) from a client that stays connected to both, alternately
#     (secret_lookup.c over sd-bus), with each call's share, the same with a plain
#     session, three Peer.Ping calls as the floor, OpenSession DH against plain
#   - `secret-tool lookup` wall time against both, alternately, and `kc get` for scale
#   - each daemon's idle memory (VmRSS, Pss) after the runs
# and issue 37's, first: on one connection to each daemon, SearchItems, GetSecrets and
# Item.GetSecret, each right after a Peer.Ping (medians, p95, per-round ratios), each
# daemon's idle memory after start and after the runs, and kc-secretd's by mapping (smaps);
# and the kernel's part of those calls without D-Bus (secret_lookup keyring), and the same
# round against a provider that does no work (bus_floor_service.c): the floor of the calls' shapes
#   FLOOR_ROUNDS    issue 37's rounds (default 5000)
#   PARTS           all (default) or floor: issue 37's table and the memory alone
#   ROUNDS          interleaved three-call lookups (default 2000)
#   OPEN_ROUNDS     rounds of the plain lookup, Peer.Ping and OpenSession (default 2000)
#   PROCESS_ROUNDS  rounds of secret-tool lookup and kc get (default 1000)
#   WARMUP          rounds of each kind not counted (default 50)
# Each daemon has a session bus of its own; it all runs in a fresh session keyring, as the
# caller, and removes what it made (Tools/bench/secret_service.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/Tools/bench/out"
mkdir -p "$out"
export PATH="/opt/swift/usr/bin:$PATH"
for tool in dbus-daemon dbus-send gnome-keyring-daemon secret-tool keyctl cc pkg-config; do
    command -v "$tool" >/dev/null || { echo "secret_service.sh: $tool is missing (dbus-daemon, dbus-bin, gnome-keyring, libsecret-tools, keyutils, build-essential)" >&2; exit 1; }
done
pkg-config --exists libsystemd libcrypto || { echo "secret_service.sh: needs libsystemd-dev and libssl-dev" >&2; exit 1; }

swift build -c release --package-path "$root" --product kc >&2
swift build -c release --package-path "$root" --product kc-secretd >&2
cc -O2 -Wall -o "$out/secret_lookup" "$root/Tools/bench/secret_lookup.c" $(pkg-config --cflags --libs libsystemd libcrypto)
cc -O2 -Wall -o "$out/bus_floor_service" "$root/Tools/bench/bus_floor_service.c" $(pkg-config --cflags --libs libsystemd)

commit=$(git -C "$root" rev-parse --short HEAD)
git -C "$root" diff --quiet HEAD -- Sources Package.swift || commit="$commit (Sources changed)"

COMMIT="$commit" KC="$root/.build/release/kc" SECRETD="$root/.build/release/kc-secretd" LOOKUP="$out/secret_lookup" FLOOR_SERVICE="$out/bus_floor_service" \
    keyctl session - python3 "$root/Tools/bench/secret_service.py"
