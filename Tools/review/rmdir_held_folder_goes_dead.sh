#!/usr/bin/env bash
# Review finding 4: rmdir in the mount of a folder some process is still in (a shell's
# cwd, an open fd), then mkdir of the same name: the bridge's InodeTable answers the new
# folder with the old folder's inode number (the entry lives until the kernel forgets
# it), and the kernel holds that inode as a removed directory (S_DEAD). Writes into the
# new folder and rm of its items fail with ENOENT, ls shows it empty while kc ls lists
# items, and it stays so after the process leaves. Also met without any holder, from
# concurrency alone (an rmdir loop beside writers: every rm ENOENT from then on).
# Run as any user with fuse3:  bash Tools/review/rmdir_held_folder_goes_dead.sh
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
KC=${KC:-$root/.build/debug/kc}
exec keyctl session - bash -s "$KC" <<'INNER'
exec 2>&1
KC=$1
export XDG_DATA_HOME=$(mktemp -d); mnt=$(mktemp -d)
"$KC" mount --foreground "$mnt" & mp=$!
for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
mkdir "$mnt/s1"
( cd "$mnt/s1" && sleep 3 ) & holder=$!     # any process whose cwd is the folder
sleep 0.3
rmdir "$mnt/s1"; echo "rmdir exit $?"
mkdir "$mnt/s1"; echo "mkdir again exit $?"
printf v > "$mnt/s1/k"; echo "write in the new folder exit $?"
printf v | "$KC" set s1 k2; echo "kc set s1 k2 exit $?; kc ls s1: $("$KC" ls s1 | tr '\n' ' ')"
echo "ls of the folder: [$(ls "$mnt/s1")]"
rm "$mnt/s1/k2"; echo "rm of k2 in the mount exit $?"
wait $holder; sleep 1
echo "after the holder left:"; rm "$mnt/s1/k2"; echo "rm exit $?"
"$KC" umount "$mnt"; wait $mp; rmdir "$mnt"; rm -rf "$XDG_DATA_HOME"
INNER
