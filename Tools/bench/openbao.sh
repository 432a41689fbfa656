#!/usr/bin/env bash
# Issue 38: from a write in OpenBao to the new value in a file (Tools/bench/openbao.py;
# docs/BENCHMARKS.md). Builds the release kc-agent, kc and kc-mountd, starts a TLS lab
# (Tools/openbao/lab.sh dev DIR --tls: OpenBao 2.7.2, one Raft node on 127.0.0.1), and in a
# fresh session keyring (keyctl session -) stores the lab's AppRole role_id and secret_id
# in kc (after-first-unlock, in services kc-bench.openbao-auth.PID), mounts kc on a
# temporary folder with the release kc, and runs at once, on one KV v2 secret (secret/bench):
#   - kc-agent at POLL, its mirror (kc-bench.openbao.PID) read through the mount
#   - bao agent at POLL: AppRole auto_auth from role_id/secret_id files, a template
#     rendering the secret's key to a file on /dev/shm, template_config
#     static_secret_render_interval = POLL (bao agent's own default for a KV secret is
#     5 minutes)
#   - bao agent at BAO_EXTRA_POLL, the same otherwise (bao agent counts this interval in
#     whole seconds: a sub-second one is 0, and it then reads every ~100 ms)
# Measures:
#   - propagation: WRITES writes of a new value through OpenBao's HTTP API (python's
#     http.client, the root token, one kept-alive TLS connection; not the bao CLI, whose
#     start-up would count), a random 0-1 s pause before each; for each write and agent,
#     the time from the write's answer (and from its start) until the agent's file, read
#     every 1 ms, holds the new value: p50, p95, p99, max
#   - idle cost: no writes, every agent at once plus kc-agent at SLOW_POLL for scale: each
#     process's CPU time (utime+stime of /proc/PID/stat) over IDLE seconds, VmRSS and Pss
#     (smaps_rollup) at the end; kc-mountd and the OpenBao server alongside
# Prints one markdown table (and a line on the setup) and writes it to
# Tools/bench/out/openbao.md.
#   WRITES          writes measured (default 200)
#   IDLE            seconds of the idle sample (default 60)
#   POLL            kc-agent's and the first bao agent's interval (default 500ms, kc-agent's default)
#   SLOW_POLL       the idle-only kc-agent's interval (default 5s)
#   BAO_EXTRA_POLL  the second bao agent's interval (default 1s; empty: no second bao agent)
#   LAB_TOOLS_DIR   where lab.sh installs bao (default .build/test-tools, the tests' folder)
# Usage: bash Tools/bench/openbao.sh   (as any user with keyctl, fuse3, curl, openssl, python3)
# Cleans up on any exit, failures and signals included (trap): openbao.py ends what it
# started, unmounts and removes its kc services; then this script ends any agent left (by
# the pid openbao.py recorded, checked against its command line), unmounts if still
# mounted, removes the services again (kc rm --yes), stops the lab (lab.sh stop) and removes
# its temporary folders (/tmp/kc-bench-openbao.*, /dev/shm/kc-bench-openbao.*).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/Tools/bench/out"
mkdir -p "$out"
export PATH="/opt/swift/usr/bin:$PATH"
export LAB_TOOLS_DIR=${LAB_TOOLS_DIR:-$root/.build/test-tools}
export WRITES=${WRITES:-200} IDLE=${IDLE:-60} POLL=${POLL:-500ms} SLOW_POLL=${SLOW_POLL:-5s}
export BAO_EXTRA_POLL=${BAO_EXTRA_POLL-1s}

for product in kc-agent kc kc-mountd; do
    swift build -c release --package-path "$root" --product "$product" >&2
done
bin=$(swift build -c release --package-path "$root" --show-bin-path)
for program in kc-agent kc kc-mountd; do
    [ -x "$bin/$program" ] || { echo "openbao.sh: $bin/$program was not built" >&2; exit 1; }
done
for program in keyctl fusermount3 curl openssl python3; do
    command -v "$program" >/dev/null || { echo "openbao.sh: $program is not installed" >&2; exit 1; }
done

tag=$$
work=$(mktemp -d /tmp/kc-bench-openbao.XXXXXX)
shm=$(mktemp -d /dev/shm/kc-bench-openbao.XXXXXX)
cleanup() {
    local status=$? pid name
    trap - EXIT INT TERM HUP
    if [ -n "${py:-}" ] && kill -0 "$py" 2>/dev/null; then  # a signal: openbao.py cleans up on TERM
        kill -TERM "$py" 2>/dev/null || true
        wait "$py" 2>/dev/null || true
    fi
    if [ -f "$work/pids" ]; then  # what openbao.py started, if it could not end it itself
        while read -r pid name; do
            if tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$work/"; then
                kill "$pid" 2>/dev/null || true
                for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
                kill -9 "$pid" 2>/dev/null || true
            fi
        done <"$work/pids"
    fi
    if [ -f "$work/mounted" ]; then
        "$bin/kc" umount "$work/mnt" >/dev/null 2>&1 || fusermount3 -u -z "$work/mnt" 2>/dev/null || true
    fi
    keyctl session - bash -c 'for s in "$@"; do "$0" rm --yes "$s"; done' "$bin/kc" \
        "kc-bench.openbao.$tag" "kc-bench.openbao-slow.$tag" \
        "kc-bench.openbao-auth.$tag" "kc-bench.openbao-auth-slow.$tag" >/dev/null 2>&1 || true
    bash "$root/Tools/openbao/lab.sh" stop "$work/lab" >/dev/null 2>&1 || true
    rm -rf "$work" "$shm"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir "$work/lab"
bash "$root/Tools/openbao/lab.sh" dev "$work/lab" --tls >"$work/lab.env"
declare -A lab=()
while IFS= read -r line; do
    [[ $line == *=* ]] && lab[${line%%=*}]=${line#*=}
done <"$work/lab.env"

env KC="$bin/kc" KC_AGENT="$bin/kc-agent" BAO="${lab[BAO]}" BAO_ADDR="${lab[BAO_ADDR]}" \
    BAO_TOKEN="${lab[BAO_TOKEN]}" BAO_CACERT="${lab[BAO_CACERT]}" BAO_PID="${lab[PID]}" \
    ROLE_ID="${lab[ROLE_ID]}" SECRET_ID="${lab[SECRET_ID]}" \
    WORK="$work" SHM="$shm" TAG="$tag" OUT="$out/openbao.md" \
    keyctl session - python3 "$root/Tools/bench/openbao.py" 2> >(grep -v '^Joined session keyring' >&2) &
py=$!  # in the background, so that a signal to this script runs its trap at once
wait "$py"
