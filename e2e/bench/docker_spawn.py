#!/usr/bin/env python3
"""Docker spawn benchmark: N docker sessions (the busybox image aoctl-agent:busybox running
e2e/agents/box-agent, with the e2e tests' limits) applied at once, timed until every one is
RuntimeReady (watched), against the raw floor measured in the same run: N sequential
`docker run -d` of the same image with the same flags (mounts, user, limits, hardening, TTY,
init), each on a worktree made beforehand; the `git worktree add` of the floor's worktrees is
timed apart and reported too. Needs a Docker engine (`e2e/docker/dockerd.sh start`); builds the
image with e2e/docker/build-image.sh when missing. Prints a JSON result line."""

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
N = int(os.environ.get("BENCH_SESSIONS", "10"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
IMAGE = os.environ.get("BENCH_IMAGE", "aoctl-agent:busybox")
HERE = os.path.dirname(os.path.abspath(__file__))
TAG = f"dbench{os.getpid()}"


def docker(*args, check=True):
    return subprocess.run(["docker", *args], check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def make_repo(path):
    os.makedirs(os.path.join(path, "scripts"))
    git(path, "init", "-q", "-b", "main")
    shutil.copy(os.path.join(HERE, "..", "agents", "box-agent"), os.path.join(path, "scripts", "box-agent"))
    with open(os.path.join(path, "README.md"), "w") as f:
        f.write("# docker bench\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "box agent")


def floor(repo, work, round_no):
    """Sequential `docker run -d` of N containers like the runtime's, on worktrees made first."""
    names, wts = [], []
    t0 = time.monotonic()
    for i in range(N):
        wt = os.path.join(work, f"floor{round_no}", f"s{i}")
        git(repo, "worktree", "add", "-q", "-b", f"floor{round_no}-{i}", wt, "main")
        wts.append(wt)
    worktrees = time.monotonic() - t0
    common = os.path.realpath(os.path.join(repo, ".git"))
    prompt_dir = os.path.join(work, f"floor{round_no}-prompt")
    os.makedirs(prompt_dir)
    with open(os.path.join(prompt_dir, "prompt.md"), "w") as f:
        f.write("bench\n")
    st = os.stat(repo)
    t0 = time.monotonic()
    for i, wt in enumerate(wts):
        name = f"{TAG}-floor{round_no}-{i}"
        docker("run", "-d", "-t", "-i", "--init", "--name", name, "--label", f"ao.dev/bench={TAG}",
               "--network", "none", "--cpus", "1", "--memory", "128m", "--pids-limit", "64",
               "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", f"{st.st_uid}:{st.st_gid}",
               "--mount", f"type=bind,source={os.path.realpath(wt)},target=/workspace",
               "--mount", f"type=bind,source={prompt_dir},target=/aoctl/session,readonly",
               "--mount", f"type=bind,source={common},target={common}",
               "-w", "/workspace", "-e", f"AOCTL_SESSION=s{i}", "--entrypoint", "sh",
               IMAGE, "./scripts/box-agent", "/aoctl/session/prompt.md")
        names.append(name)
    took = time.monotonic() - t0
    docker("rm", "-f", *names, check=False)
    return worktrees, took


def aoctl_round(repo, work, round_no):
    server = Server(AOCTL, work, f"serve{round_no}")
    names = [f"{TAG}-r{round_no}-{i}" for i in range(N)]
    try:
        server.project("bench", repo, sessionPrefix=f"r{round_no}")
        server.wait_project_ready("bench")
        manifest = "".join(
            f"---\napiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {{name: {name}}}\n"
            f"spec: {{project: bench, prompt: bench, runtime: docker,\n"
            f"  docker: {{image: '{IMAGE}', cpus: 1, memory: 128Mi, pidsLimit: 64}},\n"
            f"  agent: {{command: [sh, ./scripts/box-agent, '{{promptFile}}']}}}}\n" for name in names)
        took = timed_apply(server, manifest, N)
        # Clean up through the product itself: deleting the project cascades to the sessions.
        delete_project(server, "bench")
        return took
    finally:
        server.stop()
        # Containers are named aoctl-<owner>-<session>; the sessions' names carry this run's tag.
        left = docker("ps", "-aq", "--filter", f"name={TAG}-r{round_no}-", check=False).stdout.split()
        if left:
            docker("rm", "-f", *left, check=False)


def main():
    if docker("version", check=False).returncode != 0:
        raise SystemExit("no Docker engine answers `docker version`; start one with e2e/docker/dockerd.sh start")
    subprocess.run(["bash", os.path.join(HERE, "..", "docker", "build-image.sh"), IMAGE], check=True,
                   stdout=sys.stderr)
    work = tempfile.mkdtemp(prefix="aoctl-docker-bench-")
    try:
        repo = os.path.join(work, "repo")
        make_repo(repo)
        worktrees, floors, runs = [], [], []
        for r in range(ROUNDS):
            wt, took = floor(repo, work, r)
            worktrees.append(wt)
            floors.append(took)
            runs.append(aoctl_round(repo, work, r))
        med = lambda v: sorted(v)[len(v) // 2]
        print(json.dumps({"sessions": N, "rounds": ROUNDS, "image": IMAGE,
                          "docker_run_s": [round(x, 3) for x in floors],
                          "worktree_add_s": [round(x, 3) for x in worktrees],
                          "aoctl_s": [round(x, 3) for x in runs],
                          "docker_run_median_s": round(med(floors), 3),
                          "worktree_add_median_s": round(med(worktrees), 3),
                          "aoctl_median_s": round(med(runs), 3),
                          "ratio": round(med(runs) / med(floors), 3),
                          "ratio_with_worktrees": round(med(runs) / (med(floors) + med(worktrees)), 3)}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
