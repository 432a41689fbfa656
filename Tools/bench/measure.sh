#!/usr/bin/env bash
# Called by run.sh inside a fresh session keyring.
set -euo pipefail

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# Alternates the two readers ROUNDS times and prints "c_ns swift_ns ratio".
compare_reads() {
    local service=$1 key=$2 c=() s=()
    for _ in $(seq "$ROUNDS"); do
        c+=("$("$RAW" "$service" "$key" "$ITERATIONS")")
        s+=("$("$BENCH" read "$service" "$key" "$ITERATIONS")")
    done
    local cm sm
    cm=$(printf '%s\n' "${c[@]}" | median)
    sm=$(printf '%s\n' "${s[@]}" | median)
    echo "$cm $sm $(awk -v a="$sm" -v b="$cm" 'BEGIN { printf "%.2f", a / b }')"
}

printf 'bench-value' | "$KC" set bench.svc token
echo "## In-process read: Keychain vs raw libkeyutils (median ns per read of $ROUNDS rounds x $ITERATIONS)"
echo
echo "| services in the session keyring | C libkeyutils | Keychain | ratio |"
echo "|---|---|---|---|"
made=0
for services in 1 10 100 1000; do
    "$BENCH" populate bench.extra $((services - 1)) 0
    made=$((services - 1))
    read -r cns sns ratio < <(compare_reads bench.svc token)
    echo "| $services | $cns | $sns | $ratio |"
done
"$BENCH" clear bench.extra "$made" 0

"$BENCH" fill bench.big 1000 0
read -r cns sns ratio < <(compare_reads bench.big item-500)
echo "| 1 service holding 1000 items | $cns | $sns | $ratio |"
echo

ring=$(keyctl search @s keyring kc:bench.svc)
item=$(keyctl search "$ring" user token)
echo "## Whole process: kc get vs keyctl pipe (hyperfine, 1000 runs each)"
echo
hyperfine -N --warmup 100 --runs 1000 --export-json "$OUT/process.json" \
    "$KC get bench.svc token" "keyctl pipe $item" >&2
python3 - "$OUT/process.json" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
kc, keyctl = results[0], results[1]
print("| command | median | mean | stddev |")
print("|---|---|---|---|")
for r in results:
    print(f"| `{r['command'].split('/')[-1]}` | {r['median']*1e6:.0f} µs | {r['mean']*1e6:.0f} µs | {r['stddev']*1e6:.0f} µs |")
print()
print(f"ratio kc get / keyctl pipe: {kc['median'] / keyctl['median']:.2f} (medians), {kc['mean'] / keyctl['mean']:.2f} (means)")
PY

echo
echo "## Whole process, interleaved: kc get and keyctl pipe alternately, 2000 rounds"
echo
python3 "$(dirname "$0")/interleave.py" 2000 "$KC get bench.svc token" "$(command -v keyctl) pipe $item"

"$KC" rm bench.svc token >/dev/null
keyctl clear @s
