#!/usr/bin/env python3
"""Spawn benchmark: N sessions applied at once on a repository of a few thousand files, timed
until every one is RuntimeReady, against the raw floor measured in the same run: sequential
`git worktree add` + `tmux new-session` of the same N. Prints a JSON result line."""

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
N = int(os.environ.get("BENCH_SESSIONS", "20"))
FILES = int(os.environ.get("BENCH_FILES", "3000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


def git(repo, *args):
    subprocess.run(["git", "-C", repo, "-c", "user.name=bench", "-c", "user.email=bench@aoctl.invalid", *args],
                   check=True, stdout=subprocess.DEVNULL)


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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


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
            f"---\napiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {{name: s{i}}}\n"
            f"spec: {{project: bench, agent: {{command: [sleep, '1000']}}}}\n" for i in range(N))
        path = os.path.join(work, f"sessions{round_no}.yaml")
        with open(path, "w") as f:
            f.write(manifest)
        settle()
        t0 = time.monotonic()
        subprocess.run([AOCTL, "--server", base, "apply", "-f", path], check=True, stdout=subprocess.DEVNULL)
        if not done.wait(300):
            raise SystemExit(f"only {len(ready)} of {N} sessions became RuntimeReady")
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
        subprocess.run(["tmux", "-S", os.path.join(data, "tmux.sock"), "kill-server"], stderr=subprocess.DEVNULL)


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
