#!/usr/bin/env bash
# sshd and the budget: alice's home holds a FUSE mount that never answers. A private
# sshd (127.0.0.1:22036, in a private mount namespace whose /etc/pam.d/sshd is Debian's
# with kc's three lines, budget=2) is logged into with password and with
# keyboard-interactive authentication: how long until the command runs, does the
# session get a second budget, and does PAM_KC_SPENT_MS reach the user's environment?
source "$(dirname "$0")/common.sh"
mkuser kc-atk-alice 'Alice-pw-1'
mode=${1:-fuse}
T=/tmp/attack36-logs/sshd; rm -rf $T; mkdir -p $T
ssh-keygen -q -t ed25519 -N '' -f $T/hostkey
cat > $T/pam <<PAM
auth	[success=1 default=ignore]	pam_unix.so nullok
auth	requisite	pam_deny.so
auth	required	pam_permit.so
auth	optional	$PAMSO kc=$KC budget=2
account	required	pam_nologin.so
account	[success=1 new_authtok_reqd=done default=ignore]	pam_unix.so
account	requisite	pam_deny.so
account	required	pam_permit.so
session	required	pam_loginuid.so
session	optional	pam_keyinit.so force revoke
session	[default=1]	pam_permit.so
session	requisite	pam_deny.so
session	required	pam_permit.so
session	required	pam_unix.so
session	optional	$PAMSO kc=$KC budget=2
session	required	pam_limits.so
session	required	pam_env.so
session	required	pam_env.so user_readenv=1 envfile=/etc/default/locale
password	requisite	pam_unix.so obscure yescrypt
password	optional	$PAMSO kc=$KC budget=2
PAM
cat > $T/sshd_config <<CFG
Port 22036
ListenAddress 127.0.0.1
HostKey $T/hostkey
UsePAM yes
KbdInteractiveAuthentication yes
PasswordAuthentication yes
PidFile $T/sshd.pid
LogLevel ERROR
CFG
had_acl=$(getfacl -p /dev/fuse 2>/dev/null | grep -c "^user:kc-atk-alice:")
if [ "$mode" = fuse ]; then
  setfacl -m u:kc-atk-alice:rw /dev/fuse
  su -s /bin/bash kc-atk-alice -c "python3 /work/main/Tools/review/unanswering_fuse.py /home/kc-atk-alice/.local/share > /tmp/kc-atk-fuse.out 2>&1 & echo \$! > /tmp/kc-atk-fuse.pid"
  for i in $(seq 50); do grep -q ready /tmp/kc-atk-fuse.out 2>/dev/null && break; sleep 0.1; done
fi
inns $LOGDIR/sshd.log '
mount -t tmpfs attack36run /run; mkdir -m 755 /run/sshd
mount --bind '$T'/pam /etc/pam.d/sshd
/usr/sbin/sshd -f '$T'/sshd_config -E '$T'/sshd.err
sleep 0.5
for how in password keyboard-interactive; do
  t0=$(date +%s%3N)
  out=$(sshpass -p Alice-pw-1 ssh -n -p 22036 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
        -o PreferredAuthentications=$how -o PubkeyAuthentication=no kc-atk-alice@127.0.0.1 "env | grep -c PAM_KC_SPENT_MS; echo ran" 2>&1)
  t1=$(date +%s%3N)
  echo "$how: $((t1-t0)) ms until the command ran; PAM_KC_SPENT_MS lines in its environment, then output: $(echo $out)"
done
kill $(cat '$T'/sshd.pid)
'
echo "--- auth log (pam_kc)"; grep pam_kc $LOGDIR/sshd.log
if [ "$mode" = fuse ]; then
  kill "$(cat /tmp/kc-atk-fuse.pid)"; sleep 0.5; umount -l /home/kc-atk-alice/.local/share 2>/dev/null
  [ "$had_acl" = 1 ] || setfacl -x u:kc-atk-alice /dev/fuse
fi
