#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages kc needs (as root, or through sudo).
#   install-deps.sh          to build and use kc: libkeyutils-dev, libfuse3-dev and
#                            libpam0g-dev (the PAM module) to build, keyutils (keyctl), fuse3 (fusermount3) and attr
#                            (getfattr/setfattr) to use it, libsystemd-dev (sd-bus, for
#                            kc-secretd) and libgcrypt20-dev (its Diffie-Hellman), dbus-daemon and dbus-user-session (a session
#                            bus without a desktop), libsecret-tools (secret-tool), bash-completion (which
#                            loads kc's completions), man-db (man kc), acl (see
#                            /dev/fuse below), and python3-pip, python3-setuptools
#                            and python3-keyring (setup.sh installs kc's python
#                            keyring backend; the keyring command comes with it)
#   install-deps.sh --tests  also what the test suite and benchmark use: strace and
#                            python3 (syscall and terminal tests), gdb (that the
#                            common kc get spellings skip the argument parser), podman, runc
#                            and busybox-static (container tests), age (backup and
#                            vault interop tests), pamtester (vault PAM tests),
#                            openssh-server, sshpass, libnss-extrausers and expect
#                            (real ssh logins through PAM: SSHLoginTests),
#                            hyperfine (benchmark); and the real clients the
#                            integration tests drive (docs/INTEGRATIONS.md): git,
#                            docker-registry and apache2-utils (a local registry with
#                            htpasswd), borgbackup and restic, rclone and direnv
#                            (password commands), python3-dotenv (python3-keyring
#                            is in the base list); libsecret-1-dev (to build git's
#                            git-credential-libsecret), python3-secretstorage,
#                            gnome-keyring (the Secret Service reference the tests compare with),
#                            python3-venv (the venv python SecretStorage's and keyring's own
#                            test suites run in), python3-gi and gir1.2-secret-1 (keyring's
#                            libsecret backend, in its suite)
#   install-deps.sh --heavy-clients  the Secret Service clients Tools/test.sh --long runs
#                            (issue 37): chromium, librust-secret-service-dev with cargo and
#                            rustc, seahorse with xvfb, xauth, x11-apps (xwd) and
#                            python3-pyatspi. One by one: a package this system cannot
#                            install is named and left out, and its tests skip.
set -euo pipefail
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ "${1:-}" = "--heavy-clients" ]; then
    heavy=(chromium librust-secret-service-dev cargo rustc seahorse xvfb xauth x11-apps python3-pyatspi at-spi2-core)
    missing=()
    for package in "${heavy[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    [ ${#missing[@]} -gt 0 ] || { echo "kc: already installed: the ${#heavy[@]} packages of the heavy clients" >&2; exit 0; }
    $sudo apt-get update -qq || echo "kc: apt-get update failed; trying the package lists there are" >&2
    for package in "${missing[@]}"; do
        if DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$package" >/dev/null; then
            echo "kc: installed $package" >&2
        else
            echo "kc: cannot install $package here: the tests that need it skip" >&2
        fi
    done
    exit 0
fi
packages=(libkeyutils-dev keyutils libfuse3-dev fuse3 attr acl bash-completion man-db libpam0g-dev
          libsystemd-dev libgcrypt20-dev libcurl4-openssl-dev dbus-daemon dbus-user-session libsecret-tools
          python3-pip python3-setuptools python3-keyring)
if [ "${1:-}" = "--tests" ]; then
    packages+=(strace curl openssl python3 gdb podman runc busybox-static age pamtester openssh-server sshpass libnss-extrausers expect hyperfine
               git docker-registry apache2-utils borgbackup restic rclone direnv python3-dotenv
               libsecret-1-dev gcc pkg-config python3-secretstorage gnome-keyring python3-venv python3-gi gir1.2-secret-1)
fi
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "kc: installing ${missing[*]} (apt)" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    echo "kc: installed ${#missing[@]} packages" >&2
else
    echo "kc: already installed: the ${#packages[@]} packages this needs; apt is not needed" >&2
fi

# Debian's udev rule makes /dev/fuse mode 0666. Some machines (VMs, containers) keep it
# 0600 or 0660, and then no ordinary user can mount: grant the caller alone with an ACL.
if [ "$(id -u)" -ne 0 ] && [ -e /dev/fuse ] && ! { [ -r /dev/fuse ] && [ -w /dev/fuse ]; }; then
    echo "kc: /dev/fuse is not usable by $(id -un) here (Debian's default mode is 0666); granting it: sudo setfacl -m u:$(id -un):rw /dev/fuse" >&2
    sudo setfacl -m "u:$(id -un):rw" /dev/fuse
fi
