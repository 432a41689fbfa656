#!/bin/bash
# Race setfattr user.kc.timeout (Keychain.setTimeout) against untimed `kc set` on one item,
# no vault. After each round: a kernel expiry without a record is a key a later save
# will make permanent. Run inside `keyctl session -`.
KC=${KC:-/work/wt-attack/.build/debug/kc}
export XDG_DATA_HOME=${XDG_DATA_HOME:-/proc/no-vault}
S=attack24-race-$$
M=/tmp/attack24-mnt-$$
mkdir -p $M
$KC mount $M || { echo mount failed; exit 1; }
trap "$KC umount $M; rmdir $M; $KC rm $S K >/dev/null 2>&1" EXIT
printf v0 | $KC set $S K
bad=0
for r in $(seq 1 ${ROUNDS:-200}); do
  $KC set $S K <<< "v$r" & 
  setfattr -n user.kc.timeout -v 3600 $M/$S/K &
  wait
  ser=$(keyctl search @s user K $(keyctl search @s keyring kc:$S) 2>/dev/null)
  hex=$(printf %08x $ser)
  exp=$(grep "^$hex " /proc/keys | awk '{print $4}')
  t=$(keyctl search @u keyring kc.expiry 2>/dev/null)
  rec=$( [ -n "$t" ] && keyctl search $t user $ser 2>/dev/null)
  if [ "$exp" != perm ] && [ -z "$rec" ]; then bad=$((bad+1)); echo "round $r: expiry $exp, no record"; fi
  if [ "$exp" = perm ] && [ -n "$rec" ]; then bad=$((bad+1)); echo "round $r: no expiry, stale record"; fi
  setfattr -n user.kc.timeout -v 0 $M/$S/K
done
echo "bad=$bad of ${ROUNDS:-200}"
