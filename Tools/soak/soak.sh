#!/usr/bin/env bash
# Soak test (bounded in time; stops by itself): several workers at once set, get, rm
# and list through the CLI, the mount and the library (keychain-bench soak), on shared
# keys and on keys each worker owns. Every value read must be one some writer wrote,
# whole (values describe themselves: v:<writer>:<seq>:<fill derived from seq>), and
# every write a worker saw succeed on its own key must still read back. Midway the
# mount daemon is killed with SIGKILL and the mount is recovered by `kc mount`. The
# daemon's memory and open descriptors are sampled.
#   DURATION (seconds, default 120), WORKERS per kind (default 2)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
duration=${DURATION:-120}
workers=${WORKERS:-2}
if [ -z "${KC_SOAK_INNER:-}" ]; then
    swift build -c release --package-path "$root" --product kc >&2 && \
    swift build -c release --package-path "$root" --product kc-mountd >&2 && \
    swift build -c release --package-path "$root/Tools/bench" >&2 || exit 2
    exec env KC_SOAK_INNER=1 keyctl session - bash "$0"
fi
KC="$root/.build/release/kc"
BENCH="$root/Tools/bench/.build/release/keychain-bench"
svc="soak.$$"
mnt=$(mktemp -d /tmp/kc-soak.XXXXXX)
log=$(mktemp -d /tmp/kc-soak-log.XXXXXX)
deadline=$(( $(date +%s) + duration ))

value() {  # value WRITER SEQ
    local fill=$(( $2 % 50 + 1 )) char
    char=$(printf "\\$(printf '%03o' $(( 97 + $2 % 26 )))")
    printf 'v:%s:%s:%s' "$1" "$2" "$(printf "%${fill}s" | tr ' ' "$char")"
}
valid() {  # valid VALUE -> 0 if whole and self-consistent
    local v=$1 writer seq
    [[ $v =~ ^v:([a-z0-9-]+):([0-9]+):[a-z]+$ ]] || return 1
    writer=${BASH_REMATCH[1]}; seq=${BASH_REMATCH[2]}
    [ "$v" = "$(value "$writer" "$seq")" ]
}

cli_worker() {
    local me=cli-$1 seq=0 own=""
    while [ "$(date +%s)" -lt "$deadline" ]; do
        seq=$((seq + 1))
        case $((RANDOM % 6)) in
            5) "$KC" rm "$svc" "shared-$((RANDOM % 4))" 2>/dev/null; "$KC" ls "$svc" >/dev/null ;;
            0|1) value "$me" "$seq" | "$KC" set "$svc" "shared-$((RANDOM % 4))" 2>>"$log/$me.err" ;;
            2) v=$("$KC" get "$svc" "shared-$((RANDOM % 4))" 2>/dev/null) && { valid "$v" || echo "BAD read $v" >> "$log/$me.bad"; } ;;
            3) if value "$me" "$seq" | "$KC" set "$svc" "own-$me"; then own=$(value "$me" "$seq"); fi ;;
            4) if [ -n "$own" ]; then v=$("$KC" get "$svc" "own-$me"); [ "$v" = "$own" ] || echo "LOST own $me: want $own got $v" >> "$log/$me.bad"; fi ;;
        esac
        echo x >> "$log/$me.ops"
    done
    [ -z "$own" ] || { v=$("$KC" get "$svc" "own-$me"); [ "$v" = "$own" ] || echo "LOST own $me at end" >> "$log/$me.bad"; }
}

mount_worker() {
    local me=fs-$1 seq=0 own="" dir="$mnt/$svc"
    while [ "$(date +%s)" -lt "$deadline" ]; do
        seq=$((seq + 1))
        case $((RANDOM % 6)) in
            5) rm -f "$dir/shared-$((RANDOM % 4))" 2>/dev/null ;;
            0|1) value "$me" "$seq" | dd of="$dir/shared-$((RANDOM % 4))" status=none 2>/dev/null ;;
            2) v=$(cat "$dir/shared-$((RANDOM % 4))" 2>/dev/null) && [ -n "$v" ] && { valid "$v" || echo "BAD read $v" >> "$log/$me.bad"; } ;;
            3) if value "$me" "$seq" | dd of="$dir/own-$me" status=none 2>/dev/null; then own=$(value "$me" "$seq"); fi ;;
            4) if [ -n "$own" ]; then v=$("$KC" get "$svc" "own-$me"); [ "$v" = "$own" ] || echo "LOST own $me: want $own got $v" >> "$log/$me.bad"; fi ;;
        esac
        ls "$dir" >/dev/null 2>&1
        echo x >> "$log/$me.ops"
    done
    [ -z "$own" ] || { v=$("$KC" get "$svc" "own-$me"); [ "$v" = "$own" ] || echo "LOST own $me at end" >> "$log/$me.bad"; }
}

daemon_pid() { pgrep -f -- "kc-mountd --ready-fd 3 .*-- $mnt\$" | head -1; }
sample() { local pid; pid=$(daemon_pid); [ -n "$pid" ] && echo "$1: daemon $pid RSS $(awk '/VmRSS/ {print $2}' /proc/$pid/status) kB, $(ls /proc/$pid/fd | wc -l) fds"; }

printf 'seed' | "$KC" set "$svc" seed
"$KC" mount "$mnt" || exit 2
sample "start"
pids=()
for i in $(seq "$workers"); do
    cli_worker "$i" & pids+=($!)
    mount_worker "$i" & pids+=($!)
    "$BENCH" soak "$svc" "lib-$i" "$duration" > "$log/lib-$i.out" 2>&1 & pids+=($!)
done
sleep $(( duration / 2 ))
sample "before kill -9"
kill -9 "$(daemon_pid)"
sleep 1
"$KC" mount "$mnt" 2>>"$log/remount.err" || echo "remount failed" >> "$log/remount.bad"
sample "after remount"
wait "${pids[@]}"
sample "end"
ops=$(cat "$log"/*.ops 2>/dev/null | wc -l)
lib=$(cat "$log"/lib-*.out 2>/dev/null)
echo "operations: $ops by shell workers; library workers: $(echo "$lib" | tr '\n' ' ')"
bad=$(cat "$log"/*.bad 2>/dev/null)
"$KC" umount "$mnt"; rmdir "$mnt"
"$BENCH" clear "$svc" 0 0 >/dev/null 2>&1
# A library worker prints "<name>: N operations" and nothing else unless it failed.
if [ -n "$bad" ] || echo "$lib" | grep -q BAD || [ "$(echo "$lib" | grep -c ' operations$')" -ne "$workers" ]; then
    echo "soak: FAILED"; echo "$bad" | head -20; echo "$lib" | grep -v ' operations$' | head; rm -rf "$log"; exit 1
fi
rm -rf "$log"
echo "soak: passed ($duration s, $workers workers per kind): no torn, foreign or lost values"
