#!/usr/bin/env bash
# What a test run must not leave on the machine, for Tools/test.sh:
#   leftovers.sh snapshot FILE   records the state before the run
#   leftovers.sh check FILE      compares after the run, prints what is new, exits 1 if any
# State: the kc services in the user and persistent keyrings of the caller and of the
# suite's test users (a fresh session keyring hides only when-unlocked items, which die
# with their sessions), kc and podman processes, fuse.kc mounts, and the caller's
# entries in /tmp. Before checking, it removes what tools outside kc leave in /tmp:
# SwiftPM's empty TemporaryDirectory.* folders, and rootless podman's runtime folders
# when the run created them and podman's pause process is gone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kc="$root/.build/debug/kc"
me=$(id -u)

state() {
    echo "# keys"
    { keyctl session - "$kc" ls 2>&1 || true; } | { grep -v "^Joined session keyring" || true; } | sed "s/^/$(id -un): /"
    if [ "$me" -eq 0 ]; then
        for user in $(getent passwd | cut -d: -f1 | grep '^kc-' || true); do
            { runuser -u "$user" -- keyctl session - "$kc" ls 2>&1 || true; } | { grep -v "^Joined session keyring" || true; } | sed "s/^/$user: /"
        done
    fi
    echo "# processes"
    ps -u "$me" -o pid=,comm= | awk '$2 ~ /^(kc|kc-mountd|catatonit|conmon|podman|runc)$/ { print }' || true
    echo "# mounts"
    awk '$0 ~ / - fuse\.kc / { print $5 }' /proc/self/mountinfo
    echo "# /tmp"
    # (SwiftPM's lock files, _PATH.lock, are its own.)
    find /tmp -mindepth 1 -maxdepth 1 -user "$me" -printf '%f\n' | grep -v '^_.*\.lock$' | sort || true
}

# What tools outside kc leave in /tmp (see above), removed before each look.
remove_tool_litter() {
    local before=$1 folder
    for folder in /tmp/TemporaryDirectory.*; do
        [ -d "$folder" ] && [ -O "$folder" ] || continue
        grep -qxF "$(basename "$folder")" "$before" && continue
        [ -z "$(ls -A "$folder" | grep -vx '.keep-directory')" ] && rm -rf "$folder"
    done
    if ! pgrep -u "$me" -x catatonit >/dev/null; then
        for folder in "/tmp/podman-run-$me" "/tmp/containers-user-$me"; do
            [ -d "$folder" ] && ! grep -qxF "$(basename "$folder")" "$before" && rm -rf "$folder"
        done
    fi
    return 0
}

case "${1:-}" in
snapshot)
    state > "$2"
    ;;
check)
    before=$2
    # A mount daemon exits a moment after its kc umount, podman's pause process a
    # moment after its SIGTERM, and the kernel collects a dead session's keys a moment
    # after it ends: give them up to 5 seconds.
    after="$root/.build/leftovers-after.txt"
    for _ in $(seq 10); do
        remove_tool_litter "$before"
        state > "$after"
        new=$(diff "$before" "$after" | grep '^>' | sed 's/^> //' || true)
        [ -z "$new" ] && break
        sleep 0.5
    done
    rm -f "$after"
    if [ -n "$new" ]; then
        echo "leftovers: the run left these behind (keys as 'user: service', processes, mounts, /tmp entries):" >&2
        echo "$new" | sed 's/^/  /' >&2
        exit 1
    fi
    echo "leftovers: none (keys, processes, mounts, /tmp)"
    ;;
*)
    echo "usage: leftovers.sh snapshot|check FILE" >&2
    exit 64
    ;;
esac
