#!/usr/bin/env python3
"""`aoctl get sessions` over 1,000 sessions: wall time of the whole CLI process (median of 20
runs), against `curl` of the same list endpoint measured the same way in the same run: the plain
list, and the server-side table the CLI asks for (and, for reference, an in-process urllib GET of
the list). The sessions are `stopped: true` on a real repository, so no agent runs. Prints a JSON
result line."""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import API, Server, cleanup, loadavg, make_repo, median, percentile, stopped, workdir  # noqa: E402

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
N = int(os.environ.get("BENCH_SESSIONS", "1000"))
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


def main():
    work = workdir()
    srv = Server(AOCTL, work)
    try:
        repo = make_repo(os.path.join(work, "repo"))
        srv.project("bench", repo)
        srv.wait_project_ready("bench")
        srv.sessions("bench", N, stopped=True)
        srv.wait_sessions(stopped, N)
        srv.wait_idle()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AOCTL_")}
        env.update(HOME=os.path.join(srv.dir, "home"), NO_COLOR="1", AOCTL_DATA_DIR=srv.data)
        auth = "Authorization: Bearer " + srv.token
        url = srv.base + API + "/sessions"
        out = subprocess.run([AOCTL, "--server", srv.base, "get", "sessions"], env=env, check=True,
                             capture_output=True, text=True).stdout
        rows = len(out.strip().splitlines()) - 1
        if rows != N:
            raise SystemExit(f"aoctl get sessions printed {rows} rows, not {N}")
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
        print(json.dumps({
            "benchmark": "get_sessions", "sessions": N, "runs": len(a), "list_bytes": size,
            "aoctl_median_ms": round(median(a), 1), "aoctl_p90_ms": round(percentile(a, 90), 1),
            "curl_median_ms": round(median(c), 1), "curl_p90_ms": round(percentile(c, 90), 1),
            "table_bytes": table_size, "curl_table_median_ms": round(median(t), 1),
            "urllib_median_ms": round(median(u), 1),
            "ratio": round(median(a) / median(c), 2), "target_ms": 30, "loadavg_1m": loadavg()}))
    finally:
        srv.stop()
        cleanup(work)


if __name__ == "__main__":
    main()
