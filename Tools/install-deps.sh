#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages kc needs (as root, or through sudo).
#   install-deps.sh          to build and use kc: libkeyutils-dev and libfuse3-dev to
#                            build, keyutils (keyctl), fuse3 (fusermount3) and attr
#                            (getfattr/setfattr) to use it
#   install-deps.sh --tests  also what the test suite and benchmark use: strace and
#                            python3 (syscall and terminal tests), acl (to give the test
#                            user /dev/fuse where it is not world-writable), podman, runc
#                            and busybox-static (container tests), age (backup test),
#                            hyperfine (benchmark)
set -euo pipefail
packages=(libkeyutils-dev keyutils libfuse3-dev fuse3 attr)
if [ "${1:-}" = "--tests" ]; then
    packages+=(strace python3 acl podman runc busybox-static age hyperfine)
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "kc: installing ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
