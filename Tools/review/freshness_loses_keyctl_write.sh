#!/usr/bin/env bash
# Review finding 3: freshness across logins (kc.loaded:VAULT) takes ANY change of an
# item file since this session's load for another login's write, including this
# session's own `kc set`. A `keyctl update` of the item afterwards (a write around the
# vault, which DESIGN §3 promises works both ways and §9 says unlock/lock reconcile) is
# then reverted by `kc unlock` and dropped unsaved by `kc lock`. With one login only.
# Control: the same keyctl write to an item whose file was not touched since the load
# is saved, as before the change.
# Run as any user with keyutils:  bash Tools/review/freshness_loses_keyctl_write.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
KC=${KC:-$root/.build/debug/kc}
exec keyctl session - bash -s "$KC" <<'INNER'
exec 2>&1
KC=$1
export XDG_DATA_HOME=$(mktemp -d)
pass='review passphrase'
echo "$pass" | "$KC" vault init --work-factor 10 >/dev/null
update_around() {  # keyctl update of each named item: a write around the vault (§3)
  local value=$1; shift
  for item; do
    keyctl update "$(keyctl search "$(keyctl search @s keyring kc:svc)" user "$item")" "$value"
  done
}
show() { echo "$1 touched=$("$KC" get svc touched) control=$("$KC" get svc control)"; }
printf old | "$KC" set svc touched       # saved before the load
printf old | "$KC" set svc control
sleep 0.2                                # (a file written <50 ms before the load counts as newer too)
echo "$pass" | "$KC" unlock >/dev/null   # this session's load: kc.loaded:VAULT
sleep 0.2
printf mine | "$KC" set svc touched      # this session's own write, after the load
update_around keyctl-1 touched control
show "A. kernel before kc unlock:"
echo "$pass" | "$KC" unlock
show "A. kernel after kc unlock: "
sleep 0.2
echo "$pass" | "$KC" unlock >/dev/null   # a fresh load (both files unchanged since)
sleep 0.2
printf mine | "$KC" set svc touched
update_around keyctl-2 touched control
show "B. kernel before kc lock:  "
"$KC" lock; echo "$pass" | "$KC" unlock >/dev/null
show "B. after kc lock, unlock:  "
rm -rf "$XDG_DATA_HOME"
INNER
