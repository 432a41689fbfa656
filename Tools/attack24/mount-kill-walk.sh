#!/bin/bash
# As vault-kill-walk.sh, but the write is made through the mount and the kill -9 hits
# kc-mountd (strace -p). OP runs against $M/$S. Inside `keyctl session -`.
KC=${KC:-/work/wt-attack/.build/debug/kc}
export XDG_DATA_HOME=/tmp/a24m-$$
SYSCALLS=${SYSCALLS:-add_key,keyctl,rename,fsync,unlink,mkdir}
S=a24m$$
V=$XDG_DATA_HOME/kc
M=/tmp/a24mnt-$$
NAMES=${NAMES:-K2}
rm -rf $XDG_DATA_HOME; mkdir -m700 $XDG_DATA_HOME; mkdir -p $M
echo pw | $KC vault init --work-factor 10 >/dev/null 2>&1
rings() { local p=$(keyctl get_persistent @s); for a in @s @u $p; do for m in kc kc.local; do keyctl search $a keyring $m:$S 2>/dev/null; done; done; }
reboot() { for r in $(rings); do for a in @s @u $(keyctl get_persistent @s); do keyctl unlink $r $a >/dev/null 2>&1; done; done
           local st=$(keyctl search @u user "kc.vault:$V" 2>/dev/null); [ -n "$st" ] && keyctl unlink $st @u >/dev/null; }
state() {
  local items=$($KC ls --long --json $S 2>/dev/null | python3 -c 'import json,sys,time
try:
  d=json.load(sys.stdin)
  for i in d["items"]: print(i["name"], i.get("access"), "deadline=%s" % (round((time.time()+i["secondsLeft"])/20) if i.get("secondsLeft") else None))
except Exception: pass')
  local copies=0; for r in $(rings); do keyctl rlist $r 2>/dev/null | wc -w; done > /tmp/a24c-$$; copies=$(paste -sd+ /tmp/a24c-$$ | bc 2>/dev/null)
  local files=$(cd $V/items 2>/dev/null && find . -type f | sort | tr '\n' ' ')
  echo "[$(echo $items | tr '\n' ';')] vals=$(for n in K ${NAMES}; do printf '%s=%s,' $n "$($KC get $S $n 2>/dev/null)"; done) copies=${copies:-0} files=$files"
}
ensure_mount() { mountpoint -q $M && [ -d $M/. ] && ls $M >/dev/null 2>&1 && return; umount -l $M 2>/dev/null; $KC mount $M >/dev/null 2>&1; }
trap '$KC umount $M >/dev/null 2>&1; rmdir $M; $KC rm $S K >/dev/null 2>&1; for n in $NAMES; do $KC rm $S $n >/dev/null 2>&1; done; $KC lock >/dev/null 2>&1; rm -rf $XDG_DATA_HOME /tmp/a24c-$$ /tmp/a24u-$$' EXIT
for N in $(seq 1 ${MAXN:-80}); do
  ensure_mount
  $KC rm $S K >/dev/null 2>&1; for n in $NAMES; do $KC rm $S $n >/dev/null 2>&1; done
  rm -rf $V/items/*/$S
  eval "$SETUP"
  old=$(state)
  pid=$(pgrep -f "^[^ ]*kc-mountd .*-- $M$" | head -1)
  strace -qq -f -o /dev/null -p $pid -e trace=$SYSCALLS -e inject=$SYSCALLS:signal=SIGKILL:when=$N & spid=$!
  sleep 0.5
  out=$(eval "$OP" 2>&1); rc=$?; [ -n "$DEBUG" ] && echo "pid=$pid out=$out"
  sleep 0.2
  case "$(ps -o stat= -p $pid 2>/dev/null)" in ""|Z*) died=yes;; *) died=no;; esac
  kill $spid 2>/dev/null; wait $spid 2>/dev/null
  after=$(state)
  staged=$(ls $V/tmp | wc -l)
  $KC lock --level after-first-unlock --level always >/dev/null 2>&1
  echo pw | $KC unlock >/dev/null 2>&1
  relock=$(state)
  reboot
  echo pw | $KC unlock >/dev/null 2>/tmp/a24u-$$
  boot=$(state)
  verdict=ok
  [ "${after% files=*}" != "${relock% files=*}" ] && verdict="LOCK-UNLOCK-CHANGED"
  [ "$boot" != "$relock" ] && verdict="$verdict REBOOT-DIFFERS"
  echo "N=$N oprc=$rc daemon-died=$died staged=$staged $verdict"
  [ "$verdict" != ok ] && { echo "  old:    $old"; echo "  killed: $after"; echo "  relock: $relock"; echo "  boot:   $boot $(cat /tmp/a24u-$$)"; }
  [ $died = no ] && [ -z "$ALL" ] && break
done
