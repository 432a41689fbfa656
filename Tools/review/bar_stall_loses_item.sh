#!/usr/bin/env bash
# Review finding 1: a removal of the empty service (rmdir in the mount) that is stalled
# for more than a second between reading its barred keyring empty and unlinking it
# destroys an item a writer stored meanwhile and was told was stored (exit 0).
# The writer waits ~1 s for the bar, then takes it for a killed remover's and lifts it;
# the remover is alive, and its unlink takes the keyring, with the new item, away.
# The stall is made with gdb (a stopped, swapped or preempted daemon does the same).
# Run as any user with gdb, fuse3 and keyutils:  bash Tools/review/bar_stall_loses_item.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
KC=${KC:-$root/.build/debug/kc}
exec keyctl session - bash -s "$KC" <<'INNER'
exec 2>&1
KC=$1
export XDG_DATA_HOME=$(mktemp -d)          # no vault: the kernel is the only copy
mnt=$(mktemp -d); svc=review-stall-$$
printf seed | "$KC" set "$svc" seed && "$KC" rm "$svc" seed   # an emptied service
"$KC" mount --foreground "$mnt" & mpid=$!
for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
gdb -p "$mpid" -batch -q \
  -ex 'set pagination off' \
  -ex 'break keyctl_setperm if $rsi == 0x3b0000' -ex continue -ex finish -ex 'delete' \
  -ex 'break keyctl_unlink' -ex continue \
  -ex "shell printf precious | $KC set $svc token; echo \"writer: kc set exit \$?\"; echo -n 'writer reads back: '; $KC get $svc token; echo" \
  -ex 'delete' -ex continue >/tmp/review-gdb.$$ 2>&1 &
gpid=$!
sleep 3
rmdir "$mnt/$svc"; echo "remover: rmdir exit $?"
sleep 0.5
grep '^writer' /tmp/review-gdb.$$
echo -n "after the rmdir, kc get: "; "$KC" get "$svc" token; echo " (exit $?)"
kill "$gpid" 2>/dev/null; wait "$gpid" 2>/dev/null
"$KC" umount "$mnt" 2>/dev/null || fusermount3 -u "$mnt"; wait "$mpid" 2>/dev/null
rm -f /tmp/review-gdb.$$; rmdir "$mnt"; rm -rf "$XDG_DATA_HOME"
INNER
