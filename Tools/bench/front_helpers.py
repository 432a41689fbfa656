"""Issue 29: the credential helpers' `get` served by kc's front (Front/CredentialHelpers.swift,
docs/FRONT.md) against `keyctl pipe`, the static C floor and the full kc, whole processes,
in one run (docs/BENCHMARKS.md).

usage: front_helpers.py   (run by front_helpers.sh inside a throwaway session keyring: keyctl session -)
Environment: FRONT (the front, with kc-full beside it), KC (the full kc), RAW_GET (static
C get: three calls), RAW_GIT_GET (static C making the front's calls for git's get), ROUNDS
(pairs per row, default 300).

Each helper runs as installed, through a link named like it (to the front, or to the full
kc), with its input from a file. Each row runs its two commands as interleaved pairs (which
goes first alternates), and reports the median of each side's times and the median of the
per-pair ratios. It stores credentials for git.example and registry.example and removes them.
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interleaved import pairs, print_table, spawn  # noqa: E402

FRONT, KC = os.path.abspath(os.environ["FRONT"]), os.path.abspath(os.environ["KC"])
RAW_GET, RAW_GIT_GET = os.environ["RAW_GET"], os.environ["RAW_GIT_GET"]
KEYCTL = shutil.which("keyctl")


def output(command, stdin):
    with open(stdin, "rb") as given:
        return subprocess.run(command, stdin=given, capture_output=True).stdout


# No vault for this run, whatever the caller has: the front serves the helpers only then.
os.environ["XDG_DATA_HOME"] = "/proc/kc-bench-no-vault"
folder = tempfile.mkdtemp(prefix="kc-bench-helpers.")
links = {}
for kind, target in (("front", FRONT), ("full", KC)):
    os.mkdir(os.path.join(folder, kind))
    for helper in ("git-credential-kc", "docker-credential-kc"):
        links[kind, helper] = os.path.join(folder, kind, helper)
        os.symlink(target, links[kind, helper])


def input_file(name, data):
    path = os.path.join(folder, name)
    with open(path, "wb") as file:
        file.write(data)
    return path


subprocess.run([links["full", "git-credential-kc"], "store"],
               input=b"protocol=https\nhost=git.example\nusername=alice\npassword=pw\n\n", check=True)
subprocess.run([links["full", "docker-credential-kc"], "store"],
               input=b'{"ServerURL":"registry.example","Username":"alice","Secret":"pw"}', check=True)
git_named = input_file("git-named", b"protocol=https\nhost=git.example\nusername=alice\n\n")  # table.py's input
git_only = input_file("git-only", b"protocol=https\nhost=git.example\n\n")  # what git sends: the only user
git_unknown = input_file("git-unknown", b"protocol=https\nhost=unknown.example\n\n")
git_malformed = input_file("git-malformed", b"protocol=https\nhost=git.example\nnot key value\n\n")
docker_input = input_file("docker", b"registry.example\n")
docker_unknown = input_file("docker-unknown", b"unknown.example\n")
ring = subprocess.run([KEYCTL, "search", "@s", "keyring", "kc:git:https:git.example"], capture_output=True, check=True).stdout.decode().strip()
token = subprocess.run([KEYCTL, "search", ring, "user", "alice"], capture_output=True, check=True).stdout.decode().strip()

# Both paths give the same answer before anything is timed.
for helper, stdin in (("git-credential-kc", git_named), ("git-credential-kc", git_only), ("docker-credential-kc", docker_input)):
    front, full = output([links["front", helper], "get"], stdin), output([links["full", helper], "get"], stdin)
    if front != full or not front:
        sys.exit(f"bench: {helper} get answers differently through the front")

helper = lambda kind, name, stdin, status=0: (lambda: spawn([links[kind, name], "get"], status, stdin))
pipe = lambda: spawn([KEYCTL, "pipe", token])
floor = lambda: spawn([RAW_GET, "git:https:git.example", "alice"])
same_calls = lambda: spawn([RAW_GIT_GET, "git:https:git.example", "alice"], stdin=git_named)
if output([RAW_GIT_GET, "git:https:git.example", "alice"], git_named) != output([links["front", "git-credential-kc"], "get"], git_named):
    sys.exit("bench: raw_git_get answers differently from the front")

rows = [
    ("front `git-credential-kc get` (username=alice)", "`keyctl pipe SERIAL`", 1.2, pairs(helper("front", "git-credential-kc", git_named), pipe)),
    ("front `git-credential-kc get` (username=alice)", "static C floor (raw_get.c)", 1.1, pairs(helper("front", "git-credential-kc", git_named), floor)),
    ("front `git-credential-kc get` (username=alice)", "static C, the front's calls (raw_git_get.c)", 1.1,
     pairs(helper("front", "git-credential-kc", git_named), same_calls)),
    ("static C, the front's calls (raw_git_get.c)", "static C floor (raw_get.c)", None, pairs(same_calls, floor)),
    ("front `git-credential-kc get` (the only user)", "`keyctl pipe SERIAL`", 1.2, pairs(helper("front", "git-credential-kc", git_only), pipe)),
    ("front `git-credential-kc get` (the only user)", "static C floor (raw_get.c)", 1.1, pairs(helper("front", "git-credential-kc", git_only), floor)),
    ("full `git-credential-kc get` (username=alice, today)", "`keyctl pipe SERIAL`", None, pairs(helper("full", "git-credential-kc", git_named), pipe)),
    ("front `git-credential-kc get` (username=alice)", "full `git-credential-kc get`", None,
     pairs(helper("front", "git-credential-kc", git_named), helper("full", "git-credential-kc", git_named))),
    ("front `git-credential-kc get` (no such host)", "full, the same", None,
     pairs(helper("front", "git-credential-kc", git_unknown), helper("full", "git-credential-kc", git_unknown))),
    ("front `git-credential-kc get` (malformed: handed over)", "full, the same", None,
     pairs(helper("front", "git-credential-kc", git_malformed, 2), helper("full", "git-credential-kc", git_malformed, 2))),
    ("front `docker-credential-kc get`", "`keyctl pipe SERIAL`", 1.2, pairs(helper("front", "docker-credential-kc", docker_input), pipe)),
    ("front `docker-credential-kc get`", "static C floor (raw_get.c)", None, pairs(helper("front", "docker-credential-kc", docker_input), floor)),
    ("full `docker-credential-kc get` (today)", "`keyctl pipe SERIAL`", None, pairs(helper("full", "docker-credential-kc", docker_input), pipe)),
    ("front `docker-credential-kc get`", "full `docker-credential-kc get`", None,
     pairs(helper("front", "docker-credential-kc", docker_input), helper("full", "docker-credential-kc", docker_input))),
    ("front `docker-credential-kc get` (not found)", "full, the same", None,
     pairs(helper("front", "docker-credential-kc", docker_unknown, 1), helper("full", "docker-credential-kc", docker_unknown, 1))),
]
subprocess.run([links["full", "git-credential-kc"], "erase"], input=b"protocol=https\nhost=git.example\n\n", check=True)
subprocess.run([links["full", "docker-credential-kc"], "erase"], input=b"registry.example\n", check=True)
shutil.rmtree(folder)

print_table(rows)
