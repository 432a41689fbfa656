#!/usr/bin/env bash
# pam_kc skips the switch when the PAM application already runs as the user
# (getuid()==geteuid()==uid: a screen locker) and then never checks the gids: kc
# inherits whatever group ids the application has. A setgid PAM application (here a
# copy of pamtester that is setgid shadow, run by alice, as a setgid-shadow screen
# locker would be) starts kc with egid shadow. Root watches kc's ids in /proc.
source "$(dirname "$0")/common.sh"
mkuser kc-atk-alice 'Alice-pw-1'
service basic ""
install -m 2755 -o root -g shadow /usr/bin/pamtester $A36/pamtester-sg
su - kc-atk-alice -c "$KC lock --level after-first-unlock --level always" >/dev/null 2>&1   # so auth does scrypt (~0.7 s at 18)
python3 - > /tmp/kc-atk-ids.out <<'PY' &
import os, time, pwd
uid = pwd.getpwnam("kc-atk-alice").pw_uid; end = time.time() + 8
while time.time() < end:
    for p in os.listdir("/proc"):
        if not p.isdigit(): continue
        try:
            if os.stat("/proc/" + p).st_uid != uid or open("/proc/%s/comm" % p).read().strip() != "kc": continue
            st = dict(l.split(":", 1) for l in open("/proc/%s/status" % p).read().splitlines())
            print("kc pid %s: Uid %s Gid %s Groups %s" % (p, st["Uid"].split(), st["Gid"].split(), st["Groups"].split()), flush=True)
            raise SystemExit
        except (OSError, KeyError): continue
    time.sleep(0.002)
PY
watch=$!; sleep 0.3
su -s /bin/bash kc-atk-alice -c "echo Alice-pw-1 | $A36/pamtester-sg kc-atk-basic kc-atk-alice authenticate" >/dev/null 2>&1
wait $watch
echo "shadow is gid $(getent group shadow | cut -d: -f3); alice is $(id kc-atk-alice)"; cat /tmp/kc-atk-ids.out
rm -f $A36/pamtester-sg
