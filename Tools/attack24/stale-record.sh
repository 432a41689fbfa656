#!/bin/bash
# Walk a kill -9 through every add_key/keyctl call of an untimed `kc set` of a timed item,
# then save through the mount and look at the deadline. Run inside `keyctl session -`.
KC=${KC:-/work/wt-attack/.build/debug/kc}
export XDG_DATA_HOME=${XDG_DATA_HOME:-/proc/no-vault}
S=attack24-stale-$$
M=/tmp/attack24-mnt-$$
mkdir -p $M
$KC mount $M || { echo mount failed; exit 1; }
trap "$KC umount $M; rmdir $M; $KC rm S K >/dev/null 2>&1" EXIT
for N in $(seq 1 ${MAXN:-14}); do
  printf v1 | $KC set --timeout 1h $S K || echo "set1 failed"
  printf v2 | strace -qq -f -o /dev/null -e trace=add_key,keyctl -e inject=add_key,keyctl:signal=SIGKILL:when=$N $KC set $S K
  rc=$?
  ser=$(keyctl search @s user K $(keyctl search @s keyring kc:$S 2>/dev/null) 2>/dev/null)
  hex=$(printf %08x $ser 2>/dev/null)
  before=$(grep "^$hex " /proc/keys | awk "{print \$4}")
  rec=$(keyctl search @u keyring kc.expiry >/dev/null 2>&1 && keyctl search $(keyctl search @u keyring kc.expiry) user $ser 2>/dev/null)
  printf v3 > $M/$S/K
  ser2=$(keyctl search @s user K $(keyctl search @s keyring kc:$S) 2>/dev/null)
  hex2=$(printf %08x $ser2)
  after=$(grep "^$hex2 " /proc/keys | awk "{print \$4}")
  echo "N=$N rc=$rc value=$($KC get $S K) expiry-before-save=$before record=${rec:+yes} expiry-after-save=$after"
  $KC rm $S K
done
