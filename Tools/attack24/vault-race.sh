#!/bin/bash
# Writers at two levels (timed and untimed) on one item, with kc lock/unlock running
# at the same time, with a vault; then: one copy in the kernel, every kernel expiry has
# its record, and after lock --level all; unlock the vault equals the kernel.
KC=${KC:-/work/wt-attack/.build/debug/kc}
export XDG_DATA_HOME=/tmp/a24r-$$
S=a24r$$; V=$XDG_DATA_HOME/kc
rm -rf $XDG_DATA_HOME; mkdir -m700 $XDG_DATA_HOME
echo pw | $KC vault init --work-factor 10 >/dev/null 2>&1
end=$((SECONDS+${SECS:-20}))
w() { local i=0; while [ $SECONDS -lt $end ]; do i=$((i+1)); printf "$1-$i" | $KC set $2 $S K >/dev/null 2>&1; done; }
w a "--access after-first-unlock" & w b "--access when-unlocked --timeout 1h" & w c "--access always --timeout 2h" &
( while [ $SECONDS -lt $end ]; do $KC lock --level after-first-unlock >/dev/null 2>&1; echo pw | $KC unlock >/dev/null 2>&1; done ) &
wait
p=$(keyctl get_persistent @s)
copies=0; for a in @s @u $p; do r=$(keyctl search $a keyring kc:$S 2>/dev/null) && for k in $(keyctl rlist $r 2>/dev/null); do copies=$((copies+1)); ser=$k; done; done
echo "copies in kernel: $copies"
hex=$(printf %08x $ser); exp=$(grep "^$hex " /proc/keys | awk '{print $4}')
t=$(keyctl search @u keyring kc.expiry); rec=$(keyctl search $t user $ser 2>/dev/null)
echo "value=$($KC get $S K) expiry=$exp record=${rec:-none}"
$KC ls --long $S
find $V/items -type f; ls $V/tmp
before=$($KC ls --long --json $S | python3 -c 'import json,sys;d=json.load(sys.stdin);print([(i["name"],i["access"],(i["secondsLeft"] or 0)//60) for i in d["items"]])')v=$($KC get $S K)
$KC lock --level after-first-unlock --level always >/dev/null; echo pw | $KC unlock
after=$($KC ls --long --json $S | python3 -c 'import json,sys;d=json.load(sys.stdin);print([(i["name"],i["access"],(i["secondsLeft"] or 0)//60) for i in d["items"]])')v=$($KC get $S K)
echo "before: $before"; echo "after:  $after"
$KC rm $S K; $KC lock; rm -rf $XDG_DATA_HOME
