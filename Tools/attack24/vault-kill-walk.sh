#!/bin/bash
# Walk a SIGKILL through every traced syscall of one kc write with a vault, then check:
#  A) state after the kill (kernel) == state after `kc lock --level all; kc unlock` (no reboot)
#  B) after a simulated reboot + unlock: the old or the new state, one copy, one file.
# Usage (inside `keyctl session -`): SETUP='...' OP='...' vault-kill-walk.sh
KC=${KC:-/work/wt-attack/.build/debug/kc}
export XDG_DATA_HOME=/tmp/a24v-$$
SYSCALLS=${SYSCALLS:-add_key,keyctl,rename,fsync,unlink,mkdir}
S=a24w$$
V=$XDG_DATA_HOME/kc
rm -rf $XDG_DATA_HOME; mkdir -m700 $XDG_DATA_HOME
echo pw | $KC vault init --work-factor 10 >/dev/null 2>&1
kcx() { $KC "$@"; }
rings() { local p=$(keyctl get_persistent @s); for a in @s @u $p; do for m in kc kc.local; do keyctl search $a keyring $m:$S 2>/dev/null; done; done; }
reboot() { for r in $(rings); do for a in @s @u $(keyctl get_persistent @s); do keyctl unlink $r $a >/dev/null 2>&1; done; done
           local st=$(keyctl search @u user "kc.vault:$V" 2>/dev/null); [ -n "$st" ] && keyctl unlink $st @u >/dev/null; }
state() {  # value level secondsLeft(rounded to 10 min) copies files
  local items=$($KC ls --long --json $S 2>/dev/null | python3 -c 'import json,sys
try:
  d=json.load(sys.stdin)
  import time
  for i in d["items"]: print(i["name"], i.get("access"), "deadline=%s" % (round((time.time()+i["secondsLeft"])/20) if i.get("secondsLeft") else None))
except Exception: pass')
  local copies=0; for r in $(rings); do keyctl rlist $r 2>/dev/null | wc -w; done > /tmp/a24c-$$; copies=$(paste -sd+ /tmp/a24c-$$ | bc 2>/dev/null)
  local files=$(cd $V/items 2>/dev/null && find . -type f | sort | tr '\n' ' ')
  echo "[$(echo $items | tr '\n' ';')] vals=$(for n in K ${NAMES}; do printf '%s=%s,' $n "$($KC get $S $n 2>/dev/null)"; done) copies=${copies:-0} files=$files"
}
for N in $(seq 1 ${MAXN:-60}); do
  $KC rm $S K >/dev/null 2>&1; for n in $NAMES; do $KC rm $S $n >/dev/null 2>&1; done
  rm -rf $V/items/*/$S
  eval "$SETUP"
  old=$(state)
  out=$(eval "strace -qq -f -o /dev/null -e trace=$SYSCALLS -e inject=$SYSCALLS:signal=SIGKILL:when=$N $OP" 2>&1); rc=$?
  after=$(state)
  staged=$(ls $V/tmp | wc -l)
  kcx lock --level after-first-unlock --level always >/dev/null 2>&1
  echo pw | kcx unlock >/dev/null 2>&1; urc=$?
  relock=$(state)
  reboot
  echo pw | kcx unlock >/dev/null 2>/tmp/a24u-$$; brc=$?
  boot=$(state)
  verdict=ok
  [ "${after% files=*}" != "${relock% files=*}" ] && verdict="LOCK-UNLOCK-CHANGED"
  [ "$boot" != "$relock" ] && verdict="$verdict REBOOT-DIFFERS"
  echo "N=$N rc=$rc staged=$staged $verdict"
  [ "$verdict" != ok ] && { echo "  old:    $old"; echo "  killed: $after"; echo "  relock: $relock"; echo "  boot:   $boot $(cat /tmp/a24u-$$)"; }
  [ $rc = 0 ] && [ -z "$ALL" ] && break
done
$KC rm $S K >/dev/null 2>&1; for n in $NAMES; do $KC rm $S $n >/dev/null 2>&1; done
$KC lock >/dev/null 2>&1; rm -rf $XDG_DATA_HOME /tmp/a24c-$$ /tmp/a24u-$$
