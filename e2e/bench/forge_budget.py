#!/usr/bin/env python3
"""What sessions spend of a GitHub token, counted by the GitHub stand-in as GitHub counts (a 304
costs nothing, a GraphQL query its points, a log's redirect one), with its rules on (secondary
limits, mergeability computed after the first read). Three figures, each a count over a window
after the state it measures has settled, extrapolated to an hour:

- storm: one session whose three CI jobs failed, its agent redrawing a spinner every half second
  without end, pollInterval 30s, no webhooks: counted requests per session-hour (goal <= 30);
- rest: one open, green pull request that nothing changes, webhooks on (goal <= 2 per PR-hour);
- fleet: BENCH_FLEET_SESSIONS (200) sessions with open pull requests on one token, pollInterval
  60s, no webhooks, a third of them failing CI with agents working in bursts, for
  BENCH_FLEET_SECONDS (600) s: the spend extrapolated to 1,000 pull requests (goal < 2,500/h).

Prints a JSON result line."""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import API, Server, cleanup, git, loadavg, wait_or_kill, workdir  # noqa: E402

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STANDIN = os.path.join(ROOT, "e2e", "github-standin")
AGENT = os.path.join(ROOT, "e2e", "agents", "demo-agent")
TOKEN = "ghp_benchStandInToken0123456789"
SECRET = "bench-webhook-secret"
REPO = "acme/widgets"
WINDOW = float(os.environ.get("BENCH_FORGE_SECONDS", "120"))
FLEET = int(os.environ.get("BENCH_FLEET_SESSIONS", "200"))
FLEET_SECONDS = float(os.environ.get("BENCH_FLEET_SECONDS", "600"))


class StandIn:
    """The GitHub stand-in as a child process, on a port of its choosing."""

    def __init__(self, work, bare, webhook_url=None):
        if not os.path.isdir(os.path.join(STANDIN, "node_modules")):
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=STANDIN, check=True)
        args = ["node", os.path.join(STANDIN, "server.js"), "--port", "0", "--repo", REPO, "--git-dir", bare,
                "--token", TOKEN]
        if webhook_url:
            args += ["--webhook-url", webhook_url, "--webhook-secret", SECRET]
        self.log = open(os.path.join(work, "standin.log"), "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            raise SystemExit(f"the stand-in did not start: {line!r}; see {self.log.name}")
        self.base = "http://" + line.split()[-1]

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            payload = r.read()
        return json.loads(payload or b"null")

    def counted(self):
        """Counted requests and GraphQL points since the counters were reset."""
        r = self.call("GET", "/_standin/requests")
        core = r.get("byResource", {}).get("core", {}).get("counted", r.get("counted", 0))
        graphql = r.get("byResource", {}).get("graphql", {}).get("counted", 0)
        return core, graphql, r.get("total", 0)

    def reset(self):
        self.call("DELETE", "/_standin/requests")

    def counted_over(self, seconds):
        """`counted()` of a window of `seconds` from now, the counters reset at its start."""
        self.reset()
        time.sleep(seconds)
        return self.counted()

    def stop(self):
        self.proc.terminate()
        wait_or_kill(self.proc, 10)
        self.log.close()


def repos(work):
    """A bare origin whose main holds the scripted agent, and a clone of it (the project's path)."""
    bare, seed, clone = (os.path.join(work, n) for n in ("origin.git", "seed", "widgets"))
    os.makedirs(bare)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", bare], check=True)
    os.makedirs(os.path.join(seed, "scripts"))
    git(seed, "init", "-q", "-b", "main")
    shutil.copy(AGENT, os.path.join(seed, "scripts", "agent.sh"))
    os.chmod(os.path.join(seed, "scripts", "agent.sh"), 0o755)
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "the scripted agent")
    git(seed, "push", "-q", bare, "main")
    subprocess.run(["git", "clone", "-q", bare, clone], check=True)
    return bare, clone


@contextlib.contextmanager
def world(work, name, webhooks):
    """A server with the token, the repositories and the stand-in (announcing to the server), as
    (server, stand-in, the project's clone); both stop when the block ends."""
    bare, clone = repos(mkdir(work, name))
    srv = Server(AOCTL, work, name=name + "-serve", env={"GITHUB_TOKEN": TOKEN, "AOCTL_WEBHOOK_SECRET": SECRET})
    gh = StandIn(os.path.join(work, name), bare, srv.base + "/webhooks/github" if webhooks else None)
    try:
        yield srv, gh, clone
    finally:
        srv.stop()
        gh.stop()


def mkdir(work, name):
    path = os.path.join(work, name)
    os.makedirs(path)
    return path


def project(srv, gh, clone, poll):
    srv.project("widgets", clone, repo=REPO, github={"apiUrl": gh.base, "pollInterval": poll})
    srv.wait_project_ready("widgets")


def session(srv, name, spin):
    srv.conn.json("POST", f"{API}/sessions", {
        "apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": name},
        "spec": {"project": "widgets", "prompt": f"Work on {name}",
                 "agent": {"command": ["./scripts/agent.sh", "{promptFile}"]},
                 "env": {"DEMO_AGENT_SPIN": spin}, "pullRequest": {"create": True}}})


def routes(gh):
    """The counted requests by route and status, where any were counted."""
    r = gh.call("GET", "/_standin/requests")
    out = {}
    for route, v in r.get("byRoute", {}).items():
        counted = {k: n for k, n in v.get("byStatus", {}).items() if k != "304"}
        if counted:
            out[route] = counted
    return out


def pr_open(s):
    pr = s.get("status", {}).get("pullRequest") or {}
    return pr.get("state") == "open" and pr.get("mergeable") is not None


def wait(srv, names, pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = {s["metadata"]["name"]: s for s in srv.conn.json("GET", f"{API}/sessions")["items"]}
        if all(n in items and pred(items[n]) for n in names):
            return items
        time.sleep(1)
    raise SystemExit(f"sessions not ready after {timeout}s; see {srv.log.name}")


def fail_ci(gh, sha, jobs):
    for job in jobs:
        gh.call("POST", "/_standin/check-runs", {"sha": sha, "name": job, "conclusion": "failure",
                                                 "log": f"Run {job}\nerror: {job} failed\n##[error]exit code 1"})


def delivered_and_fixed(failing_sha):
    """Whether a session heard its CI failure, pushed its fix and aoctl read the fix's head (with
    its mergeability): the failure's one-off reads are done."""
    def pred(s):
        st = s.get("status", {})
        pr = st.get("pullRequest") or {}
        heard = (st.get("reactions", {}).get("ci-failed") or {}).get("attempts", 0) >= 1
        return heard and pr.get("headSha") not in (None, failing_sha) and pr.get("mergeable") is not None
    return pred


def settle(srv, names, quiet=10.0, timeout=300):
    """Waits until the sessions' heads and mergeability stop moving for `quiet` seconds."""
    last, since, t0 = None, time.monotonic(), time.monotonic()
    while time.monotonic() - t0 < timeout:
        items = {s["metadata"]["name"]: s for s in srv.conn.json("GET", f"{API}/sessions")["items"]}
        now = [(n, (items[n]["status"].get("pullRequest") or {}).get("headSha"),
                (items[n]["status"].get("pullRequest") or {}).get("mergeable")) for n in names if n in items]
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(1)


def storm(work):
    with world(work, "storm", webhooks=False) as (srv, gh, clone):
        project(srv, gh, clone, "30s")
        session(srv, "storm", "forever")
        items = wait(srv, ["storm"], pr_open, 120)
        sha = items["storm"]["status"]["pullRequest"]["headSha"]
        fail_ci(gh, sha, ["build", "test", "lint"])
        # The failure reaches the agent, which pushes a fix (a head without checks: the episode
        # goes on); then its spinner keeps redrawing the screen.
        wait(srv, ["storm"], delivered_and_fixed(sha), 180)
        settle(srv, ["storm"])
        core, graphql, total = gh.counted_over(WINDOW)
        return {"window_s": WINDOW, "requests": total, "counted": core + graphql,
                "counted_per_session_hour": round((core + graphql) * 3600 / WINDOW, 1), "routes": routes(gh)}


def rest(work):
    with world(work, "rest", webhooks=True) as (srv, gh, clone):
        project(srv, gh, clone, "30s")
        session(srv, "rest", "0")
        items = wait(srv, ["rest"], pr_open, 120)
        gh.call("POST", "/_standin/check-runs", {"sha": items["rest"]["status"]["pullRequest"]["headSha"],
                                                 "name": "ci", "conclusion": "success", "log": "ok"})
        settle(srv, ["rest"])
        core, graphql, total = gh.counted_over(WINDOW)
        return {"window_s": WINDOW, "requests": total, "counted": core + graphql,
                "counted_per_pr_hour": round((core + graphql) * 3600 / WINDOW, 1)}


def fleet(work):
    with world(work, "fleet", webhooks=False) as (srv, gh, clone):
        project(srv, gh, clone, "60s")
        names = [f"f{i}" for i in range(FLEET)]
        failing = set(names[::3])
        t0 = time.monotonic()
        for n in names:
            session(srv, n, "60" if n in failing else "0")
        items = wait(srv, names, pr_open, 1800)
        opened = time.monotonic() - t0
        shas = {n: items[n]["status"]["pullRequest"]["headSha"] for n in failing}
        for n in failing:
            fail_ci(gh, shas[n], ["test"])
        for n in failing:
            wait(srv, [n], delivered_and_fixed(shas[n]), 900)
        settle(srv, names, quiet=30.0, timeout=900)
        core, graphql, total = gh.counted_over(FLEET_SECONDS)
        per_hour = (core + graphql) * 3600 / FLEET_SECONDS
        return {"sessions": FLEET, "failing": len(failing), "opened_s": round(opened), "window_s": FLEET_SECONDS,
                "requests": total, "counted_core": core, "points_graphql": graphql,
                "per_hour": round(per_hour), "per_hour_at_1000": round(per_hour * 1000 / FLEET), "routes": routes(gh)}


def main():
    work = workdir()
    try:
        out = {"load_before": loadavg(), "storm": storm(work), "rest": rest(work)}
        if FLEET > 0:
            out["fleet"] = fleet(work)
        print(json.dumps(out))
    finally:
        cleanup(work)


if __name__ == "__main__":
    main()
