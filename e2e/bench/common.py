"""Helpers shared by the benchmarks of e2e/bench/: a release `aoctl serve` on a free port and a
scratch data dir, keep-alive HTTP, /proc readings, /metrics parsing, a scratch repository, and the
same disk state before each measured phase (settle_disk)."""

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

API = "/apis/ao.dev/v1alpha1"
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def git(repo, *args):
    subprocess.run(["git", "-C", repo, "-c", "user.name=bench", "-c", "user.email=bench@aoctl.invalid",
                    "-c", "commit.gpgsign=false", *args], check=True, stdout=subprocess.DEVNULL)


def make_repo(path):
    """A repository with one commit on `main`."""
    os.makedirs(path)
    git(path, "init", "-q", "-b", "main")
    with open(os.path.join(path, "README.md"), "w") as f:
        f.write("# bench\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


def median(v):
    s = sorted(v)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def percentile(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def cpu_seconds(pid, children=False):
    """utime+stime of a process in seconds (with `children`: cutime+cstime, its reaped children)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command name, fields[0] is field 3 of proc(5): utime is field 14, stime 15,
    # cutime 16, cstime 17.
    first = 16 if children else 14
    return (int(fields[first - 3]) + int(fields[first - 2])) / TICK


def rss_bytes(pid, key="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


class Conn:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, base, token):
        host, port = base.rsplit("/", 1)[1].split(":")
        self.c = http.client.HTTPConnection(host, int(port), timeout=120)
        self.token = token

    def request(self, method, path, body=None, ctype="application/json"):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": ctype} if data is not None else {}
        headers["Authorization"] = "Bearer " + self.token
        self.c.request(method, path, body=data, headers=headers)
        r = self.c.getresponse()
        payload = r.read()
        return r.status, payload

    def json(self, method, path, body=None, ctype="application/json", expect=(200, 201)):
        status, payload = self.request(method, path, body, ctype)
        if status not in expect:
            raise SystemExit(f"{method} {path}: {status} {payload[:500]!r}")
        return json.loads(payload or b"null")

    def close(self):
        self.c.close()


def parse_metrics(text):
    """{(name, frozenset(labels)): value} of a /metrics body."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)', line)
        if not m:
            continue
        labels = frozenset(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric_sum(metrics, name, **labels):
    want = set(labels.items())
    return sum(v for (n, ls), v in metrics.items() if n == name and want <= set(ls))


def wait_or_kill(proc, timeout):
    """Waits at most `timeout` seconds for the process `proc` to exit, then kills and reaps it."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Server:
    """`aoctl serve` on a free port with its own data dir and HOME; `stop()` ends it and its agents."""

    def __init__(self, aoctl, work, name="serve", env=None):
        self.aoctl = aoctl
        self.dir = os.path.join(work, name)
        os.makedirs(os.path.join(self.dir, "home"))
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        e = {k: v for k, v in os.environ.items() if not k.startswith("AOCTL_") and k != "RUST_LOG"}
        e["HOME"] = os.path.join(self.dir, "home")
        e.update(env or {})
        self.log = open(os.path.join(self.dir, "serve.log"), "w")
        self.proc = subprocess.Popen([aoctl, "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", self.data],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=e)
        self.pid = self.proc.pid
        for _ in range(400):
            try:
                urllib.request.urlopen(self.base + "/readyz", timeout=1)
                break
            except Exception:
                if self.proc.poll() is not None:
                    raise SystemExit(f"aoctl serve exited: {open(self.log.name).read()}")
                time.sleep(0.05)
        # The bearer token the server made in its data dir at start; the CLI finds it there too
        # (AOCTL_DATA_DIR in `env`).
        with open(os.path.join(self.data, "token")) as f:
            self.token = f.read().strip()
        self.env = {**e, "AOCTL_DATA_DIR": self.data}
        self.conn = Conn(self.base, self.token)

    def urlopen(self, url, headers=None, timeout=None):
        """urllib's urlopen of `url` with the bearer token."""
        req = urllib.request.Request(url, headers={**(headers or {}), "Authorization": "Bearer " + self.token})
        return urllib.request.urlopen(req, timeout=timeout)

    def metrics(self):
        status, body = self.conn.request("GET", "/metrics")
        return parse_metrics(body.decode())

    def project(self, name, path, **spec):
        return self.conn.json("POST", f"{API}/projects", {
            "apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": name},
            "spec": {"path": path, **spec}})

    def repo_project(self, name, path):
        """The project `name` on a new scratch repository at `path` (make_repo), once it is Ready."""
        self.project(name, make_repo(path))
        self.wait_project_ready(name)

    def wait_project_ready(self, name, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            p = self.conn.json("GET", f"{API}/projects/{name}")
            if any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", [])):
                return
            time.sleep(0.05)
        raise SystemExit(f"project {name} not Ready after {timeout}s")

    def sessions(self, project, n, prefix="s", **spec):
        for i in range(n):
            self.conn.json("POST", f"{API}/sessions", {
                "apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": f"{prefix}{i}"},
                "spec": {"project": project, **spec}})

    def wait_session(self, name, pred, timeout, every, failure):
        """Reads the Session `name` every `every` seconds until `pred(session)` holds and returns it;
        after `timeout` seconds ends the run with "session <name> <failure>"."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.conn.json("GET", f"{API}/sessions/{name}")
            if pred(s):
                return s
            time.sleep(every)
        raise SystemExit(f"session {name} {failure}")

    def wait_sessions(self, pred, n, timeout=600):
        """Waits until `pred(session)` holds for n sessions; returns the seconds it took."""
        t0 = time.monotonic()
        while True:
            items = self.conn.json("GET", f"{API}/sessions")["items"]
            if sum(1 for s in items if pred(s)) >= n:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise SystemExit(f"only {sum(1 for s in items if pred(s))} of {n} sessions ready after {timeout}s")
            time.sleep(0.5)

    def wait_idle(self, quiet=3.0, timeout=600):
        """Waits until no reconcile has run for `quiet` seconds and the workqueues are empty."""
        t0 = time.monotonic()
        last, since = None, time.monotonic()
        while time.monotonic() - t0 < timeout:
            m = self.metrics()
            now = (metric_sum(m, "aoctl_reconcile_total"), metric_sum(m, "aoctl_workqueue_depth"))
            if now != last:
                last, since = now, time.monotonic()
            elif now[1] == 0 and time.monotonic() - since >= quiet:
                return time.monotonic() - t0
            time.sleep(0.25)
        raise SystemExit(f"the controllers were still busy after {timeout}s")

    def tmux_server_pid(self):
        out = subprocess.run(["tmux", "-S", os.path.join(self.data, "tmux.sock"), "display", "-p", "#{pid}"],
                             capture_output=True, text=True)
        return int(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None

    def stop(self):
        self.conn.close()
        self.proc.terminate()
        wait_or_kill(self.proc, 30)
        subprocess.run(["tmux", "-S", os.path.join(self.data, "tmux.sock"), "kill-server"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.log.close()


def running(s):
    """Whether a Session reports RuntimeReady=True."""
    conds = s.get("status", {}).get("conditions", [])
    return any(c["type"] == "RuntimeReady" and c["status"] == "True" for c in conds)


def timed_apply(server, manifest, n, prepare=None, timeout=300):
    """Applies `manifest` (YAML text) with `aoctl apply` and returns the seconds from the apply
    until n Sessions report RuntimeReady=True, read from a watch started before it. `prepare` runs
    just before the clock starts."""
    path = os.path.join(server.dir, f"apply-{time.monotonic_ns()}.yaml")
    with open(path, "w") as f:
        f.write(manifest)
    return timed_command(server, ["apply", "-f", path], n, prepare, timeout)


def timed_command(server, args, n, prepare=None, timeout=300):
    """Runs `aoctl <args>` against the server and returns the seconds from the command's start
    until n Sessions report RuntimeReady=True. The time of the n-th is taken when its watch event
    arrives (the watch is connected before `prepare` runs and the clock starts), not when the
    command exits."""
    rv = server.conn.json("GET", f"{API}/sessions")["metadata"]["resourceVersion"]
    ready, connected, done = set(), threading.Event(), threading.Event()
    at = []

    def watch():
        url = f"{server.base}{API}/sessions?watch=true&resourceVersion={rv}"
        with server.urlopen(url, timeout=timeout) as r:
            connected.set()
            for line in r:
                obj = json.loads(line)["object"]
                if running(obj):
                    ready.add(obj["metadata"]["name"])
                    if len(ready) == n:
                        at.append(time.monotonic())
                        done.set()
                        return

    threading.Thread(target=watch, daemon=True).start()
    if not connected.wait(30):
        raise SystemExit(f"the watch of sessions did not connect in 30s; see {server.log.name}")
    if prepare:
        prepare()
    t0 = time.monotonic()
    subprocess.run([server.aoctl, "--server", server.base, *args], check=True, env=server.env,
                   stdout=subprocess.DEVNULL)
    if not done.wait(timeout):
        raise SystemExit(f"only {len(ready)} of {n} sessions became RuntimeReady; see {server.log.name}")
    return at[0] - t0


def delete_project(server, name, timeout=60):
    """Deletes a project through the API (its sessions go with it) and waits until none is left."""
    server.conn.json("DELETE", f"{API}/projects/{name}", expect=(200, 202))
    deadline = time.monotonic() + timeout
    while server.conn.json("GET", f"{API}/sessions")["items"] and time.monotonic() < deadline:
        time.sleep(0.1)


def loadavg():
    """The 1-minute load average: other work on the machine moves every number."""
    return round(os.getloadavg()[0], 2)


def workdir():
    return tempfile.mkdtemp(prefix="aoctl-bench-")


def cleanup(work):
    shutil.rmtree(work, ignore_errors=True)


def stopped(s):
    return s.get("status", {}).get("phase") == "Stopped"


def settled(s):
    """Whether a Session's status was written for its current generation, with a phase."""
    st = s.get("status", {})
    return st.get("observedGeneration") == s["metadata"].get("generation") and bool(st.get("phase"))


def dirty_kb():
    """Dirty plus Writeback of /proc/meminfo in KiB: written data the kernel has not yet put on disk."""
    total = 0
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Dirty", "Writeback"):
                total += int(rest.split()[0])
    return total


def bounded_sync(timeout):
    """sync(2) in a thread, waited for at most `timeout` seconds; whether it returned in time."""
    t = threading.Thread(target=os.sync, daemon=True)
    t.start()
    t.join(timeout)
    return not t.is_alive()


def evict(paths):
    """Drops the cached pages of the files in `paths`, and of every file in the folders among
    them, with POSIX_FADV_DONTNEED, which needs no privilege but drops only clean pages (so it
    follows a sync). Directory entries and inodes stay cached. Returns the number of files."""
    n = 0
    for top in paths:
        walk = [(os.path.dirname(top), [], [os.path.basename(top)])] if os.path.isfile(top) else os.walk(top)
        for root, _dirs, files in walk:
            for name in files:
                try:
                    fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    continue  # sockets, dangling or racing files
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    n += 1
                finally:
                    os.close(fd)
    return n


def drop_caches():
    """Writes 3 to /proc/sys/vm/drop_caches (page cache, dentries and inodes); False where the
    kernel refuses it, as it does to unprivileged users and in most containers."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


DIRTY_KB = int(os.environ.get("BENCH_DIRTY_KB", "8192"))
SETTLE_S = float(os.environ.get("BENCH_SETTLE_S", "60"))
# BENCH_DROP_CACHES=0 skips drop_caches where it is permitted, to measure the fallback.
DROP = os.environ.get("BENCH_DROP_CACHES", "1") != "0"


def settle_disk(paths=(), dirty_max_kb=DIRTY_KB, timeout=SETTLE_S):
    """Puts the disk in the same state before every measured phase: `sync`, then wait (at most
    `timeout` seconds) until Dirty+Writeback is below `dirty_max_kb`, then drop the caches where
    permitted, else evict the files under `paths` from the page cache. Returns what it did, for
    the result line."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    synced = bounded_sync(timeout)
    last_sync = time.monotonic()
    while dirty_kb() > dirty_max_kb and time.monotonic() < deadline:
        # Other writers on the machine dirty pages meanwhile; a new sync every second writes them too.
        if synced and time.monotonic() - last_sync >= 1:
            synced = bounded_sync(max(0.0, deadline - time.monotonic()))
            last_sync = time.monotonic()
        time.sleep(0.05)
    dirty = dirty_kb()
    dropped = DROP and synced and drop_caches()
    files = 0 if dropped else evict(paths)
    return {"method": "drop_caches" if dropped else "sync+fadvise", "dirty_kb": dirty,
            "settled": synced and dirty <= dirty_max_kb, "settle_s": round(time.monotonic() - t0, 3),
            "evicted_files": files}


def disk_summary(states):
    """One entry for the result line from the `settle_disk` results of a run."""
    return {"method": "+".join(sorted({s["method"] for s in states})), "phases": len(states),
            "unsettled": sum(1 for s in states if not s["settled"]),
            "dirty_kb_max": max((s["dirty_kb"] for s in states), default=0), "dirty_max_kb": DIRTY_KB,
            "settle_s_max": max((s["settle_s"] for s in states), default=0),
            "evicted_files_max": max((s["evicted_files"] for s in states), default=0)}


def spread(values):
    """Median, min, max and the rounds in order, in seconds, for the result line."""
    return {"median_s": round(median(values), 3), "min_s": round(min(values), 3), "max_s": round(max(values), 3),
            "rounds_s": [round(v, 3) for v in values]}


def reset_repo(repo):
    """Forgets every worktree whose folder is gone and deletes every branch but `main`, so the
    repository is the same before each phase."""
    git(repo, "worktree", "prune")
    # A worktree locked while it was being made (the server stopped meanwhile) outlives a prune.
    listed = subprocess.run(["git", "-C", repo, "worktree", "list", "--porcelain"], check=True,
                            capture_output=True, text=True).stdout
    gone = [line[len("worktree "):] for line in listed.splitlines()
            if line.startswith("worktree ") and not os.path.isdir(line[len("worktree "):])]
    for path in gone:
        subprocess.run(["git", "-C", repo, "worktree", "unlock", path], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if gone:
        git(repo, "worktree", "prune")
    refs = subprocess.run(["git", "-C", repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/"],
                          check=True, capture_output=True, text=True).stdout.split()
    others = [r for r in refs if r != "main"]
    if others:
        git(repo, "branch", "-q", "-D", *others)


def rotating_rounds(phases, rounds, run, after):
    """Runs every phase once per round, the order turned by one each round so that no phase always
    follows the same other. `run(phase, name)` returns the phase's seconds; `after(name)` removes
    what it left before the next phase settles the disk. Returns the seconds by phase and the load
    average after each phase."""
    times = {p: [] for p in phases}
    load = []
    for r in range(rounds):
        for phase in phases[r % len(phases):] + phases[:r % len(phases)]:
            name = f"{phase.replace('_', '')}{r}"
            times[phase].append(run(phase, name))
            load.append(loadavg())
            after(name)
    return times, load

