#!/usr/bin/env python3
"""Torn-read soak (issue 35), bounded in time: writers rewrite items through the mount
(open "wb", write the value, close) while readers read them (open, read all, close).
Every read must return one value some writer wrote, whole: never an empty value, never
a mix. An empty value is never stored (a kernel key cannot be empty), so a reader that
sees one saw something that was never the item.

    python3 Tools/soak/torn_read.py [SECONDS] [--items N] [--writers N] [--readers N]
                                    [--fresh] [--removers N]

--fresh starts without the items, so the writers' first opens create them; --removers
adds processes that remove items now and then (rm), so the writers create them again and
again. A reader may then find an item absent (ENOENT), which is not a wrong read.

By default it runs itself in a fresh session keyring (`keyctl session -`), mounts the
built kc (.build/debug/kc, or $KC) on a temporary directory in the foreground as a
child process, and prints one line: operations, wrong reads, and the first few wrong
reads. Exit status 0 if no read was wrong, 1 otherwise, 2 if it could not run.
"""

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def value(writer, seq):
    """A value that describes itself, so a reader can tell a whole one from anything else."""
    fill = chr(97 + seq % 26) * (seq % 50 + 1)
    return ("v:%d:%d:%s" % (writer, seq, fill)).encode()


def whole(data, seeds):
    if data in seeds:
        return True
    try:
        tag, writer, seq, fill = data.decode().split(":")
        return tag == "v" and data == value(int(writer), int(seq))
    except ValueError:
        return False


def writer(index, paths, deadline, counts):
    seq = 0
    while time.monotonic() < deadline:
        seq += 1
        try:
            with open(paths[seq % len(paths)], "wb") as f:
                f.write(value(index, seq))
        except FileNotFoundError:
            pass  # --removers: removed between the lookup and the open
    counts.put(("writes", seq, []))


def reader(paths, seeds, deadline, counts):
    done, wrong, started = 0, [], time.monotonic()
    while time.monotonic() < deadline:
        path = paths[done % len(paths)]
        done += 1
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue  # --fresh: not stored yet
        if not whole(data, seeds):
            wrong.append("%s at %.3f s: %r" % (os.path.basename(path), time.monotonic() - started, data[:80]))
    counts.put(("reads", done, wrong))


def remover(paths, deadline, counts):
    done = 0
    while time.monotonic() < deadline:
        done += 1
        try:
            os.unlink(paths[done % len(paths)])
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    counts.put(("removals", done, []))


def wait_for_mount(mountpoint, daemon, seconds=20):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if daemon.poll() is not None:
            return False
        if os.path.ismount(mountpoint):
            return True
        time.sleep(0.05)
    return False


def soak(arguments):
    kc = os.environ.get("KC", os.path.join(ROOT, ".build", "debug", "kc"))
    service = "torn.%d" % os.getpid()
    names = ["item-%d" % n for n in range(arguments.items)]
    seeds = set()
    for name in names if not arguments.fresh else []:
        seed = ("seed:" + name).encode()
        seeds.add(seed)
        subprocess.run([kc, "set", service, name], input=seed, check=True)
    mountpoint = tempfile.mkdtemp(prefix="kc-torn-")
    daemon = subprocess.Popen([kc, "mount", "--foreground", mountpoint])
    try:
        if not wait_for_mount(mountpoint, daemon):
            print("torn_read: the mount did not come up", file=sys.stderr)
            return 2
        if arguments.fresh:  # the service too: mkdir through the mount
            os.mkdir(os.path.join(mountpoint, service))
        paths = [os.path.join(mountpoint, service, name) for name in names]
        deadline = time.monotonic() + arguments.seconds
        counts = multiprocessing.Queue()
        workers = [multiprocessing.Process(target=writer, args=(n, paths, deadline, counts))
                   for n in range(arguments.writers)]
        workers += [multiprocessing.Process(target=reader, args=(paths, seeds, deadline, counts))
                    for _ in range(arguments.readers)]
        workers += [multiprocessing.Process(target=remover, args=(paths, deadline, counts))
                    for _ in range(arguments.removers)]
        for worker in workers:
            worker.start()
        totals, wrong = {"writes": 0, "reads": 0, "removals": 0}, []
        for _ in workers:
            kind, count, bad = counts.get()
            totals[kind] += count
            wrong += bad
        for worker in workers:
            worker.join()
        failed = [w.exitcode for w in workers if w.exitcode != 0]
        print("torn_read: %d s, %d writes, %d reads, %d removals, %d wrong reads%s%s" % (
            arguments.seconds, totals["writes"], totals["reads"], totals["removals"], len(wrong),
            "; first: " + "; ".join(wrong[:3]) if wrong else "",
            "; %d workers failed" % len(failed) if failed else ""))
        return 1 if wrong or failed else 0
    finally:
        subprocess.run([kc, "umount", mountpoint], stderr=subprocess.DEVNULL)
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()
        os.rmdir(mountpoint)
        subprocess.run([kc, "rm", "--yes", service], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seconds", nargs="?", type=float, default=30)
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--fresh", action="store_true",
                        help="start without the items: the writers' first opens create them")
    parser.add_argument("--removers", type=int, default=0,
                        help="processes that remove items now and then, so writers create them again")
    arguments = parser.parse_args()
    if not os.environ.get("KC_TORN_READ_INNER"):
        # A fresh session keyring: the soak's items never meet the caller's.
        environment = dict(os.environ, KC_TORN_READ_INNER="1")
        return subprocess.call(["keyctl", "session", "-", sys.executable] + sys.argv, env=environment)
    return soak(arguments)


if __name__ == "__main__":
    sys.exit(main())
