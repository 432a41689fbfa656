"""The Secret Service benchmark (issue 27's "Speed"): kc-secretd against gnome-keyring-daemon,
side by side, in one run, one markdown table (docs/BENCHMARKS.md, "The Secret Service");
and issue 37's: each daemon's SearchItems, GetSecrets and Item.GetSecret against a
Peer.Ping to the same daemon on the same connection, with each daemon's idle memory and
where kc-secretd's goes (docs/BENCHMARKS.md, "Issue 37").

usage: secret_service.py   (run by secret_service.sh inside a throwaway session keyring:
                            keyctl session -)
Environment: KC, SECRETD (release kc and kc-secretd), LOOKUP (secret_lookup.c built),
FLOOR_SERVICE (bus_floor_service.c built: issue 37's provider that does no work),
ROUNDS (interleaved three-call lookups, default 2000), OPEN_ROUNDS (plain lookups,
OpenSession and Peer.Ping rounds, default 2000), PROCESS_ROUNDS (secret-tool and kc get
rounds, default 1000), FLOOR_ROUNDS (issue 37's rounds, default 5000), WARMUP (rounds of
each kind not counted, default 50), PARTS (`all`, the default, or `floor`: issue 37's table
and the memory alone), COMMIT (shown in the heading).

Each provider gets a session bus of its own (dbus-daemon with a session configuration in
a temporary folder, no service activation): kc-secretd (`--no-audit`, a vault at work
factor 2^10 in a temporary XDG_DATA_HOME, unlocked) on one, gnome-keyring-daemon
(`--unlock --components=secrets`, password on standard input, a temporary HOME) on the
other. The same item is stored in both with `secret-tool store`. One client process
(secret_lookup.c, over sd-bus) stays connected to both buses and times the calls on each,
alternately; whole processes (`secret-tool lookup`, `kc get`) are spawned in turn. Every
value is a median; the ratio column is the median of the per-round ratios
gnome-keyring / kc-secretd (above 1: kc-secretd is faster, or smaller). Everything made
is removed at the end: the items, the vault's key in the kernel, both daemons, both
buses, the temporary folder.
"""
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

KC, SECRETD, LOOKUP, FLOOR_SERVICE = (os.path.abspath(os.environ[name]) for name in ("KC", "SECRETD", "LOOKUP", "FLOOR_SERVICE"))
ROUNDS = int(os.environ.get("ROUNDS", "2000"))
OPEN_ROUNDS = int(os.environ.get("OPEN_ROUNDS", "2000"))
PROCESS_ROUNDS = int(os.environ.get("PROCESS_ROUNDS", "1000"))
FLOOR_ROUNDS = int(os.environ.get("FLOOR_ROUNDS", "5000"))
WARMUP = int(os.environ.get("WARMUP", "50"))
PARTS = os.environ.get("PARTS", "all")
if PARTS not in ("all", "floor"):
    sys.exit("secret_service: PARTS is all or floor")
SECRET_TOOL, DBUS_DAEMON, DBUS_SEND, GNOME_KEYRING = (
    shutil.which(p) for p in ("secret-tool", "dbus-daemon", "dbus-send", "gnome-keyring-daemon"))
NAME = "org.freedesktop.secrets"
SERVICE, USERNAME = f"kc-bench.secret-service.{os.getpid()}", "alice"
VALUE = secrets.token_urlsafe(24)  # the same secret in both, 32 characters

folder = tempfile.mkdtemp(prefix="kc-bench-ss.")
children = []  # (what, Popen), stopped in reverse order at the end
devnull = os.open(os.devnull, os.O_RDWR)


def say(text):
    print(f"secret_service: {text}", file=sys.stderr, flush=True)


def start_bus(name):
    """A session bus of our own: dbus-daemon in the foreground, our child."""
    directory = os.path.join(folder, name)
    os.makedirs(os.path.join(directory, "socket"))
    configuration = os.path.join(directory, "bus.conf")
    with open(configuration, "w") as handle:
        # As Tests/KCTestSupport/SessionBus.swift's, without a service folder: no activation.
        handle.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={directory}/socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
""")
    bus = subprocess.Popen([DBUS_DAEMON, f"--config-file={configuration}", "--nofork", "--print-address=1"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    children.append((f"the {name} bus", bus))
    address = bus.stdout.readline().decode().strip()
    if not address:
        sys.exit(f"secret_service: dbus-daemon for {name} did not start")
    return address


def owner_pid(env):
    """The pid owning the Secret Service name on env's bus, waiting up to 10 s for one."""
    for _ in range(200):
        found = subprocess.run([DBUS_SEND, "--session", "--print-reply=literal", "--dest=org.freedesktop.DBus",
                                "/org/freedesktop/DBus", "org.freedesktop.DBus.GetConnectionUnixProcessID",
                                f"string:{NAME}"], env=env, capture_output=True)
        if found.returncode == 0:
            return int(found.stdout.split()[-1])
        time.sleep(0.05)
    sys.exit(f"secret_service: nobody took {NAME} on {env['DBUS_SESSION_BUS_ADDRESS']}")


def run(command, env, text=None):
    done = subprocess.run(command, input=text, env=env, capture_output=True)
    if done.returncode != 0:
        sys.exit(f"secret_service: {' '.join(command)} failed ({done.returncode}): {done.stderr.decode().strip()}")
    return done.stdout.decode()


def spawn(command, env):
    """Wall time of one whole process, its output to /dev/null."""
    start = time.perf_counter()
    pid = os.posix_spawn(command[0], command, env,
                         file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1)])
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"secret_service: {' '.join(command)} failed (exit {os.waitstatus_to_exitcode(status)})")
    return elapsed


def client(*arguments):
    """secret_lookup's samples: one row of integers (nanoseconds) per round, warm-up dropped."""
    output = subprocess.run([LOOKUP, *arguments], capture_output=True)
    if output.returncode != 0:
        sys.exit(f"secret_service: secret_lookup {arguments[0]} failed: {output.stderr.decode().strip()}")
    return [[int(v) for v in line.split()] for line in output.stdout.decode().splitlines()][WARMUP:]


def memory(pid):
    """Idle memory (KiB): VmRSS and VmHWM from status, Pss from smaps_rollup."""
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            key = line.split(":")[0]
            if key in ("Pss", "Private_Dirty", "Anonymous"):
                values[key] = int(line.split()[1])
    return values


def mappings(pid):
    """Where a process's resident memory is (KiB): Rss and Pss summed by what is mapped
    (the file's name, or [heap], [stack], anonymous), from /proc/PID/smaps."""
    totals = {}
    name = None
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                name = os.path.basename(fields[5]) if len(fields) > 5 else "anonymous"
            elif fields[0] in ("Rss:", "Pss:"):
                entry = totals.setdefault(name, [0, 0])
                entry[0 if fields[0] == "Rss:" else 1] += int(fields[1])
    return totals


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


rows = []  # (what, kc-secretd, gnome-keyring, ratio gnome-keyring / kc-secretd, unit)
floor_rows = []  # (what, kc-secretd's, gnome-keyring's, the no-work provider's (or None), kind): "ms", "µs" or "ratio"


def row(what, ours, theirs, unit="ms", per_round=True):
    """ours and theirs: per-round samples, in the same rounds. The ratio is the median of
    the per-round ratios, or (per_round=False, for differences that can be 0 or less in a
    round) the ratio of the medians."""
    if per_round:
        ratio = statistics.median(t / o for o, t in zip(ours, theirs))
    else:
        ratio = statistics.median(theirs) / statistics.median(ours)
    rows.append((what, statistics.median(ours), statistics.median(theirs), ratio, unit))


def column(samples, index):
    return [sample[index] / 1e9 for sample in samples]


kc_env = gk_env = None
secretd = gnome = None
stored = []
try:
    kc_address, gk_address = start_bus("kc-secretd"), start_bus("gnome-keyring")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DBUS_", "XDG_", "GNOME_KEYRING", "SSH_AUTH"))}

    kc_home = os.path.join(folder, "kc-home")
    os.makedirs(kc_home)
    kc_env = dict(base, HOME=kc_home, XDG_DATA_HOME=os.path.join(kc_home, "data"), DBUS_SESSION_BUS_ADDRESS=kc_address)
    run([KC, "vault", "init", "--work-factor", "10"], kc_env, b"bench-passphrase")
    secretd = subprocess.Popen([SECRETD, "--no-audit"], env=kc_env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children.append(("kc-secretd", secretd))
    if owner_pid(kc_env) != secretd.pid:
        sys.exit("secret_service: kc-secretd does not own the name on its bus")

    gk_home = os.path.join(folder, "gk-home")
    gk_runtime = os.path.join(folder, "gk-runtime")
    os.makedirs(gk_home)
    os.makedirs(gk_runtime, mode=0o700)
    gk_env = dict(base, HOME=gk_home, XDG_DATA_HOME=os.path.join(gk_home, ".local/share"),
                  XDG_RUNTIME_DIR=gk_runtime, DBUS_SESSION_BUS_ADDRESS=gk_address)
    # --foreground rather than --daemonize, so that it is this script's child to stop and reap.
    gnome = subprocess.Popen([GNOME_KEYRING, "--foreground", "--unlock", "--components=secrets"], env=gk_env,
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children.append(("gnome-keyring-daemon", gnome))
    gnome.stdin.write(b"bench-password")
    gnome.stdin.close()
    if owner_pid(gk_env) != gnome.pid:
        sys.exit("secret_service: gnome-keyring-daemon does not own the name on its bus")

    lookup = [SECRET_TOOL, "lookup", "service", SERVICE, "username", USERNAME]
    for env in (kc_env, gk_env):
        run([SECRET_TOOL, "store", "--label=kc bench", "service", SERVICE, "username", USERNAME], env, VALUE.encode())
        stored.append(env)
        if run(lookup, env) != VALUE:
            sys.exit("secret_service: secret-tool lookup does not read back what it stored")
    if run([KC, "get", SERVICE, USERNAME], kc_env) != VALUE:
        sys.exit("secret_service: kc get does not read what secret-tool stored through kc-secretd")
    time.sleep(1)
    at_start = memory(secretd.pid), memory(gnome.pid)
    at_start_mappings = mappings(secretd.pid)

    say(f"{FLOOR_ROUNDS} rounds of Ping, SearchItems, Ping, GetSecrets, Ping, Item.GetSecret on each")
    samples = client("floor", str(FLOOR_ROUNDS + WARMUP), kc_address, gk_address, SERVICE, USERNAME, VALUE)
    # The same round against a provider that does no work, on a bus of its own: the floor
    # of each call's shape (bus_floor_service.c), answering with an item path like kc-secretd's.
    floor_address = start_bus("floor")
    encoded = lambda text: "".join(c if c.isascii() and c.isalnum() else "".join(f"_{b:02x}" for b in c.encode()) for c in text)
    floor_service = subprocess.Popen([FLOOR_SERVICE, floor_address, f"/org/freedesktop/secrets/collection/login/{encoded(SERVICE)}__{encoded(USERNAME)}"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    children.append(("bus_floor_service", floor_service))
    if owner_pid(dict(base, DBUS_SESSION_BUS_ADDRESS=floor_address)) != floor_service.pid:
        sys.exit("secret_service: bus_floor_service does not own the name on its bus")
    say(f"{FLOOR_ROUNDS} rounds of the same on a provider that does no work")
    shape = client("shape", str(FLOOR_ROUNDS + WARMUP), floor_address, SERVICE, USERNAME)
    pings = lambda rows, offset: [r[offset + i] / 1e9 for r in rows for i in (0, 2, 4)]
    floor_rows.append(("`Peer.Ping`, median (all three of each round)", statistics.median(pings(samples, 0)),
                       statistics.median(pings(samples, 6)), statistics.median(pings(shape, 0)), "ms"))
    floor_rows.append(("`Peer.Ping`, p95", percentile(pings(samples, 0), 0.95), percentile(pings(samples, 6), 0.95),
                       percentile(pings(shape, 0), 0.95), "ms"))
    for what, call in (("`SearchItems` by service and username", 1), ("`GetSecrets` of the item (DH session)", 3),
                       ("`Item.GetSecret` (DH session)", 5)):
        calls = column(samples, call), column(samples, 6 + call), column(shape, call)
        before = column(samples, call - 1), column(samples, 6 + call - 1), column(shape, call - 1)
        floor_rows.append((f"{what}, median", *(statistics.median(c) for c in calls), "ms"))
        floor_rows.append((f"{what}, p95", *(percentile(c, 0.95) for c in calls), "ms"))
        floor_rows.append((f"**{what} / the `Ping` just before it**, median of the per-round ratios",
                           *(statistics.median(c / p for c, p in zip(cs, ps)) for cs, ps in zip(calls, before)), "ratio"))
        floor_rows.append((f"{what}: its median / `Ping`'s median",
                           *(statistics.median(cs) / statistics.median(ps) for cs, ps in zip(calls, before)), "ratio"))

    say(f"{FLOOR_ROUNDS} rounds of the kernel's part alone (the item's size, its value), as kc-secretd finds the item")
    kernel = client("keyring", str(FLOOR_ROUNDS + WARMUP), f"kc:{SERVICE}", USERNAME)
    floor_rows.append(("the kernel's part of a search, no D-Bus: the service's keyring, the item, its size (3 keyctl calls), median",
                       statistics.median(column(kernel, 0)), None, None, "µs"))
    floor_rows.append(("the kernel's part of a GetSecret, no D-Bus: the service's keyring, the item, its value (3 keyctl calls), median",
                       statistics.median(column(kernel, 1)), None, None, "µs"))

    if PARTS == "all":
        say(f"{ROUNDS} three-call lookups (DH) on each, alternately")
        samples = client("lookup", "dh", str(ROUNDS + WARMUP), kc_address, gk_address, SERVICE, USERNAME, VALUE)
        row("**three calls of one lookup, DH** (OpenSession, SearchItems, GetSecrets)", column(samples, 0), column(samples, 4))
        row("… of which OpenSession (DH)", column(samples, 1), column(samples, 5))
        row("… of which SearchItems by service and username", column(samples, 2), column(samples, 6))
        row("… of which GetSecrets of the item", column(samples, 3), column(samples, 7))

        say(f"{OPEN_ROUNDS} three-call lookups (plain) on each, alternately")
        samples = client("lookup", "plain", str(OPEN_ROUNDS + WARMUP), kc_address, gk_address, SERVICE, USERNAME, VALUE)
        row("three calls of one lookup, plain session", column(samples, 0), column(samples, 4))
        row("… of which SearchItems", column(samples, 2), column(samples, 6))
        row("… of which GetSecrets", column(samples, 3), column(samples, 7))

        say(f"{OPEN_ROUNDS} rounds of three Peer.Ping on each")
        samples = client("ping", str(OPEN_ROUNDS + WARMUP), kc_address, gk_address)
        row("three `Peer.Ping` calls (the floor: bus round trips, no work)", column(samples, 0), column(samples, 1))

        say(f"{OPEN_ROUNDS} rounds of OpenSession, DH and plain, on each")
        samples = client("open", str(OPEN_ROUNDS + WARMUP), kc_address, gk_address)
        row("OpenSession, DH (`dh-ietf1024-sha256-aes128-cbc-pkcs7`)", column(samples, 0), column(samples, 2))
        row("OpenSession, plain", column(samples, 1), column(samples, 3))
        row("the DH's cost: OpenSession DH − plain, per round",
            [(s[0] - s[1]) / 1e9 for s in samples], [(s[2] - s[3]) / 1e9 for s in samples], per_round=False)

        say(f"{PROCESS_ROUNDS} rounds of secret-tool lookup on each and kc get")
        get = [KC, "get", SERVICE, USERNAME]
        ours, theirs, kc_get = [], [], []
        for index in range(PROCESS_ROUNDS + WARMUP):
            # Whose turn is first alternates; kc get runs between them.
            first, second = ((lookup, kc_env, ours), (lookup, gk_env, theirs))[:: 1 if index % 2 == 0 else -1]
            a = spawn(first[0], first[1])
            g = spawn(get, kc_env)
            b = spawn(second[0], second[1])
            if index >= WARMUP:
                first[2].append(a)
                second[2].append(b)
                kc_get.append(g)
        row("`secret-tool lookup service S username U` (whole process)", ours, theirs)
        rows.append(("`kc get S U` (whole process, for scale; no D-Bus)", statistics.median(kc_get), None, None, "ms"))

    time.sleep(1)
    after = memory(secretd.pid), memory(gnome.pid)
    after_mappings = mappings(secretd.pid)
    for (ours, theirs), when in ((at_start, "before the runs (one item stored)"), (after, "after the runs")):
        for key, what in (("VmRSS", "VmRSS"), ("Pss", "Pss (smaps_rollup)")):
            rows.append((f"idle memory {when}: {what}", ours[key], theirs[key], theirs[key] / ours[key], "KiB"))
    rows.append(("peak RSS over the runs (VmHWM)", after[0]["VmHWM"], after[1]["VmHWM"],
                 after[1]["VmHWM"] / after[0]["VmHWM"], "KiB"))
finally:
    for env in stored:
        subprocess.run([SECRET_TOOL, "clear", "service", SERVICE, "username", USERNAME], env=env, capture_output=True)
    if kc_env:
        subprocess.run([KC, "rm", SERVICE, USERNAME], env=kc_env, capture_output=True)  # if the clear did not
        # The item's service keyring stays behind, empty, in the user keyring (the session
        # keyring is this run's own and goes with it).
        ring = subprocess.run(["keyctl", "search", "@u", "keyring", f"kc:{SERVICE}"], capture_output=True)
        if ring.returncode == 0:
            subprocess.run(["keyctl", "unlink", ring.stdout.decode().strip(), "@u"], capture_output=True)
        subprocess.run([KC, "lock"], env=kc_env, capture_output=True)  # the vault's key leaves the kernel
    for what, child in reversed(children):
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            say(f"{what} did not stop on SIGTERM; killing it")
            child.kill()
            child.wait()
    shutil.rmtree(folder, ignore_errors=True)

shown = {"ms": lambda v: f"{v * 1e3:.3f} ms", "µs": lambda v: f"{v * 1e6:.1f} µs", "KiB": lambda v: f"{v:,} KiB", "ratio": lambda v: f"{v:.2f}"}
print(f"Measured {time.strftime('%Y-%m-%d %H:%M %Z')} at {os.environ.get('COMMIT', '?')}: {FLOOR_ROUNDS} rounds of issue 37's "
      f"calls, each after {WARMUP} not counted.\n")
print("| | kc-secretd | gnome-keyring | no-work provider (the floor) |")
print("|---|---|---|---|")
for what, *values, unit in floor_rows:
    print(f"| {what} | " + " | ".join("—" if v is None else shown[unit](v) for v in values) + " |")
print()
print("| | kc-secretd | gnome-keyring | kc-secretd / gnome-keyring |")
print("|---|---|---|---|")
for (ours, theirs), when in ((at_start, "idle after start (one item stored)"), (after, "idle after the runs")):
    for key, what in (("VmRSS", "VmRSS"), ("Pss", "Pss (smaps_rollup)"), ("Private_Dirty", "Private_Dirty (its own written pages)"),
                      ("Anonymous", "Anonymous (heap, stacks, written data)")):
        print(f"| {when}: {what} | {ours[key]:,} KiB | {theirs[key]:,} KiB | {ours[key] / theirs[key]:.2f} |")
print(f"| peak RSS (VmHWM) | {after[0]['VmHWM']:,} KiB | {after[1]['VmHWM']:,} KiB | {after[0]['VmHWM'] / after[1]['VmHWM']:.2f} |")

print("\nkc-secretd's resident memory by mapping (KiB, the largest; smaps):\n")
print("| mapping | Rss after start | Pss after start | Rss after the runs | Pss after the runs |")
print("|---|---|---|---|---|")
names = sorted(after_mappings, key=lambda n: -after_mappings[n][0])
for name in names[:12]:
    first = at_start_mappings.get(name, [0, 0])
    print(f"| {name} | {first[0]:,} | {first[1]:,} | {after_mappings[name][0]:,} | {after_mappings[name][1]:,} |")
rest = names[12:]
print(f"| {len(rest)} others | {sum(at_start_mappings.get(n, [0, 0])[0] for n in rest):,} | "
      f"{sum(at_start_mappings.get(n, [0, 0])[1] for n in rest):,} | {sum(after_mappings[n][0] for n in rest):,} | "
      f"{sum(after_mappings[n][1] for n in rest):,} |")

ratios = {what: (ours, floor) for what, ours, _, floor, unit in floor_rows if unit == "ratio" and what.startswith("**")}
print()
for what, (ratio, floor) in ratios.items():
    print(f"Target (issue 37): {what.strip('*').split(' / ')[0]} within 1.2× of a Ping: "
          f"{'met' if ratio <= 1.2 else '**not met**'} ({ratio:.2f}×, the median of the per-round ratios; "
          f"{floor:.2f}× for the provider that does no work).")
rss_met = at_start[0]["VmRSS"] <= at_start[1]["VmRSS"] and after[0]["VmRSS"] <= after[1]["VmRSS"]
print(f"Target (issue 37): idle RSS no more than gnome-keyring-daemon's: {'met' if rss_met else '**not met**'} "
      f"({at_start[0]['VmRSS']:,} against {at_start[1]['VmRSS']:,} KiB after start, "
      f"{after[0]['VmRSS']:,} against {after[1]['VmRSS']:,} KiB after the runs).")

if PARTS == "all":
    target = rows[0][3]
    print(f"\nIssue 27's table: {ROUNDS} lookups, {OPEN_ROUNDS} rounds of the others, "
          f"{PROCESS_ROUNDS} of the processes, each after {WARMUP} not counted.\n")
    print("| | kc-secretd | gnome-keyring | gnome-keyring / kc-secretd |")
    print("|---|---|---|---|")
    for what, ours, theirs, ratio, unit in rows:
        theirs_shown = "—" if theirs is None else shown[unit](theirs)
        ratio_shown = "—" if ratio is None else f"{ratio:.2f}"
        print(f"| {what} | {shown[unit](ours)} | {theirs_shown} | {ratio_shown} |")
    print(f"\nTarget (issue 27): the three-call lookup with DH ≥ 5× faster than gnome-keyring: "
          f"{'met' if target >= 5 else '**not met**'} ({target:.2f}×).")
