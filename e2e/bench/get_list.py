#!/usr/bin/env python3
"""A fleet of stopped sessions, at each size of BENCH_SIZES (default 1,000 and 10,000) in the same
run: the time to create and settle them, the reconciles it took, the controller's CPU and RSS, and
how long SIGTERM then takes to stop it; and `aoctl get sessions` over them, wall time of the whole
CLI process (median of BENCH_RUNS runs), against `curl` of the same list endpoint measured the same
way: the plain list, and the server-side table the CLI asks for (and, for reference, an in-process
urllib GET of the list). The sessions are `stopped: true` on a real repository, so no agent runs;
each has its worktree. Prints a JSON result line."""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (API, Server, cleanup, cpu_seconds, loadavg, median, metric_sum,  # noqa: E402
                    percentile, rss_bytes, workdir)

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
SIZES = [int(n) for n in os.environ.get("BENCH_SIZES", os.environ.get("BENCH_SESSIONS", "1000,10000")).split(",")]
RUNS = int(os.environ.get("BENCH_RUNS", "20"))
# What `aoctl get` asks for: Kubernetes' server-side table.
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def timed(fns):
    """Wall times in ms of RUNS rounds of each function (interleaved, after 2 warm-up rounds), so
    that drift (CPU frequency, page cache) hits them alike."""
    out = [[] for _ in fns]
    for r in range(RUNS + 2):
        for fn, times in zip(fns, out):
            t0 = time.perf_counter()
            fn()
            if r >= 2:
                times.append((time.perf_counter() - t0) * 1000)
    return out


def settle(srv, n, timeout):
    """Creates n stopped sessions and waits until all are Stopped and the controllers are idle;
    what it took, read from the controller's own counters and /proc."""
    m0 = srv.metrics()
    c0 = cpu_seconds(srv.pid)
    t0 = time.monotonic()
    srv.sessions("bench", n, stopped=True)
    created = time.monotonic() - t0
    rss_max = 0
    while True:
        m = srv.metrics()
        rss_max = max(rss_max, rss_bytes(srv.pid))
        if metric_sum(m, "aoctl_sessions", project="bench", phase="Stopped") >= n:
            break
        if time.monotonic() - t0 > timeout:
            done = metric_sum(m, "aoctl_sessions", project="bench", phase="Stopped")
            raise SystemExit(f"only {done:.0f} of {n} sessions Stopped after {timeout}s")
        time.sleep(0.5)
    stopped_s = time.monotonic() - t0
    srv.wait_idle(quiet=3.0, timeout=timeout)
    settled_s = time.monotonic() - t0 - 3.0
    m = srv.metrics()
    count = lambda c: int(metric_sum(m, "aoctl_reconcile_total", controller=c)
                          - metric_sum(m0, "aoctl_reconcile_total", controller=c))
    cpu = cpu_seconds(srv.pid) - c0
    return {"sessions": n, "create_s": round(created, 1), "all_stopped_s": round(stopped_s, 1),
            "settled_s": round(settled_s, 1), "ms_per_session": round(settled_s / n * 1000, 2),
            "session_reconciles": count("session"), "project_reconciles": count("project"),
            "cpu_s": round(cpu, 1), "cpu_ms_per_session": round(cpu / n * 1000, 2),
            "rss_mb": round(rss_bytes(srv.pid) / 1e6, 1), "rss_max_mb": round(max(rss_max, rss_bytes(srv.pid)) / 1e6, 1)}


def get_timings(srv, n):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOCTL_")}
    env.update(HOME=os.path.join(srv.dir, "home"), NO_COLOR="1", AOCTL_DATA_DIR=srv.data)
    auth = "Authorization: Bearer " + srv.token
    url = srv.base + API + "/sessions"
    out = subprocess.run([AOCTL, "--server", srv.base, "get", "sessions"], env=env, check=True,
                         capture_output=True, text=True).stdout
    rows = len(out.strip().splitlines()) - 1
    if rows != n:
        raise SystemExit(f"aoctl get sessions printed {rows} rows, not {n}")
    size = len(srv.urlopen(url).read())

    def cli():
        subprocess.run([AOCTL, "--server", srv.base, "get", "sessions"], env=env, check=True,
                       stdout=subprocess.DEVNULL)

    def curl():
        subprocess.run(["curl", "-sf", "-o", "/dev/null", "-H", auth, url], check=True)

    def curl_table():
        subprocess.run(["curl", "-sf", "-o", "/dev/null", "-H", auth, "-H", "Accept: " + TABLE,
                        url + "?includeObject=None"],
                       check=True)

    def urllib_get():
        srv.urlopen(url).read()

    table_size = len(srv.urlopen(url + "?includeObject=None", headers={"Accept": TABLE}).read())
    a, c, t, u = timed([cli, curl, curl_table, urllib_get])
    return {"runs": len(a), "list_bytes": size,
            "aoctl_median_ms": round(median(a), 1), "aoctl_p90_ms": round(percentile(a, 90), 1),
            "curl_median_ms": round(median(c), 1), "curl_p90_ms": round(percentile(c, 90), 1),
            "table_bytes": table_size, "curl_table_median_ms": round(median(t), 1),
            "urllib_median_ms": round(median(u), 1),
            "ratio_to_table": round(median(a) / median(t), 2), "ratio_to_list": round(median(a) / median(c), 2)}


def one_size(n):
    work = workdir()
    srv = Server(AOCTL, work)
    try:
        srv.repo_project("bench", os.path.join(work, "repo"))
        srv.wait_idle()
        out = settle(srv, n, timeout=int(os.environ.get("BENCH_SETTLE_TIMEOUT", "1800")))
        out["get"] = get_timings(srv, n)
        out["loadavg_1m"] = loadavg()
        t0 = time.monotonic()
        srv.stop()
        out["sigterm_s"] = round(time.monotonic() - t0, 2)
        return out
    finally:
        if srv.proc.poll() is None:
            srv.stop()
        cleanup(work)


def main():
    fleets = [one_size(n) for n in SIZES]
    first, last = fleets[0], fleets[-1]
    print(json.dumps({
        "benchmark": "fleet", "fleets": fleets,
        # Linear in the fleet: the time per session stays flat from the smallest size to the largest.
        "per_session_growth": round(last["ms_per_session"] / first["ms_per_session"], 2),
        "goals": {"rss_mb": 300, "get_ratio_to_table": 1.2, "get_ms_1000": 30}}))


if __name__ == "__main__":
    main()
