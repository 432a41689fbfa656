"""Runs whole commands alternately, N rounds, and prints median and mean wall time of each.

Interleaving puts every command under the same machine state at each round, which on a
small shared machine is fairer than hyperfine's one-command-after-another.
usage: interleave.py ROUNDS "CMD ARGS" "CMD ARGS" ...   (commands by absolute path)
"""
import os
import statistics
import sys
import time

rounds = int(sys.argv[1])
commands = [c.split() for c in sys.argv[2:]]
times = [[] for _ in commands]
devnull = os.open("/dev/null", os.O_WRONLY)
for _ in range(rounds):
    for index, command in enumerate(commands):
        start = time.perf_counter()
        pid = os.posix_spawn(command[0], command, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1)])
        os.waitpid(pid, 0)
        times[index].append(time.perf_counter() - start)
print("| command | median | mean |")
print("|---|---|---|")
for command, samples in zip(commands, times):
    print(f"| `{os.path.basename(command[0])} {' '.join(command[1:])}` | {statistics.median(samples)*1e6:.0f} µs | {statistics.mean(samples)*1e6:.0f} µs |")
print()
first, last = times[0], times[-1]
print(f"ratio first / last: {statistics.median(first)/statistics.median(last):.2f} (medians), "
      f"{statistics.mean(first)/statistics.mean(last):.2f} (means)")
