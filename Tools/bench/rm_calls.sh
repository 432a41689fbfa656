#!/usr/bin/env bash
# Keyring calls of `kc rm SERVICE ITEM` (issue 35): a removal that leaves two items, one
# that leaves one, and the removal of the last item (which once also removed the
# emptied service). Counts add_key, keyctl and request_key with strace -f, in a fresh
# session keyring, without a vault.
#   bash Tools/bench/rm_calls.sh [KC]     default: .build/debug/kc-front if built, else .build/debug/kc
set -euo pipefail
if [ "${KC_RM_CALLS_IN_SESSION:-}" != 1 ]; then
    root=$(cd "$(dirname "$0")/../.." && pwd)
    kc=${1:-}
    [ -n "$kc" ] || { [ -x "$root/.build/debug/kc-front" ] && kc="$root/.build/debug/kc-front" || kc="$root/.build/debug/kc"; }
    KC_RM_CALLS_IN_SESSION=1 keyctl session - bash "$0" "$kc" 2>&1 | grep -v '^Joined session keyring'
    exit "${PIPESTATUS[0]}"
fi
kc=$1
export XDG_DATA_HOME=/proc/kc-bench-no-vault
service=kc-bench.rm.$$
calls() { strace -f -c -e trace=add_key,keyctl,request_key "$kc" rm "$service" "$1" 2>&1 >/dev/null | awk '$NF == "total" { print $4 }'; }
for item in a b c; do printf v | "$kc" set "$service" "$item"; done
echo "kc rm leaving two items: $(calls a)"
echo "kc rm leaving one item:  $(calls b)"
echo "kc rm of the last item:  $(calls c)"
"$kc" rm --yes "$service" 2>/dev/null || true
