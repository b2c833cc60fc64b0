#!/usr/bin/env python3
"""An orchestrator hearing from its workers: BENCH_WORKERS workers (default 20, stopped sessions
labelled as its own) report at once through the real path (`POST /agent/v1/report` with each
worker's own token, what `aoctl mcp`'s report tool calls), BENCH_ROUNDS times (default 5). For each
round: the time from the first report's answer until the orchestrator's status has every report
delivered (typed into its agent, a `cat` in tmux that echoes), and how many batches (typed
messages) that took. Baseline in the same run: one message typed into the same agent through
`POST …/sessions/<name>/input` (the path `aoctl send` takes), median over the rounds. The
orchestrator waits for a quiet moment (3 s with no new report) before it types a batch, so the
ratio is mostly that window. Prints a JSON result line."""

import hashlib
import hmac
import json
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (API, Conn, Server, cleanup, loadavg, make_repo, median, percentile, running,  # noqa: E402
                    workdir)

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
WORKERS = int(os.environ.get("BENCH_WORKERS", "20"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
PROJECT = "fleet"
ORCHESTRATOR = f"{PROJECT}-orchestrator"


def token(bearer, name, uid, orchestrator=False):
    """A session's (or the orchestrator's) token, made as the server makes it
    (controller/src/agent_token.rs)."""
    purpose = b"aoctl orchestrator token v1" if orchestrator else b"aoctl session token v1"
    key = hmac.new(bearer.encode(), purpose, hashlib.sha256).digest()
    mac = hmac.new(key, name.encode() + b"\0" + uid.encode(), hashlib.sha256).hexdigest()
    return f"{'aoo1' if orchestrator else 'aos1'}.{name}.{uid}.{mac}"


def delivered(srv):
    """The orchestrator's cursors per worker and its batch count."""
    s = srv.conn.json("GET", f"{API}/sessions/{ORCHESTRATOR}")
    o = s.get("status", {}).get("orchestrator", {})
    return {w: d["seq"] for w, d in o.get("delivered", {}).items()}, o.get("batches", 0)


def main():
    work = workdir()
    srv = Server(AOCTL, work)
    try:
        repo = os.path.join(work, "repo")
        srv.project(PROJECT, make_repo(repo), orchestrator={"agent": {"command": ["cat"]}})
        srv.wait_project_ready(PROJECT)
        o = srv.wait_session(ORCHESTRATOR, running, 60, 0.1, "has no running agent after 60 s")
        otoken = token(srv.token, ORCHESTRATOR, o["metadata"]["uid"], orchestrator=True)
        # Its agent runs no `aoctl mcp`: say its hello, so its first prompt is typed at once.
        Conn(srv.base, otoken).json("POST", "/agent/v1/hello", {})
        workers = []
        for i in range(WORKERS):
            name = f"w{i}"
            s = srv.conn.json("POST", f"{API}/sessions", {
                "apiVersion": "ao.dev/v1alpha1", "kind": "Session",
                "metadata": {"name": name, "labels": {"ao.dev/orchestrator": ORCHESTRATOR}},
                "spec": {"project": PROJECT, "prompt": "task", "stopped": True}})
            workers.append((name, token(srv.token, name, s["metadata"]["uid"])))
        srv.wait_idle(quiet=2.0, timeout=120)

        rounds, batches, baseline = [], [], []
        for r in range(1, ROUNDS + 1):
            _, before = delivered(srv)
            barrier = threading.Barrier(len(workers))

            def report(name, tok):
                conn = Conn(srv.base, tok)
                barrier.wait()
                conn.json("POST", "/agent/v1/report", {"summary": f"round {r}: {name} done"})
                conn.close()

            threads = [threading.Thread(target=report, args=w) for w in workers]
            t0 = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            deadline = t0 + 120
            while True:
                cursors, now = delivered(srv)
                if len(cursors) == WORKERS and all(seq >= r for seq in cursors.values()):
                    rounds.append(time.monotonic() - t0)
                    batches.append(now - before)
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"round {r}: not every report was delivered after 120 s: {cursors}")
                time.sleep(0.02)
            t1 = time.monotonic()
            srv.conn.json("POST", f"{API}/sessions/{ORCHESTRATOR}/input", {"text": f"baseline {r}"}, expect=(200, 202))
            baseline.append(time.monotonic() - t1)
        events = srv.conn.json("GET", f"{API}/events")["items"]
        typed = sum(e.get("count", 1) for e in events
                    if e.get("reason") == "ReportsDelivered" and e["involvedObject"]["name"] == ORCHESTRATOR)
        result = {
            "workers": WORKERS,
            "rounds": ROUNDS,
            "delivered_p50_s": round(median(rounds), 3),
            "delivered_p90_s": round(percentile(rounds, 90), 3),
            "delivered_max_s": round(max(rounds), 3),
            "batches_per_round": batches,
            "batches_delivered_events": typed,
            "baseline_input_p50_s": round(median(baseline), 3),
            "ratio": round(median(rounds) / max(median(baseline), 1e-6), 1),
            "load": loadavg(),
        }
        print(json.dumps(result))
    finally:
        srv.stop()
        cleanup(work)


if __name__ == "__main__":
    main()
