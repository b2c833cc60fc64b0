// The hub of the shared stream (hub.js): clients' ids renamed on the wire and back, sockets opened
// on demand and filled up to the server's bound, subscriptions reported lost when a socket closes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Hub, MAX_SUBSCRIPTIONS, streamURL } from '../hub.js';

/** A WebSocket that records what is sent and opens or closes when told. */
class FakeSocket {
  constructor(url) {
    this.url = url;
    this.readyState = 0;
    this.sent = [];
  }
  send(text) {
    assert.equal(this.readyState, 1, 'sent only on an open socket');
    this.sent.push(JSON.parse(text));
  }
  close(code, reason) {
    this.readyState = 3;
    this.closedWith = [code, reason];
  }
  open() {
    this.readyState = 1;
    this.onopen();
  }
  server(msg) {
    this.onmessage({ data: JSON.stringify(msg) });
  }
  drop(code, reason = '') {
    this.readyState = 3;
    this.onclose({ code, reason });
  }
}

function hub(options = {}) {
  const sockets = [];
  const h = new Hub('ws://h/streams', {
    open: (u) => {
      const s = new FakeSocket(u);
      sockets.push(s);
      return s;
    },
    idle: 10,
    ...options,
  });
  const client = () => {
    const got = [];
    return { c: h.client((m) => got.push(m)), got };
  };
  return { h, sockets, client };
}

test('the URL follows the page: ws on http, wss on https', () => {
  assert.equal(streamURL({ protocol: 'http:', host: 'localhost:7070' }), 'ws://localhost:7070/apis/ao.dev/v1alpha1/streams');
  assert.equal(streamURL({ protocol: 'https:', host: 'ao.example' }), 'wss://ao.example/apis/ao.dev/v1alpha1/streams');
});

test('two clients share one socket, each with its own ids', () => {
  const { h, sockets, client } = hub();
  const a = client();
  const b = client();
  h.request(a.c, { op: 'watch', id: 1, plural: 'sessions', resourceVersion: '5' });
  h.request(b.c, { op: 'watch', id: 1, plural: 'sessions', resourceVersion: '9' });
  assert.equal(sockets.length, 1);
  assert.deepEqual(a.got, [], 'nothing sent before the socket opens');
  sockets[0].open();
  const wire = sockets[0].sent;
  assert.equal(wire.length, 2);
  assert.notEqual(wire[0].id, wire[1].id, 'ids are unique on the socket');
  assert.deepEqual(a.got, [{ id: 1, sent: true }]);
  sockets[0].server({ id: wire[1].id, event: { type: 'ADDED', object: { metadata: { name: 'x' } } } });
  assert.deepEqual(b.got.at(-1), { id: 1, event: { type: 'ADDED', object: { metadata: { name: 'x' } } } });
  assert.equal(a.got.length, 1, 'the other client hears nothing of it');

  // A cancel goes out under the socket's id.
  h.request(a.c, { op: 'cancel', id: 1 });
  assert.deepEqual(wire.at(-1), { op: 'cancel', id: wire[0].id });
});

test('an error or an ERROR event ends a subscription; a closed socket loses them all', () => {
  const { h, sockets, client } = hub();
  const a = client();
  h.request(a.c, { op: 'watch', id: 1, plural: 'sessions' });
  h.request(a.c, { op: 'log', id: 2, session: 's' });
  h.request(a.c, { op: 'watch', id: 3, plural: 'events' });
  sockets[0].open();
  const [w1, l2] = sockets[0].sent;
  sockets[0].server({ id: w1.id, event: { type: 'ERROR', object: { code: 410 } } });
  sockets[0].server({ id: l2.id, error: { code: 404, message: 'gone' } });
  assert.equal(a.c.subs.size, 1);
  sockets[0].drop(1001, 'the server is shutting down');
  assert.deepEqual(a.got.at(-1), { id: 3, lost: 'the server is shutting down', code: 1001 });
  assert.equal(a.c.subs.size, 0);
  // The next request opens a new socket.
  h.request(a.c, { op: 'watch', id: 4, plural: 'events', resourceVersion: '12' });
  assert.equal(sockets.length, 2);
});

test('a socket holds at most the server\'s bound; then another opens', () => {
  const { h, sockets, client } = hub();
  const a = client();
  for (let id = 1; id <= MAX_SUBSCRIPTIONS + 1; id++) h.request(a.c, { op: 'watch', id, plural: 'sessions' });
  assert.equal(sockets.length, 2);
  sockets[0].open();
  sockets[1].open();
  assert.equal(sockets[0].sent.length, MAX_SUBSCRIPTIONS);
  assert.equal(sockets[1].sent.length, 1);
});

test('a client that goes ends its subscriptions, and an idle socket closes', async () => {
  const { h, sockets, client } = hub();
  const a = client();
  h.request(a.c, { op: 'watch', id: 1, plural: 'sessions' });
  sockets[0].open();
  h.drop(a.c);
  assert.equal(sockets[0].sent.at(-1).op, 'cancel');
  await new Promise((r) => setTimeout(r, 30));
  assert.deepEqual(sockets[0].closedWith, [1000, 'nothing to follow']);
});

test('a silent client dropped hears that its subscriptions were lost', () => {
  const { h, sockets, client } = hub();
  const a = client();
  h.request(a.c, { op: 'log', id: 7, session: 's', offset: 10 });
  sockets[0].open();
  h.drop(a.c, 'the tab was silent for too long');
  assert.deepEqual(a.got.at(-1), { id: 7, lost: 'the tab was silent for too long', code: 1001 });
  assert.deepEqual(sockets[0].sent.at(-1), { op: 'cancel', id: sockets[0].sent[0].id });
});
