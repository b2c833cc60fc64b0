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
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
N = int(os.environ.get("BENCH_SESSIONS", "10"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
IMAGE = os.environ.get("BENCH_IMAGE", "aoctl-agent:busybox")
HERE = os.path.dirname(os.path.abspath(__file__))
TAG = f"dbench{os.getpid()}"


def git(repo, *args):
    subprocess.run(["git", "-C", repo, "-c", "user.name=bench", "-c", "user.email=bench@aoctl.invalid", *args],
                   check=True, stdout=subprocess.DEVNULL)


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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


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


def request(base, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def aoctl_round(repo, work, round_no):
    data = os.path.join(work, f"data{round_no}")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(work, f"serve{round_no}.log"), "w")
    server = subprocess.Popen([AOCTL, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data],
                              stdout=log, stderr=subprocess.STDOUT)
    names = [f"{TAG}-r{round_no}-{i}" for i in range(N)]
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(base + "/readyz", timeout=1)
                break
            except Exception:
                time.sleep(0.05)
        request(base, "POST", "/apis/ao.dev/v1alpha1/projects", {
            "apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": "bench"},
            "spec": {"path": repo, "sessionPrefix": f"r{round_no}"}})
        while True:
            p = request(base, "GET", "/apis/ao.dev/v1alpha1/projects/bench")
            if any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", [])):
                break
            time.sleep(0.05)
        lst = request(base, "GET", "/apis/ao.dev/v1alpha1/sessions")
        rv = lst["metadata"]["resourceVersion"]
        ready = set()
        done = threading.Event()

        def watch():
            url = f"{base}/apis/ao.dev/v1alpha1/sessions?watch=true&resourceVersion={rv}"
            with urllib.request.urlopen(url, timeout=300) as r:
                for line in r:
                    ev = json.loads(line)
                    obj = ev["object"]
                    conds = obj.get("status", {}).get("conditions", [])
                    if any(c["type"] == "RuntimeReady" and c["status"] == "True" for c in conds):
                        ready.add(obj["metadata"]["name"])
                        if len(ready) == N:
                            done.set()
                            return

        threading.Thread(target=watch, daemon=True).start()
        manifest = "".join(
            f"---\napiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {{name: {name}}}\n"
            f"spec: {{project: bench, prompt: bench, runtime: docker,\n"
            f"  docker: {{image: '{IMAGE}', cpus: 1, memory: 128Mi, pidsLimit: 64}},\n"
            f"  agent: {{command: [sh, ./scripts/box-agent, '{{promptFile}}']}}}}\n" for name in names)
        path = os.path.join(work, f"sessions{round_no}.yaml")
        with open(path, "w") as f:
            f.write(manifest)
        t0 = time.monotonic()
        subprocess.run([AOCTL, "--server", base, "apply", "-f", path], check=True, stdout=subprocess.DEVNULL)
        if not done.wait(300):
            raise SystemExit(f"only {len(ready)} of {N} docker sessions became RuntimeReady; see {log.name}")
        took = time.monotonic() - t0
        # Clean up through the product itself: deleting the project cascades to the sessions.
        request(base, "DELETE", "/apis/ao.dev/v1alpha1/projects/bench")
        for _ in range(600):
            if not request(base, "GET", "/apis/ao.dev/v1alpha1/sessions")["items"]:
                break
            time.sleep(0.1)
        return took
    finally:
        server.terminate()
        server.wait(10)
        docker("rm", "-f", *[f"aoctl-{n}" for n in names], check=False)


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
