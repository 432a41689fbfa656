#!/usr/bin/env bash
# Called by run.sh inside a fresh session keyring: the mount against tmpfs and against
# a minimal C libfuse filesystem with the same cache policy (minimal_fuse.c).
set -euo pipefail

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
value="bench-value"
shm=$(mktemp -d /dev/shm/kc-bench.XXXXXX)
kcmnt=$(mktemp -d /tmp/kc-bench-mnt.XXXXXX)
minmnt=$(mktemp -d /tmp/kc-bench-min.XXXXXX)
cleanup() {
    "$KC" umount "$kcmnt" 2>/dev/null || true
    fusermount3 -u "$minmnt" 2>/dev/null || true
    rm -rf "$shm"; rmdir "$kcmnt" "$minmnt" 2>/dev/null || true
    "$BENCH" clear bench.ls 1 0 >/dev/null 2>&1 || true
}
trap cleanup EXIT

printf '%s' "$value" | "$KC" set bench.fs token
mkdir "$shm/bench.fs"; printf "%s" "$value" > "$shm/bench.fs/token"
"$KC" mount "$kcmnt"
"$MINIMAL" "$minmnt" bench.fs "$value" &
for _ in $(seq 100); do [ -e "$minmnt/bench.fs/token" ] && break; sleep 0.05; done

echo "## cat as a whole process (hyperfine, 1000 runs each)"
echo
hyperfine -N --warmup 100 --runs 1000 --export-json "$OUT/cat.json" \
    "cat $kcmnt/bench.fs/token" "cat $shm/bench.fs/token" "cat $minmnt/bench.fs/token" >&2
python3 - "$OUT/cat.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
names = ["kc mount", "tmpfs", "minimal C libfuse"]
print("| file | median | mean | stddev |")
print("|---|---|---|---|")
for name, x in zip(names, r):
    print(f"| {name} | {x['median']*1e6:.0f} µs | {x['mean']*1e6:.0f} µs | {x['stddev']*1e6:.0f} µs |")
print()
print(f"ratio kc / tmpfs: {r[0]['median']/r[1]['median']:.2f} (medians), {r[0]['mean']/r[1]['mean']:.2f} (means); "
      f"kc / minimal C libfuse: {r[0]['median']/r[2]['median']:.2f} (medians)")
PY
echo

echo "## open+read+close in one process (median ns per iteration, $ROUNDS rounds x $ITERATIONS)"
echo
k=(); t=(); m=()
for _ in $(seq "$ROUNDS"); do
    k+=("$("$LOOP" "$kcmnt/bench.fs/token" "$ITERATIONS")")
    t+=("$("$LOOP" "$shm/bench.fs/token" "$ITERATIONS")")
    m+=("$("$LOOP" "$minmnt/bench.fs/token" "$ITERATIONS")")
done
km=$(printf '%s\n' "${k[@]}" | median); tm=$(printf '%s\n' "${t[@]}" | median); mm=$(printf '%s\n' "${m[@]}" | median)
echo "| kc mount | tmpfs | minimal C libfuse | kc / minimal | kc / tmpfs |"
echo "|---|---|---|---|---|"
echo "| $km | $tm | $mm | $(awk -v a="$km" -v b="$mm" 'BEGIN { printf "%.2f", a / b }') | $(awk -v a="$km" -v b="$tm" 'BEGIN { printf "%.1f", a / b }') |"
echo

"$BENCH" fill bench.ls 1000 0
mkdir "$shm/ls"
for i in $(seq 0 999); do printf 'value-%s' "$i" > "$shm/ls/item-$i"; done
echo "## ls -l of a service with 1000 items (hyperfine, 30 runs)"
echo
hyperfine -N --warmup 3 --runs 30 --export-json "$OUT/ls.json" "ls -l $kcmnt/bench.ls" "ls -l $shm/ls" >&2
python3 - "$OUT/ls.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
print("| directory | median | mean |")
print("|---|---|---|")
for name, x in zip(["kc mount", "tmpfs"], r):
    print(f"| {name} | {x['median']*1e3:.1f} ms | {x['mean']*1e3:.1f} ms |")
print()
print(f"ratio kc / tmpfs: {r[0]['median']/r[1]['median']:.1f}")
PY
echo
daemon=$(pgrep -f -- "--ready-fd 3 .*-- $kcmnt\$" | head -1)
echo "## Daemon memory after serving 1000 items"
echo
grep -E "VmRSS|VmHWM" "/proc/$daemon/status" | awk '{ printf "- %s %s %s\n", $1, $2, $3 }'
