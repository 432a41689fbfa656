"""Issue 38: from a write in OpenBao to the new value in a file, kc-agent through kc's mount
against OpenBao's own agent rendering a template, and what each agent costs while idle
(Tools/bench/openbao.sh runs this; docs/BENCHMARKS.md).

usage: openbao.py   (run by openbao.sh inside a throwaway session keyring: keyctl session -)
Environment (openbao.sh sets them): KC, KC_AGENT, BAO (the programs); BAO_ADDR, BAO_TOKEN,
BAO_CACERT, ROLE_ID, SECRET_ID, BAO_PID (a `lab.sh dev DIR --tls` lab); WORK (a private temp
folder), SHM (a private folder on tmpfs), TAG (makes the kc services' names unique), OUT
(the markdown file), WRITES (200), IDLE (seconds, 60), POLL (500ms), SLOW_POLL (5s),
BAO_EXTRA_POLL (1s; empty for none).

All agents run at once, on the same secret (secret/bench, key k): kc-agent at POLL mirrors it
into a kc service read through `kc mount`; bao agent at POLL (template_config
static_secret_render_interval; its own default for a KV secret is 5 minutes) renders it with
a template to a file on tmpfs, and a second bao agent does the same at BAO_EXTRA_POLL. Each
write is a POST to OpenBao's HTTP API on a kept-alive TLS connection, with the root token,
after a random pause of 0-1 s; every file is then read every 1 ms (open+read+close) until
each shows the new value. Then, with no writes, each process's CPU time (utime+stime) over
IDLE seconds, with one more agent (kc-agent at SLOW_POLL) started for scale, and VmRSS and
Pss at the end (each agent runs from its own copy of its program). Every process this starts
is recorded in WORK/pids (pid, name) so that openbao.sh's trap can end it if this script
dies; the script ends them itself, unmounts and removes its kc services.
"""
import http.client
import json
import os
import random
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.parse

env = os.environ
KC, KC_AGENT, BAO = env["KC"], env["KC_AGENT"], env["BAO"]
ADDR, TOKEN, CACERT = env["BAO_ADDR"], env["BAO_TOKEN"], env["BAO_CACERT"]
ROLE_ID, SECRET_ID = env["ROLE_ID"], env["SECRET_ID"]
WORK, SHM, TAG, OUT = env["WORK"], env["SHM"], env["TAG"], env["OUT"]
WRITES = int(env.get("WRITES", "200"))
IDLE = float(env.get("IDLE", "60"))
POLL = env.get("POLL", "500ms")
SLOW_POLL = env.get("SLOW_POLL", "5s")
BAO_EXTRA_POLL = env.get("BAO_EXTRA_POLL", "1s")
SETTLE_TIMEOUT = 30.0     # seconds an agent may take to show a write before it counts as missed
START_TIMEOUT = 60.0      # seconds an agent may take to log in and show the first version
SECRET = "secret/bench"
MNT = os.path.join(WORK, "mnt")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def say(text):
    print(f"openbao.py: {text}", file=sys.stderr, flush=True)


def interrupted(signum, _frame):
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, interrupted)
signal.signal(signal.SIGHUP, interrupted)


# ---- OpenBao's HTTP API, directly (the bao CLI would add its own start-up) ----
url = urllib.parse.urlsplit(ADDR)
tls = ssl.create_default_context(cafile=CACERT)
connection = None


def api(method, path, body=None):
    """One request on a kept-alive connection (made again once if the server closed it)."""
    global connection
    data = json.dumps(body).encode() if body is not None else None
    headers = {"X-Vault-Token": TOKEN}
    if data is not None:
        headers["Content-Type"] = "application/json"
    for attempt in (1, 2):
        if connection is None:
            connection = http.client.HTTPSConnection(url.hostname, url.port, context=tls, timeout=30)
        try:
            connection.request(method, "/v1/" + path, body=data, headers=headers)
            response = connection.getresponse()
            answer = response.read()
        except (http.client.HTTPException, OSError):
            connection.close()
            connection = None
            if attempt == 2:
                raise
            continue
        if response.status // 100 != 2:
            raise RuntimeError(f"{method} {path}: HTTP {response.status}: {answer[:300]!r}")
        return answer


def write(value):
    api("POST", "secret/data/bench", {"data": {"k": value}})


# ---- processes ----
started = []  # (name, Popen)


def own_copy(program, name):
    """A copy of `program` for one agent alone: two agents (or bao agent and the OpenBao server,
    one binary) never share its pages, so each one's Pss is its own as if it ran alone."""
    folder = os.path.join(WORK, "bin", name.replace(" ", "-").replace("(", "").replace(")", ""))
    os.makedirs(folder, exist_ok=True)
    copy = os.path.join(folder, os.path.basename(program))
    shutil.copy2(program, copy)
    return copy


def spawn(name, command, log):
    child_env = {k: v for k, v in env.items() if not k.startswith(("BAO_", "VAULT_"))}
    with open(log, "ab") as out:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=child_env, cwd=WORK)
    started.append((name, proc))
    proc.started = time.perf_counter()
    with open(os.path.join(WORK, "pids"), "a") as f:
        f.write(f"{proc.pid} {name}\n")
    return proc


def tail(path, lines=8):
    try:
        with open(path, errors="replace") as f:
            return " ".join(line.strip() for line in f.readlines()[-lines:])
    except OSError as error:
        return f"(no log: {error})"


def kc(*arguments, stdin=None):
    result = subprocess.run([KC, *arguments], input=stdin, capture_output=True)
    if result.returncode != 0:
        raise RuntimeError(f"kc {' '.join(arguments)}: exit {result.returncode}: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout


def read(path):
    """The file's whole content as `open(path).read()` gives it, or None (missing)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def wait_for(files, value, timeout):
    """Reads each file of `files` every 1 ms until it holds `value`: {file: seconds from the call, or None}."""
    want = value.encode()
    start = time.perf_counter()
    seen = dict.fromkeys(files)
    while True:
        for path in seen:
            if seen[path] is None and read(path) == want:
                seen[path] = time.perf_counter() - start
        if all(t is not None for t in seen.values()) or time.perf_counter() - start > timeout:
            return seen
        time.sleep(0.001)


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


def status_field(pid, name):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])


def pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return None


def mountd_pid():
    """The kc-mountd serving MNT (kc mount starts it in the background)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"kc-mountd" and MNT.encode() in argv:
            return int(entry)
    return None


def percentile(samples, p):
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * p // 100))  # nearest rank
    return ordered[int(rank) - 1]


def summary(samples):
    if not samples:
        return "–"
    return " / ".join(f"{percentile(samples, p) * 1000:.0f}" for p in (50, 95, 99, 100))


# ---- the agents ----
class Agent:
    def __init__(self, kind, poll, label, measured):
        self.kind, self.poll, self.label, self.measured = kind, poll, label, measured
        self.proc = None
        self.problem = None
        self.from_answer, self.from_start, self.missed = [], [], 0

    @property
    def name(self):
        return f"{self.kind} ({self.poll})"


class KCAgent(Agent):
    def __init__(self, poll, suffix, measured=True):
        super().__init__("kc-agent", poll, "kc mount: DIR/SERVICE/k", measured)
        self.auth = f"kc-bench.openbao-auth{suffix}.{TAG}"
        self.service = f"kc-bench.openbao{suffix}.{TAG}"
        self.file = os.path.join(MNT, self.service, "k")
        self.config = os.path.join(WORK, f"kc-agent{suffix}.json")
        self.log = os.path.join(WORK, f"kc-agent{suffix}.log")

    def start(self):
        kc("set", "--access", "after-first-unlock", self.auth, "role_id", stdin=ROLE_ID.encode())
        kc("set", "--access", "after-first-unlock", self.auth, "secret_id", stdin=SECRET_ID.encode())
        with open(self.config, "w") as f:
            json.dump({"address": ADDR, "ca_file": CACERT, "auth": {"method": "approle", "service": self.auth},
                       "poll_interval": self.poll, "kv": [{"secret": SECRET, "service": self.service}]}, f, indent=1)
        self.proc = spawn(self.name, [own_copy(KC_AGENT, self.name), "run", self.config], self.log)


class BaoAgent(Agent):
    def __init__(self, poll, suffix):
        super().__init__("bao agent", poll, "template file on tmpfs", True)
        self.file = os.path.join(SHM, f"bao-agent{suffix}", "k")
        self.config = os.path.join(WORK, f"bao-agent{suffix}.hcl")
        self.log = os.path.join(WORK, f"bao-agent{suffix}.log")

    def start(self):
        os.makedirs(os.path.dirname(self.file), mode=0o700, exist_ok=True)
        for name, value in (("role_id", ROLE_ID), ("secret_id", SECRET_ID)):
            fd = os.open(os.path.join(WORK, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, value.encode())
            os.close(fd)
        template = '{{ with secret "secret/data/bench" }}{{ .Data.data.k }}{{ end }}'
        with open(self.config, "w") as f:
            f.write(f'''vault {{
  address = "{ADDR}"
  ca_cert = "{CACERT}"
}}
auto_auth {{
  method "approle" {{
    config = {{
      role_id_file_path = "{WORK}/role_id"
      secret_id_file_path = "{WORK}/secret_id"
      remove_secret_id_file_after_reading = false
    }}
  }}
}}
template_config {{
  static_secret_render_interval = "{self.poll}"
}}
template {{
  contents = {json.dumps(template)}
  destination = "{self.file}"
}}
''')
        self.proc = spawn(self.name, [own_copy(BAO, self.name), "agent", f"-config={self.config}"], self.log)


def main():
    version = 0
    value = f"v{version}-{TAG}"
    write(value)
    os.mkdir(MNT)
    kc("mount", MNT)
    with open(os.path.join(WORK, "mounted"), "w") as f:
        f.write(MNT + "\n")

    kc_agent = KCAgent(POLL, "")
    agents = [kc_agent, BaoAgent(POLL, "")]
    if BAO_EXTRA_POLL and BAO_EXTRA_POLL != POLL:
        agents.append(BaoAgent(BAO_EXTRA_POLL, "-extra"))
    for agent in agents:
        agent.start()
    waited = time.perf_counter()
    seen = wait_for([a.file for a in agents], value, START_TIMEOUT)
    for agent in agents:
        if seen[agent.file] is None:
            agent.problem = (f"it did not write the secret's first version to its file within {START_TIMEOUT:.0f} s"
                             f" (exit status {agent.proc.poll()}); last lines of its log: {tail(agent.log, 4)}")
            say(f"{agent.name}: {agent.problem}")
        else:
            say(f"{agent.name}: first version in its file {waited + seen[agent.file] - agent.proc.started:.2f} s after its start")
    if kc_agent.problem:
        raise RuntimeError(f"kc-agent: {kc_agent.problem}")
    live = [a for a in agents if not a.problem]

    # ---- propagation ----
    requests = []
    for i in range(1, WRITES + 1):
        time.sleep(random.uniform(0.0, 1.0))
        version += 1
        value = f"v{version}-{TAG}"
        t0 = time.perf_counter()
        write(value)
        t1 = time.perf_counter()
        requests.append(t1 - t0)
        seen = wait_for([a.file for a in live], value, SETTLE_TIMEOUT)
        for agent in live:
            if seen[agent.file] is None:
                agent.missed += 1
            else:
                agent.from_answer.append(seen[agent.file])
                agent.from_start.append(seen[agent.file] + (t1 - t0))
        if i % 25 == 0:
            say(f"{i}/{WRITES} writes; p50 so far: "
                + ", ".join(f"{a.name} {percentile(a.from_answer, 50) * 1000:.0f} ms" for a in live if a.from_answer))
    for agent in live:
        if agent.proc.poll() is not None:
            agent.problem = f"it exited (status {agent.proc.returncode}) during the writes: {tail(agent.log, 4)}"

    # ---- idle: no writes ----
    slow = KCAgent(SLOW_POLL, "-slow", measured=False)
    slow.label = "kc mount"
    slow.start()
    if wait_for([slow.file], value, START_TIMEOUT)[slow.file] is None:
        raise RuntimeError(f"kc-agent at {SLOW_POLL} did not mirror the secret; its log: {tail(slow.log)}")
    time.sleep(1.0)  # its log-in and first sync are behind it
    watched = [(a.name, a.proc.pid, a) for a in [kc_agent, slow] + agents[1:] if a.proc.poll() is None]
    mountd = mountd_pid()
    if mountd:
        watched.append(("kc-mountd (no reads)", mountd, None))
    server = int(env["BAO_PID"]) if env.get("BAO_PID", "").isdigit() else None
    if server:
        watched.append((f"OpenBao server (serving all {len(watched) - (1 if mountd else 0)} agents)", server, None))
    say(f"idle for {IDLE:.0f} s: " + ", ".join(f"{n} pid {pid}" for n, pid, _ in watched))
    before = {pid: cpu_ticks(pid) for _, pid, _ in watched}
    t0 = time.monotonic()
    time.sleep(IDLE)
    elapsed = time.monotonic() - t0
    idle = {pid: ((cpu_ticks(pid) - before[pid]) * 1000 / CLK_TCK, status_field(pid, "VmRSS"), pss(pid),
                  status_field(pid, "Threads")) for _, pid, _ in watched}

    # ---- the table ----
    def mib(kib):
        return "–" if kib is None else f"{kib / 1024:.1f} MiB"

    lines = ["| process (poll interval) | the value read from | writes seen | from the write's answer, ms: "
             "p50 / p95 / p99 / max | from the write's start, ms: p50 / p95 / p99 / max | "
             f"idle CPU over {elapsed:.0f} s (share of a core) | VmRSS | Pss |", "|" + "---|" * 8]
    for name, pid, agent in watched:
        if agent is not None and agent.problem and not agent.from_answer:
            cells = [agent.label, "did not work: see below", "–", "–"]
        elif agent is not None and agent.measured:
            got = len(agent.from_answer)
            cells = [agent.label, f"{got}/{WRITES}" + (f" ({agent.missed} missed)" if agent.missed else ""),
                     summary(agent.from_answer), summary(agent.from_start)]
        elif agent is not None:
            cells = [agent.label, "not measured", "–", "–"]
        else:
            cells = ["–", "–", "–", "–"]
        cpu, rss, own, _ = idle[pid]
        tick = 1000 / CLK_TCK  # /proc/PID/stat counts in clock ticks
        cells += [f"{cpu:.0f} ms ({cpu / (elapsed * 10):.2f} %)" if cpu else f"< {tick:.0f} ms (< {tick / (elapsed * 10):.2f} %)",
                  mib(rss), mib(own)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    broken = [a for a in agents if a.problem]
    for agent in broken:
        if agent.proc.poll() is not None:
            lines.append(f"| {agent.name} | did not work: see below | – | – | – | – | – | – |")

    setup = (f"{WRITES} writes of secret/bench (KV v2, one key) through OpenBao 2.7.2's HTTP API (one-node Raft, TLS, "
             f"127.0.0.1; write request p50 {percentile(requests, 50) * 1000:.1f} ms), a random 0–1 s pause before each; "
             f"all agents ran at once, each file read every 1 ms; bao agent's interval is template_config "
             f"static_secret_render_interval (its default for a KV secret is 5 minutes); idle: no writes, all agents "
             f"at once, VmRSS and Pss at the end (each agent runs from its own copy of its program, so that Pss does "
             f"not split the program's pages between two agents, or bao agent's with the OpenBao server's, one binary).")
    text = setup + "\n\n" + "\n".join(lines) + "\n"
    for agent in broken:
        text += f"\n{agent.name} did not work: {agent.problem}\n"
    with open(OUT, "w") as f:
        f.write(text)
    print(text, flush=True)
    say("threads: " + ", ".join(f"{name} {idle[pid][3]}" for name, pid, _ in watched))


def cleanup():
    for _, proc in reversed(started):
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + 5
    for _, proc in started:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if os.path.exists(os.path.join(WORK, "mounted")):
        result = subprocess.run([KC, "umount", MNT], capture_output=True)
        if result.returncode == 0:
            os.unlink(os.path.join(WORK, "mounted"))
        else:
            say(f"kc umount {MNT}: {result.stderr.decode(errors='replace').strip()}")
    for suffix in ("", "-slow"):
        for service in (f"kc-bench.openbao{suffix}.{TAG}", f"kc-bench.openbao-auth{suffix}.{TAG}"):
            result = subprocess.run([KC, "rm", "--yes", service], capture_output=True)
            if result.returncode not in (0, 1):  # 1: there was none
                say(f"kc rm --yes {service}: {result.stderr.decode(errors='replace').strip()}")


try:
    main()
except Exception as error:
    say(f"failed: {error}")
    sys.exit(1)
finally:
    cleanup()
