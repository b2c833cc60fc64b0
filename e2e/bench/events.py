#!/usr/bin/env python3
"""Bounded events: one session records BENCH_EVENTS events (default 100,000) over its life, through
the real path: its agent's `POST /agent/v1/report` (what `aoctl mcp`'s report tool calls, with the
session's own token), each report a new progress text, so each is a new Event from the session
controller's recorder (and a write of the session's status). At each checkpoint of
BENCH_CHECKPOINTS (default 1,000, 10,000 and 100,000 recorded) it reads the bytes of the store's
folder (<data dir>/store, sled) and of the whole data folder, the Events kept (the session's and
all), the server's RSS, and the wall time of `aoctl describe session` (the whole CLI process,
median and p90 of BENCH_RUNS runs after two warm-up runs). Then a second server runs with
`AOCTL_EVENT_TTL=5s` (`--event-ttl`), the session records 1,000 events, and the time from the
last until the expiry pass has deleted all of them is measured. BENCH_CLIENTS connections report
at once (default 4), each retrying a 409 of the status write. Prints a JSON result line."""

import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (API, Conn, Server, cleanup, loadavg, median, percentile, rss_bytes,  # noqa: E402
                    stopped, workdir)

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
TOTAL = int(os.environ.get("BENCH_EVENTS", "100000"))
CHECKPOINTS = [int(n) for n in os.environ.get("BENCH_CHECKPOINTS", "1000,10000,100000").split(",") if int(n) <= TOTAL]
RUNS = int(os.environ.get("BENCH_RUNS", "20"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "4"))
SESSION = "chatty"


def session_token(bearer, name, uid):
    """The session's token, made as the server makes it (controller/src/agent_token.rs)."""
    key = hmac.new(bearer.encode(), b"aoctl session token v1", hashlib.sha256).digest()
    mac = hmac.new(key, name.encode() + b"\0" + uid.encode(), hashlib.sha256).hexdigest()
    return f"aos1.{name}.{uid}.{mac}"


def folder_bytes(path):
    """The bytes the files under `path` take on disk (allocated blocks, as `du` counts them)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def report_range(srv, token, start, end, step):
    """Reports progress texts start, start+step, … below end over one connection."""
    conn = Conn(srv.base, token)
    try:
        for i in range(start, end, step):
            for _ in range(100):
                status, body = conn.request("POST", "/agent/v1/report", {"progress": f"step {i} of the bench"})
                if status == 200:
                    break
                if status != 409:
                    raise SystemExit(f"report {i}: {status} {body[:300]!r}")
            else:
                raise SystemExit(f"report {i}: still 409 after 100 tries")
    finally:
        conn.close()


def record(srv, token, start, end):
    """Records the events start..end with CLIENTS connections at once; the seconds it took."""
    t0 = time.monotonic()
    errors = []

    def run(k):
        try:
            report_range(srv, token, start + k, end, CLIENTS)
        except BaseException as e:  # noqa: BLE001 - carried to the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.monotonic() - t0


def events(srv, name=None):
    path = f"{API}/events"
    if name:
        path += f"?fieldSelector=involvedObject.kind%3DSession,involvedObject.name%3D{name}"
    return srv.conn.json("GET", path)["items"]


def describe_times(srv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOCTL_")}
    env.update(HOME=os.path.join(srv.dir, "home"), NO_COLOR="1", AOCTL_DATA_DIR=srv.data)
    cmd = [AOCTL, "--server", srv.base, "describe", "session", SESSION]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    if "Events:" not in out or "AgentReported" not in out:
        raise SystemExit(f"aoctl describe shows no events:\n{out}")
    times = []
    for r in range(RUNS + 2):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        if r >= 2:
            times.append((time.perf_counter() - t0) * 1000)
    return {"describe_median_ms": round(median(times), 1), "describe_p90_ms": round(percentile(times, 90), 1)}


def checkpoint(srv, recorded, seconds):
    mine, every = events(srv, SESSION), events(srv)
    out = {"recorded": recorded, "record_s": round(seconds, 1),
           "session_events": len(mine), "all_events": len(every),
           "newest_kept": max(mine, key=lambda e: int(e["metadata"]["resourceVersion"]))["message"],
           "store_bytes": folder_bytes(os.path.join(srv.data, "store")),
           "data_dir_bytes": folder_bytes(srv.data),
           "rss_mb": round(rss_bytes(srv.pid) / 1e6, 1)}
    out.update(describe_times(srv))
    out["loadavg_1m"] = loadavg()
    return out


def wait_settled(srv, name, timeout=120):
    return srv.wait_session(name, stopped, timeout, 0.2, f"not Stopped after {timeout}s")


def start(work, name, env=None):
    """A server with a project on a scratch repository and the stopped session SESSION; the
    server and the session's token."""
    srv = Server(AOCTL, work, name=name, env=env)
    srv.repo_project("bench", os.path.join(work, f"{name}-repo"))
    srv.conn.json("POST", f"{API}/sessions", {
        "apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": SESSION},
        "spec": {"project": "bench", "stopped": True}})
    s = wait_settled(srv, SESSION)
    return srv, session_token(srv.token, SESSION, s["metadata"]["uid"])


def main():
    work = workdir()
    srv = None
    try:
        srv, token = start(work, "serve")
        points, done = [], 0
        for target in CHECKPOINTS:
            seconds = record(srv, token, done, target)
            done = target
            points.append(checkpoint(srv, done, seconds))
        srv.stop()

        # A server with `--event-ttl 5s`: the time from the last of 1,000 events until the
        # expiry pass has deleted them all.
        srv, token = start(work, "serve-ttl", env={"AOCTL_EVENT_TTL": "5s"})
        record(srv, token, 0, 1000)
        t0 = time.monotonic()
        before = len(events(srv, SESSION))
        while events(srv, SESSION):
            if time.monotonic() - t0 > 120:
                raise SystemExit(f"{len(events(srv, SESSION))} events left 120 s after the last, with --event-ttl 5s")
            time.sleep(0.25)
        expiry = {"ttl_s": 5, "events_after_last": before, "all_gone_after_s": round(time.monotonic() - t0, 1)}
        first, last = points[0], points[-1]
        print(json.dumps({
            "benchmark": "events", "clients": CLIENTS, "checkpoints": points, "expiry": expiry,
            # Flat: what the most events recorded leave against what the fewest left.
            "store_growth": round(last["store_bytes"] / first["store_bytes"], 2),
            "describe_growth": round(last["describe_median_ms"] / first["describe_median_ms"], 2)}))
    finally:
        if srv is not None and srv.proc.poll() is None:
            srv.stop()
        cleanup(work)


if __name__ == "__main__":
    main()
