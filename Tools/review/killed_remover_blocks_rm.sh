#!/usr/bin/env bash
# Review finding 2: a removal of the empty service (rmdir in the mount) killed while its
# bar is on leaves the service keyring without its owner's write right, and no door
# but a write lifts it: `kc rm S K`, `kc rm S` and `rm` in the mount all fail, with a
# message blaming "another user", for as long as nobody stores into the service.
# Case A: an item arrives between rmdir's first look and its bar, then the daemon is
# killed (gdb makes the interleaving exact). Case B: an empty service, daemon killed
# after the bar.
# Run as any user with gdb, fuse3 and keyutils:  bash Tools/review/killed_remover_blocks_rm.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
KC=${KC:-$root/.build/debug/kc}
exec keyctl session - bash -s "$KC" <<'INNER'
exec 2>&1
KC=$1
export XDG_DATA_HOME=$(mktemp -d)
run_case() {  # $1: name, $2: whether an item arrives before the bar
  local mnt svc mpid gpid
  mnt=$(mktemp -d); svc=review-kill-$1-$$
  printf seed | "$KC" set "$svc" seed && "$KC" rm "$svc" seed
  "$KC" mount --foreground "$mnt" & mpid=$!
  for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
  local arrive=""
  [ "$2" = yes ] && arrive="printf v | $KC set $svc token; echo \"writer: kc set exit \$?\""
  gdb -p "$mpid" -batch -q -ex 'set pagination off' \
    -ex 'break keyctl_setperm if $rsi == 0x3b0000' -ex continue \
    -ex "shell $arrive" -ex finish -ex "shell kill -9 $mpid" >/tmp/review-gdb.$$ 2>&1 &
  gpid=$!
  sleep 3
  rmdir "$mnt/$svc" 2>&1; wait "$gpid"; wait "$mpid" 2>/dev/null
  fusermount3 -uz "$mnt" 2>/dev/null
  grep '^writer' /tmp/review-gdb.$$
  echo "== case $1: after the killed rmdir"
  keyctl describe "$(keyctl search @s keyring kc:$svc)"
  [ "$2" = yes ] && { echo "-- kc rm $svc token"; "$KC" rm "$svc" token; echo "exit $?"; }
  echo "-- kc rm --yes $svc"; "$KC" rm --yes "$svc"; echo "exit $?"
  "$KC" mount --foreground "$mnt" & mpid=$!
  for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
  [ "$2" = yes ] && { echo "-- rm in the mount"; rm "$mnt/$svc/token"; echo "exit $?"; }
  echo "-- rmdir in the mount"; rmdir "$mnt/$svc"; echo "exit $?"
  keyctl describe "$(keyctl search @s keyring kc:$svc 2>/dev/null)" 2>&1
  "$KC" umount "$mnt" 2>/dev/null || fusermount3 -u "$mnt"; wait "$mpid" 2>/dev/null; rmdir "$mnt"
}
run_case A yes
run_case B no
rm -f /tmp/review-gdb.$$; rm -rf "$XDG_DATA_HOME"
INNER
