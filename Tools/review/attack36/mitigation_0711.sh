#!/usr/bin/env bash
# Companion to sudo_password_capture.sh: the same user-level grabber (grab_kc_stdin.py:
# finds kc by /proc/PID/comm, SIGSTOPs it, pidfd_getfd(0)) against pam_kc with kc
# (a) installed 0755 as usual: it reads the password; (b) installed 0711 (not readable
# by the user): execve of an unreadable file leaves the process non-dumpable, so
# pidfd_getfd/ptrace are refused (EPERM) and the password stays out of reach.
source "$(dirname "$0")/common.sh"
mkuser kc-atk-alice 'Alice-pw-1'
for mode in 0755 0711; do
  mkdir -p $A36/m$mode; install -m $mode -o root -g root /work/main/.build/release/kc $A36/m$mode/kc
  service m$mode ""; sed -i "s#kc=$KC #kc=$A36/m$mode/kc #" /etc/pam.d/kc-atk-m$mode
  out=/tmp/kc-atk-grab.out; : > $out; chmod 666 $out
  su -s /bin/bash kc-atk-alice -c "python3 $(dirname "$(readlink -f "$0")")/grab_kc_stdin.py > $out 2>&1 & echo \$! > /tmp/kc-atk-grab.pid"
  sleep 0.5
  echo Alice-pw-1 | pamtester kc-atk-m$mode kc-atk-alice authenticate >/dev/null 2>&1; sleep 1
  echo "kc $mode: $(cat $out)"
  kill "$(cat /tmp/kc-atk-grab.pid)" 2>/dev/null
done
