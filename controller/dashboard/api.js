// The page's only way to the server: the public API (README.md, "HTTP API"), same origin, with the dashboard's
// cookie. `request` answers a call with its `message`; `Stream` is the page's one WebSocket of
// the server's multiplexed stream (`…/streams`), shared by the browser's tabs through a
// SharedWorker; over it `Watch` keeps a kind's objects live from its list and watch, resuming
// from the last resourceVersion, relisting on a 410 and reconnecting with a bounded backoff, and
// `LogFollow` follows a session's transcript from its last offset. A page holds the stream and,
// on a session's page, its terminal's WebSocket; everything else is a short fetch
// (docs/dashboard.md, "Connections").

export const API = '/apis/ao.dev/v1alpha1';

/** Backoff between reconnections: from the first delay, doubled each failure, up to the last. */
export const BACKOFF = { first: 500, max: 15000 };

/**
 * One call: `{ ok, code, body, message }`, where `message` is the server's own words (a Status
 * body's `message`) or a sentence made from the object it answered with.
 */
export async function request(method, path, body, contentType = 'application/json') {
  const init = { method, credentials: 'same-origin', headers: { accept: 'application/json' } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['content-type'] = contentType;
  }
  let resp;
  try {
    resp = await fetch(path.startsWith('/') ? path : `${API}/${path}`, init);
  } catch (e) {
    return { ok: false, code: 0, body: null, message: `the server did not answer: ${e.message}` };
  }
  const text = await resp.text();
  let parsed = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  let message = parsed?.message;
  if (!message) {
    if (parsed?.kind && parsed?.metadata?.name) {
      const phase = parsed.status?.phase ? `, phase ${parsed.status.phase}` : '';
      message = `${parsed.kind.toLowerCase()} "${parsed.metadata.name}" ${resp.ok ? 'accepted' : 'refused'} (${resp.status}${phase})`;
    } else {
      message = `${resp.status} ${resp.statusText || (resp.ok ? 'OK' : 'error')}${text && !parsed ? `: ${text.slice(0, 200)}` : ''}`;
    }
  }
  return { ok: resp.ok, code: resp.status, body: parsed, text, message };
}

/** A text resource (a log, a diff): `{ ok, code, text }`. */
export async function fetchText(path, accept = 'text/plain') {
  try {
    const resp = await fetch(`${API}/${path}`, { credentials: 'same-origin', headers: { accept } });
    return { ok: resp.ok, code: resp.status, text: await resp.text() };
  } catch (e) {
    return { ok: false, code: 0, text: `the server did not answer: ${e.message}` };
  }
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });

/** A delay of about `ms`: a quarter more or less, so that tabs and watches do not retry in step. */
const jittered = (ms) => ms * (0.75 + Math.random() * 0.5);

/** How often a tab tells the shared worker it is still there. */
const ALIVE_EVERY = 20_000;

/**
 * The page's one stream to the server (docs/dashboard.md): watches and transcript follows over
 * one WebSocket, shared by the browser's tabs through a SharedWorker (stream-worker.js), or the
 * page's own (hub.js) where there is none. `open(request, onMessage)` subscribes and gives the id;
 * `onMessage` hears `{sent}` once the request is on its way, then the server's messages
 * (`{event}`, `{log, offset}`, `{error}`), or `{lost, code}` when the connection went: a
 * subscription ends with an `error`, an `ERROR` event or `lost`, and its owner subscribes again.
 */
export class Stream {
  constructor() {
    this.handlers = new Map();
    this.nextId = 1;
    this.post = null;
    this.connect();
    // A page kept in the back/forward cache comes back with its subscriptions ended.
    addEventListener('pagehide', () => this.send({ op: 'bye' }));
    addEventListener('pageshow', (e) => {
      if (e.persisted) this.lose('the page was put away', 1001, () => this.connect());
    });
  }

  /** Connects to the shared worker, or to a hub of the page's own. */
  connect() {
    if (typeof SharedWorker === 'function') {
      try {
        const worker = new SharedWorker('/assets/stream-worker.js', { type: 'module', name: 'aoctl-stream' });
        const port = worker.port;
        port.onmessage = (e) => this.receive(e.data);
        port.start();
        this.post = (msg) => port.postMessage(msg);
        clearInterval(this.alive);
        this.alive = setInterval(() => this.post({ op: 'alive' }), ALIVE_EVERY);
        // A worker that cannot run: the page's own hub, from now on.
        worker.onerror = () => this.lose('the shared worker failed', 1001, () => this.local());
        this.shared = true;
        return;
      } catch {
        // Refused (a policy, a private window of some browsers): the page's own hub.
      }
    }
    this.local();
  }

  local() {
    clearInterval(this.alive);
    this.shared = false;
    this.post = null;
    import('./hub.js').then(({ Hub, streamURL }) => {
      const hub = new Hub(streamURL(location));
      const client = hub.client((msg) => this.receive(msg));
      this.post = (msg) => {
        if (msg.op === 'bye') hub.drop(client);
        else if (msg.op !== 'alive') hub.request(client, msg);
      };
      for (const m of this.waiting ?? []) this.post(m);
      this.waiting = null;
    });
  }

  /** Every subscription is `lost` (`detail`, `code`); then `then`. */
  lose(detail, code, then) {
    const lost = [...this.handlers.entries()];
    this.handlers.clear();
    then();
    for (const [id, fn] of lost) fn({ id, lost: detail, code });
  }

  send(msg) {
    if (this.post) this.post(msg);
    else (this.waiting ??= []).push(msg);
  }

  open(request, onMessage) {
    const id = this.nextId++;
    this.handlers.set(id, onMessage);
    this.send({ ...request, id });
    return id;
  }

  close(id) {
    if (this.handlers.delete(id)) this.send({ op: 'cancel', id });
  }

  receive(msg) {
    const fn = this.handlers.get(msg?.id);
    if (!fn) return;
    if (msg.lost !== undefined || msg.error || msg.event?.type === 'ERROR') this.handlers.delete(msg.id);
    fn(msg);
  }
}

let theStream = null;

/** The page's stream, made at first use. */
export function pageStream() {
  theStream ??= new Stream();
  return theStream;
}

/**
 * The objects of one kind, kept live. `onReset(items)` gets the whole list (at start and after a
 * relist), `onChange(type, object)` each ADDED, MODIFIED or DELETED, `onState(state, detail)` the
 * connection's state: `connecting`, `live` or `offline`. It lists with a short fetch, then
 * watches over the page's stream from the list's resourceVersion, and again from the last version
 * it saw when the stream is lost (the server restarted, say); a 410 (that version is gone from
 * the server's log) lists again.
 */
export class Watch {
  constructor(plural, { onReset, onChange, onState }, stream = null) {
    this.plural = plural;
    this.onReset = onReset;
    this.onChange = onChange;
    this.onState = onState ?? (() => {});
    this.stream = stream;
    this.resourceVersion = null;
    this.abort = new AbortController();
    this.state = 'connecting';
    this.delay = BACKOFF.first;
    this.id = null;
  }

  setState(state, detail = '') {
    this.state = state;
    this.detail = detail;
    this.onState(state, detail);
  }

  stop() {
    this.abort.abort();
    if (this.id !== null) this.stream?.close(this.id);
    this.id = null;
  }

  /** Lists when it holds no version, then watches; again after a failure, waiting longer each time. */
  async run() {
    this.stream ??= pageStream();
    const signal = this.abort.signal;
    while (!signal.aborted) {
      try {
        if (this.resourceVersion === null) await this.list(signal);
        if (signal.aborted) return;
        this.subscribe();
        return;
      } catch (e) {
        if (signal.aborted) return;
        this.setState('offline', e.message);
      }
      await this.backoff(signal);
    }
  }

  async backoff(signal) {
    await sleep(jittered(this.delay), signal);
    this.delay = Math.min(this.delay * 2, BACKOFF.max);
  }

  /** Runs again after a wait (`now`: at once). */
  again(now = false) {
    this.id = null;
    const signal = this.abort.signal;
    if (signal.aborted) return;
    if (now) this.run();
    else this.backoff(signal).then(() => this.run());
  }

  async list(signal) {
    const resp = await fetch(`${API}/${this.plural}`, {
      credentials: 'same-origin',
      headers: { accept: 'application/json' },
      signal,
    });
    if (!resp.ok) throw new Error(await failure(resp));
    const list = await resp.json();
    this.resourceVersion = list.metadata?.resourceVersion ?? '0';
    this.onReset(list.items ?? []);
  }

  subscribe() {
    const req = { op: 'watch', plural: this.plural, resourceVersion: this.resourceVersion };
    this.id = this.stream.open(req, (m) => this.message(m));
  }

  message(m) {
    if (m.sent) {
      this.setState('live');
      return;
    }
    if (m.lost !== undefined) {
      // The connection went (the server restarts, say): watch again from the version held.
      this.setState(m.code === 1000 || m.code === 1001 ? 'connecting' : 'offline', m.lost);
      this.again();
      return;
    }
    if (m.error) {
      this.setState('offline', m.error.message ?? `${m.error.code}`);
      if (m.error.code === 410) this.resourceVersion = null;
      this.again();
      return;
    }
    const ev = m.event ?? {};
    const obj = ev.object ?? {};
    if (ev.type === 'ERROR') {
      if (obj.code === 410) {
        // Too far behind the server's log: list again, at once.
        this.resourceVersion = null;
        this.again(true);
      } else {
        this.setState('offline', obj.message ?? 'the watch failed');
        this.again();
      }
      return;
    }
    this.delay = BACKOFF.first;
    if (this.state !== 'live') this.setState('live');
    const version = obj.metadata?.resourceVersion;
    if (version) this.resourceVersion = version;
    if (ev.type === 'ADDED' || ev.type === 'MODIFIED' || ev.type === 'DELETED') this.onChange(ev.type, obj);
  }
}

/**
 * A session's transcript, followed over the page's stream: `onText(text, replace)` gets its last
 * lines first (`replace` true), then what the agent writes; `onState(state, detail)` says when it
 * cannot be followed. Resumes from the last offset when the stream is lost; ends when the session
 * is gone (`onGone`).
 */
export class LogFollow {
  constructor(session, { onText, onState = () => {}, onGone = () => {} }, stream = null) {
    this.session = session;
    this.onText = onText;
    this.onState = onState;
    this.onGone = onGone;
    this.stream = stream;
    this.offset = null;
    this.abort = new AbortController();
    this.delay = 1000;
    this.id = null;
  }

  start() {
    this.stream ??= pageStream();
    if (this.abort.signal.aborted) return;
    const req = { op: 'log', session: this.session };
    if (this.offset !== null) req.offset = this.offset;
    this.id = this.stream.open(req, (m) => this.message(m));
  }

  stop() {
    this.abort.abort();
    if (this.id !== null) this.stream?.close(this.id);
    this.id = null;
  }

  message(m) {
    if (m.sent) return;
    if (m.log !== undefined) {
      this.onText(m.log, this.offset === null);
      this.offset = m.offset ?? this.offset;
      this.delay = 1000;
      this.onState('live', '');
      return;
    }
    if (m.error?.code === 404) {
      this.id = null;
      this.onGone(m.error.message);
      return;
    }
    this.onState('offline', m.lost ?? m.error?.message ?? '');
    this.id = null;
    sleep(jittered(this.delay), this.abort.signal).then(() => this.start());
    this.delay = Math.min(this.delay * 2, 30000);
  }
}
async function failure(resp) {
  const text = await resp.text().catch(() => '');
  try {
    return JSON.parse(text).message ?? `${resp.status}`;
  } catch {
    return `${resp.status} ${text.slice(0, 200)}`;
  }
}
