#!/usr/bin/env bash
# PAM_KC_SPENT_MS lives in the PAM environment, which pam_env's user_readenv=1 fills from
# the user's ~/.pam_environment. Debian's sshd has that line AFTER common-session (held
# there: too late to matter). An admin who orders it before kc's session line (as many
# guides do: pam_env first) lets the user reset the count: PAM_KC_SPENT_MS OVERRIDE=0 (or DEFAULT=0) gives
# the session step a second whole budget, so the login waits twice the budget.
source "$(dirname "$0")/common.sh"
mkuser kc-atk-alice 'Alice-pw-1'
cat > /etc/pam.d/kc-atk-env <<PAM
auth	[success=1 default=ignore]	pam_unix.so nullok
auth	requisite	pam_deny.so
auth	required	pam_permit.so
auth	optional	$PAMSO kc=$KC budget=2
account	required	pam_unix.so
session	optional	pam_keyinit.so force revoke
session	required	pam_env.so user_readenv=1
session	optional	$PAMSO kc=$KC budget=2
PAM
had_acl=$(getfacl -p /dev/fuse 2>/dev/null | grep -c "^user:kc-atk-alice:")
setfacl -m u:kc-atk-alice:rw /dev/fuse
for forged in no yes; do
  if [ $forged = yes ]; then echo 'PAM_KC_SPENT_MS OVERRIDE=0' > /home/kc-atk-alice/.pam_environment; else rm -f /home/kc-atk-alice/.pam_environment; fi
  su -s /bin/bash kc-atk-alice -c "python3 /work/main/Tools/review/unanswering_fuse.py /home/kc-atk-alice/.local/share > /tmp/kc-atk-fuse.out 2>&1 & echo \$! > /tmp/kc-atk-fuse.pid"
  for i in $(seq 50); do grep -q ready /tmp/kc-atk-fuse.out 2>/dev/null && break; sleep 0.1; done
  inns $LOGDIR/env.log 't0=$(date +%s%3N); echo Alice-pw-1 | pamtester kc-atk-env kc-atk-alice authenticate open_session >/dev/null 2>&1; t1=$(date +%s%3N)
    echo "~/.pam_environment forging PAM_KC_SPENT_MS='$forged': login (auth+session, budget=2) took $((t1-t0)) ms"'
  grep -o 'pam_kc([^)]*): user [^:]*: kc[^(]*' $LOGDIR/env.log | sed 's/^/    /'
  kill "$(cat /tmp/kc-atk-fuse.pid)"; sleep 0.5; umount -l /home/kc-atk-alice/.local/share 2>/dev/null
done
rm -f /home/kc-atk-alice/.pam_environment
[ "$had_acl" = 1 ] || setfacl -x u:kc-atk-alice /dev/fuse
