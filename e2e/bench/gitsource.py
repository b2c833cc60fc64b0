#!/usr/bin/env python3
"""A GitSource of 500 sessions. From a push (a commit force-pushed to a bare repository on disk,
then `aoctl reconcile gitsource`) to every object applied — the source's status names the
revision, and its one transaction wrote the objects with it — for a first revision of 500 new
sessions and for one that changes all 500; and the cost of a sync that finds nothing to change
(interval 1s: reconciles counted, time inside them, the controller's CPU beyond what it spends in
as long a window without syncs, and no store write). Beside them, in the same run, `aoctl apply
-f -R` of the same folder into a second server: 500 creates, then again with nothing to change.
The sessions are `stopped: true` in a project whose repository does not exist, so no agent runs
and no worktree is made: the numbers are the source's and the store's. Prints a JSON result line."""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import API, Server, cleanup, cpu_seconds, git, loadavg, metric_sum, workdir  # noqa: E402

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
N = int(os.environ.get("BENCH_SESSIONS", "500"))
# The project's repository: none, so its sessions wait for it (and look again every few seconds).
NO_REPO = "/nonexistent/aoctl-bench/repo"
# How long the no-change syncs are watched, and the window without syncs beside them.
IDLE_SECONDS = int(os.environ.get("BENCH_IDLE_SECONDS", "20"))


def write_fleet(work, project_path, prompt, sessions=True):
    """The repository's `fleet/` folder: a project and (with `sessions`) N stopped sessions."""
    folder = os.path.join(work, "fleet")
    os.makedirs(os.path.join(folder, "sessions"), exist_ok=True)
    with open(os.path.join(folder, "project.yaml"), "w") as f:
        f.write(f"apiVersion: ao.dev/v1alpha1\nkind: Project\nmetadata: {{name: bench}}\nspec: {{path: {project_path}}}\n")
    for i in range(N if sessions else 0):
        with open(os.path.join(folder, "sessions", f"s{i}.yaml"), "w") as f:
            f.write("apiVersion: ao.dev/v1alpha1\nkind: Session\n"
                    f"metadata: {{name: s{i}, labels: {{team: t{i % 10}}}}}\n"
                    f"spec: {{project: bench, prompt: \"{prompt} {i}\", stopped: true}}\n")
    return folder


def push(work, bare):
    """Commits everything and force-pushes it; the revision the source will report."""
    git(work, "add", "-A")
    git(work, "commit", "-q", "--allow-empty", "-m", "change")
    git(work, "push", "-q", "-f", bare, "HEAD:main")
    sha = subprocess.run(["git", "-C", work, "rev-parse", "HEAD"], check=True, capture_output=True,
                         text=True).stdout.strip()
    return f"main@sha1:{sha}"


def cli(srv, *args):
    return subprocess.run([AOCTL, "--server", srv.base, *args], env=srv.env, check=True, capture_output=True,
                          text=True).stdout


def source(srv):
    return srv.conn.json("GET", f"{API}/gitsources/bench")


def timed_sync(srv, work, bare):
    """Pushes the working copy and asks the source to sync; seconds from the push to applied."""
    revision = push(work, bare)
    t0 = time.monotonic()
    out = cli(srv, "reconcile", "gitsource", "bench")
    took = time.monotonic() - t0
    if revision not in out or source(srv)["status"].get("lastAppliedRevision") != revision:
        raise SystemExit(f"revision {revision} not applied: {out}")
    return took


def drained(srv, timeout=300):
    """Waits until the workqueues have been empty for 2 s; the seconds it took."""
    t0, quiet = time.monotonic(), 0
    while quiet < 10:
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"the workqueues were not empty after {timeout}s")
        quiet = quiet + 1 if metric_sum(srv.metrics(), "aoctl_workqueue_depth") == 0 else 0
        time.sleep(0.2)
    return time.monotonic() - t0


def count_sessions(srv, prompt):
    items = srv.conn.json("GET", f"{API}/sessions")["items"]
    return sum(1 for s in items if s["spec"].get("prompt", "").startswith(prompt + " "))


def main():
    work = workdir()
    srv = Server(AOCTL, work, "gitsource")
    base = None
    try:
        repo = NO_REPO
        fleet, bare = os.path.join(work, "fleet-work"), os.path.join(work, "fleet.git")
        os.makedirs(fleet)
        git(fleet, "init", "-q", "-b", "main")
        os.makedirs(bare)
        git(bare, "init", "-q", "--bare", "-b", "main")
        write_fleet(fleet, repo, "v1", sessions=False)
        first = push(fleet, bare)
        srv.conn.json("POST", f"{API}/gitsources", {
            "apiVersion": "ao.dev/v1alpha1", "kind": "GitSource", "metadata": {"name": "bench"},
            "spec": {"url": bare, "path": "fleet", "prune": True, "interval": "1h",
                     "policy": {"kinds": ["Project", "Session"], "projectRoots": [os.path.dirname(NO_REPO)]}}})
        deadline = time.monotonic() + 60
        while source(srv).get("status", {}).get("lastAppliedRevision") != first:
            if time.monotonic() > deadline:
                raise SystemExit(f"the first revision was not applied: {source(srv)}")
            time.sleep(0.05)

        write_fleet(fleet, repo, "v1")
        create_s = timed_sync(srv, fleet, bare)
        if count_sessions(srv, "v1") != N:
            raise SystemExit(f"{count_sessions(srv, 'v1')} of {N} sessions after the sync")
        settle_create = drained(srv)
        write_fleet(fleet, repo, "v2")
        update_s = timed_sync(srv, fleet, bare)
        if count_sessions(srv, "v2") != N:
            raise SystemExit(f"{count_sessions(srv, 'v2')} of {N} sessions changed after the sync")
        drained(srv)

        # The controller's CPU without syncs (its sessions look at their project every few
        # seconds), then with a sync that finds nothing to change every second.
        cpu0 = cpu_seconds(srv.pid)
        time.sleep(IDLE_SECONDS)
        quiet_cpu = cpu_seconds(srv.pid) - cpu0
        srv.conn.json("PATCH", f"{API}/gitsources/bench", {"spec": {"interval": "1s"}},
                      ctype="application/merge-patch+json")
        time.sleep(3)
        rv0 = srv.conn.json("GET", f"{API}/sessions")["metadata"]["resourceVersion"]
        m0 = srv.metrics()
        cpu0 = cpu_seconds(srv.pid)
        time.sleep(IDLE_SECONDS)
        syncing_cpu = cpu_seconds(srv.pid) - cpu0
        m1 = srv.metrics()
        rv1 = srv.conn.json("GET", f"{API}/sessions")["metadata"]["resourceVersion"]

        def delta(name):
            return metric_sum(m1, name, controller="gitsource") - metric_sum(m0, name, controller="gitsource")

        syncs = delta("aoctl_reconcile_duration_seconds_count")
        inside = delta("aoctl_reconcile_duration_seconds_sum")

        # The baseline: `aoctl apply -f -R` of the same folder into a server of its own.
        base = Server(AOCTL, work, "apply")
        folder = os.path.join(fleet, "fleet")
        t0 = time.monotonic()
        cli(base, "apply", "-R", "-f", folder)
        apply_create_s = time.monotonic() - t0
        if count_sessions(base, "v2") != N:
            raise SystemExit(f"{count_sessions(base, 'v2')} of {N} sessions after aoctl apply")
        drained(base)
        t0 = time.monotonic()
        out = cli(base, "apply", "-R", "-f", folder)
        apply_unchanged_s = time.monotonic() - t0
        if out.count("unchanged") != N + 1:
            raise SystemExit(f"a second apply changed something:\n{out[:2000]}")

        print(json.dumps({
            "benchmark": "gitsource", "sessions": N,
            "push_to_applied_create_s": round(create_s, 2), "push_to_applied_update_s": round(update_s, 2),
            "queues_drained_after_create_s": round(settle_create, 1),
            "nochange_syncs": int(syncs), "nochange_sync_ms": round(inside / syncs * 1000, 2) if syncs else None,
            "nochange_controller_cpu_ms_per_sync":
                round((syncing_cpu - quiet_cpu) / syncs * 1000, 2) if syncs else None,
            "controller_cpu_s_without_syncs": round(quiet_cpu, 2), "controller_cpu_s_with_syncs": round(syncing_cpu, 2),
            "nochange_store_writes": int(rv1) - int(rv0),
            "apply_create_s": round(apply_create_s, 2), "apply_unchanged_s": round(apply_unchanged_s, 2),
            "loadavg_1m": loadavg()}))
    finally:
        srv.stop()
        if base:
            base.stop()
        cleanup(work)


if __name__ == "__main__":
    main()
