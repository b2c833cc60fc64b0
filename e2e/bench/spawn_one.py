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
from common import git, reset_repo, settle_disk, timed_command  # noqa: E402
# The rounds, the phases and BENCH_ROUNDS, BENCH_POOL and BENCH_POOL_TIMEOUT are spawn.py's.
from spawn import ROUNDS, pool_phase, pool_rounds  # noqa: E402

POOL_SIZE = int(os.environ.get("BENCH_POOL_SIZE", "1"))
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
    args = ["spawn", "--project", "bench", "--name", "one", "benchmark"]
    return pool_phase(repo, work, name, pool, disk, fills,
                      lambda server, prepare: timed_command(server, args, 1, prepare=prepare),
                      defaults={"agent": {"command": ["sleep", "1000"]}})


def main():
    repo = django_repo()
    work = tempfile.mkdtemp(prefix="aoctl-bench-")
    try:
        head = {"tree": f"django-{DJANGO}", "files": files_of(repo), "rounds": ROUNDS, "ready_from": "watch"}
        out = pool_rounds(repo, work, floor, aoctl_phase, POOL_SIZE, head, lambda out: {
            "pool_size": POOL_SIZE, "goal_s": GOAL_S, "goal_met": out["pool_on"]["median_s"] <= GOAL_S})
        print(json.dumps(out))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
