"""Issue 29: kc's front serving `kc get --group G S K` and `kc get --from U S K`
(Front/Shared.swift, docs/FRONT.md) for a member of G reading an item U shares with G, against the static C floor
(raw_get.c, a plain get of the member's own item), a static C program making the same
kernel calls as a member's read (raw_shared_get.c) and the full kc, whole processes, in
one run (docs/BENCHMARKS.md).

usage: front_shared.py   (run by front_shared.sh as the member, inside a throwaway session
keyring with its user keyring linked, after the owner shared bench.shared/token with G)
Environment: FRONT (the front, with kc-full beside it), KC (the full kc), RAW_GET,
RAW_SHARED_GET, GROUP, GID, OWNER (the owner's name), ROUNDS (pairs per row, default 300).

Each row runs its two commands as interleaved pairs (which goes first alternates), and
reports the median of each side's times and the median of the per-pair ratios.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interleaved import pairs, print_table, spawn  # noqa: E402

FRONT, KC = os.environ["FRONT"], os.environ["KC"]
RAW_GET, RAW_SHARED_GET = os.environ["RAW_GET"], os.environ["RAW_SHARED_GET"]
GROUP, GID, OWNER = os.environ["GROUP"], os.environ["GID"], os.environ["OWNER"]


def served_by_front(command):
    """The front's copy with no kc-full beside it serves the command (exit 0) rather than
    saying it cannot run the full kc."""
    alone = os.environ["FRONT_ALONE"]
    done = subprocess.run([alone] + command[1:], capture_output=True)
    return done.returncode == 0 and b"cannot run the full kc" not in done.stderr


# No vault: the front serves a member's read only then.
os.environ["XDG_DATA_HOME"] = "/proc/kc-bench-no-vault"
# The member's own item, for the plain floor and the own read with --group.
subprocess.run([KC, "set", "bench.floor", "token"], input=b"s3cret-value", check=True)
shared = [FRONT, "get", "--group", GROUP, "bench.shared", "token"]
own = [FRONT, "get", "--group", GROUP, "bench.floor", "token"]
named = [FRONT, "get", "--from", OWNER, "bench.shared", "token"]
for command in (shared, own, named):
    if not served_by_front(command):
        sys.exit(f"bench: the front does not serve {' '.join(command[1:])} here; see docs/FRONT.md")
    if subprocess.run(command, capture_output=True).stdout != subprocess.run([KC] + command[1:], capture_output=True).stdout:
        sys.exit(f"bench: the front and the full kc print different values for {' '.join(command[1:])}")
full_shared = [KC] + shared[1:]
floor = lambda: spawn([RAW_GET, "bench.floor", "token"])
same_calls = lambda: spawn([RAW_SHARED_GET, GID, "bench.shared", "token"])
run = lambda command: (lambda: spawn(command))

rows = [
    ("front `kc get --group G S K` (member)", "static C floor, a plain get (raw_get.c)", 1.1, pairs(run(shared), floor)),
    ("front `kc get --group G S K` (member)", "static C, a member's calls (raw_shared_get.c)", 1.1, pairs(run(shared), same_calls)),
    ("front `kc get --group G S K` (member)", "full `kc get --group G S K`", None, pairs(run(shared), run(full_shared))),
    ("full `kc get --group G S K` (member, today)", "static C floor, a plain get (raw_get.c)", None, pairs(run(full_shared), floor)),
    ("front `kc get -q --group G S K` (member)", "static C floor, a plain get (raw_get.c)", 1.1,
     pairs(run(shared[:2] + ["-q"] + shared[2:]), floor)),
    ("front `kc get --group G S K` (own service)", "static C floor, a plain get (raw_get.c)", 1.1, pairs(run(own), floor)),
    ("front `kc get --from U S K` (member)", "static C floor, a plain get (raw_get.c)", 1.1, pairs(run(named), floor)),
    ("front `kc get --from U S K` (member)", "full `kc get --from U S K`", None, pairs(run(named), run([KC] + named[1:]))),
]
subprocess.run([KC, "rm", "bench.floor", "token"], check=True)

with open("/proc/keys") as listing:
    keys = sum(1 for _ in listing)
print(f"(the member sees {keys} keys in /proc/keys)")
print()
print_table(rows)
