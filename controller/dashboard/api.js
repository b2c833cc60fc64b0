// The page's only way to the server: the public API (DESIGN §4), same origin, with the dashboard's
// cookie. `request` answers a call with its `message`; `Watch` keeps a kind's objects live from
// its list and watch stream (newline-delimited JSON), resuming from the last resourceVersion,
// relisting on a 410 and reconnecting with a bounded backoff.

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

/**
 * Reads a streamed response line by line, calling `onLine` with each complete line until the
 * stream ends or `onLine` returns `false` (the rest is cancelled); rejects when the stream fails
 * or `onLine` throws.
 */
export async function readLines(resp, onLine) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  const take = (line) => {
    let more;
    try {
      more = onLine(line);
    } catch (e) {
      reader.cancel().catch(() => {});
      throw e;
    }
    if (more === false) reader.cancel().catch(() => {});
    return more !== false;
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (line.trim() && !take(line)) return;
    }
  }
  buffered += decoder.decode();
  if (buffered.trim()) take(buffered);
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });

/**
 * The objects of one kind, kept live. `onReset(items)` gets the whole list (at start and after a
 * relist), `onChange(type, object)` each ADDED, MODIFIED or DELETED, `onState(state, detail)` the
 * connection's state: `connecting`, `live` or `offline`.
 */
export class Watch {
  constructor(plural, { onReset, onChange, onState }) {
    this.plural = plural;
    this.onReset = onReset;
    this.onChange = onChange;
    this.onState = onState ?? (() => {});
    this.resourceVersion = null;
    this.abort = new AbortController();
    this.state = 'connecting';
  }

  setState(state, detail = '') {
    this.state = state;
    this.detail = detail;
    this.onState(state, detail);
  }

  stop() {
    this.abort.abort();
  }

  /** Runs until `stop()`: list, watch, and again after a failure, waiting longer each time. */
  async run() {
    const signal = this.abort.signal;
    let delay = BACKOFF.first;
    while (!signal.aborted) {
      try {
        if (this.resourceVersion === null) await this.list(signal);
        await this.follow(signal);
        // A 410: list again at once.
        if (this.resourceVersion === null) continue;
        // The server ended a live stream (it shuts down, say): go on from where it was.
        delay = BACKOFF.first;
        this.setState('connecting', 'the watch ended');
      } catch (e) {
        if (signal.aborted) return;
        this.setState('offline', e.message);
      }
      await sleep(delay * (0.75 + Math.random() * 0.5), signal);
      delay = Math.min(delay * 2, BACKOFF.max);
    }
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

  /** Follows the watch from the version held until the stream ends; throws when it fails. */
  async follow(signal) {
    const rv = encodeURIComponent(this.resourceVersion);
    const resp = await fetch(`${API}/${this.plural}?watch=true&resourceVersion=${rv}`, {
      credentials: 'same-origin',
      headers: { accept: 'application/json' },
      signal,
    });
    if (resp.status === 410) {
      this.resourceVersion = null;
      return;
    }
    if (!resp.ok) throw new Error(await failure(resp));
    this.setState('live');
    let gone = false;
    await readLines(resp, (line) => {
      let ev;
      try {
        ev = JSON.parse(line);
      } catch {
        return true;
      }
      const obj = ev.object ?? {};
      if (ev.type === 'ERROR') {
        if (obj.code !== 410) throw new Error(obj.message ?? 'the watch failed');
        // Too far behind the server's log: list again.
        gone = true;
        return false;
      }
      const version = obj.metadata?.resourceVersion;
      if (version) this.resourceVersion = version;
      if (ev.type === 'ADDED' || ev.type === 'MODIFIED' || ev.type === 'DELETED') this.onChange(ev.type, obj);
      return true;
    });
    if (gone) this.resourceVersion = null;
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
