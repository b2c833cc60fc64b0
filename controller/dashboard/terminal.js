// A session's live terminal: xterm.js (vendored, loaded on first use) over the session's terminal
// WebSocket. Binary frames carry the terminal's bytes both ways; a text frame `{"resize":[c,r]}`
// follows the panel's size. It starts read-only: keys reach the agent only while typing is on.
// A connection that drops (the server restarts) is made again by itself, waiting longer each time.

import { API, BACKOFF } from './api.js';

let loading = null;

function load(tag, attrs) {
  return new Promise((resolve, reject) => {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    el.addEventListener('load', resolve);
    el.addEventListener('error', () => reject(new Error(`${attrs.src ?? attrs.href} did not load`)));
    document.head.append(el);
  });
}

/** Loads xterm.js, its stylesheet and the fit addon once. */
export function loadXterm() {
  loading ??= Promise.all([
    load('link', { rel: 'stylesheet', href: '/assets/xterm/xterm.css' }),
    load('script', { src: '/assets/xterm/xterm.js' }).then(() => load('script', { src: '/assets/xterm/addon-fit.js' })),
  ]);
  return loading;
}

const THEME = {
  background: '#0d1117',
  foreground: '#d6dae0',
  cursor: '#d6dae0',
  selectionBackground: '#3b4a63',
  black: '#1b1f27',
  red: '#f47067',
  green: '#57c27b',
  yellow: '#d9b43c',
  blue: '#6ea8fe',
  magenta: '#c58af9',
  cyan: '#5cc8d8',
  white: '#c9d1d9',
  brightBlack: '#6e7681',
  brightRed: '#ff938a',
  brightGreen: '#7ee2a0',
  brightYellow: '#f0d06c',
  brightBlue: '#9cc3ff',
  brightMagenta: '#dcb2ff',
  brightCyan: '#8ee0ea',
  brightWhite: '#f0f3f6',
};

/**
 * The terminal of session `name` in `container`. `onState(state, detail)` hears `connecting`,
 * `open`, `closed` (with why) and `unavailable`.
 */
export class TerminalView {
  constructor(container, name, { onState }) {
    this.container = container;
    this.name = name;
    this.onState = onState;
    this.typing = false;
    this.socket = null;
    this.disposed = false;
    this.encoder = new TextEncoder();
    this.delay = BACKOFF.first;
  }

  async start() {
    try {
      await loadXterm();
    } catch (e) {
      this.onState('unavailable', e.message);
      return;
    }
    if (this.disposed) return;
    const { Terminal } = globalThis;
    const { FitAddon } = globalThis.FitAddon;
    this.term = new Terminal({
      disableStdin: true,
      cursorBlink: false,
      convertEol: false,
      scrollback: 5000,
      fontSize: 13,
      fontFamily: 'ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace',
      theme: THEME,
    });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.open(this.container);
    this.fitNow();
    this.term.onData((data) => this.send(this.encoder.encode(data)));
    this.term.onBinary((data) => this.send(Uint8Array.from(data, (c) => c.charCodeAt(0) & 0xff)));
    this.term.onResize(({ cols, rows }) => this.sendResize(cols, rows));
    this.resizeObserver = new ResizeObserver(() => this.fitNow());
    this.resizeObserver.observe(this.container);
    this.connect();
  }

  fitNow() {
    try {
      this.fit?.fit();
    } catch {
      // A hidden panel has no size to fit.
    }
  }

  connect() {
    if (this.disposed || !this.term) return;
    clearTimeout(this.retryTimer);
    this.socket?.close();
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const query = `cols=${this.term.cols}&rows=${this.term.rows}`;
    const url = `${scheme}://${location.host}${API}/sessions/${encodeURIComponent(this.name)}/terminal?${query}`;
    const socket = new WebSocket(url);
    socket.binaryType = 'arraybuffer';
    this.socket = socket;
    this.onState('connecting', '');
    let opened = false;
    socket.addEventListener('open', () => {
      if (socket !== this.socket) return;
      opened = true;
      this.delay = BACKOFF.first;
      this.term.reset();
      this.onState('open', '');
      this.sendResize(this.term.cols, this.term.rows);
    });
    socket.addEventListener('message', (ev) => {
      if (socket !== this.socket) return;
      if (typeof ev.data === 'string') this.term.write(ev.data);
      else this.term.write(new Uint8Array(ev.data));
    });
    socket.addEventListener('close', (ev) => {
      if (socket !== this.socket || this.disposed) return;
      const why = ev.reason || (ev.code === 1000 ? 'the terminal ended' : `the connection closed (${ev.code})`);
      // The server went away (it restarts, say): the agent runs on, so connect again.
      const dropped = ev.code === 1001 || ev.code === 1006;
      if (opened) {
        if (dropped) this.retry(why);
        else this.closed(why);
        return;
      }
      // A refused handshake tells the page nothing; the same request without the upgrade says
      // why when the session is missing or not running.
      fetch(url.replace(/^ws/, 'http'), { credentials: 'same-origin', headers: { accept: 'application/json' } })
        .then((r) => r.json())
        .then((st) => ({ message: st?.code && st.code !== 400 && st.message ? st.message : null }))
        .catch(() => ({ unreachable: true }))
        .then(({ message, unreachable }) => {
          if (socket !== this.socket || this.disposed) return;
          if (unreachable) this.retry('the server does not answer');
          else this.closed(message ?? 'the server opened no terminal for this session');
        });
    });
  }

  /** Connects again after a wait, longer each time. */
  retry(why) {
    this.onState('connecting', why);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), this.delay * (0.75 + Math.random() * 0.5));
    this.delay = Math.min(this.delay * 2, BACKOFF.max);
  }

  closed(why) {
    this.term.write(`\r\n\x1b[2m[${why}]\x1b[0m\r\n`);
    this.onState('closed', why);
  }

  send(bytes) {
    if (this.typing && this.socket?.readyState === WebSocket.OPEN) this.socket.send(bytes);
  }

  sendResize(cols, rows) {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify({ resize: [cols, rows] }));
  }

  /** Turns typing on or off; keys reach the agent only while it is on. */
  setTyping(on) {
    this.typing = on;
    if (!this.term) return;
    this.term.options.disableStdin = !on;
    this.term.options.cursorBlink = on;
    if (on) this.term.focus();
    else this.term.blur();
  }

  dispose() {
    this.disposed = true;
    clearTimeout(this.retryTimer);
    this.resizeObserver?.disconnect();
    this.socket?.close();
    this.term?.dispose();
  }
}
