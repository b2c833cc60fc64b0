#!/usr/bin/env python3
"""Spawn benchmark on a real tree: one `aoctl spawn` on Django's source (pip's sdist as a
one-commit repository), from the project's warm pool and without one, timed from the command's
start until the session is RuntimeReady (read from a watch), against the floor measured in the
same run: `git worktree add` + `tmux new-session` of the same tree. Every phase starts from the
same disk state (common.settle_disk). Prints a JSON result line.

Environment: BENCH_ROUNDS (5), BENCH_POOL=0 skips the pool phase, BENCH_POOL_SIZE (1),
BENCH_POOL_TIMEOUT (600 s), BENCH_DOWNLOAD_TIMEOUT (300 s) bounds the sdist's download; the
repository is kept in ~/.cache/aoctl-bench/ between runs. The settling takes the variables of
spawn.py."""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (Server, disk_summary, git, reset_repo, rotating_rounds, settle_disk, spread,  # noqa: E402
                    timed_command)
from spawn import create_project, delete_all, show_log, wait_pool  # noqa: E402

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
POOL = os.environ.get("BENCH_POOL", "1") != "0"
POOL_SIZE = int(os.environ.get("BENCH_POOL_SIZE", "1"))
POOL_TIMEOUT = float(os.environ.get("BENCH_POOL_TIMEOUT", "600"))
DOWNLOAD_TIMEOUT = float(os.environ.get("BENCH_DOWNLOAD_TIMEOUT", "300"))
DJANGO = "5.1.4"
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "aoctl-bench")
GOAL_S = 0.150


def has_main(repo):
    return subprocess.run(["git", "-C", repo, "rev-parse", "-q", "--verify", "main^{commit}"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def django_repo():
    """Django's sdist unpacked and committed once on `main`, made on first use and kept."""
    repo = os.path.join(CACHE, f"django-{DJANGO}")
    if os.path.isdir(repo) and has_main(repo):
        reset_repo(repo)  # what an interrupted run may have left
        return repo
    os.makedirs(CACHE, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="django-", dir=CACHE)
    try:
        dl = os.path.join(tmp, "dl")
        try:
            subprocess.run([sys.executable, "-m", "pip", "download", f"django=={DJANGO}", "--no-binary", ":all:",
                            "--no-deps", "--disable-pip-version-check", "-q", "-d", dl],
                           check=True, timeout=DOWNLOAD_TIMEOUT, stdout=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"pip download django=={DJANGO} took more than {DOWNLOAD_TIMEOUT}s")
        sdist = [f for f in os.listdir(dl) if f.endswith(".tar.gz")]
        if len(sdist) != 1:
            raise SystemExit(f"pip download left {os.listdir(dl)}, not one sdist")
        with tarfile.open(os.path.join(dl, sdist[0])) as t:
            t.extractall(os.path.join(tmp, "x"), filter="data")
        (top,) = os.listdir(os.path.join(tmp, "x"))
        tree = os.path.join(tmp, "x", top)
        git(tree, "init", "-q", "-b", "main")
        git(tree, "add", "-A")
        git(tree, "commit", "-q", "-m", f"Django {DJANGO} (sdist)")
        if os.path.isdir(repo):
            shutil.rmtree(repo)  # a half-made one, without a commit on main
        os.rename(tree, repo)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return repo


def files_of(repo):
    out = subprocess.run(["git", "-C", repo, "ls-files", "-z"], check=True, capture_output=True).stdout
    return out.count(b"\0")


def floor(repo, work, disk):
    """`git worktree add` + `tmux new-session` of one, the way a person would script it."""
    os.makedirs(work)
    sock = os.path.join(work, "floor.sock")
    wt = os.path.join(work, "wt")
    disk.append(settle_disk([repo]))
    t0 = time.monotonic()
    git(repo, "worktree", "add", "-q", "-b", "floor", wt, "main")
    subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-s", "one", "-c", wt, "sleep", "1000"], check=True)
    took = time.monotonic() - t0
    subprocess.run(["tmux", "-S", sock, "kill-server"], stderr=subprocess.DEVNULL)
    return took


def aoctl_phase(repo, work, name, pool, disk, fills):
    """One `aoctl spawn`, timed until the session is RuntimeReady; with `pool`, the project keeps
    that many worktrees ready and the clock starts once they are."""
    server = Server(AOCTL, work, name)
    try:
        t0 = time.monotonic()
        create_project(server, repo, pool, name, defaults={"agent": {"command": ["sleep", "1000"]}})
        if pool:
            wait_pool(server, "bench", pool, POOL_TIMEOUT)
            # From the project's creation: its first reconcile may fill the pool before Ready.
            fills.append(round(time.monotonic() - t0, 3))
        args = ["spawn", "--project", "bench", "--name", "one", "benchmark"]
        took = timed_command(server, args, 1, prepare=lambda: disk.append(settle_disk([repo, server.dir])))
        delete_all(server, "bench")
        return took
    except BaseException:
        show_log(server)  # the scratch folder goes when the script ends
        raise
    finally:
        server.stop()


def main():
    repo = django_repo()
    work = tempfile.mkdtemp(prefix="aoctl-bench-")
    try:
        phases = ["floor", "pool_off"] + (["pool_on"] if POOL else [])
        disk, fills = [], []

        def run(phase, name):
            if phase == "floor":
                return floor(repo, os.path.join(work, name), disk)
            return aoctl_phase(repo, work, name, POOL_SIZE if phase == "pool_on" else 0, disk, fills)

        def after(name):
            # The phase's worktree, branches and server data go before the next phase settles.
            shutil.rmtree(os.path.join(work, name), ignore_errors=True)
            reset_repo(repo)

        times, load = rotating_rounds(phases, ROUNDS, run, after)
        out = {"tree": f"django-{DJANGO}", "files": files_of(repo), "rounds": ROUNDS, "ready_from": "watch",
               "disk": disk_summary(disk)}
        out.update({p: spread(v) for p, v in times.items()})
        out["ratio"] = round(out["pool_off"]["median_s"] / out["floor"]["median_s"], 3)
        if POOL:
            out["ratio_pool"] = round(out["pool_on"]["median_s"] / out["floor"]["median_s"], 3)
            out["pool_size"] = POOL_SIZE
            out["pool_fill_s"] = fills
            out["goal_s"] = GOAL_S
            out["goal_met"] = out["pool_on"]["median_s"] <= GOAL_S
        else:
            out["pool_on"] = "skipped (BENCH_POOL=0)"
        out["loadavg_max"] = max(load)
        print(json.dumps(out))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
