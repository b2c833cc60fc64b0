// Self-test: checks the schema subset against @linear/sdk, starts server.js on port 0 with a
// local webhook receiver, and exercises every GraphQL root field, the filters, pagination,
// Linear's error shapes, rate limits, faults, the control API, validation and signed webhooks.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { checkSchema, loadSchema, SCHEMA_FILE } = require('../lib/check-schema');
const { sdkTypes } = require('../lib/sdk-types');

const SERVER = path.join(__dirname, '..', 'server.js');
const TOKEN = 'lin_api_standinTestToken0123456789';
const SECRET = 'linear-webhook-secret';

let child;
let base;
let hookServer;
const hooks = [];
let hookWaiters = [];

function start(args) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [SERVER, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/^listening on 127\.0\.0\.1:(\d+)\n/);
      if (m) resolve({ p, port: Number(m[1]), stderr: () => err });
    });
    p.stderr.on('data', (d) => (err += d));
    p.on('exit', (code) => reject(Object.assign(new Error(`server exited ${code}: ${err}`), { code, stderr: err, stdout: out })));
  });
}

async function gql(query, variables, { auth = TOKEN, operationName } = {}) {
  const headers = { 'Content-Type': 'application/json' };
  if (auth) headers.Authorization = auth;
  const res = await fetch(`${base}/graphql`, { method: 'POST', headers, body: JSON.stringify({ query, variables, operationName }) });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

async function control(method, p, body) {
  const res = await fetch(base + p, { method, headers: { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

function nextHook() {
  return new Promise((resolve) => hookWaiters.push(resolve));
}

const ISSUE_FIELDS = `id identifier number title description url priority createdAt updatedAt archivedAt canceledAt
  completedAt startedAt branchName state { id name type color position } team { id key name }
  labels { nodes { id name color } } creator { id name displayName email } assignee { id }`;

async function allIdentifiers(filter, extra = {}) {
  const r = await gql(`query Q($filter: IssueFilter, $includeArchived: Boolean) { issues(filter: $filter, first: 250, includeArchived: $includeArchived) { nodes { identifier } } }`, { filter, ...extra });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.data.issues.nodes.map((n) => n.identifier).sort();
}

test.before(async () => {
  hookServer = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const hook = { headers: req.headers, raw, body: JSON.parse(raw) };
      hooks.push(hook);
      res.writeHead(200).end('ok');
      const waiters = hookWaiters;
      hookWaiters = [];
      for (const w of waiters) w(hook);
    });
  });
  await new Promise((r) => hookServer.listen(0, '127.0.0.1', r));
  const hookUrl = `http://127.0.0.1:${hookServer.address().port}/webhooks/linear`;
  const s = await start(['--port', '0', '--team', 'ENG:Engineering', '--team', 'OPS:Operations', '--token', TOKEN, '--webhook-url', hookUrl, '--webhook-secret', SECRET]);
  child = s.p;
  base = `http://127.0.0.1:${s.port}`;
});

test.after(async () => {
  if (child) child.kill('SIGTERM');
  await new Promise((r) => hookServer.close(r));
});

test('the SDL subset agrees with @linear/sdk, and a disagreeing one is caught', async () => {
  assert.deepEqual(checkSchema(), []);
  const text = fs.readFileSync(SCHEMA_FILE, 'utf8');
  const bad = text
    .replace('  number: Float!', '  number: Int!')
    .replace('  description: String\n', '  description: String!\n')
    .replace('  id: IssueIdComparator', '  id: IDComparator')
    .replace('input IssueIdComparator', 'input IDComparator')
    .replace('  nodes: [Issue!]!', '  nodes: [Issue]!')
    .replace('  teams(first: Int, after: String)', '  teams(first: Int, after: String, nope: Int)');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'linear-standin-'));
  const file = path.join(tmp, 'bad.graphql');
  fs.writeFileSync(file, bad);
  const problems = checkSchema(loadSchema(file));
  const joined = problems.join('\n');
  assert.match(joined, /type Issue\.number: the subset says Int!, @linear\/sdk 98\.0\.0 says Float!/);
  assert.match(joined, /type Issue\.description: the subset says String!, .* says String$/m);
  assert.match(joined, /input IssueFilter\.id: the subset says IDComparator, .* says IssueIdComparator/);
  assert.match(joined, /input IDComparator: not in @linear\/sdk/);
  assert.match(joined, /type IssueConnection\.nodes: the subset says \[Issue\]!, .* says \[Issue!\]!/);
  assert.match(joined, /type Query\.teams\(nope\): not in @linear\/sdk/);
  // The server refuses to start with it, naming the mismatches.
  await assert.rejects(start(['--port', '0', '--team', 'ENG:Engineering', '--schema', file]), (e) => {
    assert.equal(e.code, 1);
    assert.match(e.stderr, /Issue\.number/);
    return true;
  });
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('authentication: bare key or Bearer; otherwise 400 AUTHENTICATION_ERROR', async () => {
  const none = await gql('{ viewer { id } }', undefined, { auth: null });
  assert.equal(none.status, 400);
  assert.equal(none.body.errors[0].message, 'Authentication required, not authenticated');
  assert.equal(none.body.errors[0].extensions.code, 'AUTHENTICATION_ERROR');
  assert.equal(none.body.errors[0].extensions.type, 'authentication error');
  assert.ok(none.body.errors[0].extensions.userPresentableMessage);
  const wrong = await gql('{ viewer { id } }', undefined, { auth: 'Bearer nope' });
  assert.equal(wrong.status, 400);
  const bare = await gql('{ viewer { id name displayName email } }');
  assert.equal(bare.status, 200);
  assert.equal(bare.body.data.viewer.email, 'viewer@example.com');
  const bearer = await gql('{ viewer { id } }', undefined, { auth: `Bearer ${TOKEN}` });
  assert.equal(bearer.status, 200);
});

test('teams, team, states', async () => {
  const r = await gql('{ teams { nodes { id key name states { nodes { name type position color } } } pageInfo { hasNextPage } } }');
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.data.teams.nodes.map((t) => t.key), ['ENG', 'OPS']);
  assert.deepEqual(r.body.data.teams.nodes[0].states.nodes.map((s) => `${s.name}:${s.type}`), ['Backlog:backlog', 'Todo:unstarted', 'In Progress:started', 'Done:completed', 'Canceled:canceled']);
  const page = await gql('{ teams(first: 1) { nodes { key } pageInfo { hasNextPage endCursor } } }');
  assert.equal(page.body.data.teams.pageInfo.hasNextPage, true);
  const page2 = await gql('query($a: String) { teams(first: 1, after: $a) { nodes { key } pageInfo { hasNextPage } } }', { a: page.body.data.teams.pageInfo.endCursor });
  assert.deepEqual(page2.body.data.teams.nodes.map((t) => t.key), ['OPS']);
  assert.equal(page2.body.data.teams.pageInfo.hasNextPage, false);
  const ops = await gql('query($id: String!) { team(id: $id) { key name } }', { id: 'OPS' });
  assert.deepEqual(ops.body.data.team, { key: 'OPS', name: 'Operations' });
  const byId = await gql('query($id: String!) { team(id: $id) { key } }', { id: r.body.data.teams.nodes[0].id });
  assert.equal(byId.body.data.team.key, 'ENG');
  const missing = await gql('{ team(id: "NOPE") { key } }');
  assert.equal(missing.status, 200);
  assert.equal(missing.body.data, null);
  assert.equal(missing.body.errors[0].message, 'Entity not found: Team');
});

test('control API creates issues with signed create webhooks that match @linear/sdk', async () => {
  const got = nextHook();
  const r = await control('POST', '/_standin/issues', { title: 'Fix the flaky test', description: 'It fails on Tuesdays.', labels: ['agent', 'bug'] });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  assert.equal(r.body.issue.identifier, 'ENG-1');
  assert.equal(r.body.issue.state, 'Todo');
  assert.equal(r.body.deliveries.length, 1);
  assert.equal(r.body.deliveries[0].status, 200);
  const hook = await got;
  assert.equal(hook.headers['linear-event'], 'Issue');
  assert.equal(hook.headers['user-agent'], 'Linear-Webhook');
  assert.match(hook.headers['linear-delivery'], /^[0-9a-f-]{36}$/);
  assert.equal(hook.headers['linear-signature'], crypto.createHmac('sha256', SECRET).update(hook.raw).digest('hex'));
  const p = hook.body;
  assert.equal(p.action, 'create');
  assert.equal(p.type, 'Issue');
  assert.equal(p.data.identifier, 'ENG-1');
  assert.equal(p.data.team.key, 'ENG');
  assert.equal(p.data.state.name, 'Todo');
  assert.deepEqual(p.data.labels.map((l) => l.name), ['agent', 'bug']);
  assert.equal(p.data.labelIds.length, 2);
  assert.equal(p.url, 'https://linear.app/acme/issue/ENG-1/fix-the-flaky-test');
  assert.ok(Math.abs(p.webhookTimestamp - Date.now()) < 60000);
  assert.deepEqual(sdkTypes().validate(p, 'EntityWebhookPayloadWithIssueData'), []);

  for (const [title, extra] of [
    ['Second issue', { state: 'In Progress', labels: ['agent'] }],
    ['Third issue', { state: 'Backlog', labels: ['docs'] }],
    ['Ops chore', { team: 'OPS', labels: ['agent', 'ops'] }],
    ['Fourth issue', {}],
  ]) {
    const c = await control('POST', '/_standin/issues', { title, ...extra });
    assert.equal(c.status, 201, JSON.stringify(c.body));
  }
  const bad = await control('POST', '/_standin/issues', { title: 'x', state: 'Nope' });
  assert.equal(bad.status, 400);
  const issues = await allIdentifiers(undefined);
  assert.deepEqual(issues, ['ENG-1', 'ENG-2', 'ENG-3', 'ENG-4', 'OPS-1']);
});

test('issue by identifier and by uuid, with every field', async () => {
  const r = await gql(`query($id: String!) { issue(id: $id) { ${ISSUE_FIELDS} } }`, { id: 'ENG-1' });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const i = r.body.data.issue;
  assert.equal(i.identifier, 'ENG-1');
  assert.equal(i.number, 1);
  assert.equal(i.title, 'Fix the flaky test');
  assert.equal(i.description, 'It fails on Tuesdays.');
  assert.equal(i.url, 'https://linear.app/acme/issue/ENG-1/fix-the-flaky-test');
  assert.equal(i.branchName, 'viewer/eng-1-fix-the-flaky-test');
  assert.equal(i.state.type, 'unstarted');
  assert.equal(i.team.key, 'ENG');
  assert.deepEqual(i.labels.nodes.map((l) => l.name), ['agent', 'bug']);
  assert.equal(i.creator.displayName, 'viewer');
  assert.equal(i.assignee, null);
  assert.equal(i.priority, 0);
  assert.ok(!Number.isNaN(Date.parse(i.createdAt)));
  const byId = await gql('query($id: String!) { issue(id: $id) { identifier } }', { id: i.id });
  assert.equal(byId.body.data.issue.identifier, 'ENG-1');
  const lower = await gql('{ issue(id: "eng-1") { identifier } }');
  assert.equal(lower.body.data.issue.identifier, 'ENG-1');
  const labels = await gql('{ issue(id: "ENG-1") { labels(filter: { name: { eq: "bug" } }) { nodes { name } } } }');
  assert.deepEqual(labels.body.data.issue.labels.nodes, [{ name: 'bug' }]);
  const started = await gql('{ issue(id: "ENG-2") { startedAt state { name } } }');
  assert.ok(started.body.data.issue.startedAt);
});

test('filters filter', async () => {
  assert.deepEqual(await allIdentifiers({ team: { key: { eq: 'OPS' } } }), ['OPS-1']);
  assert.deepEqual(await allIdentifiers({ team: { key: { in: ['ENG'] } }, labels: { name: { eq: 'agent' } } }), ['ENG-1', 'ENG-2']);
  assert.deepEqual(await allIdentifiers({ state: { type: { eq: 'started' } } }), ['ENG-2']);
  assert.deepEqual(await allIdentifiers({ state: { name: { nin: ['Todo', 'Backlog'] } } }), ['ENG-2']);
  assert.deepEqual(await allIdentifiers({ state: { type: { neq: 'unstarted' } } }), ['ENG-2', 'ENG-3']);
  assert.deepEqual(await allIdentifiers({ labels: { some: { name: { eqIgnoreCase: 'BUG' } } } }), ['ENG-1']);
  assert.deepEqual(await allIdentifiers({ labels: { every: { name: { eq: 'agent' } } }, team: { key: { eq: 'ENG' } } }), ['ENG-2', 'ENG-4']);
  assert.deepEqual(await allIdentifiers({ number: { gt: 1, lt: 4 }, team: { key: { eq: 'ENG' } } }), ['ENG-2', 'ENG-3']);
  assert.deepEqual(await allIdentifiers({ number: { in: [3, 4] } }), ['ENG-3', 'ENG-4']);
  assert.deepEqual(await allIdentifiers({ number: { eq: 1 } }), ['ENG-1', 'OPS-1']);
  assert.deepEqual(await allIdentifiers({ title: { containsIgnoreCase: 'ISSUE' } }), ['ENG-2', 'ENG-3', 'ENG-4']);
  assert.deepEqual(await allIdentifiers({ or: [{ title: { eq: 'Ops chore' } }, { labels: { name: { eq: 'docs' } } }] }), ['ENG-3', 'OPS-1']);
  assert.deepEqual(await allIdentifiers({ and: [{ team: { key: { eq: 'ENG' } } }, { title: { neq: 'Fourth issue' } }, { labels: { name: { in: ['agent', 'docs'] } } }] }), ['ENG-1', 'ENG-2', 'ENG-3']);
  const one = await gql('{ issue(id: "ENG-3") { id team { id } } }');
  assert.deepEqual(await allIdentifiers({ id: { eq: one.body.data.issue.id } }), ['ENG-3']);
  assert.deepEqual(await allIdentifiers({ id: { in: [one.body.data.issue.id] } }), ['ENG-3']);
  assert.deepEqual(await allIdentifiers({ team: { id: { eq: one.body.data.issue.team.id } }, id: { nin: [one.body.data.issue.id] } }), ['ENG-1', 'ENG-2', 'ENG-4']);
  assert.deepEqual(await allIdentifiers({ labels: { name: { eq: 'no-such-label' } } }), []);
});

test('pagination pages, with opaque cursors, both ways', async () => {
  for (let n = 0; n < 6; n++) await control('POST', '/_standin/issues', { title: `Page filler ${n}`, labels: ['filler'] });
  const filter = { labels: { name: { eq: 'filler' } } };
  const seen = [];
  let after = null;
  let pages = 0;
  for (;;) {
    const r = await gql('query($f: IssueFilter, $after: String) { issues(filter: $f, first: 4, after: $after) { nodes { title } edges { cursor node { title } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }', { f: filter, after });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const c = r.body.data.issues;
    pages++;
    assert.deepEqual(c.nodes.map((x) => x.title), c.edges.map((e) => e.node.title));
    assert.equal(c.pageInfo.endCursor, c.edges[c.edges.length - 1].cursor);
    assert.equal(c.pageInfo.hasPreviousPage, after !== null);
    seen.push(...c.nodes.map((x) => x.title));
    if (!c.pageInfo.hasNextPage) break;
    after = c.pageInfo.endCursor;
  }
  assert.equal(pages, 2);
  // Newest first.
  assert.deepEqual(seen, [5, 4, 3, 2, 1, 0].map((n) => `Page filler ${n}`));
  const lastTwo = await gql('query($f: IssueFilter) { issues(filter: $f, last: 2) { nodes { title } pageInfo { hasPreviousPage startCursor } } }', { f: filter });
  assert.deepEqual(lastTwo.body.data.issues.nodes.map((x) => x.title), ['Page filler 1', 'Page filler 0']);
  assert.equal(lastTwo.body.data.issues.pageInfo.hasPreviousPage, true);
  const before = await gql('query($f: IssueFilter, $b: String) { issues(filter: $f, last: 2, before: $b) { nodes { title } } }', { f: filter, b: lastTwo.body.data.issues.pageInfo.startCursor });
  assert.deepEqual(before.body.data.issues.nodes.map((x) => x.title), ['Page filler 3', 'Page filler 2']);
  const byUpdated = await gql('{ issues(first: 1, orderBy: updatedAt) { nodes { title } } }');
  assert.equal(byUpdated.body.data.issues.nodes[0].title, 'Page filler 5');
  // Default page: 50; at most 250.
  for (let n = 0; n < 45; n++) await control('POST', '/_standin/issues', { title: `Bulk ${n}`, team: 'OPS' });
  const def = await gql('{ issues { nodes { id } pageInfo { hasNextPage } } }');
  assert.equal(def.body.data.issues.nodes.length, 50);
  assert.equal(def.body.data.issues.pageInfo.hasNextPage, true);
  const tooMany = await gql('{ issues(first: 251) { nodes { id } } }');
  assert.equal(tooMany.body.errors[0].extensions.code, 'INVALID_INPUT');
  const badCursor = await gql('{ issues(after: "nonsense") { nodes { id } } }');
  assert.equal(badCursor.body.errors[0].extensions.code, 'INVALID_INPUT');
});

test('state changes, label replacement, moves and archiving send update/remove webhooks', async () => {
  let got = nextHook();
  let r = await control('POST', '/_standin/issues/ENG-1/state', { state: 'Done' });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  let hook = await got;
  assert.equal(hook.body.action, 'update');
  assert.equal(hook.body.data.state.type, 'completed');
  assert.ok(hook.body.updatedFrom.stateId);
  assert.ok(hook.body.updatedFrom.updatedAt);
  assert.equal(hook.body.updatedFrom.completedAt, null);
  assert.deepEqual(sdkTypes().validate(hook.body, 'EntityWebhookPayloadWithIssueData'), []);
  const done = await gql('{ issue(id: "ENG-1") { completedAt state { name } } }');
  assert.equal(done.body.data.issue.state.name, 'Done');
  assert.ok(done.body.data.issue.completedAt);

  got = nextHook();
  r = await control('POST', '/_standin/issues/ENG-1/labels', { labels: ['agent', 'needs-review'] });
  hook = await got;
  assert.deepEqual(hook.body.data.labels.map((l) => l.name), ['agent', 'needs-review']);
  assert.equal(hook.body.updatedFrom.labelIds.length, 2);
  assert.deepEqual(r.body.issue.labels, ['agent', 'needs-review']);

  got = nextHook();
  r = await control('POST', '/_standin/issues/ENG-2/move', { team: 'OPS' });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  hook = await got;
  const newId = r.body.issue.identifier;
  assert.match(newId, /^OPS-\d+$/);
  assert.equal(hook.body.data.identifier, newId);
  assert.ok(hook.body.updatedFrom.teamId);
  assert.notEqual(hook.body.updatedFrom.teamId, hook.body.data.teamId);
  assert.equal(hook.body.updatedFrom.identifier, 'ENG-2');
  assert.deepEqual(hook.body.data.previousIdentifiers, ['ENG-2']);
  assert.deepEqual(sdkTypes().validate(hook.body, 'EntityWebhookPayloadWithIssueData'), []);
  // The old identifier still resolves, to the issue under its new identifier.
  const moved = await gql('{ issue(id: "ENG-2") { identifier team { key } state { name } url } }');
  assert.equal(moved.body.data.issue.identifier, newId);
  assert.equal(moved.body.data.issue.team.key, 'OPS');
  assert.equal(moved.body.data.issue.state.name, 'In Progress');
  assert.ok(moved.body.data.issue.url.includes(`/issue/${newId}/`));
  assert.deepEqual(await allIdentifiers({ state: { type: { eq: 'started' } } }), [newId]);

  got = nextHook();
  r = await control('POST', '/_standin/issues/ENG-3/archive');
  hook = await got;
  assert.equal(hook.body.action, 'remove');
  assert.ok(hook.body.data.archivedAt);
  assert.ok(!(await allIdentifiers({ team: { key: { eq: 'ENG' } } })).includes('ENG-3'));
  assert.ok((await allIdentifiers({ team: { key: { eq: 'ENG' } } }, { includeArchived: true })).includes('ENG-3'));
  const archived = await gql('{ issue(id: "ENG-3") { archivedAt } }');
  assert.ok(archived.body.data.issue.archivedAt);

  assert.equal((await control('POST', '/_standin/issues/ENG-99/state', { state: 'Done' })).status, 404);
  assert.equal((await control('POST', '/_standin/issues/ENG-1/state', { state: 'Nope' })).status, 400);
  const one = await control('GET', '/_standin/issues/ENG-1');
  assert.equal(one.body.issue.state, 'Done');
});

test("GraphQL errors have Linear's codes", async () => {
  const parse = await gql('{ issue(id: ');
  assert.equal(parse.status, 400);
  assert.equal(parse.body.errors[0].extensions.code, 'GRAPHQL_PARSE_FAILED');
  const unknown = await gql('{ issue(id: "ENG-1") { nope } }');
  assert.equal(unknown.status, 400);
  assert.equal(unknown.body.errors[0].extensions.code, 'GRAPHQL_VALIDATION_FAILED');
  const unknownFilter = await gql('{ issues(filter: { assignee: { id: { eq: "x" } } }) { nodes { id } } }');
  assert.equal(unknownFilter.body.errors[0].extensions.code, 'GRAPHQL_VALIDATION_FAILED');
  const vars = await gql('query($id: String!) { issue(id: $id) { id } }', { id: 42 });
  assert.equal(vars.status, 400);
  assert.equal(vars.body.errors[0].extensions.code, 'INVALID_INPUT');
  const missingVar = await gql('query($id: String!) { issue(id: $id) { id } }', {});
  assert.equal(missingVar.body.errors[0].extensions.code, 'INVALID_INPUT');
  const nf = await gql('{ issue(id: "ENG-404") { id } }');
  assert.equal(nf.status, 200);
  assert.equal(nf.body.data, null);
  assert.equal(nf.body.errors[0].message, 'Entity not found: Issue');
  assert.equal(nf.body.errors[0].extensions.code, 'INVALID_INPUT');
  assert.deepEqual(nf.body.errors[0].path, ['issue']);
  const badJson = await fetch(`${base}/graphql`, { method: 'POST', headers: { Authorization: TOKEN }, body: '{' });
  assert.equal(badJson.status, 400);
});

test('rate-limit headers on every answer; exhausted → 400 RATELIMITED', async () => {
  const a = await gql('{ viewer { id } }');
  const b = await gql('{ issues(first: 10) { nodes { id title } } }');
  for (const h of ['x-ratelimit-requests-limit', 'x-ratelimit-requests-remaining', 'x-ratelimit-requests-reset', 'x-complexity', 'x-ratelimit-complexity-limit', 'x-ratelimit-complexity-remaining', 'x-ratelimit-complexity-reset']) {
    assert.ok(a.headers.get(h), h);
  }
  assert.equal(a.headers.get('x-ratelimit-requests-limit'), '1500');
  assert.equal(Number(b.headers.get('x-ratelimit-requests-remaining')), Number(a.headers.get('x-ratelimit-requests-remaining')) - 1);
  assert.ok(Number(b.headers.get('x-complexity')) > Number(a.headers.get('x-complexity')));
  assert.ok(Number(a.headers.get('x-ratelimit-requests-reset')) > Date.now());
  const err = await gql('{ nope }');
  assert.ok(err.headers.get('x-ratelimit-requests-remaining'));

  await control('POST', '/_standin/rate-limit', { remaining: 1, resetIn: 30 });
  assert.equal((await gql('{ viewer { id } }')).status, 200);
  const limited = await gql('{ viewer { id } }');
  assert.equal(limited.status, 400);
  assert.deepEqual(limited.body.errors[0].message, 'Rate limit exceeded');
  assert.equal(limited.body.errors[0].extensions.code, 'RATELIMITED');
  assert.equal(limited.headers.get('x-ratelimit-requests-remaining'), '0');
  assert.ok(Math.abs(Number(limited.headers.get('x-ratelimit-requests-reset')) - (Date.now() + 30000)) < 5000);
  const got = await control('GET', '/_standin/rate-limit');
  assert.equal(got.body.rate.remaining, 0);
  await control('DELETE', '/_standin/rate-limit');
  assert.equal((await gql('{ viewer { id } }')).status, 200);
});

test('faults: status, body, headers, delay, per operation', async () => {
  await control('POST', '/_standin/faults', { status: 502, count: 2, operation: 'Flaky', body: { oops: true }, headers: { 'Retry-After': '1' } });
  assert.equal((await gql('{ viewer { id } }')).status, 200); // another operation
  const f1 = await gql('query Flaky { viewer { id } }', undefined, { operationName: 'Flaky' });
  assert.equal(f1.status, 502);
  assert.deepEqual(f1.body, { oops: true });
  assert.equal(f1.headers.get('retry-after'), '1');
  assert.equal((await gql('query Flaky { viewer { id } }')).status, 502);
  assert.equal((await gql('query Flaky { viewer { id } }')).status, 200);
  await control('POST', '/_standin/faults', { delayMs: 300, operation: 'viewer' });
  const t0 = Date.now();
  assert.equal((await gql('{ viewer { id } }')).status, 200);
  assert.ok(Date.now() - t0 >= 280);
  await control('POST', '/_standin/faults', { status: 500 });
  assert.equal((await control('GET', '/_standin/faults')).body.faults.length, 1);
  await control('DELETE', '/_standin/faults');
  assert.equal((await gql('{ viewer { id } }')).status, 200);
  assert.equal((await control('POST', '/_standin/faults', { count: 1 })).status, 400);
});

test('request counts by operation', async () => {
  await control('DELETE', '/_standin/requests');
  await gql('query ListIssues { issues { nodes { id } } }');
  await gql('query ListIssues { issues { nodes { id } } }');
  await gql('{ issue(id: "ENG-1") { id } }');
  const r = await control('GET', '/_standin/requests?log=1');
  assert.equal(r.body.total, 3);
  assert.deepEqual(r.body.byOperation, { ListIssues: 2, issue: 1 });
  assert.equal(r.body.log.length, 3);
  const plain = await control('GET', '/_standin/requests');
  assert.equal(plain.body.log, undefined);
});

test('validation: a corrupted answer and a corrupted webhook are caught as bugs', async () => {
  assert.deepEqual((await control('GET', '/_standin/bugs')).body.bugs, []);
  await control('POST', '/_standin/corrupt', { target: 'graphql', delete: ['title'] });
  const r = await gql('{ issue(id: "ENG-1") { title } }');
  assert.equal(r.status, 500);
  assert.equal(r.body.errors[0].extensions.code, 'INTERNAL_SERVER_ERROR');
  let bugs = (await control('GET', '/_standin/bugs')).body.bugs;
  assert.equal(bugs.length, 1);
  assert.match(JSON.stringify(bugs[0]), /Issue\.title/);
  assert.equal((await gql('{ issue(id: "ENG-1") { title } }')).status, 200);

  const before = hooks.length;
  await control('POST', '/_standin/corrupt', { target: 'webhook', delete: ['data.stateId'], set: { 'data.number': 'seven', 'data.bogus': 1 } });
  const c = await control('POST', '/_standin/issues', { title: 'Corrupted announcement' });
  assert.equal(c.body.deliveries[0].invalid, true);
  const errors = c.body.deliveries[0].errors.join('\n');
  assert.match(errors, /\$\.data\.stateId: missing/);
  assert.match(errors, /\$\.data\.number: expected Float/);
  assert.match(errors, /\$\.data\.bogus: not a field of IssueWebhookPayload/);
  bugs = (await control('GET', '/_standin/bugs')).body.bugs;
  assert.equal(bugs.length, 2);
  await new Promise((res) => setTimeout(res, 100));
  assert.equal(hooks.length, before); // not sent
  // The validator rejects a wrong actor or a wrong type too.
  assert.notDeepEqual(sdkTypes().validate({ ...hooks[0].body, type: 'Comment' }, 'EntityWebhookPayloadWithIssueData'), []);
  assert.notDeepEqual(sdkTypes().validate({ ...hooks[0].body, actor: { id: 'x' } }, 'EntityWebhookPayloadWithIssueData'), []);
});

test('state, webhooks and reset', async () => {
  const s = await control('GET', '/_standin/state');
  assert.deepEqual(s.body.teams.map((t) => t.key), ['ENG', 'OPS']);
  assert.ok(s.body.issues.some((i) => i.previousIdentifiers.includes('ENG-2')));
  assert.ok(s.body.labels.some((l) => l.name === 'agent'));
  const w = await control('GET', '/_standin/webhooks?payloads=1');
  assert.ok(w.body.deliveries.length >= 10);
  assert.ok(w.body.deliveries.filter((d) => !d.invalid).every((d) => d.payload && d.status === 200));
  const plain = await control('GET', '/_standin/webhooks');
  assert.equal(plain.body.deliveries[0].payload, undefined);
  assert.equal((await control('GET', '/_standin/nope')).status, 404);
  await control('POST', '/_standin/reset');
  assert.deepEqual(await allIdentifiers(undefined), []);
  const again = await control('POST', '/_standin/issues', { title: 'After reset' });
  assert.equal(again.body.issue.identifier, 'ENG-1');
});
