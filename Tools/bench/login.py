"""Whole PAM logins with kc on and off, interleaved (run by login.sh, as root).

Each row: ROUNDS pairs (the kc-stuck row: 3), each pair a login through the stack
with kc's profile and one through the same stack without it, in alternating order;
the medians of each side and of the per-pair differences. A login is `pamtester
SERVICE USER authenticate open_session` with the password on standard input.
"""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from interleaved import alternate, spawn  # noqa: E402

KC, USER, WORK, ROOT = os.environ["KC"], os.environ["USER_NAME"], os.environ["WORK"], os.environ["ROOT"]
ROUNDS = int(os.environ.get("ROUNDS", "20"))
PASSWORD = os.path.join(WORK, "password")


def as_user(script):
    subprocess.run(["runuser", "-u", USER, "--", "keyctl", "session", "-", "sh", "-c", script],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def login(stack, before=None):
    def run():
        if before:
            before()
        return spawn(["/usr/bin/pamtester", f"kc-bench-login-{stack}", USER, "authenticate", "open_session"], stdin=PASSWORD)
    return run


def row(label, on, off, rounds):
    a, b = alternate(on, off, rounds)
    extra = statistics.median([x - y for x, y in zip(a, b)])
    print(f"| {label} | {statistics.median(a) * 1e3:.0f} ms | {statistics.median(b) * 1e3:.0f} ms | "
          f"+{extra * 1e3:.0f} ms | {rounds} |", flush=True)


def locked():
    """As after a reboot: the vault's key and its loaded items gone from the kernel."""
    as_user(f"{KC} lock --level after-first-unlock --level always")


print("== a whole login (pamtester authenticate open_session, Debian's stack), kc on and off, interleaved")
print("| login | kc on | kc off | kc adds | pairs |")
print("|---|---|---|---|---|")
as_user("rm -rf ~/.local/share/kc")
row("user without a vault", login("on"), login("off"), ROUNDS)
password = open(PASSWORD).read().strip()
as_user(f"printf %s '{password}' | {KC} vault init >/dev/null && printf v | {KC} set bench.login token "
        f"&& printf v | {KC} set --access after-first-unlock bench.login user")
row("first login after a reboot (vault locked, default work factor)", login("on", before=locked), login("off", before=locked), ROUNDS)
as_user(f"printf %s '{password}' | {KC} unlock")
row("another login (vault unlocked)", login("on"), login("off"), ROUNDS)

# The user's own FUSE mount over the folder above the vault, answering nothing: kc is
# stuck in the kernel at its first look, and the login goes on at pam_kc's budget.
locked()
subprocess.run(["setfacl", "-m", f"u:{USER}:rw", "/dev/fuse"], check=True)
home = subprocess.run(["getent", "passwd", USER], capture_output=True, text=True, check=True).stdout.split(":")[5]
daemon = subprocess.Popen(["runuser", "-u", USER, "--", "python3", os.path.join(ROOT, "Tools/review/unanswering_fuse.py"),
                           os.path.join(home, ".local/share")], stdout=subprocess.PIPE, text=True)
if daemon.stdout.readline().strip() != "ready":
    sys.exit("login.py: the FUSE daemon did not start")
try:
    row("kc stuck in the kernel (budget 5 s)", login("on"), login("off"), 3)
finally:
    daemon.terminate()
    daemon.wait()
    subprocess.run(["fusermount3", "-u", "-z", os.path.join(home, ".local/share")])
    time.sleep(0.5)
