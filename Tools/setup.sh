#!/usr/bin/env bash
# The README's first command: install what kc needs, build the release `kc` (its front
# and the full kc, `kc-full`, where the toolchain has Embedded Swift) and its mount
# daemon `kc-mountd`, install them in /usr/local/bin, and show them working on a
# throwaway secret. It numbers its steps and shows the build's own progress; run again,
# it skips what is done: packages already there (no apt), an up-to-date build (swift
# build says so in seconds), installed files that are already the same ("already
# installed").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
steps=8
started=$SECONDS
step() { echo "kc setup [$1/$steps]: $2" >&2; }
mkdir -p "$root/.build"
log=$root/.build/setup-build.log
: > "$log"

# Installs SOURCE as TARGET with MODE, unless TARGET holds the same bytes with that mode.
install_file() {
    local mode=$1 source=$2 target=$3
    if [ -f "$target" ] && [ ! -L "$target" ] && cmp -s "$source" "$target" &&
       [ "$(stat -c %a "$target")" = "${mode#0}" ]; then
        echo "  already installed: $target" >&2
    else
        $sudo install -D -m "$mode" "$source" "$target"
        echo "  installed $target" >&2
    fi
}
# Makes LINK a symbolic link to TARGET, unless it is one already.
install_link() {
    local target=$1 link=$2
    if [ -L "$link" ] && [ "$(readlink "$link")" = "$target" ]; then
        echo "  already installed: $link -> $target" >&2
    else
        $sudo ln -sfn "$target" "$link"
        echo "  installed $link -> $target" >&2
    fi
}

step 1 "the Debian packages kc needs (apt only for those missing)"
bash "$root/Tools/install-deps.sh"

step 2 "building kc, kc-mountd, kc-secretd and kc-agent (release: a few minutes on a small machine; seconds when nothing changed)"
# Every product at once, as the man page's generator builds them (step 6), so that
# step finds them built. swift build's progress lines ([n/N] ..., fetching, Build
# complete) go to the terminal; all of its output, warnings too, goes to the log.
if ! swift build -c release --package-path "$root" 2>&1 | tee -a "$log" |
     awk '/^\[[0-9]+\/[0-9]+\] |^(Fetch|Comput|Creat|Working copy|Building for|Build complete)|error:/ { print; fflush() }' >&2
then
    echo "kc: the build failed; its errors:" >&2
    grep -A8 "error:" "$log" | head -60 >&2 || true
    echo "kc: the build's whole output is in .build/setup-build.log" >&2
    exit 2
fi
warnings=$(grep -c "warning:" "$log" || true)
[ "$warnings" -eq 0 ] || echo "  (the build's $warnings warnings are in .build/setup-build.log)" >&2
bin=$(swift build -c release --package-path "$root" --show-bin-path)
# kc's front (docs/FRONT.md): the small program installed as `kc` that serves the hot
# commands at the speed of C and runs the full kc, installed beside it as `kc-full`,
# for everything else. Without Embedded Swift in the toolchain there is no front, and
# the full kc is installed as `kc`, as before.
if front_log=$(bash "$root/Tools/build-front.sh" --release 2>&1); then
    echo "$front_log" >> "$log"
    grep "^build-front: no front" <<< "$front_log" | sed 's/^build-front: /  /' >&2 || true
else
    echo "$front_log" >> "$log"
    rm -f "$bin/kc-front"
    echo "kc: the front did not build (.build/setup-build.log); the full kc is installed as kc" >&2
fi

step 3 "the programs, in /usr/local/bin"
if [ -x "$bin/kc-front" ]; then
    # kc-full first: the front runs it, so it must be there before the front is.
    install_file 0755 "$bin/kc" /usr/local/bin/kc-full
    install_file 0755 "$bin/kc-front" /usr/local/bin/kc
else
    install_file 0755 "$bin/kc" /usr/local/bin/kc
    if [ -e /usr/local/bin/kc-full ]; then
        $sudo rm -f /usr/local/bin/kc-full
        echo "  removed /usr/local/bin/kc-full (no front was built: kc is the full kc)" >&2
    fi
fi
for program in kc-mountd kc-secretd kc-agent; do
    install_file 0755 "$bin/$program" "/usr/local/bin/$program"
done
# The credential helpers are kc itself under another name (it looks at argv[0]).
install_link kc /usr/local/bin/git-credential-kc
install_link kc /usr/local/bin/docker-credential-kc

# The Secret Service: the session bus starts kc-secretd on a client's first call (D-Bus
# activation; under systemd's user manager through its user unit).
step 4 "the Secret Service kc-secretd, started by the session bus on first use (secret-tool, libsecret, python keyring)"
install_file 0644 "$root/Tools/secret-service/org.freedesktop.secrets.service" /usr/local/share/dbus-1/services/org.freedesktop.secrets.service
install_file 0644 "$root/Tools/systemd/kc-secretd.service" /usr/local/lib/systemd/user/kc-secretd.service
# kc as OpenBao's agent: its user unit, not enabled (it needs a configuration first).
install_file 0644 "$root/Tools/systemd/kc-agent.service" /usr/local/lib/systemd/user/kc-agent.service

# The PAM module and its pam-auth-update profile: installed, not switched on. PAM looks
# for modules in the folder that holds pam_unix.so.
step 5 "the PAM module pam_kc.so (installed, not switched on)"
pam_module=$root/.build/pam/pam_kc.so
if [ "$pam_module" -nt "$root/PAM/pam_kc.c" ] && [ "$pam_module" -nt "$root/Tools/build-pam.sh" ] ||
   bash "$root/Tools/build-pam.sh" >> "$log" 2>&1; then
    modules=$(dirname "$(find /lib /usr/lib /lib64 /usr/lib64 -name pam_unix.so -print -quit 2>/dev/null)")
    install_file 0644 "$pam_module" "$modules/pam_kc.so"
    if [ -d /usr/share/pam-configs ]; then
        install_file 0644 "$root/PAM/kc" /usr/share/pam-configs/kc
        echo "  to unlock the vault at login: sudo pam-auth-update --enable kc" >&2
    else
        echo "  this system has no pam-auth-update: see the README for the lines" >&2
    fi
else
    echo "kc: the PAM module could not be built (.build/setup-build.log); everything else works without it" >&2
fi

# Shell completions and the man page, generated from the argument parser.
step 6 "bash, zsh and fish completions and the man page (the first time, its generator is built first: seconds to a minute)"
completions=$(mktemp -d)
kc=/usr/local/bin/kc
"$kc" --generate-completion-script bash > "$completions/kc"
"$kc" --generate-completion-script zsh > "$completions/_kc"
"$kc" --generate-completion-script fish > "$completions/kc.fish"
install_file 0644 "$completions/kc" /usr/local/share/bash-completion/completions/kc
install_file 0644 "$completions/_kc" /usr/local/share/zsh/site-functions/_kc
install_file 0644 "$completions/kc.fish" /usr/local/share/fish/vendor_completions.d/kc.fish
rm -rf "$completions"
if bash "$root/Tools/manpage.sh" "$root/.build/man/kc.1" >> "$log" 2>&1; then
    install_file 0644 "$root/.build/man/kc.1" /usr/local/share/man/man1/kc.1
else
    echo "kc: the man page could not be generated (.build/setup-build.log); the completions are installed" >&2
fi
install_file 0644 "$root/docs/kc-agent.1" /usr/local/share/man/man1/kc-agent.1

# The python keyring backend (Integrations/python), into the system python, where
# Debian's keyring command and library find it (/usr/local/lib/python3.*/dist-packages).
# Built offline from a copy, so pip's build folders stay out of the repository.
step 7 "the python keyring backend keyring_kc"
python=/usr/bin/python3
# Whether the installed backend is this one: the same module, version and entry point.
python_backend_installed() {
    local version
    version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Integrations/python/pyproject.toml")
    "$python" -I - "$root/Integrations/python/keyring_kc.py" "$version" 2>/dev/null <<'PYTHON'
import filecmp, sys
from importlib import metadata, util
try:
    spec = util.find_spec("keyring_kc")
    same = (spec is not None and spec.origin is not None
            and filecmp.cmp(spec.origin, sys.argv[1], shallow=False)
            and metadata.version("keyring-kc") == sys.argv[2]
            and any(entry.value == "keyring_kc"
                    for entry in metadata.entry_points().select(group="keyring.backends")))
except Exception:
    same = False
sys.exit(0 if same else 1)
PYTHON
}
if [ ! -x "$python" ] || ! "$python" -m pip --version > /dev/null 2>&1; then
    echo "  skipped: $python has no pip (Tools/install-deps.sh installs python3-pip)" >&2
elif python_backend_installed; then
    echo "  already installed: keyring_kc for $python" >&2
else
    pip_options=(--quiet --no-build-isolation --no-deps --no-cache-dir --disable-pip-version-check)
    pip_help=$("$python" -m pip install --help 2>/dev/null || true)
    # Debian 12 marks its python externally managed (PEP 668); pips before 23.0 lack the flag.
    case "$pip_help" in *--break-system-packages*) pip_options+=(--break-system-packages) ;; esac
    case "$pip_help" in *--root-user-action*) pip_options+=(--root-user-action=ignore) ;; esac
    source=$(mktemp -d)
    cp -R "$root/Integrations/python/." "$source/"
    if $sudo "$python" -m pip install "${pip_options[@]}" "$source" >> "$log" 2>&1; then
        echo "kc: installed the python keyring backend keyring_kc for $python (keyring --list-backends shows it)" >&2
    else
        echo "kc: the python keyring backend could not be installed; pip's output is in .build/setup-build.log" >&2
    fi
    $sudo rm -rf "$source"
fi

step 8 "kc at work, in a throwaway session keyring (nothing is left behind)"
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
echo "kc setup: done in $((SECONDS - started)) s; try 'man kc' and 'kc doctor'" >&2
