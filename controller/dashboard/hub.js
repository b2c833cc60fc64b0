// The WebSockets of the server's multiplexed stream (`…/streams`, docs/dashboard.md) and the
// subscriptions they carry, for one or more clients: the tabs of a browser when it runs in the
// shared worker (stream-worker.js), or the page itself where there is no SharedWorker. A client
// sends the server's requests (`watch`, `log`, `cancel`) with ids of its own; the hub renames them
// to ids unique on their socket and hands each server message back under the client's id. It
// keeps no positions: when a socket closes, each of its subscriptions is reported `lost` and its
// client subscribes again from where it got to (a watch from its resourceVersion, a log from its
// offset). Sockets open on demand, hold at most MAX_SUBSCRIPTIONS each (the server's bound), and
// close a while after their last subscription ends.

/** Where the stream is served (api.js's API, written out so that the worker loads this file alone). */
const STREAMS = '/apis/ao.dev/v1alpha1/streams';

/** The server's bound on one stream's subscriptions (aoctl_api::stream::MAX_SUBSCRIPTIONS). */
export const MAX_SUBSCRIPTIONS = 32;
/** How long a socket with nothing on it stays open, for the next page's subscriptions. */
export const IDLE_CLOSE = 15_000;

/** The stream's URL on the origin of `loc` (a page's or a worker's location). */
export function streamURL(loc) {
  return `${loc.protocol === 'https:' ? 'wss' : 'ws'}://${loc.host}${STREAMS}`;
}

export class Hub {
  /** `url` of the stream; `open(url)` makes a WebSocket (tests give their own). */
  constructor(url, { open = (u) => new WebSocket(u), max = MAX_SUBSCRIPTIONS, idle = IDLE_CLOSE } = {}) {
    this.url = url;
    this.openSocket = open;
    this.max = max;
    this.idle = idle;
    this.sockets = new Set();
    this.nextId = 1;
  }

  /** A client that hears its messages through `post(msg)`. */
  client(post) {
    return { post, subs: new Map(), seen: Date.now() };
  }

  /** Does what a client asks: `watch`, `log` or `cancel`, with the client's id. */
  request(client, msg) {
    if (!msg || typeof msg !== 'object' || !Number.isSafeInteger(msg.id)) return;
    const old = client.subs.get(msg.id);
    if (old) this.end(old, true);
    if (msg.op === 'cancel') return;
    const sock = this.socketWithRoom();
    const sub = { client, id: msg.id, gid: this.nextId++, sock, msg, sent: false };
    client.subs.set(msg.id, sub);
    sock.subs.set(sub.gid, sub);
    clearTimeout(sock.idleTimer);
    if (sock.ws.readyState === 1) this.send(sub);
  }

  /**
   * Ends every subscription of a client that is gone; with `lost`, tells it so, for a client that
   * was only silent (a frozen tab) and subscribes again when it wakes.
   */
  drop(client, lost = null) {
    for (const sub of [...client.subs.values()]) {
      this.end(sub, true);
      if (lost) client.post({ id: sub.id, lost, code: 1001 });
    }
  }

  /** A socket with room for one more subscription, opened when none has. */
  socketWithRoom() {
    for (const s of this.sockets) if (s.subs.size < this.max && s.ws.readyState <= 1) return s;
    const ws = this.openSocket(this.url);
    const sock = { ws, subs: new Map(), idleTimer: null };
    this.sockets.add(sock);
    ws.onopen = () => {
      for (const sub of sock.subs.values()) this.send(sub);
    };
    ws.onmessage = (e) => this.receive(sock, e.data);
    ws.onclose = (e) => this.closed(sock, e);
    ws.onerror = () => {};
    return sock;
  }

  send(sub) {
    sub.sock.ws.send(JSON.stringify({ ...sub.msg, id: sub.gid }));
    sub.sent = true;
    sub.client.post({ id: sub.id, sent: true });
  }

  /** Ends a subscription: told to the server when `cancel` and it was sent; the socket closes when idle. */
  end(sub, cancel) {
    sub.client.subs.delete(sub.id);
    sub.sock.subs.delete(sub.gid);
    if (cancel && sub.sent && sub.sock.ws.readyState === 1) sub.sock.ws.send(JSON.stringify({ op: 'cancel', id: sub.gid }));
    const sock = sub.sock;
    if (sock.subs.size === 0 && this.sockets.has(sock)) {
      clearTimeout(sock.idleTimer);
      sock.idleTimer = setTimeout(() => {
        if (sock.subs.size === 0) {
          this.sockets.delete(sock);
          sock.ws.close(1000, 'nothing to follow');
        }
      }, this.idle);
    }
  }

  receive(sock, data) {
    let m;
    try {
      m = JSON.parse(data);
    } catch {
      return;
    }
    const sub = sock.subs.get(m.id);
    if (!sub) return;
    // The server holds a subscription no longer after an error or a watch's ERROR event.
    if (m.error || m.event?.type === 'ERROR') this.end(sub, false);
    sub.client.post({ ...m, id: sub.id });
  }

  closed(sock, e) {
    this.sockets.delete(sock);
    clearTimeout(sock.idleTimer);
    const detail = e.reason || (e.code === 1006 ? 'the server did not answer' : `closed (${e.code})`);
    for (const sub of [...sock.subs.values()]) {
      sub.client.subs.delete(sub.id);
      sub.client.post({ id: sub.id, lost: detail, code: e.code });
    }
    sock.subs.clear();
  }
}
