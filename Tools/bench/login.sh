#!/usr/bin/env bash
# What kc costs a login (docs/BENCHMARKS.md, "A login"), as root:
#   - kc unlock at each scrypt work factor (the passphrase work a first login does)
#   - a whole PAM login (pamtester authenticate open_session through Debian's own stack,
#     kc switched on by pam-auth-update on a copy), interleaved with the same login with
#     kc off: a user without a vault, a first login after a reboot (vault locked, at the
#     default work factor), a second login (vault unlocked), and a kc stuck in the
#     kernel (the user's own FUSE mount over ~/.local/share that never answers)
# Usage: sudo [ROUNDS=20] [FACTORS="14 16 17 18 20"] bash Tools/bench/login.sh
# It makes a throwaway user kc-bench-login and removes it, and the PAM service files
# /etc/pam.d/kc-bench-login-*, at the end.
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "login.sh: run as root (PAM, a test user)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
(cd "$root" && swift build -c release --product kc >/dev/null && bash Tools/build-pam.sh)
work=$(mktemp -d /var/tmp/kc-bench-login.XXXXXX)
chmod 755 "$work"
user=kc-bench-login
cleanup() {
    pkill -u "$user" -f unanswering_fuse.py 2>/dev/null || true
    fusermount3 -u -z "/home/$user/.local/share" 2>/dev/null || true
    sleep 0.5
    rm -f /etc/pam.d/kc-bench-login-*
    userdel -r "$user" >/dev/null 2>&1 || true
    setfacl -x "u:$user" /dev/fuse 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
password="bench-$(head -c 9 /dev/urandom | base64 | tr -d '/+')"
echo "$user:$password" | chpasswd
install -m 0755 "$root/.build/release/kc" "$work/kc"   # root's, writable by root only, as pam_kc requires
kc="$work/kc"
as_user() { runuser -u "$user" -- keyctl session - sh -c "$1" 2>&1 | grep -v '^Joined session keyring' || true; }

echo "== kc unlock at each work factor (release kc, median of 5, vault with one item)"
echo "| work factor | scrypt memory | kc unlock |"
echo "|---|---|---|"
for factor in ${FACTORS:-14 16 17 18 20}; do
    as_user "rm -rf ~/.local/share/kc; printf %s '$password' | $kc vault init --work-factor $factor >/dev/null 2>&1 && printf v | $kc set bench.login token"
    times=()
    for _ in 1 2 3 4 5; do
        start=$(date +%s%N)
        as_user "printf %s '$password' | $kc unlock >/dev/null 2>&1; $kc lock --level after-first-unlock --level always >/dev/null 2>&1" >/dev/null
        # The lock is in the measure too; it costs milliseconds (no passphrase work).
        times+=($(( ($(date +%s%N) - start) / 1000000 )))
    done
    median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
    echo "| $factor | $(( (1 << factor) * 1024 / 1024 / 1024 )) MiB | $median ms |"
done

# The Debian stack, with and without kc's profile, on copies (nothing in /etc changes
# but the two service files).
stack() {  # stack NAME [pam-auth-update arguments...]
    local name=$1; shift
    local copy="$work/$name"
    mkdir -p "$copy/usr/share/pam-configs" "$copy/etc/pam.d" "$copy/var/lib/pam"
    cp /usr/share/pam-configs/* "$copy/usr/share/pam-configs/"
    cp "$root/PAM/kc" "$copy/usr/share/pam-configs/kc"
    cp /etc/pam.d/common-* "$copy/etc/pam.d/"
    cp -a /var/lib/pam/. "$copy/var/lib/pam/"
    [ $# -eq 0 ] || DEBIAN_FRONTEND=noninteractive pam-auth-update --root "$copy" "$@"
    for part in auth account session password; do
        sed "s|pam_kc.so|$root/.build/pam/pam_kc.so kc=$kc|" "$copy/etc/pam.d/common-$part" > "$copy/etc/pam.d/login-$part"
    done
    {
        echo "@include $copy/etc/pam.d/login-auth"
        echo "@include $copy/etc/pam.d/login-account"
        echo "session optional pam_keyinit.so force revoke"
        echo "@include $copy/etc/pam.d/login-session"
        echo "@include $copy/etc/pam.d/login-password"
    } > "/etc/pam.d/kc-bench-login-$name"
}
stack off
stack on --enable kc
printf '%s\n' "$password" > "$work/password"
chmod 644 "$work/password"

export KC="$kc" USER_NAME="$user" WORK="$work" ROUNDS="${ROUNDS:-20}" ROOT="$root"
python3 "$root/Tools/bench/login.py"
