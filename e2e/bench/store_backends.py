#!/usr/bin/env python3
"""The store backends side by side: the same `aoctl serve` on sled and on etcd (a three-member
cluster of the machine's `etcd` on loopback ports, started here with its data in a scratch
folder), in the same run. For each, 300 label writes to one session, one at a time, each timed
from the request to its response (write latency) and to the arrival of its change on a watch of
sessions opened before (watch delivery latency, raw socket, timestamped as data arrives); p50,
p99 and max. The session's project has no repository, so no agent runs. Prints a JSON result
line."""

import json
import os
import selectors
import shutil
import subprocess
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import API, Server, cleanup, free_port, loadavg, percentile, workdir  # noqa: E402
from watch_fanout import Response, connect, request  # noqa: E402

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
WRITES = int(os.environ.get("BENCH_WRITES", "300"))
MEMBERS = int(os.environ.get("BENCH_ETCD_MEMBERS", "3"))
ETCD = os.environ.get("AOCTL_TEST_ETCD", shutil.which("etcd") or "etcd")


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
    srv.project("bench", "/nonexistent/aoctl-bench/repo")
    srv.conn.json("POST", f"{API}/sessions", {"apiVersion": "ao.dev/v1alpha1", "kind": "Session",
                                              "metadata": {"name": "w"}, "spec": {"project": "bench"}})
    srv.wait_idle(quiet=2.0)
    rv = srv.conn.json("GET", f"{API}/sessions")["metadata"]["resourceVersion"]
    sel = selectors.DefaultSelector()
    watcher = connect(srv.port)
    watcher.sendall(request("GET", f"{API}/sessions?watch=true&resourceVersion={rv}", srv.token))
    watcher.setblocking(False)
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


def main():
    if not shutil.which(ETCD) and not os.path.exists(ETCD):
        raise SystemExit("etcd is not installed (Debian: apt-get install etcd-server)")
    work = workdir()
    cluster = None
    result = {"benchmark": "store_backends", "writes": WRITES, "etcd_members": MEMBERS}
    try:
        srv = Server(AOCTL, work, "sled")
        try:
            result["sled"] = measure(srv)
        finally:
            srv.stop()
        cluster = Cluster(work)
        env = {"AOCTL_STORE": "etcd", "AOCTL_ETCD_ENDPOINTS": cluster.endpoints(), "AOCTL_ETCD_PREFIX": "/bench"}
        srv = Server(AOCTL, work, "etcd", env=env)
        try:
            result["etcd"] = measure(srv)
        finally:
            srv.stop()
        result["loadavg_1m"] = loadavg()
        print(json.dumps(result))
    finally:
        if cluster:
            cluster.stop()
        cleanup(work)


if __name__ == "__main__":
    main()
