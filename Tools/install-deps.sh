#!/usr/bin/env bash
# Installs the system packages kc needs on Debian/Ubuntu (as root, or through sudo):
# libkeyutils-dev and libfuse3-dev to build, keyutils (keyctl) and fuse3 (fusermount3)
# to use and test, attr for the mount's extended attributes, hyperfine for the benchmark,
# strace and python3 for tests that watch system calls and drive a terminal, acl to
# give the test user /dev/fuse where it is not world-writable, podman, runc and
# busybox-static for the container tests.
set -euo pipefail
packages=(libkeyutils-dev keyutils libfuse3-dev fuse3 attr acl hyperfine strace python3 podman runc busybox-static)
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
if ! command -v swift >/dev/null && [ -x /opt/swift/usr/bin/swift ]; then
    echo "kc: add /opt/swift/usr/bin to PATH to use swift directly" >&2
fi
