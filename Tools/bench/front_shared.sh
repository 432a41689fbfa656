#!/usr/bin/env bash
# Issue 29: kc's front serving `kc get --group G S K` and `--from U` (Front/Shared.swift,
# docs/FRONT.md) for a member of G, against the static C floor (raw_get.c), a static C program making a
# member's kernel calls (raw_shared_get.c) and the full kc (Tools/bench/front_shared.py;
# docs/BENCHMARKS.md).
#   ROUNDS   interleaved pairs per row (default 300)
# Needs root: it acts as two users, the test suite's kc-test (the owner) and
# kc-test-member (the member), both in the group kc-test-share (made here as the tests
# make them if missing). The owner shares bench.shared/token with the group at
# after-first-unlock; the member reads it in a throwaway session keyring (its user
# keyring linked, as a login's is). The programs are copied to a folder both may run
# from; what the run made is removed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "front_shared.sh: run as root (it acts as the owner and the member)" >&2; exit 1; }
export PATH="/opt/swift/usr/bin:$PATH"
owner=kc-test member=kc-test-member group=kc-test-share

swift build -c release --package-path "$root" --product kc >&2
bash "$root/Tools/build-front.sh" --release
bin=$(swift build -c release --package-path "$root" --show-bin-path)
[ -x "$bin/kc-front" ] || { echo "front_shared.sh: no front was built (see above)" >&2; exit 1; }

getent group "$group" >/dev/null || groupadd --system "$group"
for user in "$owner" "$member"; do
    id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
    id -nG "$user" | tr ' ' '\n' | grep -qx "$group" || usermod -aG "$group" "$user"
done
gid=$(getent group "$group" | cut -d: -f3)

work=$(mktemp -d "${TMPDIR:-/tmp}/kc-bench-shared.XXXXXX")
as() {  # as USER COMMAND...: in a throwaway session keyring with the user keyring linked, no vault
    local user=$1; shift
    runuser -u "$user" -- keyctl session - /bin/sh -c 'keyctl link @u @s >/dev/null; XDG_DATA_HOME=/proc/kc-bench-no-vault; export XDG_DATA_HOME; cd /; exec "$@"' as "$@" 2>/dev/null
}
cleanup() {  # the owner's service keyring, items and all (a removal of its last item leaves a shared keyring)
    as "$owner" /bin/sh -c 'r=$(keyctl search @u keyring kc:bench.shared) && keyctl clear "$r" && keyctl unlink "$r" @u' >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/alone"
cp "$bin/kc-front" "$work/kc"
cp "$bin/kc-front" "$work/alone/kc"
cp "$bin/kc" "$work/kc-full"
cc -O2 -static -o "$work/raw_get" "$root/Tools/bench/raw_get.c" -lkeyutils
cc -O2 -static -o "$work/raw_shared_get" "$root/Tools/bench/raw_shared_get.c" -lkeyutils
cp "$root/Tools/bench/front_shared.py" "$root/Tools/bench/interleaved.py" "$work/"
chmod -R a+rX "$work"

printf 's3cret-value' | as "$owner" "$work/kc-full" set --group "$group" --access after-first-unlock bench.shared token
runuser -u "$member" -- env FRONT="$work/kc" FRONT_ALONE="$work/alone/kc" KC="$work/kc-full" \
    RAW_GET="$work/raw_get" RAW_SHARED_GET="$work/raw_shared_get" GROUP="$group" GID="$gid" OWNER="$owner" ROUNDS="${ROUNDS:-300}" \
    keyctl session - /bin/sh -c 'keyctl link @u @s >/dev/null; cd /; exec python3 "$0"' "$work/front_shared.py" 2>&1 \
    | grep -v '^Joined session keyring'
