#!/usr/bin/env bash
# The README's first command: install what kc needs, build the release `kc` and its
# mount daemon `kc-mountd`, install them in /usr/local/bin, and show them working on a
# throwaway secret.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
bash "$root/Tools/install-deps.sh"

echo "kc: building the release kc (static, stripped)" >&2
mkdir -p "$root/.build"
if ! { swift build -c release --package-path "$root" --product kc &&
       swift build -c release --package-path "$root" --product kc-mountd &&
       swift build -c release --package-path "$root" --product kc-secretd; } > "$root/.build/setup-build.log" 2>&1; then
    cat "$root/.build/setup-build.log" >&2
    echo "kc: the build failed; the log above is in .build/setup-build.log" >&2
    exit 2
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo install -m 0755 "$root/.build/release/kc" "$root/.build/release/kc-mountd" "$root/.build/release/kc-secretd" /usr/local/bin/
# The credential helpers are kc itself under another name (it looks at argv[0]).
$sudo ln -sf kc /usr/local/bin/git-credential-kc
$sudo ln -sf kc /usr/local/bin/docker-credential-kc
echo "kc: installed /usr/local/bin/kc, its mount daemon /usr/local/bin/kc-mountd, and the credential helpers git-credential-kc and docker-credential-kc (links to kc)" >&2

# The Secret Service: the session bus starts kc-secretd on a client's first call (D-Bus
# activation; under systemd's user manager through its user unit).
$sudo install -D -m 0644 "$root/Tools/secret-service/org.freedesktop.secrets.service" /usr/local/share/dbus-1/services/org.freedesktop.secrets.service
$sudo install -D -m 0644 "$root/Tools/systemd/kc-secretd.service" /usr/local/lib/systemd/user/kc-secretd.service
echo "kc: installed the Secret Service kc-secretd (/usr/local/bin), started by the session bus on first use (secret-tool, libsecret, python keyring)" >&2

# The PAM module and its pam-auth-update profile: installed, not switched on. PAM looks
# for modules in the folder that holds pam_unix.so.
if bash "$root/Tools/build-pam.sh" >> "$root/.build/setup-build.log" 2>&1; then
    modules=$(dirname "$(find /lib /usr/lib /lib64 /usr/lib64 -name pam_unix.so -print -quit 2>/dev/null)")
    $sudo install -m 0644 "$root/.build/pam/pam_kc.so" "$modules/pam_kc.so"
    if [ -d /usr/share/pam-configs ]; then
        $sudo install -m 0644 "$root/PAM/kc" /usr/share/pam-configs/kc
        echo "kc: installed the PAM module $modules/pam_kc.so; to unlock the vault at login: sudo pam-auth-update --enable kc" >&2
    else
        echo "kc: installed the PAM module $modules/pam_kc.so (this system has no pam-auth-update: see the README for the lines)" >&2
    fi
else
    echo "kc: the PAM module could not be built (.build/setup-build.log); everything else works without it" >&2
fi

# Shell completions and the man page, generated from the argument parser.
completions=$(mktemp -d)
kc=/usr/local/bin/kc
"$kc" --generate-completion-script bash > "$completions/kc"
"$kc" --generate-completion-script zsh > "$completions/_kc"
"$kc" --generate-completion-script fish > "$completions/kc.fish"
$sudo install -D -m 0644 "$completions/kc" /usr/local/share/bash-completion/completions/kc
$sudo install -D -m 0644 "$completions/_kc" /usr/local/share/zsh/site-functions/_kc
$sudo install -D -m 0644 "$completions/kc.fish" /usr/local/share/fish/vendor_completions.d/kc.fish
rm -rf "$completions"
if bash "$root/Tools/manpage.sh" "$root/.build/man/kc.1" >> "$root/.build/setup-build.log" 2>&1; then
    $sudo install -D -m 0644 "$root/.build/man/kc.1" /usr/local/share/man/man1/kc.1
    echo "kc: installed completions for bash, zsh and fish, and the man page (man kc)" >&2
else
    echo "kc: installed completions for bash, zsh and fish; the man page could not be generated (.build/setup-build.log)" >&2
fi

# The python keyring backend (Integrations/python), into the system python, where
# Debian's keyring command and library find it (/usr/local/lib/python3.*/dist-packages).
# Built offline from a copy, so pip's build folders stay out of the repository.
python=/usr/bin/python3
if [ -x "$python" ] && "$python" -m pip --version > /dev/null 2>&1; then
    pip_options=(--quiet --no-build-isolation --no-deps --no-cache-dir --disable-pip-version-check)
    pip_help=$("$python" -m pip install --help 2>/dev/null || true)
    # Debian 12 marks its python externally managed (PEP 668); pips before 23.0 lack the flag.
    case "$pip_help" in *--break-system-packages*) pip_options+=(--break-system-packages) ;; esac
    case "$pip_help" in *--root-user-action*) pip_options+=(--root-user-action=ignore) ;; esac
    source=$(mktemp -d)
    cp -R "$root/Integrations/python/." "$source/"
    if $sudo "$python" -m pip install "${pip_options[@]}" "$source" >> "$root/.build/setup-build.log" 2>&1; then
        echo "kc: installed the python keyring backend keyring_kc for $python (keyring --list-backends shows it)" >&2
    else
        echo "kc: the python keyring backend could not be installed; pip's output is in .build/setup-build.log" >&2
    fi
    $sudo rm -rf "$source"
fi

# The demo runs in a throwaway session keyring so it leaves nothing behind: store a
# secret, mount ~/kc, read it with cat, unmount.
# ~/kc unless it is taken (already a mount, or a folder with files in it, such as a
# clone of this repository named kc).
mountpoint="$HOME/kc"
if mountpoint -q "$mountpoint" 2>/dev/null || [ -n "$(ls -A "$mountpoint" 2>/dev/null)" ] || { [ -e "$mountpoint" ] && [ ! -d "$mountpoint" ]; }; then
    mountpoint=$(mktemp -d /tmp/kc-demo.XXXXXX)
    trap 'rmdir "$mountpoint" 2>/dev/null || true' EXIT
    echo "kc: $HOME/kc is in use; the demo mounts at $mountpoint instead" >&2
fi
mkdir -p "$mountpoint"
KC_DEMO_MOUNT="$mountpoint" keyctl session - bash -c '
set -e
m=$KC_DEMO_MOUNT
show() { printf "$ %s\n" "$*"; eval "$@"; }
show "printf %s hunter2 | kc set com.example.demo token"
show "kc get com.example.demo token; echo"
show "kc mount $m"
show "ls -l $m/com.example.demo"
show "cat $m/com.example.demo/token; echo"
show "printf %s correct-horse > $m/com.example.demo/token"
show "kc get com.example.demo token; echo"
show "kc umount $m"
show "kc rm com.example.demo token"
' 2>&1 | grep -v "^Joined session keyring"
