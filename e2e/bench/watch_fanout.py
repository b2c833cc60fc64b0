#!/usr/bin/env python3
"""Watch fan-out: 100 concurrent watchers of sessions (raw sockets, one selector loop that
timestamps data as it arrives), 200 label writes to one session, one at a time; for each write
and watcher, the latency from the write's response to the event's delivery (p50/p99; 0 or less
when the event came in the same read as the response or before it: `by_response_pct`). Baseline
in the same run: the latency of a plain GET of the session after each write. The session's
project has no repository, so no agent runs. Prints a JSON result line."""

import json
import os
import selectors
import socket
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import API, Server, cleanup, loadavg, metric_sum, percentile, workdir  # noqa: E402

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
WATCHERS = int(os.environ.get("BENCH_WATCHERS", "100"))
WRITES = int(os.environ.get("BENCH_WRITES", "200"))


class Response:
    """Incremental HTTP/1.1 response decoding: the head, then a Content-Length or chunked body."""

    def __init__(self):
        self.raw = b""
        self.status = None
        self.chunked = False
        self.length = None
        self.body = bytearray()
        self.state = "size"
        self.left = 0
        self.done = False

    def feed(self, data):
        self.raw += data
        if self.status is None:
            i = self.raw.find(b"\r\n\r\n")
            if i < 0:
                return
            head = self.raw[:i].decode("latin-1").split("\r\n")
            self.raw = self.raw[i + 4:]
            self.status = int(head[0].split()[1])
            headers = dict((k.strip().lower(), v.strip()) for k, v in (h.split(":", 1) for h in head[1:]))
            self.chunked = "chunked" in headers.get("transfer-encoding", "")
            self.length = int(headers["content-length"]) if "content-length" in headers else None
        if not self.chunked:
            self.body += self.raw
            self.raw = b""
            self.done = self.length is not None and len(self.body) >= self.length
            return
        while True:
            if self.state == "size":
                j = self.raw.find(b"\r\n")
                if j < 0:
                    return
                size = int(self.raw[:j].split(b";")[0], 16)
                self.raw = self.raw[j + 2:]
                if size == 0:
                    self.done = True
                    return
                self.left, self.state = size, "data"
            if self.state == "data":
                take = self.raw[:self.left]
                self.body += take
                self.raw = self.raw[len(take):]
                self.left -= len(take)
                if self.left:
                    return
                self.state = "crlf"
            if self.state == "crlf":
                if len(self.raw) < 2:
                    return
                self.raw = self.raw[2:]
                self.state = "size"


def connect(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def request(method, path, token, body=None, ctype=None):
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
    data = json.dumps(body).encode() if body is not None else b""
    if body is not None:
        head += f"Content-Type: {ctype}\r\nContent-Length: {len(data)}\r\n"
    return (head + "\r\n").encode() + data


def watched_session(srv):
    """The project `bench` without a repository and its one Session `w`, once the controllers are
    idle; returns the resourceVersion of the sessions to watch from."""
    srv.project("bench", "/nonexistent/aoctl-bench/repo")
    srv.conn.json("POST", f"{API}/sessions", {"apiVersion": "ao.dev/v1alpha1", "kind": "Session",
                                              "metadata": {"name": "w"}, "spec": {"project": "bench"}})
    srv.wait_idle(quiet=2.0)
    return srv.conn.json("GET", f"{API}/sessions")["metadata"]["resourceVersion"]


def open_watch(srv, rv):
    """A non-blocking connection on which a watch of sessions from `rv` was asked for."""
    s = connect(srv.port)
    s.sendall(request("GET", f"{API}/sessions?watch=true&resourceVersion={rv}", srv.token))
    s.setblocking(False)
    return s


def roundtrip(sock, raw):
    """Sends a request on a keep-alive socket and reads the whole response."""
    sock.sendall(raw)
    r = Response()
    while not r.done:
        r.feed(sock.recv(65536))
    return r


def main():
    work = workdir()
    srv = Server(AOCTL, work)
    try:
        rv = watched_session(srv)

        sel = selectors.DefaultSelector()
        watchers = []
        for i in range(WATCHERS):
            s = open_watch(srv, rv)
            w = {"sock": s, "resp": Response(), "seen": 0, "at": None}
            watchers.append(w)
            sel.register(s, selectors.EVENT_READ, w)
        deadline = time.monotonic() + 30
        while any(w["resp"].status is None for w in watchers):
            for key, _ in sel.select(1):
                key.data["resp"].feed(key.fileobj.recv(65536))
            if time.monotonic() > deadline:
                raise SystemExit("watch requests were not answered")
        bad = [w["resp"].status for w in watchers if w["resp"].status != 200]
        if bad:
            raise SystemExit(f"watch requests answered {bad}")
        streams = metric_sum(srv.metrics(), "aoctl_watch_streams")

        writer = connect(srv.port)
        reader = connect(srv.port)
        after_resp, after_send, gets = [], [], []
        for n in range(WRITES):
            marker = f"bench-{n:06d}".encode()
            for w in watchers:
                w["at"] = None
            writer.sendall(request("PATCH", f"{API}/sessions/w", srv.token, {"metadata": {"labels": {"seq": marker.decode()}}},
                                   "application/merge-patch+json"))
            sent = time.perf_counter()
            writer.setblocking(False)
            sel.register(writer, selectors.EVENT_READ, {"writer": Response()})
            answered = None
            pending = WATCHERS
            deadline = time.monotonic() + 30
            while answered is None or pending:
                events = sel.select(5)
                now = time.perf_counter()
                for key, _ in events:
                    d = key.data
                    data = key.fileobj.recv(262144)
                    if "writer" in d:
                        d["writer"].feed(data)
                        if d["writer"].done:
                            if d["writer"].status != 200:
                                raise SystemExit(f"write {n}: {d['writer'].status} {bytes(d['writer'].body)[:300]!r}")
                            answered = now
                            sel.unregister(writer)
                        continue
                    if not data:
                        raise SystemExit("a watch stream ended")
                    d["resp"].feed(data)
                    if d["at"] is None and marker in d["resp"].body:
                        d["at"] = now
                        pending -= 1
                    # Keep only a tail that could hold the start of a split marker.
                    del d["resp"].body[:-len(marker)]
                if time.monotonic() > deadline:
                    raise SystemExit(f"write {n}: {pending} watchers got no event in 30 s")
            writer.setblocking(True)
            for w in watchers:
                after_resp.append((w["at"] - answered) * 1000)
                after_send.append((w["at"] - sent) * 1000)
            t = time.perf_counter()
            r = roundtrip(reader, request("GET", f"{API}/sessions/w", srv.token))
            gets.append((time.perf_counter() - t) * 1000)
            if r.status != 200 or marker not in r.body:
                raise SystemExit(f"GET after write {n}: {r.status}")

        q = lambda v, p: round(percentile(v, p), 3)  # noqa: E731
        print(json.dumps({
            "benchmark": "watch_fanout", "watchers": WATCHERS, "writes": WRITES, "deliveries": len(after_resp),
            "watch_streams_gauge": int(streams),
            "after_response_p50_ms": q(after_resp, 50), "after_response_p99_ms": q(after_resp, 99),
            "after_response_max_ms": round(max(after_resp), 3),
            "by_response_pct": round(sum(1 for x in after_resp if x <= 0) / len(after_resp) * 100, 1),
            "after_send_p50_ms": q(after_send, 50), "after_send_p99_ms": q(after_send, 99),
            "baseline_get_p50_ms": q(gets, 50), "baseline_get_p99_ms": q(gets, 99), "loadavg_1m": loadavg()}))
        for w in watchers:
            w["sock"].close()
        writer.close()
        reader.close()
    finally:
        srv.stop()
        cleanup(work)


if __name__ == "__main__":
    main()
