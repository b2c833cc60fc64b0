// A page's watches and transcript over the stream (api.js's Watch and LogFollow) with a stream
// that records what they ask: they subscribe again from where they got to when the stream is
// lost, and a 410 lists again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BACKOFF, LogFollow, Watch } from '../api.js';

/** A stream that records the requests and lets the test answer them. */
class FakeStream {
  constructor() {
    this.opened = [];
    this.closed = [];
  }
  open(req, onMessage) {
    this.opened.push({ req, onMessage });
    return this.opened.length;
  }
  close(id) {
    this.closed.push(id);
  }
  last() {
    return this.opened.at(-1);
  }
}

const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

/** Answers every list with `items` at version `rv`, counting the calls. */
function serveLists(rv, items) {
  const calls = [];
  globalThis.fetch = async (url) => {
    calls.push(url);
    return { ok: true, json: async () => ({ metadata: { resourceVersion: rv() }, items: items() }) };
  };
  return calls;
}

test('a watch lists, watches from the list, and watches again from the last version when lost', async () => {
  BACKOFF.first = 1;
  const lists = serveLists(() => '10', () => [{ metadata: { name: 'a', resourceVersion: '9' } }]);
  const stream = new FakeStream();
  const seen = [];
  const states = [];
  const w = new Watch('sessions', {
    onReset: (items) => seen.push(['RESET', items.length]),
    onChange: (type, o) => seen.push([type, o.metadata.name]),
    onState: (s) => states.push(s),
  }, stream);
  await w.run();
  assert.deepEqual(stream.last().req, { op: 'watch', plural: 'sessions', resourceVersion: '10' });
  stream.last().onMessage({ sent: true });
  assert.equal(states.at(-1), 'live');
  stream.last().onMessage({ event: { type: 'ADDED', object: { metadata: { name: 'b', resourceVersion: '12' } } } });
  stream.last().onMessage({ event: { type: 'BOOKMARK', object: { metadata: { resourceVersion: '15' } } } });
  assert.deepEqual(seen, [['RESET', 1], ['ADDED', 'b']]);

  // The server restarts: the same watch from version 15, without a list.
  stream.last().onMessage({ lost: 'the server is shutting down', code: 1001 });
  assert.equal(states.at(-1), 'connecting');
  await tick(20);
  assert.equal(stream.opened.length, 2);
  assert.deepEqual(stream.last().req, { op: 'watch', plural: 'sessions', resourceVersion: '15' });
  assert.equal(lists.length, 1);

  // Too far behind: list again, then watch from the new list.
  stream.last().onMessage({ event: { type: 'ERROR', object: { code: 410, message: 'gone' } } });
  await tick(20);
  assert.equal(lists.length, 2);
  assert.deepEqual(stream.last().req, { op: 'watch', plural: 'sessions', resourceVersion: '10' });
  w.stop();
  assert.deepEqual(stream.closed, [3]);
});

test('a transcript starts with its tail, goes on from its offset when lost, and ends with its session', async () => {
  const stream = new FakeStream();
  const texts = [];
  let gone = null;
  const log = new LogFollow('s', { onText: (t, replace) => texts.push([t, replace]), onGone: (why) => (gone = why) }, stream);
  log.start();
  assert.deepEqual(stream.last().req, { op: 'log', session: 's' });
  stream.last().onMessage({ log: 'tail\n', offset: 5 });
  stream.last().onMessage({ log: 'more\n', offset: 10 });
  assert.deepEqual(texts, [['tail\n', true], ['more\n', false]]);
  log.delay = 1;
  stream.last().onMessage({ lost: 'closed (1006)', code: 1006 });
  await tick(20);
  assert.deepEqual(stream.last().req, { op: 'log', session: 's', offset: 10 });
  stream.last().onMessage({ error: { code: 404, message: 'session "s" not found' } });
  assert.equal(gone, 'session "s" not found');
  log.stop();
});
