#!/usr/bin/env python3
"""Spawn benchmark: N sessions applied at once on a repository of a few thousand files, timed
until every one is RuntimeReady, against the raw floor measured in the same run: sequential
`git worktree add` + `tmux new-session` of the same N. Prints a JSON result line."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Server, delete_project, git, timed_apply  # noqa: E402

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
N = int(os.environ.get("BENCH_SESSIONS", "20"))
FILES = int(os.environ.get("BENCH_FILES", "3000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


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


def settle():
    """Writes back the previous round's files first, so no round pays for another's dirty pages."""
    os.sync()
    time.sleep(1)


def floor(repo, work):
    """Sequential git worktree add + tmux new-session of N, the way a person would script it."""
    settle()
    sock = os.path.join(work, "floor.sock")
    t0 = time.monotonic()
    for i in range(N):
        wt = os.path.join(work, "floor", f"s{i}")
        git(repo, "worktree", "add", "-q", "-b", f"floor{i}", wt, "main")
        subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-s", f"s{i}", "-c", wt, "sleep", "1000"], check=True)
    took = time.monotonic() - t0
    subprocess.run(["tmux", "-S", sock, "kill-server"], stderr=subprocess.DEVNULL)
    return took


def aoctl_round(repo, work, round_no):
    server = Server(AOCTL, work, f"serve{round_no}")
    try:
        server.project("bench", repo, sessionPrefix=f"r{round_no}")
        server.wait_project_ready("bench")
        manifest = "".join(
            f"---\napiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {{name: s{i}}}\n"
            f"spec: {{project: bench, agent: {{command: [sleep, '1000']}}}}\n" for i in range(N))
        took = timed_apply(server, manifest, N, prepare=settle)
        # Clean up through the product itself: deleting the project cascades to the sessions.
        delete_project(server, "bench")
        return took
    finally:
        server.stop()


def main():
    work = tempfile.mkdtemp(prefix="aoctl-bench-")
    try:
        repo = os.path.join(work, "repo")
        make_repo(repo)
        floors, runs = [], []
        for r in range(ROUNDS):
            floors.append(floor(repo, os.path.join(work, f"f{r}")))
            shutil.rmtree(os.path.join(work, f"f{r}"), ignore_errors=True)
            git(repo, "worktree", "prune")
            for i in range(N):
                git(repo, "branch", "-q", "-D", f"floor{i}")
            runs.append(aoctl_round(repo, work, r))
        floors.sort()
        runs.sort()
        med = lambda v: v[len(v) // 2]
        print(json.dumps({"sessions": N, "files": FILES, "rounds": ROUNDS,
                          "floor_s": [round(x, 3) for x in floors], "aoctl_s": [round(x, 3) for x in runs],
                          "floor_median_s": round(med(floors), 3), "aoctl_median_s": round(med(runs), 3),
                          "ratio": round(med(runs) / med(floors), 3)}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
