#!/usr/bin/env python3
"""Idle cost: 1,000 running sessions (agent `sleep 100000` in tmux) held for 600 s. Reports the
controller's CPU (% of one core, from /proc/<pid>/stat utime+stime deltas), the CPU of what it
spawned and reaped meanwhile (cutime+cstime: tmux clients), its tmux server's CPU, its RSS, and
the reconciles it ran. Baseline in the same run: the same number of `tmux new-session sleep` without
aoctl — the tmux server's own CPU. Prints a JSON result line."""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Server, cleanup, running, cpu_seconds, loadavg, metric_sum, rss_bytes, workdir  # noqa: E402

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
N = int(os.environ.get("BENCH_SESSIONS", "1000"))
# Quiet sessions are looked at by a safety resync every 600 s and the engine's resync every 600 s,
# so a shorter window can miss the work they cost; the baseline needs no more than a minute.
SECONDS = float(os.environ.get("BENCH_IDLE_SECONDS", "600"))
BASELINE_SECONDS = min(SECONDS, 60.0)
WARMUP = float(os.environ.get("BENCH_WARMUP_SECONDS", "15"))


def pct(cpu, wall):
    return round(cpu / wall * 100, 3)


def baseline(work):
    """The tmux server's CPU while it holds N sleeping sessions."""
    sock = os.path.join(work, "baseline.sock")
    tmux = ["tmux", "-f", "/dev/null", "-S", sock]
    try:
        for i in range(N):
            subprocess.run([*tmux, "new-session", "-d", "-s", f"b{i}", "sleep", "100000"], check=True)
        pid = int(subprocess.run([*tmux, "display", "-p", "#{pid}"], check=True, capture_output=True,
                                 text=True).stdout)
        time.sleep(WARMUP)
        c0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(BASELINE_SECONDS)
        return pct(cpu_seconds(pid) - c0, time.monotonic() - t0), rss_bytes(pid)
    finally:
        subprocess.run([*tmux, "kill-server"], stderr=subprocess.DEVNULL)


def main():
    work = workdir()
    try:
        base_cpu, base_rss = baseline(work)
        srv = Server(AOCTL, work)
        try:
            srv.repo_project("bench", os.path.join(work, "repo"))
            srv.sessions("bench", N, agent={"command": ["sleep", "100000"]})
            srv.wait_sessions(running, N)
            time.sleep(WARMUP)
            tmux = srv.tmux_server_pid()
            m0 = srv.metrics()
            c0, k0, x0 = cpu_seconds(srv.pid), cpu_seconds(srv.pid, children=True), cpu_seconds(tmux)
            t0 = time.monotonic()
            time.sleep(SECONDS)
            wall = time.monotonic() - t0
            c1, k1, x1 = cpu_seconds(srv.pid), cpu_seconds(srv.pid, children=True), cpu_seconds(tmux)
            m1 = srv.metrics()
            phases = {}
            for (name, labels), v in m1.items():
                if name == "aoctl_sessions" and v:
                    phase = dict(labels)["phase"]
                    phases[phase] = phases.get(phase, 0) + int(v)
            delta = lambda name, **l: metric_sum(m1, name, **l) - metric_sum(m0, name, **l)  # noqa: E731
            print(json.dumps({
                "benchmark": "idle", "sessions": N, "seconds": round(wall, 1),
                "controller_cpu_pct": pct(c1 - c0, wall), "controller_rss_mb": round(rss_bytes(srv.pid) / 1e6, 1),
                "spawned_children_cpu_pct": pct(k1 - k0, wall), "aoctl_tmux_server_cpu_pct": pct(x1 - x0, wall),
                "reconciles_per_s": round(delta("aoctl_reconcile_total") / wall, 2),
                "runtime_ops_per_s": round(delta("aoctl_runtime_operations_total") / wall, 2),
                "phases": phases,
                "baseline_tmux_server_cpu_pct": base_cpu, "baseline_tmux_server_rss_mb": round(base_rss / 1e6, 1),
                "target_cpu_pct": 0.5, "target_rss_mb": 50, "loadavg_1m": loadavg()}))
        finally:
            srv.stop()
    finally:
        cleanup(work)


if __name__ == "__main__":
    main()
