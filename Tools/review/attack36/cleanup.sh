#!/usr/bin/env bash
# Removes what the attack36 scripts made: their users (after removing the keys they left
# in the users' keyrings, which outlive the users: see finding 4), group, PAM files,
# the kc copies, temporary files. Leaves ACL entries on /dev/fuse it did not add.
for u in kc-atk-alice kc-atk-bob kc-atk-old kc-atk-new; do
  id "$u" >/dev/null 2>&1 || continue
  ps -o pid= -u "$u" | while read -r p; do kill -KILL "$p" 2>/dev/null; done
  mountpoint -q "/home/$u/.local/share" 2>/dev/null && umount -l "/home/$u/.local/share"
  # only the keys these scripts made (another account's leftovers under a reused uid stay)
  su - "$u" -c 'for k in $(keyctl rlist @u 2>/dev/null); do d=$(keyctl rdescribe $k 2>/dev/null | cut -d";" -f5-)
      case "$d" in kc:svc|kc:svc2|kc:web|kc:web2|kc:bank|kc.vault:/home/kc-atk-*|token|later|_uid.*) keyctl unlink $k @u >/dev/null;; esac; done
    keyctl purge user token >/dev/null 2>&1; keyctl purge user later >/dev/null 2>&1; true' 2>/dev/null
  userdel -r "$u" 2>/dev/null || userdel "$u"
done
getent group kc-atk-grp >/dev/null && groupdel kc-atk-grp
rm -f /etc/pam.d/kc-atk-*
rm -rf /var/tmp/attack36 /tmp/attack36-logs
rm -f /tmp/kc-atk-*
echo "left: users $(getent passwd | grep -c '^kc-atk-'), pam files $(ls /etc/pam.d | grep -c '^kc-atk-'), mounts $(findmnt -t fuse.unanswering -n | wc -l)"
