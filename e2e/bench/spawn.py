#!/usr/bin/env python3
"""Spawn benchmark: N sessions applied at once on a repository of a few thousand files, timed
until every one is RuntimeReady, with the project's warm pool off and on, against the raw floor
measured in the same run: sequential `git worktree add` + `tmux new-session` of the same N. Every
phase starts from the same disk state (common.settle_disk). Prints a JSON result line.

Environment: BENCH_SESSIONS (20), BENCH_FILES (3000), BENCH_ROUNDS (5), BENCH_POOL=0 skips the
pool phase, BENCH_POOL_TIMEOUT (600 s) bounds the wait for a full pool; BENCH_DIRTY_KB, BENCH_SETTLE_S and
BENCH_DROP_CACHES=0 (the fallback even where drop_caches is permitted) tune the settling (common.py)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (API, Server, delete_project, disk_summary, git, reset_repo, rotating_rounds, settle_disk,  # noqa: E402
                    spread, timed_apply)

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
N = int(os.environ.get("BENCH_SESSIONS", "20"))
FILES = int(os.environ.get("BENCH_FILES", "3000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
POOL = os.environ.get("BENCH_POOL", "1") != "0"
POOL_TIMEOUT = float(os.environ.get("BENCH_POOL_TIMEOUT", "600"))


def make_repo(path):
    os.makedirs(path)
    git(path, "init", "-q", "-b", "main")
    for i in range(FILES):
        d = os.path.join(path, "src", f"m{i % 50:02d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}.txt"), "w") as f:
            f.write(f"file {i}\n" * 20)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "files")


def floor(repo, work, disk):
    """Sequential git worktree add + tmux new-session of N, the way a person would script it."""
    sock = os.path.join(work, "floor.sock")
    os.makedirs(work)
    disk.append(settle_disk([repo]))
    t0 = time.monotonic()
    for i in range(N):
        wt = os.path.join(work, f"s{i}")
        git(repo, "worktree", "add", "-q", "-b", f"floor{i}", wt, "main")
        subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-s", f"s{i}", "-c", wt, "sleep", "1000"], check=True)
    took = time.monotonic() - t0
    subprocess.run(["tmux", "-S", sock, "kill-server"], stderr=subprocess.DEVNULL)
    return took


def wait_pool(server, name, size, timeout):
    """Waits until the project's status.workspacePool.ready reaches `size`. A controller that
    keeps a pool reports status.workspacePool at once, so its absence for a minute ends the wait
    early (wait_project_ready came first)."""
    t0 = time.monotonic()
    while True:
        pool = server.conn.json("GET", f"{API}/projects/{name}").get("status", {}).get("workspacePool")
        if pool is None and time.monotonic() - t0 > min(60, timeout):
            raise SystemExit(f"project {name} has no status.workspacePool {min(60, timeout)}s after it was "
                             f"created: this aoctl accepts spec.workspacePool but keeps no pool; see {server.log.name}")
        pool = pool or {}
        if pool.get("ready", 0) >= size:
            return
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"the workspace pool of {name} holds {pool.get('ready', 0)} of {size} ready "
                             f"worktrees after {timeout}s (status.workspacePool: {pool}); see {server.log.name}")
        time.sleep(0.2)


def show_log(server, lines=40):
    """Copies the end of the server's log to stderr."""
    with open(server.log.name, errors="replace") as f:
        tail = f.readlines()[-lines:]
    sys.stderr.write(f"last lines of {server.log.name}:\n{''.join(tail)}")


def delete_all(server, name, timeout=300):
    """Deletes the project and waits until its sessions and the project itself are gone: the
    warm pool's finalizer removes the pool's worktrees first."""
    delete_project(server, name, timeout)
    deadline = time.monotonic() + timeout
    while server.conn.request("GET", f"{API}/projects/{name}")[0] != 404:
        if time.monotonic() > deadline:
            raise SystemExit(f"project {name} still there {timeout}s after it was deleted; see {server.log.name}")
        time.sleep(0.1)


def create_project(server, repo, pool, prefix, **spec):
    """The project `bench`, with a warm pool of `pool` worktrees unless 0; waits until it is Ready."""
    spec = {"path": repo, "sessionPrefix": prefix, **spec}
    if pool:
        spec["workspacePool"] = {"size": pool}
    status, body = server.conn.request("POST", f"{API}/projects", {
        "apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": "bench"}, "spec": spec})
    if status == 400 and pool:
        raise SystemExit(f"the server refused spec.workspacePool ({status} {body[:300]!r}): this aoctl has no "
                         "warm pool; BENCH_POOL=0 skips the pool phase")
    if status not in (200, 201):
        raise SystemExit(f"POST project: {status} {body[:500]!r}")
    server.wait_project_ready("bench")


def pool_phase(repo, work, name, pool, disk, fills, timed, **spec):
    """One aoctl phase of a spawn benchmark: a server and the project `bench` (create_project;
    `spec` adds to its spec) with a warm pool of `pool` worktrees unless 0, waited for until full
    (the seconds from the project's creation go to `fills`); then `timed(server, prepare)` returns
    the seconds it measured, `prepare` settling the disk just before its clock starts. The project
    goes after; on a failure the end of the server's log is shown."""
    server = Server(AOCTL, work, name)
    try:
        t0 = time.monotonic()
        create_project(server, repo, pool, name, **spec)
        if pool:
            wait_pool(server, "bench", pool, POOL_TIMEOUT)
            # From the project's creation: its first reconcile may fill the pool before Ready.
            fills.append(round(time.monotonic() - t0, 3))
        took = timed(server, lambda: disk.append(settle_disk([repo, server.dir])))
        # Clean up through the product itself: deleting the project cascades to the sessions.
        delete_all(server, "bench")
        return took
    except BaseException:
        show_log(server)  # the scratch folder goes when the script ends
        raise
    finally:
        server.stop()


def pool_rounds(repo, work, floor, aoctl_phase, pool_size, head, pool_entries=lambda out: {}):
    """The rounds of a spawn benchmark and its result line: `floor(repo, folder, disk)`, and
    `aoctl_phase(repo, work, name, pool, disk, fills)` without a warm pool (pool_off) and, unless
    BENCH_POOL=0, with one of `pool_size` (pool_on), in rotating order (rotating_rounds); each
    phase's folder, worktrees and branches go before the next one settles the disk. The result
    begins with `head`, then the disk, each phase's spread and the ratios to the floor; with the
    pool, its fill times and `pool_entries(result)`."""
    phases = ["floor", "pool_off"] + (["pool_on"] if POOL else [])
    disk, fills = [], []

    def run(phase, name):
        if phase == "floor":
            return floor(repo, os.path.join(work, name), disk)
        return aoctl_phase(repo, work, name, pool_size if phase == "pool_on" else 0, disk, fills)

    def after(name):
        # The phase's worktrees, branches and server data go before the next phase settles.
        shutil.rmtree(os.path.join(work, name), ignore_errors=True)
        reset_repo(repo)

    times, load = rotating_rounds(phases, ROUNDS, run, after)
    out = {**head, "disk": disk_summary(disk)}
    out.update({p: spread(v) for p, v in times.items()})
    med = {p: out[p]["median_s"] for p in phases}
    out["ratio"] = round(med["pool_off"] / med["floor"], 3)
    if POOL:
        out["ratio_pool"] = round(med["pool_on"] / med["floor"], 3)
        out["pool_fill_s"] = fills
        out.update(pool_entries(out))
    else:
        out["pool_on"] = "skipped (BENCH_POOL=0)"
    out["loadavg_max"] = max(load)
    return out


def aoctl_phase(repo, work, name, pool, disk, fills):
    """N Sessions applied at once, timed until all are RuntimeReady; with `pool`, the project
    keeps that many worktrees ready and the clock starts once the pool is full."""
    manifest = "".join(
        f"---\napiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {{name: s{i}}}\n"
        f"spec: {{project: bench, agent: {{command: [sleep, '1000']}}}}\n" for i in range(N))
    return pool_phase(repo, work, name, pool, disk, fills,
                      lambda server, prepare: timed_apply(server, manifest, N, prepare=prepare))


def main():
    work = tempfile.mkdtemp(prefix="aoctl-bench-")
    try:
        repo = os.path.join(work, "repo")
        make_repo(repo)
        out = pool_rounds(repo, work, floor, aoctl_phase, N, {"sessions": N, "files": FILES, "rounds": ROUNDS})
        print(json.dumps(out))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
