"""Issue 29's prototype: kc's front (Front/, docs/FRONT.md) against the static C floor,
`keyctl` and the full kc, whole processes, in one run (docs/BENCHMARKS.md): a hit, a miss
without a vault, `kc ls S` without a vault, and a command handed over.

usage: front.py      (run by front.sh inside a throwaway session keyring: keyctl session -)
Environment: FRONT (the front, with kc-full beside it), KC (the full kc), RAW_GET (static
C get), PEAK_RSS (peak_rss), ROUNDS (pairs per row, default 300).

Each row runs its two commands as interleaved pairs (which goes first alternates), and
reports the median of each side's times and the median of the per-pair ratios. It
stores what it reads under a service named bench.front and removes it.
"""
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interleaved import pairs, print_table, spawn  # noqa: E402

FRONT, KC = os.path.abspath(os.environ["FRONT"]), os.path.abspath(os.environ["KC"])
RAW_GET, PEAK_RSS = os.environ["RAW_GET"], os.environ["PEAK_RSS"]
KEYCTL = shutil.which("keyctl")


def peak_rss(command):
    """Median peak RSS (KiB) of 5 runs."""
    return statistics.median(int(subprocess.run([PEAK_RSS] + command, capture_output=True, check=True).stdout)
                             for _ in range(5))


# No vault for this run, whatever the caller has: the front serves a miss and `kc ls S` only then.
os.environ["XDG_DATA_HOME"] = "/proc/kc-bench-no-vault"
subprocess.run([KC, "set", "bench.front", "token"], input=b"s3cret-value", check=True)
ring = subprocess.run([KEYCTL, "search", "@s", "keyring", "kc:bench.front"], capture_output=True, check=True).stdout.decode().strip()
serial = subprocess.run([KEYCTL, "search", ring, "user", "token"], capture_output=True, check=True).stdout.decode().strip()
for item in ("second", "third"):
    subprocess.run([KC, "set", "bench.front", item], input=b"another-value", check=True)
floor = lambda: spawn([RAW_GET, "bench.front", "token"])
search_missing = lambda: spawn([KEYCTL, "search", ring, "user", "missing"], 1)
pipe = lambda: spawn([KEYCTL, "pipe", serial])
get = lambda kc, *words, status=0: (lambda: spawn([kc, "get", *words], status))
value = os.path.join(os.environ.get("OUT", "/tmp"), "front-value")
with open(value, "wb") as handle:
    handle.write(b"s3cret-value")
set_value = lambda kc: (lambda: spawn([kc, "set", "bench.front", "token"], stdin=value))
padd = lambda: spawn([KEYCTL, "padd", "user", "token", ring], stdin=value)


def victim():
    """A fresh item to remove (made outside the timing); its serial."""
    subprocess.run([KC, "set", "bench.front", "victim"], input=b"v", check=True)
    return subprocess.run([KEYCTL, "search", ring, "user", "victim"], capture_output=True, check=True).stdout.decode().strip()


def removal(kc):
    def remove():
        victim()
        return spawn([kc, "rm", "bench.front", "victim"])
    return remove


unlink = lambda: spawn([KEYCTL, "unlink", victim(), ring])

rows = [
    ("front `kc get S K`", "static C floor (raw_get.c)", 1.1, pairs(get(FRONT, "bench.front", "token"), floor)),
    ("front `kc get -q S K`", "static C floor (raw_get.c)", 1.1, pairs(get(FRONT, "-q", "bench.front", "token"), floor)),
    ("front `kc get S K`", "`keyctl pipe SERIAL`", 1.0, pairs(get(FRONT, "bench.front", "token"), pipe)),
    ("front `kc get -q S K`", "`keyctl pipe SERIAL`", 1.0, pairs(get(FRONT, "-q", "bench.front", "token"), pipe)),
    ("full `kc get S K` (today)", "static C floor (raw_get.c)", None, pairs(get(KC, "bench.front", "token"), floor)),
    ("front `kc get S K`", "full `kc get S K`", None, pairs(get(FRONT, "bench.front", "token"), get(KC, "bench.front", "token"))),
    # A miss without a vault, every level probed (the service exists at home only).
    ("front `kc get S missing` (no vault)", "`keyctl search RING user missing` (fails)", None,
     pairs(get(FRONT, "bench.front", "missing", status=1), search_missing)),
    ("front `kc get -q S missing` (no vault)", "`keyctl search RING user missing` (fails)", None,
     pairs(get(FRONT, "-q", "bench.front", "missing", status=1), search_missing)),
    ("front `kc get -q S missing` (no vault)", "static C floor, the same miss (raw_get.c)", None,
     pairs(get(FRONT, "-q", "bench.front", "missing", status=1), lambda: spawn([RAW_GET, "bench.front", "missing"], 1))),
    ("front `kc get -q S missing` (no vault)", "full `kc get -q S missing`", None,
     pairs(get(FRONT, "-q", "bench.front", "missing", status=1), get(KC, "-q", "bench.front", "missing", status=1))),
    # kc ls S without a vault, against table.py's peer.
    ("front `kc ls S` (no vault, 3 items)", "`keyctl rlist RING`", 1.1,
     pairs(lambda: spawn([FRONT, "ls", "bench.front"]), lambda: spawn([KEYCTL, "rlist", ring]))),
    ("front `kc ls S` (no vault, 3 items)", "full `kc ls S`", None,
     pairs(lambda: spawn([FRONT, "ls", "bench.front"]), lambda: spawn([KC, "ls", "bench.front"]))),
    # An existing item set again, and an item removed (the service keeps others), no vault.
    ("front `kc set S K < value` (no vault)", "`keyctl padd user K RING < value`", 1.1, pairs(set_value(FRONT), padd)),
    ("front `kc set S K < value` (no vault)", "full `kc set S K < value`", None, pairs(set_value(FRONT), set_value(KC))),
    ("front `kc rm S K` (no vault)", "`keyctl unlink SERIAL RING`", 1.1, pairs(removal(FRONT), unlink)),
    ("front `kc rm S K` (no vault)", "full `kc rm S K`", None, pairs(removal(FRONT), removal(KC))),
    # kc exec --env of one's own service (3 items), served by the front (issue 39).
    ("front `kc exec --service S --env -- true`", "`env true`", 1.2,
     pairs(lambda: spawn([FRONT, "exec", "--service", "bench.front", "--env", "--", "true"]), lambda: spawn(["/usr/bin/env", "true"]))),
    ("full `kc exec --service S --env -- true`", "`env true`", None,
     pairs(lambda: spawn([KC, "exec", "--service", "bench.front", "--env", "--", "true"]), lambda: spawn(["/usr/bin/env", "true"]))),
    ("front `kc ls -l S` (handed over)", "full `kc ls -l S`", None,
     pairs(lambda: spawn([FRONT, "ls", "-l", "bench.front"]), lambda: spawn([KC, "ls", "-l", "bench.front"]))),
]
memory = [("peak RSS of front `kc get`", peak_rss([FRONT, "get", "bench.front", "token"])),
          ("peak RSS of full `kc get`", peak_rss([KC, "get", "bench.front", "token"])),
          ("peak RSS of `keyctl pipe`", peak_rss([KEYCTL, "pipe", serial])),
          ("peak RSS of the static C floor", peak_rss([RAW_GET, "bench.front", "token"]))]
for item in ("token", "second", "third"):
    subprocess.run([KC, "rm", "bench.front", item], check=True)
os.remove(value)

print_table(rows)
print()
for label, kib in memory:
    print(f"- {label}: {kib:.0f} KiB")
