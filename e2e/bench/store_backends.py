#!/usr/bin/env python3
"""The store backends side by side: the same `aoctl serve` on sled and on etcd (a three-member
cluster of the machine's `etcd` on loopback ports, started here with its data in a scratch
folder), in the same run. For each, 300 label writes to one session, one at a time, each timed
from the request to its response (write latency) and to the arrival of its change on a watch of
sessions opened before (watch delivery latency, raw socket, timestamped as data arrives); p50,
p99 and max. The session's project has no repository, so no agent runs. Then, on the same server,
reconciles per second: one `aoctl apply -f` of a file holding a Project on a real repository and
N `stopped: true` Sessions, timed until every session's status is written for its generation
with the phase `Stopped` (read from a watch opened before the apply), with the session controller's
reconciles from /metrics before and after; a stopped session gets its finalizer, its worktree
and its `Stopped` status, and no agent runs. Prints a JSON result line."""

import collections
import json
import os
import selectors
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (API, Server, cleanup, free_port, loadavg, make_repo, metric_sum, percentile,  # noqa: E402
                    settled, stopped, workdir)
from watch_fanout import Response, connect, open_watch, request, watched_session  # noqa: E402

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
WRITES = int(os.environ.get("BENCH_WRITES", "300"))
MEMBERS = int(os.environ.get("BENCH_ETCD_MEMBERS", "3"))
ETCD = os.environ.get("AOCTL_TEST_ETCD", shutil.which("etcd") or "etcd")
SESSIONS = int(os.environ.get("BENCH_RECONCILE_SESSIONS", "200"))
# How long the sessions may take to settle, and the controllers to fall quiet, before the
# benchmark fails.
SETTLE_TIMEOUT = float(os.environ.get("BENCH_RECONCILE_TIMEOUT", "300"))


class Cluster:
    """`MEMBERS` etcd members on free loopback ports, data dirs under `work`."""

    def __init__(self, work):
        ports = set()
        while len(ports) < 2 * MEMBERS:
            ports.add(free_port())
        ports = sorted(ports)
        self.clients = ports[:MEMBERS]
        peers = ports[MEMBERS:]
        initial = ",".join(f"m{i}=http://127.0.0.1:{p}" for i, p in enumerate(peers))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        self.procs = []
        self.logs = []
        for i in range(MEMBERS):
            log = open(os.path.join(work, f"etcd-m{i}.log"), "w")
            self.logs.append(log)
            client, peer = f"http://127.0.0.1:{self.clients[i]}", f"http://127.0.0.1:{peers[i]}"
            self.procs.append(subprocess.Popen([
                ETCD, "--name", f"m{i}", "--data-dir", os.path.join(work, f"etcd-m{i}"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", initial, "--initial-cluster-token", f"bench-{os.getpid()}",
                "--initial-cluster-state", "new", "--logger", "zap", "--log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env))
        deadline = time.monotonic() + 60
        while not all(self.healthy(p) for p in self.clients):
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                self.stop()
                raise SystemExit("the etcd cluster did not become healthy; see " + work)
            time.sleep(0.1)

    @staticmethod
    def healthy(port):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                return b'"health":"true"' in r.read()
        except Exception:
            return False

    def endpoints(self):
        return ",".join(f"http://127.0.0.1:{p}" for p in self.clients)

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()
        for log in self.logs:
            log.close()


def measure(srv):
    """Write and watch delivery latencies (ms) of WRITES label writes to one session."""
    rv = watched_session(srv)
    sel = selectors.DefaultSelector()
    watcher = open_watch(srv, rv)
    stream = Response()
    sel.register(watcher, selectors.EVENT_READ, "watch")
    deadline = time.monotonic() + 30
    while stream.status is None:
        for key, _ in sel.select(1):
            stream.feed(key.fileobj.recv(65536))
        if time.monotonic() > deadline:
            raise SystemExit("the watch request was not answered")
    if stream.status != 200:
        raise SystemExit(f"the watch request was answered {stream.status}")

    writer = connect(srv.port)
    writes, deliveries, after_response = [], [], []
    for n in range(WRITES):
        marker = f"bench-{n:06d}".encode()
        body = {"metadata": {"labels": {"seq": marker.decode()}}}
        writer.sendall(request("PATCH", f"{API}/sessions/w", srv.token, body, "application/merge-patch+json"))
        sent = time.perf_counter()
        writer.setblocking(False)
        reply = Response()
        sel.register(writer, selectors.EVENT_READ, "write")
        answered = seen = None
        deadline = time.monotonic() + 30
        while answered is None or seen is None:
            events = sel.select(5)
            now = time.perf_counter()
            for key, _ in events:
                data = key.fileobj.recv(262144)
                if key.data == "write":
                    reply.feed(data)
                    if reply.done:
                        if reply.status != 200:
                            raise SystemExit(f"write {n}: {reply.status} {bytes(reply.body)[:300]!r}")
                        answered = now
                        sel.unregister(writer)
                    continue
                if not data:
                    raise SystemExit("the watch stream ended")
                stream.feed(data)
                if seen is None and marker in stream.body:
                    seen = now
                del stream.body[:-len(marker)]
            if time.monotonic() > deadline:
                raise SystemExit(f"write {n}: no answer or no event in 30 s")
        writer.setblocking(True)
        writes.append((answered - sent) * 1000)
        deliveries.append((seen - sent) * 1000)
        after_response.append((seen - answered) * 1000)
    watcher.close()
    writer.close()
    q = lambda v, p: round(percentile(v, p), 3)  # noqa: E731
    return {"write_p50_ms": q(writes, 50), "write_p99_ms": q(writes, 99), "write_max_ms": round(max(writes), 3),
            "watch_p50_ms": q(deliveries, 50), "watch_p99_ms": q(deliveries, 99),
            "watch_max_ms": round(max(deliveries), 3),
            "watch_after_response_p50_ms": q(after_response, 50)}


def session_counts(srv):
    """The session controller's reconciles, and the seconds spent in them, from one scrape."""
    m = srv.metrics()
    return (metric_sum(m, "aoctl_reconcile_total", controller="session"),
            metric_sum(m, "aoctl_reconcile_duration_seconds_sum", controller="session"),
            metric_sum(m, "aoctl_reconcile_duration_seconds_count", controller="session"))


def remove_session(srv, name, timeout=60):
    """Deletes a session and waits until it is gone (its finalizer released)."""
    srv.conn.json("DELETE", f"{API}/sessions/{name}", expect=(200, 202))
    deadline = time.monotonic() + timeout
    while srv.conn.request("GET", f"{API}/sessions/{name}")[0] != 404:
        if time.monotonic() > deadline:
            raise SystemExit(f"session {name} still there {timeout}s after its deletion; see {srv.log.name}")
        time.sleep(0.05)


def reconcile_rate(srv):
    """Sessions settled and session reconciles per second after one `aoctl apply -f` of a Project
    on a real repository and SESSIONS stopped Sessions."""
    # The latency session's project is never Ready, so it would be reconciled every few seconds.
    remove_session(srv, "w")
    srv.wait_idle(quiet=2.0, timeout=SETTLE_TIMEOUT)
    repo = make_repo(os.path.join(srv.dir, "repo"))
    docs = [{"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": "fleet"},
             "spec": {"path": repo}}]
    docs += [{"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": f"r{i}"},
              "spec": {"project": "fleet", "stopped": True}} for i in range(SESSIONS)]
    manifest = os.path.join(srv.dir, "fleet.yaml")
    with open(manifest, "w") as f:
        # JSON is YAML: one document per object.
        f.write("".join("---\n" + json.dumps(d) + "\n" for d in docs))

    rv = srv.conn.json("GET", f"{API}/sessions")["metadata"]["resourceVersion"]
    state, done, failed, when = {}, threading.Event(), [], []

    def watch():
        url = f"{srv.base}{API}/sessions?watch=true&resourceVersion={rv}"
        try:
            with srv.urlopen(url, timeout=SETTLE_TIMEOUT) as r:
                for line in r:
                    ev = json.loads(line)
                    obj = ev.get("object") or {}
                    if obj.get("spec", {}).get("project") != "fleet":
                        continue
                    # A status written while the project was not Ready yet is not the steady state.
                    state[obj["metadata"]["name"]] = ev.get("type") != "DELETED" and settled(obj) and stopped(obj)
                    if len(state) == SESSIONS and all(state.values()):
                        when.append(time.monotonic())
                        done.set()
                        return
        except Exception as e:  # noqa: BLE001 (reported by the waiting thread)
            failed.append(e)
            done.set()

    before, spent0, count0 = session_counts(srv)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    subprocess.run([srv.aoctl, "--server", srv.base, "apply", "-f", manifest], check=True, env=srv.env,
                   stdout=subprocess.DEVNULL, timeout=SETTLE_TIMEOUT)
    applied = time.monotonic() - t0
    if not done.wait(max(1.0, SETTLE_TIMEOUT - applied)):
        n = sum(state.values())
        raise SystemExit(f"only {n} of {SESSIONS} sessions settled after {SETTLE_TIMEOUT}s; see {srv.log.name}")
    if failed:
        raise SystemExit(f"the watch of sessions failed: {failed[0]}")
    took = when[0] - t0
    at_settle, _, _ = session_counts(srv)
    srv.wait_idle(quiet=2.0, timeout=SETTLE_TIMEOUT)
    quiet = time.monotonic() - t0
    after, spent1, count1 = session_counts(srv)
    items = [s for s in srv.conn.json("GET", f"{API}/sessions")["items"] if s["spec"]["project"] == "fleet"]
    ready = collections.Counter(
        next((c["reason"] for c in s.get("status", {}).get("conditions", []) if c["type"] == "Ready"), None)
        for s in items)
    return {"sessions": SESSIONS, "created_by": "one aoctl apply -f", "apply_s": round(applied, 3),
            "settle_s": round(took, 3), "settle_after_apply_s": round(took - applied, 3),
            "sessions_settled_per_s": round(SESSIONS / took, 1),
            "reconciles_at_settle": int(at_settle - before),
            "reconciles_per_s": round((at_settle - before) / took, 1),
            "reconciles_to_quiet": int(after - before), "quiet_s": round(quiet, 1),
            "mean_reconcile_ms": round((spent1 - spent0) / max(1, count1 - count0) * 1000, 2),
            "phases": dict(collections.Counter(s.get("status", {}).get("phase") for s in items)),
            "ready_reasons": dict(ready)}


def main():
    if not shutil.which(ETCD) and not os.path.exists(ETCD):
        raise SystemExit("etcd is not installed (Debian: apt-get install etcd-server)")
    work = workdir()
    cluster = None
    result = {"benchmark": "store_backends", "writes": WRITES, "etcd_members": MEMBERS,
              "reconcile_sessions": SESSIONS, "loadavg_1m_start": loadavg()}
    try:
        srv = Server(AOCTL, work, "sled")
        try:
            result["sled"] = measure(srv)
            result["sled"]["reconcile"] = reconcile_rate(srv)
        finally:
            srv.stop()
        cluster = Cluster(work)
        env = {"AOCTL_STORE": "etcd", "AOCTL_ETCD_ENDPOINTS": cluster.endpoints(), "AOCTL_ETCD_PREFIX": "/bench"}
        srv = Server(AOCTL, work, "etcd", env=env)
        try:
            result["etcd"] = measure(srv)
            result["etcd"]["reconcile"] = reconcile_rate(srv)
        finally:
            srv.stop()
        sled, etcd = result["sled"]["reconcile"], result["etcd"]["reconcile"]
        result["reconcile_ratio_etcd_over_sled"] = {
            k: round(etcd[k] / sled[k], 2) for k in ("sessions_settled_per_s", "reconciles_per_s")}
        result["loadavg_1m"] = loadavg()
        print(json.dumps(result))
    finally:
        if cluster:
            cluster.stop()
        cleanup(work)


if __name__ == "__main__":
    main()
