#!/usr/bin/env bash
# Budget: alice mounts a FUSE filesystem that never answers over ~/.local/share (any
# user with /dev/fuse). Each kc step then sticks in the kernel until the budget. Which
# of ROOT's commands that run kc as alice wait, and how long (budget=2)?
source "$(dirname "$0")/common.sh"
mkuser kc-atk-alice 'Alice-pw-1'
service budget "budget=2"
cat > /etc/pam.d/kc-atk-budgetpw <<PAM
auth	sufficient	pam_rootok.so
password	requisite	pam_unix.so yescrypt
password	optional	$PAMSO kc=$KC budget=2
PAM
had_acl=$(getfacl -p /dev/fuse 2>/dev/null | grep -c "^user:kc-atk-alice:")
setfacl -m u:kc-atk-alice:rw /dev/fuse
su -s /bin/bash kc-atk-alice -c "python3 /work/main/Tools/review/unanswering_fuse.py /home/kc-atk-alice/.local/share > /tmp/kc-atk-fuse.out 2>&1 & echo \$! > /tmp/kc-atk-fuse.pid"
for i in $(seq 50); do grep -q ready /tmp/kc-atk-fuse.out 2>/dev/null && break; sleep 0.1; done
inns $LOGDIR/budget_fuse.log '
t0=$(date +%s%3N); echo Alice-pw-1 | pamtester kc-atk-budget kc-atk-alice authenticate open_session >/dev/null 2>&1; t1=$(date +%s%3N)
echo "(a) her own login, auth+session: $((t1-t0)) ms"
findmnt -n -t fuse.unanswering >/dev/null || echo "(the FUSE mount is gone)"
t0=$(date +%s%3N); pamtester kc-atk-budget kc-atk-alice open_session >/dev/null 2>&1; t1=$(date +%s%3N)
echo "(c) root: session step alone (su - alice, sudo -i -u alice, runuser -l alice): $((t1-t0)) ms"
t0=$(date +%s%3N); printf "Alice-pw-2\nAlice-pw-2\n" | pamtester kc-atk-budgetpw kc-atk-alice chauthtok >/dev/null 2>&1; t1=$(date +%s%3N)
echo "(b) root: passwd alice (prelim check + update): $((t1-t0)) ms"
'
echo "--- auth log (pam_kc)"; grep pam_kc $LOGDIR/budget_fuse.log
echo "--- alice's kc processes stuck in the kernel now:"; ps -o pid,stat,wchan:20,cmd -u kc-atk-alice | grep '[k]c '
kill "$(cat /tmp/kc-atk-fuse.pid)"; sleep 0.5
umount -l /home/kc-atk-alice/.local/share 2>/dev/null
sleep 0.5; echo "--- after the daemon is gone:"; ps -o pid,stat,cmd -u kc-atk-alice | grep '[k]c ' || echo none
[ "$had_acl" = 1 ] || setfacl -x u:kc-atk-alice /dev/fuse
echo 'kc-atk-alice:Alice-pw-1' | chpasswd
