#!/usr/bin/env bash
# Builds kc's PAM module, PAM/pam_kc.c, into .build/pam/pam_kc.so: plain C against
# libpam (libpam0g-dev), without the Swift runtime that a SwiftPM product would link in
# (the module is loaded into login, sshd, su, sudo and passwd; see the file's head).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/.build/pam"
# Any C compiler: the system's cc, else the clang that comes with Swift.
compiler=$(command -v cc || command -v clang || echo /opt/swift/usr/bin/clang)
"$compiler" -shared -fPIC -O2 -Wall -Wextra -Werror -fstack-protector-strong -D_FORTIFY_SOURCE=2 \
   -Wl,-z,relro,-z,now -Wl,--as-needed \
   -o "$root/.build/pam/pam_kc.so" "$root/PAM/pam_kc.c" -lpam
