#!/usr/bin/env bash
# Budget checks: alice leaves a watcher running that SIGSTOPs every kc of hers as it
# starts (any user may stop her own processes; kc runs as her after the drop). How long
# do (a) her own login (auth+session), (b) root's `passwd alice` (prelim check + update),
# (c) root's `su - alice`-like session-only step wait, with budget=2?
source "$(dirname "$0")/common.sh"
mkuser kc-atk-alice 'Alice-pw-1'
service budget "budget=2"
cat > /etc/pam.d/kc-atk-budgetpw <<PAM
auth	sufficient	pam_rootok.so
password	requisite	pam_unix.so yescrypt
password	optional	$PAMSO kc=$KC budget=2
PAM
W=/tmp/kc-atk-watch.py
cat > $W <<'PY'
import os, signal, time, sys
me = os.getuid(); seen = set(); end = time.time() + float(sys.argv[1])
while time.time() < end:
    for p in os.listdir("/proc"):
        if not p.isdigit() or p in seen: continue
        try:
            st = os.stat("/proc/" + p)
            if st.st_uid != me: continue
            exe = os.readlink("/proc/%s/exe" % p)
        except OSError: continue
        if exe.endswith("/kc"):
            seen.add(p); os.kill(int(p), signal.SIGSTOP); print("stopped", p, flush=True)
    time.sleep(0.001)
PY
chmod 644 $W
# a vault at work factor 18 (the default), locked: the auth step does ~0.7 s of scrypt,
# time enough for a watcher that scans /proc
su - kc-atk-alice -c "$KC vault passwd --work-factor 18 --passphrase-fd 3 --new-passphrase-fd 4 3<<<Alice-pw-1 4<<<Alice-pw-1; $KC lock --level after-first-unlock --level always" 2>&1 | tail -1
su -s /bin/bash kc-atk-alice -c "python3 $W 40 > /tmp/kc-atk-watch.out 2>&1 & echo \$! > /tmp/kc-atk-watch.pid"
sleep 0.5
inns $LOGDIR/budget.log '
t0=$(date +%s%3N); echo Alice-pw-1 | pamtester kc-atk-budget kc-atk-alice authenticate open_session >/dev/null 2>&1; t1=$(date +%s%3N)
echo "(a) login auth+session with budget=2: $((t1-t0)) ms"
su - kc-atk-alice -c "/var/tmp/attack36/kc lock --level after-first-unlock --level always" >/dev/null 2>&1
t0=$(date +%s%3N); pamtester kc-atk-budget kc-atk-alice open_session >/dev/null 2>&1; t1=$(date +%s%3N)
echo "(c) session step alone (root: su - alice, sudo -i -u alice, runuser -l): $((t1-t0)) ms"
t0=$(date +%s%3N); printf "Alice-pw-2\nAlice-pw-2\n" | pamtester kc-atk-budgetpw kc-atk-alice chauthtok >/dev/null 2>&1; t1=$(date +%s%3N)
echo "(b) root passwd alice (prelim check + update): $((t1-t0)) ms"
'
echo "--- auth log"; cat $LOGDIR/budget.log
echo "--- watcher"; cat /tmp/kc-atk-watch.out
echo "--- alice's stopped kc processes left behind:"; ps -o pid,stat,pgid,sid,cmd -u kc-atk-alice | grep '[k]c '
kill -KILL "$(cat /tmp/kc-atk-watch.pid)"; for p in $(ps -o pid= -u kc-atk-alice -o comm= | awk '$2=="kc"{print $1}'); do kill -KILL $p; done
echo 'kc-atk-alice:Alice-pw-1' | chpasswd
