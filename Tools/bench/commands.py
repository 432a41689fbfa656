"""Every kc command a script calls in a loop, against the keyctl (or plain) command doing
the same kernel work: whole processes, run alternately, ROUNDS rounds; one table of
medians and their ratio (issue 17's targets: 1.1 for kc get, 1.2 for the rest).

usage: commands.py KC ROUNDS       (run inside a throwaway session keyring: keyctl session -)

It stores what it reads in the session keyring (the service `bench.cmd`, and the
helpers' `git:https:git.example` and `docker:registry.example`) and removes it
afterwards. Work outside the timed command (making the item that `rm`
removes) is done before the clock starts.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

kc, rounds = os.path.abspath(sys.argv[1]), int(sys.argv[2])
keyctl = shutil.which("keyctl")
folder = tempfile.mkdtemp(prefix="kc-bench-commands.")
devnull = os.open("/dev/null", os.O_RDWR)


def run(command, text=None):
    return subprocess.run(command, input=text, capture_output=True, check=True).stdout.decode().strip()


def linked(name):
    """kc under another name (git-credential-kc, docker-credential-kc), as setup.sh links it."""
    path = os.path.join(folder, name)
    os.symlink(kc, path)
    return path


def input_file(text):
    path = os.path.join(folder, f"input.{len(os.listdir(folder))}")
    with open(path, "wb") as handle:
        handle.write(text)
    return path


def timed(command, stdin=None, env=None):
    """Wall time of one whole process, output to /dev/null."""
    descriptor = os.open(stdin, os.O_RDONLY) if stdin else devnull
    try:
        start = time.perf_counter()
        pid = os.posix_spawn(command[0], command, env or os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, descriptor, 0), (os.POSIX_SPAWN_DUP2, devnull, 1)])
        _, status = os.waitpid(pid, 0)
        elapsed = time.perf_counter() - start
    finally:
        if stdin:
            os.close(descriptor)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench: {' '.join(command)} failed (exit {os.waitstatus_to_exitcode(status)})")
    return elapsed


# The items: bench.cmd/token at when-unlocked (the session), as kc stores them.
value = input_file(b"s3cret-value")
run([kc, "set", "bench.cmd", "token"], b"s3cret-value")
ring = run([keyctl, "search", "@s", "keyring", "kc:bench.cmd"])
token = run([keyctl, "search", ring, "user", "token"])
git_input = input_file(b"protocol=https\nhost=git.example\nusername=alice\n\n")
subprocess.run([linked("git-credential-kc"), "store"], input=b"protocol=https\nhost=git.example\nusername=alice\npassword=pw\n\n", check=True)
docker_input = input_file(b"registry.example\n")
subprocess.run([linked("docker-credential-kc"), "store"],
               input=b'{"ServerURL":"registry.example","Username":"alice","Secret":"pw"}', check=True)
git_helper, docker_helper = os.path.join(folder, "git-credential-kc"), os.path.join(folder, "docker-credential-kc")
podman_env = dict(os.environ, SECRET_ID="token")
true = shutil.which("true")
env_program = shutil.which("env")


def make_victim():
    """The item `kc rm` (and keyctl unlink) removes: made before the clock starts."""
    run([kc, "set", "bench.cmd", "victim"], b"v")
    return run([keyctl, "search", ring, "user", "victim"])


# (label, kc command, its stdin, its env, peer label, peer command, peer stdin, setup)
rows = [
    ("kc get bench.cmd token", [kc, "get", "bench.cmd", "token"], None, None,
     "keyctl pipe SERIAL", [keyctl, "pipe", token], None, None),
    ("kc get -- bench.cmd token", [kc, "get", "--", "bench.cmd", "token"], None, None,
     "keyctl pipe SERIAL", [keyctl, "pipe", token], None, None),
    ("kc get -q bench.cmd token", [kc, "get", "-q", "bench.cmd", "token"], None, None,
     "keyctl pipe SERIAL", [keyctl, "pipe", token], None, None),
    ("kc set bench.cmd token < value", [kc, "set", "bench.cmd", "token"], value, None,
     "keyctl padd user token RING < value", [keyctl, "padd", "user", "token", ring], value, None),
    ("kc rm bench.cmd victim", [kc, "rm", "bench.cmd", "victim"], None, None,
     "keyctl unlink SERIAL RING", None, None, make_victim),
    ("kc ls bench.cmd", [kc, "ls", "bench.cmd"], None, None,
     "keyctl rlist RING", [keyctl, "rlist", ring], None, None),
    ("kc exec --service bench.cmd --env -- true", [kc, "exec", "--service", "bench.cmd", "--env", "--", true], None, None,
     "env true", [env_program, true], None, None),
    ("kc podman-driver lookup --service bench.cmd", [kc, "podman-driver", "lookup", "--service", "bench.cmd"], None, podman_env,
     "keyctl pipe SERIAL", [keyctl, "pipe", token], None, None),
    ("git-credential-kc get", [git_helper, "get"], git_input, None,
     "keyctl pipe SERIAL", [keyctl, "pipe", token], None, None),
    ("docker-credential-kc get", [docker_helper, "get"], docker_input, None,
     "keyctl pipe SERIAL", [keyctl, "pipe", token], None, None),
]

results = []
for label, command, stdin, env, peer_label, peer, peer_stdin, setup in rows:
    ours, theirs = [], []
    for _ in range(rounds):
        if setup:
            # kc rm, then keyctl unlink of a fresh victim: the same search-free unlink for keyctl.
            setup()
            ours.append(timed(command, stdin, env))
            serial = setup()
            theirs.append(timed([keyctl, "unlink", serial, ring]))
        else:
            ours.append(timed(command, stdin, env))
            theirs.append(timed(peer, peer_stdin))
    results.append((label, statistics.median(ours), peer_label, statistics.median(theirs)))

print(f"| command | kc median | peer | peer median | kc / peer |")
print("|---|---|---|---|---|")
for label, ours, peer_label, theirs in results:
    print(f"| `{label}` | {ours * 1e3:.2f} ms | `{peer_label}` | {theirs * 1e3:.2f} ms | {ours / theirs:.2f} |")

run([kc, "rm", "bench.cmd", "token"])
subprocess.run([git_helper, "erase"], input=b"protocol=https\nhost=git.example\nusername=alice\n\n", check=True)
subprocess.run([docker_helper, "erase"], input=b"registry.example\n", capture_output=True, check=True)
shutil.rmtree(folder)
