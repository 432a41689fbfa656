#!/usr/bin/env bash
# The vault's costs, side by side (docs/BENCHMARKS.md, "The vault"):
#   - kc get with and without a vault (and, with BEFORE=path, a kc built before the vault)
#   - kc set: --ephemeral, with the vault on disk, with the vault on tmpfs (the fsync's
#     share), pass insert (gpg) and secret-tool store (gnome-keyring), where installed
#   - kc unlock of 0 and of 200 items at the same work factor: the items' own cost
# Usage: [BEFORE=/path/to/old/kc] [RUNS=300] bash Tools/bench/vault.sh
# Run as root or a user; it works in a throwaway session keyring and temp folders.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
runs=${RUNS:-300}
(cd "$root" && swift build -c release --product kc >/dev/null)
export KC="$root/.build/release/kc"
work=$(mktemp -d /var/tmp/kc-bench-vault.XXXXXX)
ram=$(mktemp -d /dev/shm/kc-bench-vault.XXXXXX)
trap 'rm -rf "$work" "$ram"' EXIT
export work ram runs BEFORE="${BEFORE:-}"
head -c 40 /dev/urandom | base64 > "$work/value"

keyctl session - bash -s <<'INNER'
set -euo pipefail
printf %s secret | $KC set bench.vault token
serial=$(keyctl search @s keyring kc:bench.vault)
key=$(keyctl search "$serial" user token)
echo "== kc get, no vault"
olds=(); [ -n "$BEFORE" ] && olds=(-n "kc get (before the vault)" "$BEFORE get bench.vault token")
XDG_DATA_HOME=$work/none hyperfine -N --warmup 100 --runs "$runs" --export-markdown "$work/get.md" \
    -n "kc get (no vault)" "$KC get bench.vault token" "${olds[@]}" -n "keyctl pipe" "keyctl pipe $key"
echo "== kc get, with a vault (the read path does not touch it)"
export XDG_DATA_HOME=$work/disk
printf pw | $KC vault init --work-factor 18 >/dev/null 2>&1
hyperfine -N --warmup 100 --runs "$runs" -n "kc get (vault)" "$KC get bench.vault token"

echo "== kc set"
XDG_DATA_HOME=$ram/vault bash -c 'printf pw | $KC vault init --work-factor 10' >/dev/null 2>&1
hyperfine --warmup 20 --runs "$runs" \
    -n "kc set --ephemeral" "$KC set --ephemeral bench.vault token < $work/value" \
    -n "kc set (vault on disk)" "$KC set bench.vault token < $work/value" \
    -n "kc set (vault on tmpfs: no fsync cost)" "XDG_DATA_HOME=$ram/vault $KC set bench.vault token < $work/value"
$KC lock >/dev/null 2>&1 || true
XDG_DATA_HOME=$ram/vault $KC lock >/dev/null 2>&1 || true
INNER

if command -v pass >/dev/null && command -v gpg >/dev/null; then
    echo "== pass insert (gpg, no passphrase on the key)"
    export GNUPGHOME="$work/gnupg" PASSWORD_STORE_DIR="$work/pass"
    mkdir -m 700 "$GNUPGHOME"
    gpg --batch --quiet --passphrase '' --quick-gen-key kc-bench@example.invalid default default never 2>/dev/null
    pass init kc-bench@example.invalid >/dev/null
    hyperfine --warmup 5 --runs 50 -n "pass insert" "pass insert -m -f bench/token < $work/value"
    gpgconf --kill all 2>/dev/null || true
fi
if command -v secret-tool >/dev/null && command -v gnome-keyring-daemon >/dev/null && command -v dbus-run-session >/dev/null; then
    echo "== secret-tool store (gnome-keyring)"
    HOME="$work/home" dbus-run-session -- bash -c '
        mkdir -p "$HOME"
        printf pw | gnome-keyring-daemon --unlock --components=secrets >/dev/null
        hyperfine --warmup 5 --runs 100 -n "secret-tool store" "secret-tool store --label=bench service bench key token < $work/value"
    ' || echo "(secret-tool could not run here)"
fi

echo "== kc unlock: 0 items vs 200 items, work factor 10"
keyctl session - bash -s <<'INNER'
set -euo pipefail
export XDG_DATA_HOME=$work/unlock0
printf pw | $KC vault init --work-factor 10 >/dev/null 2>&1
printf pw > "$work/pw"
hyperfine --warmup 3 --runs 30 -n "unlock, 0 items" "$KC unlock < $work/pw"
$KC lock >/dev/null 2>&1
export XDG_DATA_HOME=$work/unlock200
printf pw | $KC vault init --work-factor 10 >/dev/null 2>&1
for i in $(seq 1 200); do printf 'value-%03d' "$i" | $KC set --access after-first-unlock bench.unlock "item$i"; done
hyperfine --warmup 1 --runs 20 --prepare "$KC lock --level after-first-unlock >/dev/null 2>&1" \
    -n "unlock, 200 items" "$KC unlock < $work/pw"
$KC lock --level after-first-unlock >/dev/null 2>&1
$KC rm bench.unlock 2>/dev/null || true
INNER
