#!/usr/bin/env python3
"""Engine throughput: 1,000 stopped sessions on a real repository are held; a spec patch on their
project that stopped sessions do not use (`github.pollInterval`) moves its generation, which
triggers all of them (route_changes in controller/src/serve.rs; a label patch no longer does), and
the time until `aoctl_reconcile_total{controller="session"}` has grown by 1,000 gives reconciles
per second.
Steady-state reconciles of stopped sessions write nothing (the workspace is opened, the runtime
is left alone). Also reports the controller's RSS holding them. Baseline in the same run: GETs
of the same sessions one by one over one keep-alive HTTP connection (per-object work of the
API: read from the store, encode JSON). Prints a JSON result line."""

import json
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (API, Server, cleanup, cpu_seconds, loadavg, median, metric_sum,  # noqa: E402
                    rss_bytes, stopped, workdir)

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
N = int(os.environ.get("BENCH_SESSIONS", "1000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


def reconciles(srv):
    return metric_sum(srv.metrics(), "aoctl_reconcile_total", controller="session")


def time_in_reconcile(srv):
    m = srv.metrics()
    return (metric_sum(m, "aoctl_reconcile_duration_seconds_sum", controller="session"),
            metric_sum(m, "aoctl_reconcile_duration_seconds_count", controller="session"))


def trigger_round(srv, r, poll):
    """Patches the project's spec (a new generation); returns (seconds until N more session reconciles, reconciles
    counted once the controllers are idle again, mean ms inside one reconcile, CPU ms per
    reconcile of the controller and of the processes it spawned and reaped, polling included)."""
    before = reconciles(srv)
    spent0, count0 = time_in_reconcile(srv)
    own0, kids0 = cpu_seconds(srv.pid), cpu_seconds(srv.pid, children=True)
    t0 = time.perf_counter()
    patch = {"spec": {"github": {"pollInterval": f"{31 + r}s"}}}
    srv.conn.json("PATCH", f"{API}/projects/bench", patch, ctype="application/merge-patch+json")
    while True:
        time.sleep(poll)
        now = reconciles(srv)
        if now - before >= N:
            took = time.perf_counter() - t0
            break
        if time.perf_counter() - t0 > 300:
            raise SystemExit(f"only {now - before} of {N} reconciles after 300 s")
    own, kids = cpu_seconds(srv.pid) - own0, cpu_seconds(srv.pid, children=True) - kids0
    srv.wait_idle(quiet=2.0)
    spent1, count1 = time_in_reconcile(srv)
    mean_ms = (spent1 - spent0) / max(1, count1 - count0) * 1000
    return took, reconciles(srv) - before, mean_ms, own / N * 1000, kids / N * 1000


def main():
    work = workdir()
    srv = Server(AOCTL, work)
    try:
        srv.repo_project("bench", os.path.join(work, "repo"))
        t0 = time.monotonic()
        srv.sessions("bench", N, stopped=True)
        created = time.monotonic() - t0
        srv.wait_sessions(stopped, N)
        srv.wait_idle()
        settled = time.monotonic() - t0
        setup_reconciles = reconciles(srv)
        rss_held = rss_bytes(srv.pid)

        # Poll no faster than 5 scrapes' time, so that polling takes at most a fifth of the server's
        # time; the floor of 10 ms bounds the error of a round that takes a few hundred ms.
        scrapes = []
        for _ in range(10):
            t = time.perf_counter()
            srv.metrics()
            scrapes.append(time.perf_counter() - t)
        scrape = median(scrapes)
        poll = max(0.01, 5 * scrape)
        rounds = [trigger_round(srv, r, poll) for r in range(ROUNDS)]
        rates = [N / took for took, *_ in rounds]
        rss_after = rss_bytes(srv.pid)

        # Baseline: the same number of single-object GETs over HTTP.
        names = [f"s{i}" for i in range(N)]
        gets = []
        for _ in range(ROUNDS):
            t = time.perf_counter()
            for name in names:
                status, _ = srv.conn.request("GET", f"{API}/sessions/{name}")
                assert status == 200, status
            gets.append(N / (time.perf_counter() - t))
        m = srv.metrics()
        count = metric_sum(m, "aoctl_reconcile_duration_seconds_count", controller="session")
        spent = metric_sum(m, "aoctl_reconcile_duration_seconds_sum", controller="session")
        print(json.dumps({
            "benchmark": "engine", "sessions": N, "rounds": ROUNDS,
            "reconciles_per_s": [round(x) for x in rates], "reconciles_per_s_median": round(median(rates)),
            "reconciles_per_trigger": [int(r[1]) for r in rounds],
            "mean_reconcile_ms": [round(r[2], 2) for r in rounds],
            "cpu_ms_per_reconcile": [round(r[3], 2) for r in rounds],
            "children_cpu_ms_per_reconcile": [round(r[4], 2) for r in rounds],
            "mean_reconcile_ms_overall": round(spent / count * 1000, 2) if count else None,
            "metrics_scrape_ms": round(scrape * 1000, 1), "poll_s": round(poll, 3),
            "rss_mb_holding": round(rss_held / 1e6, 1), "rss_mb_after": round(rss_after / 1e6, 1),
            "peak_rss_mb": round(rss_bytes(srv.pid, "VmHWM") / 1e6, 1),
            "create_s": round(created, 1), "settle_s": round(settled, 1),
            "setup_session_reconciles": int(setup_reconciles),
            "baseline_gets_per_s_median": round(median(gets)),
            "ratio": round(median(rates) / median(gets), 2),
            "target_per_s": 2000, "target_rss_mb": 200, "loadavg_1m": loadavg()}))
    finally:
        srv.stop()
        cleanup(work)


if __name__ == "__main__":
    main()
