"""Issue 29's two library and mount rows of table.py, alone: a `Keychain` read in-process
against C libkeyutils (raw_read.c), and `ls -l` of a service of 1000 items through the
mount against the minimal C libfuse filesystem with the same cache policy
(minimal_fuse.c), measured as table.py measures them (docs/BENCHMARKS.md).

usage: lib_mount.py   (run by lib_mount.sh inside a throwaway session keyring: keyctl session -)
Environment: KC (kc-mountd beside it), BENCH (keychain-bench), RAW (raw_read), MINIMAL
(minimal_fuse); ITERATIONS and LOOP_ROUNDS (in-process loops, default 20000 and 5);
LS_ROUNDS (default 20). With BEFORE_KC and BEFORE_BENCH (another build's kc and
keychain-bench), each row also runs that build, interleaved with the others, so that
before and after are measured side by side in one run.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

KC, BENCH, RAW, MINIMAL = (os.path.abspath(os.environ[name]) for name in ("KC", "BENCH", "RAW", "MINIMAL"))
BEFORE_KC, BEFORE_BENCH = os.environ.get("BEFORE_KC"), os.environ.get("BEFORE_BENCH")
ITERATIONS = os.environ.get("ITERATIONS", "20000")
LOOP_ROUNDS = int(os.environ.get("LOOP_ROUNDS", "5"))
LS_ROUNDS = int(os.environ.get("LS_ROUNDS", "20"))
LS = shutil.which("ls")
devnull = os.open("/dev/null", os.O_RDWR)


def run(command, text=None):
    return subprocess.run(command, input=text, capture_output=True, check=True).stdout.decode().strip()


def spawn(command):
    """Wall time of one whole process, its output to /dev/null."""
    start = time.perf_counter()
    pid = os.posix_spawn(command[0], command, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1)])
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench: {' '.join(command)} failed")
    return elapsed


def report(label, unit, floor, sides):
    """One line per side: median, and the ratio to the floor's median."""
    print(f"{label}: C floor {statistics.median(floor):.{unit}f}")
    for name, samples in sides:
        ratios = [ours / theirs for ours, theirs in zip(samples, floor)]
        print(f"  {name}: {statistics.median(samples):.{unit}f}, ratio of medians "
              f"{statistics.median(samples) / statistics.median(floor):.3f}, median of ratios {statistics.median(ratios):.3f}")


# ---- A Keychain read in-process, 1 service of 1000 items and 1 service of 1 item ----
benches = [("after", BENCH)] + ([("before", os.path.abspath(BEFORE_BENCH))] if BEFORE_BENCH else [])
run([BENCH, "fill", "bench.big", "1000", "0"])
run([BENCH, "fill", "bench.svc", "1", "0"])
for label, service, key in (("1 service of 1 item", "bench.svc", "item-0"), ("1 service of 1000 items", "bench.big", "item-500")):
    floor, sides = [], {name: [] for name, _ in benches}
    for _ in range(LOOP_ROUNDS):
        floor.append(float(run([RAW, service, key, ITERATIONS])))
        for name, bench in benches:
            sides[name].append(float(run([bench, "read", service, key, ITERATIONS])))
    report(f"Keychain read in-process, {label} (ns per read)", 0, floor, [(name, sides[name]) for name, _ in benches])

# ---- ls -l of a service of 1000 items: kc's mount against the C floor ----
mounts = tempfile.mkdtemp(prefix="kc-bench-mnt.")
kcs = [("after", KC)] + ([("before", os.path.abspath(BEFORE_KC))] if BEFORE_KC else [])
points = {name: os.path.join(mounts, name) for name, _ in kcs}
floor_mount = os.path.join(mounts, "floor")
for path in list(points.values()) + [floor_mount]:
    os.makedirs(path)
for name, kc in kcs:
    run([kc, "mount", points[name]])
floor = subprocess.Popen([MINIMAL, floor_mount, "bench.fs", "bench-value", "bench.big", "1000"])
try:
    for _ in range(200):
        if os.path.exists(os.path.join(floor_mount, "bench.big", "item-0")):
            break
        time.sleep(0.05)
    floor_times, sides = [], {name: [] for name, _ in kcs}
    for _ in range(LS_ROUNDS):
        floor_times.append(spawn([LS, "-l", os.path.join(floor_mount, "bench.big")]) * 1e3)
        for name, _ in kcs:
            sides[name].append(spawn([LS, "-l", os.path.join(points[name], "bench.big")]) * 1e3)
    report("ls -l of a service of 1000 items (ms)", 2, floor_times, [(name, sides[name]) for name, _ in kcs])
finally:
    for name, kc in kcs:
        subprocess.run([kc, "umount", points[name]], check=False)
    subprocess.run(["fusermount3", "-u", floor_mount], check=False)
    floor.wait()
    shutil.rmtree(mounts, ignore_errors=True)
    run(["keyctl", "clear", "@s"])  # what this made: the session keyring is this run's own
