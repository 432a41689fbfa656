"""What issue 29's front benchmarks share (front.py, front_helpers.py, front_shared.py):
whole processes timed one by one, two commands run as interleaved pairs, and the table.

Each row runs its two commands ROUNDS times (environment, default 300) as pairs whose
order alternates, and reports the median of each side's times and the median of the
per-pair ratios.
"""
import os
import statistics
import sys
import time

ROUNDS = int(os.environ.get("ROUNDS", "300"))
devnull = os.open("/dev/null", os.O_RDWR)


def spawn(command, status=0, stdin=None):
    """Wall time of one whole process, its input from the file `stdin` (else /dev/null),
    its output and messages to /dev/null; it must exit `status`."""
    actions = [(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)]
    if stdin is not None:
        actions[0] = (os.POSIX_SPAWN_OPEN, 0, stdin, os.O_RDONLY, 0)
    start = time.perf_counter()
    pid = os.posix_spawn(command[0], command, os.environ, file_actions=actions)
    _, result = os.waitpid(pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(result) != status:
        sys.exit(f"bench: {' '.join(command)} exited {os.waitstatus_to_exitcode(result)}, not {status}")
    return elapsed


def alternate(ours, theirs, rounds=None):
    """Each side's times over `rounds` (default ROUNDS) pairs whose order alternates."""
    a, b = [], []
    for round in range(ROUNDS if rounds is None else rounds):
        if round % 2:
            y = theirs(); x = ours()
        else:
            x = ours(); y = theirs()
        a.append(x); b.append(y)
    return a, b


def pairs(ours, theirs):
    """(median of ours, median of theirs, median of ours/theirs) over ROUNDS interleaved pairs."""
    a, b = alternate(ours, theirs)
    return statistics.median(a), statistics.median(b), statistics.median([x / y for x, y in zip(a, b)])


def print_table(rows):
    """Rows of (label, peer, target or None, (ours, theirs, ratio)) as a Markdown table."""
    print("| command | median | peer | median | median of ratios | target |")
    print("|---|---|---|---|---|---|")
    for label, peer, target, (ours, theirs, ratio) in rows:
        verdict = "—" if target is None else (f"≤ {target}: met" if ratio <= target else f"≤ {target}: **not met**")
        if target is None and ratio >= 1:
            verdict = f"— (+{(ours - theirs) * 1e3:.2f} ms)"
        print(f"| {label} | {ours * 1e3:.3f} ms | {peer} | {theirs * 1e3:.3f} ms | {ratio:.2f} | {verdict} |")
