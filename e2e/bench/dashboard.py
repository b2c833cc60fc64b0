#!/usr/bin/env python3
"""The web dashboard in headless Chromium (through e2e/browser/driver.mjs), with 1,000 sessions
(BENCH_SESSIONS), all but two on a project without a repository (rows, no agent), one whose status
is written and one running `cat` in tmux. Prints three JSON result lines:

- status → row: the time from a status write (PUT …/status, the phase moving between Merged and
  what the controller makes of the session otherwise) to the row changing group in the page,
  timestamped by a MutationObserver in the page; p50/p95/p99 over 50 writes, and how many rows the
  page drew for them (the probe's own, and any other's). Baseline in the same run: the same
  write's event at a plain watch of sessions.
- keystroke echo: one key typed over the dashboard's terminal WebSocket (from the page) until its
  echo comes back, against `tmux attach` in a PTY on the same tmux session, in alternating rounds;
  the ratio of the medians. The same WebSocket from a client made by hand in Python (no browser)
  is measured in the same rounds, to tell the browser's share from the server's.
- load: a fresh browser context's navigation to `/` until all 100 rows are in the DOM (a
  MutationObserver installed before the page's scripts), and the bytes it transferred (navigation
  and resources, encoded). Baseline: a navigation to the server's 401 page.

Needs /usr/bin/chromium and AOCTL_PLAYWRIGHT_CORE (what e2e/browser/install.sh prints)."""

import base64
import fcntl
import json
import os
import pty
import queue
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ next to the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import API, Server, cleanup, loadavg, median, percentile, running, wait_or_kill, workdir  # noqa: E402

AOCTL = sys.argv[1] if len(sys.argv) > 1 else "target/release/aoctl"
SESSIONS = int(os.environ.get("BENCH_SESSIONS", "1000"))
WRITES = int(os.environ.get("BENCH_WRITES", "50"))
KEYS = int(os.environ.get("BENCH_KEYS", "20"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
LOADS = int(os.environ.get("BENCH_LOADS", "10"))
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser", "driver.mjs")
# Keys whose echo no tmux status line or redraw of this screen holds.
ALPHABET = "~^|{}`=+"
PROBE = "probe"
ECHO = "echo"


class Browser:
    """The bridge: one JSON request per line to driver.mjs, its answers read by a thread."""

    def __init__(self, core, log):
        self.proc = subprocess.Popen(["node", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, text=True, env={**os.environ, "AOCTL_PLAYWRIGHT_CORE": core})
        self.answers = queue.Queue()
        self.n = 0
        threading.Thread(target=self._read, daemon=True).start()
        first = self.answers.get(timeout=90)
        if not first.get("ready"):
            raise SystemExit(f"the browser driver did not start: {first}")

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.answers.put(json.loads(line))
            except ValueError:
                pass

    def call(self, op, timeout=30, **args):
        self.n += 1
        args.update(id=self.n, op=op, timeout=int(timeout * 1000))
        self.proc.stdin.write(json.dumps(args) + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout + 20
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(f"the browser driver did not answer {op} in time")
            a = self.answers.get(timeout=left)
            if a.get("id") != self.n:
                continue
            if not a.get("ok"):
                raise SystemExit(f"browser: {op}: {a.get('error')}")
            return a.get("value")

    def close(self):
        self.proc.stdin.close()
        wait_or_kill(self.proc, 15)


def login(srv):
    """The link `aoctl dashboard` prints on its last line."""
    out = subprocess.run([AOCTL, "--server", srv.base, "dashboard"], env=srv.env, check=True,
                         capture_output=True, text=True, timeout=30).stdout
    return out.strip().splitlines()[-1]


def wait_phase(srv, name, pred, timeout=60):
    return srv.wait_session(name, pred, timeout, 0.1, f"did not reach the expected state in {timeout}s")


class Watcher:
    """A plain watch of sessions from `rv`: the wall time each MODIFIED event of `name` arrives,
    with its phase."""

    def __init__(self, srv, rv, name):
        self.events = queue.Queue()
        url = f"{srv.base}{API}/sessions?watch=true&resourceVersion={rv}"
        resp = srv.urlopen(url, timeout=600)

        def read():
            for line in resp:
                at = time.time()
                ev = json.loads(line)
                obj = ev.get("object", {})
                if ev.get("type") == "MODIFIED" and obj.get("metadata", {}).get("name") == name:
                    self.events.put((at, obj.get("status", {}).get("phase")))

        threading.Thread(target=read, daemon=True).start()

    def next_phase(self, phase, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            at, p = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            if p == phase:
                return at


# Records, in the page, each change of the probe row's group with its wall time, and every row the
# page draws (the probe's, or another's).
OBSERVE = """(name) => {
  window.__changes = [];
  window.__drawn = {own: 0, others: 0};
  new MutationObserver((records) => {
    for (const r of records) for (const n of r.addedNodes) {
      if (n.matches?.('a.session')) window.__drawn[n.dataset.session === name ? 'own' : 'others'] += 1;
    }
  }).observe(document.getElementById('view'), {subtree: true, childList: true});
  const where = () => document.querySelector(`a.session[data-session="${name}"]`)
      ?.closest('section.group')?.dataset.group ?? null;
  let last = where();
  new MutationObserver(() => {
    const g = where();
    if (g !== last) { last = g; window.__changes.push({group: g, at: performance.timeOrigin + performance.now()}); }
  }).observe(document.body, {subtree: true, childList: true, attributes: true});
  return last;
}"""


def status_to_row(srv, browser, page, base_phase):
    start = browser.call("evaluate", page=page, expression=OBSERVE, arg=PROBE)
    watcher = Watcher(srv, srv.conn.json("GET", f"{API}/sessions")["metadata"]["resourceVersion"], PROBE)
    page_ms, resp_ms, watch_ms, groups = [], [], [], set([start])
    for i in range(WRITES):
        merged = i % 2 == 0
        obj = srv.conn.json("GET", f"{API}/sessions/{PROBE}")
        st = obj.setdefault("status", {})
        if merged:
            st["pullRequest"] = {"number": 7, "url": "https://example.invalid/pr/7", "state": "merged",
                                 "checks": "passing", "review": "approved"}
            st["phase"] = "Merged"
        else:
            st.pop("pullRequest", None)
            st["phase"] = base_phase
        t0 = time.time()
        status, body = srv.conn.request("PUT", f"{API}/sessions/{PROBE}/status", obj)
        t1 = time.time()
        if status != 200:
            raise SystemExit(f"PUT status: {status} {body[:300]!r}")
        change = browser.call("waitForFunction", page=page, timeout=30,
                              expression="(k) => window.__changes.length > k && window.__changes[k]", arg=i)
        groups.add(change["group"])
        at = watcher.next_phase(st["phase"])
        page_ms.append(change["at"] - t0 * 1000)
        resp_ms.append(change["at"] - t1 * 1000)
        watch_ms.append((at - t0) * 1000)
        time.sleep(0.2)
    drawn = browser.call("evaluate", page=page, expression="() => window.__drawn")
    return {
        "benchmark": "dashboard_status_to_row", "sessions": SESSIONS, "writes": WRITES,
        "groups": sorted(g or "none" for g in groups),
        "write_to_row_p50_ms": round(median(page_ms), 1), "write_to_row_p95_ms": round(percentile(page_ms, 95), 1),
        "write_to_row_p99_ms": round(percentile(page_ms, 99), 1),
        "response_to_row_p50_ms": round(median(resp_ms), 1),
        "response_to_row_p95_ms": round(percentile(resp_ms, 95), 1),
        "rows_drawn_probe": drawn["own"], "rows_drawn_others": drawn["others"],
        "baseline_write_to_watch_event_p50_ms": round(median(watch_ms), 1),
        "baseline_write_to_watch_event_p95_ms": round(percentile(watch_ms, 95), 1),
    }


# Types `keys` one at a time over a terminal WebSocket of the page's own origin; each key's time
# until a frame holding it comes back.
WS_ECHO = """async ({url, keys}) => {
  const ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  await new Promise((ok, fail) => { ws.onopen = ok; ws.onerror = () => fail(new Error('the socket failed')); });
  let last = performance.now();
  let waiter = null;
  ws.onmessage = (e) => {
    last = performance.now();
    const bytes = typeof e.data === 'string' ? new TextEncoder().encode(e.data) : new Uint8Array(e.data);
    if (waiter && bytes.includes(waiter.code)) { const w = waiter; waiter = null; w.done(last); }
  };
  const quiet = async (ms) => { while (performance.now() - last < ms) await new Promise((r) => setTimeout(r, 10)); };
  await quiet(300);
  const out = [];
  for (const k of keys) {
    const echoed = new Promise((done, fail) => {
      waiter = {code: k.charCodeAt(0), done};
      setTimeout(() => fail(new Error(`no echo of ${k}`)), 5000);
    });
    const t0 = performance.now();
    ws.send(new TextEncoder().encode(k));
    out.push((await echoed) - t0);
    await quiet(30);
  }
  ws.send(new TextEncoder().encode('\\r'));
  await quiet(200);
  ws.close();
  return out;
}"""


def pty_echo(srv, keys):
    """The same keys through `tmux attach` in a PTY of 80×24."""
    pid, fd = pty.fork()
    if pid == 0:
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        env["TERM"] = "xterm-256color"
        os.execvpe("tmux", ["tmux", "-S", os.path.join(srv.data, "tmux.sock"), "attach", "-t", f"={ECHO}"], env)
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))

        def drain(quiet):
            last = time.perf_counter()
            while time.perf_counter() - last < quiet:
                r, _, _ = select.select([fd], [], [], 0.01)
                if r:
                    os.read(fd, 65536)
                    last = time.perf_counter()

        drain(0.3)
        out = []
        for k in keys:
            code = k.encode()
            t0 = time.perf_counter()
            os.write(fd, code)
            deadline = t0 + 5
            while True:
                r, _, _ = select.select([fd], [], [], max(0, deadline - time.perf_counter()))
                if not r:
                    raise SystemExit(f"no echo of {k} through tmux attach")
                if code in os.read(fd, 65536):
                    out.append((time.perf_counter() - t0) * 1000)
                    break
            drain(0.03)
        os.write(fd, b"\r")
        drain(0.2)
        return out
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(fd)


class RawSocket:
    """A WebSocket client with the bearer token, made by hand on a socket: the same terminal
    without a browser."""

    def __init__(self, srv, path):
        self.sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                           f"Authorization: Bearer {srv.token}\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.sock.recv(65536)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise SystemExit(f"the terminal's handshake: {head[:200]!r}")

    def send(self, data):
        mask = os.urandom(4)
        self.sock.sendall(bytes([0x82, 0x80 | len(data)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def frame(self, timeout):
        """The payload of the next frame, None when none comes within `timeout`."""
        deadline = time.perf_counter() + timeout
        while True:
            if len(self.buf) >= 2:
                n, at = self.buf[1] & 0x7F, 2
                if n == 126:
                    n, at = (struct.unpack(">H", self.buf[2:4])[0], 4) if len(self.buf) >= 4 else (None, 0)
                elif n == 127:
                    n, at = (struct.unpack(">Q", self.buf[2:10])[0], 10) if len(self.buf) >= 10 else (None, 0)
                if n is not None and len(self.buf) >= at + n:
                    payload, self.buf = self.buf[at:at + n], self.buf[at + n:]
                    return payload
            left = deadline - time.perf_counter()
            if left <= 0:
                return None
            r, _, _ = select.select([self.sock], [], [], left)
            if r:
                data = self.sock.recv(65536)
                if not data:
                    raise SystemExit("the terminal's socket closed")
                self.buf += data

    def echo(self, keys):
        while self.frame(0.3) is not None:
            pass
        out = []
        for k in keys:
            t0 = time.perf_counter()
            self.send(k.encode())
            while True:
                f = self.frame(max(0, t0 + 5 - time.perf_counter()))
                if f is None:
                    raise SystemExit(f"no echo of {k} through the terminal's WebSocket")
                if k.encode() in f:
                    out.append((time.perf_counter() - t0) * 1000)
                    break
            while self.frame(0.03) is not None:
                pass
        self.send(b"\r")
        while self.frame(0.2) is not None:
            pass
        self.sock.close()
        return out


def keystroke_echo(srv, browser, page):
    path = f"{API}/sessions/{ECHO}/terminal?cols=80&rows=24"
    url = f"ws://127.0.0.1:{srv.port}{path}"
    ws, raw, tm = [], [], []
    for r in range(ROUNDS):
        keys = [ALPHABET[(r * KEYS + i) % len(ALPHABET)] for i in range(KEYS)]
        ws += browser.call("evaluate", page=page, timeout=120, expression=WS_ECHO, arg={"url": url, "keys": keys})
        raw += RawSocket(srv, path).echo(keys)
        tm += pty_echo(srv, keys)
    return {
        "benchmark": "dashboard_keystroke_echo", "keys": len(ws),
        "browser_websocket_p50_ms": round(median(ws), 2), "browser_websocket_p99_ms": round(percentile(ws, 99), 2),
        "python_websocket_p50_ms": round(median(raw), 2), "python_websocket_p99_ms": round(percentile(raw, 99), 2),
        "tmux_attach_pty_p50_ms": round(median(tm), 2), "tmux_attach_pty_p99_ms": round(percentile(tm, 99), 2),
        "ratio_p50": round(median(ws) / median(tm), 2), "ratio_p99": round(percentile(ws, 99) / percentile(tm, 99), 2),
    }


# Before the page's own scripts: the time all rows are in the DOM.
RENDERED = """(() => {
  const want = %d;
  new MutationObserver(() => {
    if (!window.__rendered && document.querySelectorAll('a.session').length >= want) window.__rendered = performance.now();
  }).observe(document, {subtree: true, childList: true});
})();"""

SIZES = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const sum = (k) => res.reduce((a, r) => a + r[k], nav[k]);
  return {encoded: sum('encodedBodySize'), transfer: sum('transferSize'), decoded: sum('decodedBodySize'),
          resources: res.length, load: nav.loadEventEnd};
}"""


def load(browser, origin, cookie):
    rendered, loaded, sizes = [], [], None
    for i in range(LOADS + 1):
        page = browser.call("open", cookies=[cookie], initScript=RENDERED % SESSIONS)
        browser.call("goto", page=page, url=f"{origin}/")
        at = browser.call("waitForFunction", page=page, timeout=60, expression="() => window.__rendered")
        s = browser.call("evaluate", page=page, expression=SIZES)
        browser.call("close", page=page)
        if i == 0:
            continue  # a warm-up: the first page of the browser pays for starting its renderer
        rendered.append(at)
        loaded.append(s["load"])
        sizes = s
    base = []
    for i in range(LOADS + 1):
        page = browser.call("open")
        nav = browser.call("goto", page=page, url=f"{origin}/")
        if nav["status"] != 401:
            raise SystemExit(f"the page without a cookie answered {nav['status']}")
        s = browser.call("evaluate", page=page, expression=SIZES)
        browser.call("close", page=page)
        if i:
            base.append(s["load"])
    return {
        "benchmark": "dashboard_load", "sessions": SESSIONS, "loads": LOADS,
        "rows_rendered_p50_ms": round(median(rendered), 1), "rows_rendered_p95_ms": round(percentile(rendered, 95), 1),
        "load_event_p50_ms": round(median(loaded), 1),
        "encoded_bytes": sizes["encoded"], "transfer_bytes": sizes["transfer"], "decoded_bytes": sizes["decoded"],
        "resources": sizes["resources"],
        "baseline_401_page_load_p50_ms": round(median(base), 1),
    }


def main():
    core = os.environ.get("AOCTL_PLAYWRIGHT_CORE")
    if not core:
        raise SystemExit("AOCTL_PLAYWRIGHT_CORE is not set (e2e/browser/install.sh prints it)")
    work = workdir()
    srv = Server(AOCTL, work)
    browser = None
    try:
        srv.project("vault", "/nonexistent/aoctl-bench/repo")
        srv.sessions("vault", SESSIONS - 2, prefix="row-")
        srv.conn.json("POST", f"{API}/sessions", {
            "apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": PROBE},
            "spec": {"project": "vault"}})
        srv.repo_project("echo", os.path.join(work, "repo"))
        srv.conn.json("POST", f"{API}/sessions", {
            "apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": ECHO},
            "spec": {"project": "echo", "agent": {"command": ["cat"]}}})
        wait_phase(srv, ECHO, running)
        wait_phase(srv, PROBE, lambda s: s.get("status", {}).get("conditions"))
        srv.wait_idle()
        base_phase = srv.conn.json("GET", f"{API}/sessions/{PROBE}")["status"]["phase"]

        link = login(srv)
        origin = link.split("/login", 1)[0]
        browser = Browser(core, open(os.path.join(work, "driver.log"), "w"))
        page = browser.call("open")
        browser.call("goto", page=page, url=link)
        cookie = next(c for c in browser.call("cookies", page=page) if c["name"] == "aoctl_dashboard")
        browser.call("waitForFunction", page=page, timeout=60,
                     expression="(n) => document.querySelectorAll('a.session').length >= n", arg=SESSIONS)

        loads = load(browser, origin, cookie)
        rows = status_to_row(srv, browser, page, base_phase)
        echo = keystroke_echo(srv, browser, page)
        for result in (rows, echo, loads):
            result["loadavg"] = loadavg()
            print(json.dumps(result))
    finally:
        if browser:
            browser.close()
        srv.stop()
        cleanup(work)


if __name__ == "__main__":
    main()
