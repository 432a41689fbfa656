#!/usr/bin/env bash
# The README's first command: install what kc needs, build the release `kc`, install
# it on the PATH (/usr/local/bin), and show it working on a throwaway secret.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/opt/swift/usr/bin:$PATH"
bash "$root/Tools/install-deps.sh"

echo "kc: building the release kc (static, stripped)" >&2
swift build -c release --package-path "$root" --product kc >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo install -m 0755 "$root/.build/release/kc" /usr/local/bin/kc
echo "kc: installed /usr/local/bin/kc" >&2

# The demo runs in a throwaway session keyring so it leaves nothing behind.
keyctl session - bash -c '
set -e
echo "\$ printf %s hunter2 | kc set com.example.demo token"
printf %s hunter2 | kc set com.example.demo token
echo "\$ kc get com.example.demo token"
kc get com.example.demo token; echo
echo "\$ kc ls --long com.example.demo"
kc ls --long com.example.demo
echo "\$ keyctl print \$(keyctl search @s user token)"
keyctl print "$(keyctl search @s user token)"
echo "\$ kc rm com.example.demo token"
kc rm com.example.demo token
'
