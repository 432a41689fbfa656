#!/usr/bin/env bash
# Keyring system calls per operation (docs/BENCHMARKS.md, "Keyring calls per operation
# (issue 24)"). Counts with strace the keyring calls (add_key, keyctl, request_key) and
# the opens of /proc/keys that one operation makes, for:
#   kc get S K                       an existing item, no vault
#   kc set S K                       an existing item, value on stdin, no vault
#   kc set S NEW                     a new item in an existing service, no vault
#   kc set --timeout 1h S NEW        the same with a deadline
#   kc set NEWS K                    the first item of a new service, no vault
#   kc set S K (vault)               the same with a vault
#   mount save (no vault)            printf new > MNT/S/K of an existing item
#   mount save (vault)               the same, the daemon writing to a vault
#   mount save (vault, deadline)     the same on an item set with --timeout 1h
# For the mount the daemon's calls only, during the save (lookup, open, write, flush,
# release): strace attaches to the running kc-mountd (-f -p) around one printf, after
# one save that is not counted. Each CLI case is one process traced whole (-f).
#
# Usage: bash Tools/bench/keyring_calls.sh [--detail] [--sequence] [KC]
#   KC          the kc to measure; default .build/release/kc if built, else
#               .build/debug/kc. kc-mountd is taken from beside it. Builds nothing.
#   --detail    also each case's calls by kind (keyctl by operation: KEYCTL_SEARCH ...)
#   --sequence  also each case's keyring calls in order, as strace decodes them
#
# Needs strace, keyctl (keyutils), fusermount3 (fuse3) and /dev/fuse. It works in a fresh
# session keyring (keyctl session -), with services named kc-bench.calls.PID, vault
# folders and mount points under a temporary folder; at the end it unmounts, removes the
# items (and their deadline records), locks the vaults (their keys leave the user
# keyring) and removes the folder.
set -euo pipefail

if [ "${KC_CALLS_IN_SESSION:-}" != 1 ]; then
    root=$(cd "$(dirname "$0")/../.." && pwd)
    detail=0 sequence=0 kc=
    for argument in "$@"; do
        case $argument in
            --detail) detail=1 ;;
            --sequence) sequence=1 ;;
            -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
            -*) echo "keyring_calls.sh: unknown option $argument (see --help)" >&2; exit 2 ;;
            *) kc=$argument ;;
        esac
    done
    if [ -z "$kc" ]; then
        kc=$root/.build/release/kc
        [ -x "$kc" ] || kc=$root/.build/debug/kc
    fi
    kc=$(cd "$(dirname "$kc")" && pwd)/$(basename "$kc")
    for program in "$kc" "$(dirname "$kc")/kc-mountd"; do
        [ -x "$program" ] || { echo "keyring_calls.sh: $program is not built (swift build -c release)" >&2; exit 2; }
    done
    for program in strace keyctl fusermount3; do
        command -v "$program" >/dev/null || { echo "keyring_calls.sh: $program is not installed (Tools/install-deps.sh --tests)" >&2; exit 2; }
    done
    KC_CALLS_IN_SESSION=1 KC=$kc DETAIL=$detail SEQUENCE=$sequence \
        keyctl session - bash "$0" 2> >(grep -v '^Joined session keyring: ' >&2)
    exit
fi

work=$(mktemp -d /tmp/kc-bench-calls.XXXXXX)
novault=$work/no-vault      # never made: an XDG_DATA_HOME without a vault
vault=$work/vault
service=kc-bench.calls.$$
timed=kc-bench.calls-deadline.$$
traced="add_key,keyctl,request_key,open,openat"
mounts=() tracers=()

cleanup() {
    set +e
    for tracer in "${tracers[@]}"; do kill -INT "$tracer" 2>/dev/null; wait "$tracer" 2>/dev/null; done
    for mnt in "${mounts[@]}"; do
        "$KC" umount "$mnt" >/dev/null 2>&1 || fusermount3 -u -z "$mnt" 2>/dev/null
    done
    XDG_DATA_HOME=$novault "$KC" rm "$service" >/dev/null 2>&1
    if [ -d "$vault/kc" ]; then
        XDG_DATA_HOME=$vault "$KC" rm "$service" >/dev/null 2>&1
        XDG_DATA_HOME=$vault "$KC" rm "$timed" >/dev/null 2>&1
        XDG_DATA_HOME=$vault "$KC" lock >/dev/null 2>&1
    fi
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -m 700 "$vault"

# The kc-mountd serving mount point $1 (its last argument).
daemon_of() {
    local dir
    for dir in /proc/[0-9]*; do
        [ "$(cat "$dir/comm" 2>/dev/null)" = kc-mountd ] || continue
        [ "$(tr '\0' '\n' < "$dir/cmdline" 2>/dev/null | tail -n 1)" = "$1" ] && { echo "${dir#/proc/}"; return; }
    done
    return 1
}

# Waits (up to 5 s) until every thread of $1 is traced.
wait_traced() {
    local round task all
    for round in $(seq 1 500); do
        all=1
        for task in /proc/"$1"/task/*; do
            [ "$(awk '/^TracerPid:/ { print $2 }' "$task/status" 2>/dev/null)" != 0 ] || all=0
        done
        [ $all = 1 ] && return 0
        sleep 0.01
    done
    echo "keyring_calls.sh: strace could not attach to kc-mountd $1" >&2
    return 1
}

# Prints "NAME<TAB>CALLS<TAB>PROC_KEYS_READS<TAB>BREAKDOWN" for strace output file $2.
report() {
    local calls reads kinds
    calls=$(grep -Ec '^[0-9]+ +(add_key|keyctl|request_key)\(' "$2" || true)
    reads=$(grep -Ec '^[0-9]+ +open(at)?\(.*"/proc/keys"' "$2" || true)
    kinds=$(grep -Eo '^[0-9]+ +(add_key|request_key|keyctl\([A-Z_0-9]+)' "$2" | sed -E 's/^[0-9]+ +//; s/^keyctl\(//' |
        sort | uniq -c | sort -k1,1nr -k2 | awk '{ printf "%s%s %d", sep, $2, $1; sep = ", " }')
    printf '%s\t%s\t%s\t%s\n' "$1" "$calls" "$reads" "$kinds" >> "$work/table"
    if [ "$SEQUENCE" = 1 ]; then
        { echo "== $1"; grep -E '^[0-9]+ +((add_key|keyctl|request_key)\(|open(at)?\(.*"/proc/keys")' "$2" | sed -E 's/^[0-9]+ +//'; } >> "$work/sequence"
    fi
}

# A CLI case: $1 the name, $2 XDG_DATA_HOME, then the kc arguments; the value on stdin.
cli() {
    local name=$1 data=$2
    shift 2
    XDG_DATA_HOME=$data strace -f -qq -o "$work/trace" -e trace=$traced "$KC" "$@" > /dev/null < "$work/value"
    report "$name" "$work/trace"
}

# A mount case: $1 the name, $2 the mount point, $3 the service, $4 the item.
mount_save() {
    local daemon tracer
    printf warm > "$2/$3/$4"  # the first save is not counted
    daemon=$(daemon_of "$2") || { echo "keyring_calls.sh: no kc-mountd serves $2" >&2; exit 1; }
    strace -f -qq -p "$daemon" -o "$work/trace" -e trace=$traced 2>/dev/null &
    tracer=$!
    tracers+=("$tracer")
    wait_traced "$daemon"
    printf new > "$2/$3/$4"
    sleep 0.2  # the release that follows close is asynchronous
    kill -INT "$tracer"
    wait "$tracer" || true
    tracers=()
    report "$1" "$work/trace"
}

# A mount of kc with XDG_DATA_HOME $1, at a new folder; prints the mount point.
mount_with() {
    local mnt
    mnt=$(mktemp -d "$work/mnt.XXXXXX")
    XDG_DATA_HOME=$1 "$KC" mount "$mnt" >/dev/null
    echo "$mnt"
}

printf 'value-0123456789' > "$work/value"

# No vault.
XDG_DATA_HOME=$novault "$KC" set "$service" token < "$work/value"
cli "kc get S K" "$novault" get "$service" token
cli "kc set S K" "$novault" set "$service" token
cli "kc set S NEW" "$novault" set "$service" new
cli "kc set --timeout 1h S NEW" "$novault" set --timeout 1h "$service" new-timed
cli "kc set NEWS K" "$novault" set "$service.new" token
XDG_DATA_HOME=$novault "$KC" rm --yes "$service.new" >/dev/null
mnt=$(mount_with "$novault")
mounts+=("$mnt")
mount_save "mount save (no vault)" "$mnt" "$service" token
"$KC" umount "$mnt" >/dev/null

# A vault (the passphrase on stdin, the smallest work factor: only writes are measured).
printf 'kc bench passphrase\n' | XDG_DATA_HOME=$vault "$KC" vault init --work-factor 10 >/dev/null 2>&1
XDG_DATA_HOME=$vault "$KC" set "$service" token < "$work/value"
XDG_DATA_HOME=$vault "$KC" set --timeout 1h "$timed" token < "$work/value"
cli "kc set S K (vault)" "$vault" set "$service" token
mnt=$(mount_with "$vault")
mounts+=("$mnt")
mount_save "mount save (vault)" "$mnt" "$service" token
mount_save "mount save (vault, deadline)" "$mnt" "$timed" token

echo "kc: $KC"
{
    printf 'case\tkeyring calls\t/proc/keys reads\n'
    cut -f 1-3 "$work/table"
} | column -t -s $'\t'
if [ "$DETAIL" = 1 ]; then
    echo
    awk -F '\t' '{ printf "%s: %s\n", $1, $4 }' "$work/table"
fi
if [ "$SEQUENCE" = 1 ]; then
    echo
    cat "$work/sequence"
fi
