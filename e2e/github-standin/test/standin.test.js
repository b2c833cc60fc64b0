'use strict';
// Self-test: starts server.js on a temporary bare repository and exercises every GitHub route,
// the control API, conditional GETs, rate-limit headers, faults, validation, real merges and
// signed webhooks.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');

const SERVER = path.join(__dirname, '..', 'server.js');
const TOKEN = 'ghp_standinTestToken0123456789';
const SECRET = "It's a Secret to Everybody";
const OWNER = 'octo';
const REPO = `${OWNER}/demo`;

let tmp;
let origin; // bare repository
let work; // a clone that pushes like an agent
let child;
let base; // http://127.0.0.1:P
let stderr = '';
let startupMs;
const hooks = []; // received webhook deliveries
let hookServer;

function git(cwd, ...args) {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_AUTHOR_NAME: 'Agent', GIT_AUTHOR_EMAIL: 'agent@example.com', GIT_COMMITTER_NAME: 'Agent', GIT_COMMITTER_EMAIL: 'agent@example.com' },
  }).trim();
}

function bare(...args) {
  return execFileSync('git', ['--git-dir', origin, ...args], { encoding: 'utf8' }).trim();
}

function commitFile(branch, file, content, message) {
  git(work, 'checkout', '-q', branch);
  fs.writeFileSync(path.join(work, file), content);
  git(work, 'add', file);
  git(work, 'commit', '-q', '-m', message);
  git(work, 'push', '-q', 'origin', branch);
  return git(work, 'rev-parse', 'HEAD');
}

async function call(method, p, { body, headers = {}, auth = `Bearer ${TOKEN}`, redirect = 'manual' } = {}) {
  const h = { Accept: 'application/vnd.github+json', ...headers };
  if (auth) h.Authorization = auth;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const res = await fetch(base + p, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), redirect });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

const get = (p, opts) => call('GET', p, opts);
const control = (method, p, body) => call(method, `/_standin${p}`, { body, auth: null });

// Waits for `n` webhook deliveries matching `pred` (received since the test began).
async function waitHooks(pred, n = 1, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = hooks.filter(pred);
    if (found.length >= n) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} webhook(s); got ${hooks.map((h) => `${h.event}.${h.json.action}`).join(', ')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test.before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'github-standin-'));
  origin = path.join(tmp, 'origin.git');
  work = path.join(tmp, 'work');
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', origin]);
  execFileSync('git', ['clone', '-q', origin, work], { stdio: 'ignore' });
  git(work, 'checkout', '-q', '-b', 'main');
  fs.writeFileSync(path.join(work, 'a.txt'), 'one\ntwo\nthree\nfour\nfive\n');
  fs.writeFileSync(path.join(work, 'b.txt'), 'alpha\n');
  git(work, 'add', '.');
  git(work, 'commit', '-q', '-m', 'initial');
  git(work, 'push', '-q', 'origin', 'main');
  for (const b of ['demo/fix', 'demo/conflict', 'demo/squash', 'demo/rebase', 'demo/close']) git(work, 'branch', b, 'main');
  commitFile('demo/fix', 'a.txt', 'one\ntwo\nTHREE\nfour\nfive\n', 'Fix three');
  commitFile('demo/conflict', 'b.txt', 'beta\n', 'Beta');
  commitFile('demo/squash', 'c.txt', 'c1\n', 'Add c');
  commitFile('demo/squash', 'c.txt', 'c1\nc2\n', 'Extend c');
  commitFile('demo/rebase', 'd.txt', 'd\n', 'Add d');
  commitFile('demo/close', 'e.txt', 'e\n', 'Add e');

  hookServer = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      hooks.push({ event: req.headers['x-github-event'], headers: req.headers, raw, json: JSON.parse(raw.toString('utf8')) });
      res.writeHead(204);
      res.end();
    });
  });
  await new Promise((r) => hookServer.listen(0, '127.0.0.1', r));
  const hookUrl = `http://127.0.0.1:${hookServer.address().port}/webhooks/github`;

  const started = Date.now();
  child = spawn(process.execPath, [SERVER, '--port', '0', '--repo', REPO, '--git-dir', origin, '--token', TOKEN, '--webhook-url', hookUrl, '--webhook-secret', SECRET], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  base = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve(`http://${m[1]}`);
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}: ${stderr}`)));
  });
  startupMs = Date.now() - started;
});

test.after(async () => {
  if (child) child.kill('SIGTERM');
  if (hookServer) hookServer.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

test('starts quickly and prints its address', () => {
  assert.match(base, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.ok(startupMs < 3000, `start-up took ${startupMs} ms`);
  console.log(`# start-up: ${startupMs} ms`);
});

test('authentication: Bearer and token accepted, others 401', async () => {
  let r = await get('/repos/octo/demo', { auth: null });
  assert.equal(r.status, 401);
  assert.equal(r.json.message, 'Requires authentication');
  r = await get('/repos/octo/demo', { auth: 'Bearer wrong' });
  assert.equal(r.status, 401);
  assert.equal(r.json.message, 'Bad credentials');
  r = await get('/repos/octo/demo', { auth: `token ${TOKEN}` });
  assert.equal(r.status, 200);
  assert.equal(r.json.full_name, REPO);
  assert.equal(r.json.default_branch, 'main');
  assert.equal(typeof r.json.owner.id, 'number');
  assert.equal(r.json.network_count, 0);
});

test('unknown routes and repositories answer GitHub 404 bodies', async () => {
  for (const p of ['/nope', '/repos/octo/other', '/repos/octo/demo/branches', '/repos/octo/demo/pulls/999', '/repos/octo/demo/pulls/abc']) {
    const r = await get(p);
    assert.equal(r.status, 404, p);
    assert.equal(r.json.message, 'Not Found');
    assert.match(r.json.documentation_url, /^https:\/\/docs\.github\.com/);
  }
});

let pr1;
test('create a pull request: request validation, semantic errors, opened webhook', async () => {
  let r = await call('POST', '/repos/octo/demo/pulls', { body: { title: 'x', head: 'demo/fix' } });
  assert.equal(r.status, 422);
  assert.ok(r.json.errors.some((e) => e.field === 'base' && e.code === 'missing_field'), JSON.stringify(r.json));
  r = await call('POST', '/repos/octo/demo/pulls', { body: { title: 7, head: 'demo/fix', base: 'main' } });
  assert.equal(r.status, 422);
  r = await call('POST', '/repos/octo/demo/pulls', { body: { title: 'x', head: 'nope', base: 'main' } });
  assert.equal(r.status, 422);
  assert.equal(r.json.errors[0].field, 'head');
  r = await call('POST', '/repos/octo/demo/pulls', { body: { title: 'x', head: 'main', base: 'main' } });
  assert.equal(r.status, 422);
  assert.match(r.json.errors[0].message, /No commits between/);
  r = await fetch(`${base}/repos/octo/demo/pulls`, { method: 'POST', headers: { Authorization: `Bearer ${TOKEN}` }, body: '{not json' });
  assert.equal(r.status, 400);

  r = await call('POST', '/repos/octo/demo/pulls', { body: { title: 'Fix three', head: 'octo:demo/fix', base: 'main', body: 'Fixes it', draft: false } });
  assert.equal(r.status, 201, r.text);
  pr1 = r.json;
  assert.equal(pr1.number, 1);
  assert.equal(pr1.head.ref, 'demo/fix');
  assert.equal(pr1.head.sha, bare('rev-parse', 'refs/heads/demo/fix'));
  assert.equal(pr1.base.ref, 'main');
  assert.equal(pr1.html_url, 'https://github.com/octo/demo/pull/1');
  assert.equal(pr1.user.login, OWNER);
  assert.equal(pr1.commits, 1);
  assert.equal(pr1.changed_files, 1);
  assert.equal(r.headers.get('location'), pr1.url);

  r = await call('POST', '/repos/octo/demo/pulls', { body: { title: 'again', head: 'demo/fix', base: 'main' } });
  assert.equal(r.status, 422);
  assert.match(r.json.errors[0].message, /already exists/);

  const [hook] = await waitHooks((h) => h.event === 'pull_request' && h.json.action === 'opened');
  assert.equal(hook.json.number, 1);
  assert.equal(hook.json.pull_request.head.sha, pr1.head.sha);
});

test('list pull requests by head and state, with query validation', async () => {
  let r = await get('/repos/octo/demo/pulls?head=octo:demo/fix&state=all&sort=created&direction=desc&per_page=30');
  assert.equal(r.status, 200);
  assert.equal(r.json.length, 1);
  assert.equal(r.json[0].number, 1);
  assert.equal(r.json[0].mergeable, undefined, 'the list shape has no mergeability');
  r = await get('/repos/octo/demo/pulls?head=octo:other');
  assert.deepEqual(r.json, []);
  r = await get('/repos/octo/demo/pulls?state=closed');
  assert.deepEqual(r.json, []);
  r = await get('/repos/octo/demo/pulls?state=bogus');
  assert.equal(r.status, 422);
  assert.equal(r.json.message, 'Validation Failed');
  assert.equal(r.json.errors[0].field, 'state');
});

test('ETag, 304 and rate-limit headers', async () => {
  const a = await get('/repos/octo/demo/pulls/1');
  assert.equal(a.status, 200);
  const etag = a.headers.get('etag');
  assert.match(etag, /^W\/"[0-9a-f]{64}"$/);
  assert.equal(a.headers.get('x-ratelimit-limit'), '5000');
  assert.equal(a.headers.get('x-ratelimit-resource'), 'core');
  const remaining = Number(a.headers.get('x-ratelimit-remaining'));
  const used = Number(a.headers.get('x-ratelimit-used'));
  assert.equal(remaining + used, 5000);
  assert.ok(Number(a.headers.get('x-ratelimit-reset')) > Date.now() / 1000);

  const b = await get('/repos/octo/demo/pulls/1', { headers: { 'If-None-Match': etag } });
  assert.equal(b.status, 304);
  assert.equal(b.text, '');
  assert.equal(b.headers.get('etag'), etag);
  assert.equal(Number(b.headers.get('x-ratelimit-remaining')), remaining, '304 does not count');

  const c = await get('/repos/octo/demo/pulls/1', { headers: { 'If-None-Match': '"something-else"' } });
  assert.equal(c.status, 200);
  assert.equal(Number(c.headers.get('x-ratelimit-remaining')), remaining - 1);

  const rl = await get('/rate_limit');
  assert.equal(rl.status, 200);
  assert.equal(rl.json.resources.core.remaining, remaining - 1);
  assert.equal(rl.json.rate.used, used + 1);
  assert.equal(Number(rl.headers.get('x-ratelimit-remaining')), remaining - 1, '/rate_limit does not count');
  for (const p of ['/repos/octo/demo', '/repos/octo/demo/pulls?state=all', '/repos/octo/demo/issues/1', '/repos/octo/demo/commits/main/status']) {
    const r = await get(p);
    assert.ok(r.headers.get('etag'), `${p} has an ETag`);
  }
});

test('the head follows pushes to the bare repository (synchronize webhook)', async () => {
  const before = (await get('/repos/octo/demo/pulls/1')).json.head.sha;
  const after = commitFile('demo/fix', 'a.txt', 'one\ntwo\nTHREE\nfour\nFIVE\n', 'Fix five');
  const r = await get('/repos/octo/demo/pulls/1');
  assert.equal(r.json.head.sha, after);
  assert.notEqual(before, after);
  assert.equal(r.json.commits, 2);
  const [hook] = await waitHooks((h) => h.event === 'pull_request' && h.json.action === 'synchronize');
  assert.equal(hook.json.before, before);
  assert.equal(hook.json.after, after);
});

test('check runs, job logs (302 to plain text) and check_run webhooks', async () => {
  const log = '2024-01-01T00:00:00.0000000Z ##[group]Run cargo test\nerror[E0308]: mismatched types\nerror: could not compile\n';
  let r = await control('POST', '/check-runs', { number: 1, name: 'test', status: 'completed', conclusion: 'failure', log, summary: 'tests failed' });
  assert.equal(r.status, 201, r.text);
  const run = r.json.checkRun;
  assert.equal(run.app.slug, 'github-actions');
  assert.equal(run.pull_requests[0].number, 1);
  assert.deepEqual(r.json.deliveries.map((d) => [d.event, d.action, d.status]), [
    ['check_run', 'created', 204],
    ['check_run', 'completed', 204],
  ]);
  r = await control('POST', '/check-runs', { branch: 'demo/fix', name: 'lint', status: 'in_progress' });
  assert.equal(r.status, 201);

  const sha = bare('rev-parse', 'refs/heads/demo/fix');
  r = await get(`/repos/octo/demo/commits/${sha}/check-runs?filter=latest&per_page=100`);
  assert.equal(r.status, 200);
  assert.equal(r.json.total_count, 2);
  const failing = r.json.check_runs.find((c) => c.name === 'test');
  assert.equal(failing.conclusion, 'failure');
  assert.equal(failing.id, run.id);
  const lint = r.json.check_runs.find((c) => c.name === 'lint');
  assert.equal(lint.status, 'in_progress');
  assert.equal(lint.conclusion, null);
  r = await get('/repos/octo/demo/commits/demo/fix/check-runs?check_name=test');
  assert.equal(r.json.total_count, 1);

  r = await get(`/repos/octo/demo/check-runs/${run.id}`);
  assert.equal(r.status, 200);
  assert.equal(r.json.output.summary, 'tests failed');

  r = await get(`/repos/octo/demo/actions/jobs/${run.id}/logs`);
  assert.equal(r.status, 302);
  const location = r.headers.get('location');
  assert.ok(location.startsWith(base), location);
  const logResponse = await fetch(location);
  assert.equal(logResponse.status, 200);
  assert.match(logResponse.headers.get('content-type'), /^text\/plain/);
  assert.equal(await logResponse.text(), log);
  r = await get(`/repos/octo/demo/actions/jobs/${run.id}/logs`, { redirect: 'follow' });
  assert.equal(r.text, log);
  r = await get('/repos/octo/demo/actions/jobs/12345/logs');
  assert.equal(r.status, 404);
  assert.equal((await fetch(location.replace(/sig=[0-9a-f]+/, 'sig=00'))).status, 404);

  r = await get('/repos/octo/demo/pulls/1');
  assert.equal(r.json.mergeable_state, 'unstable');

  // A rerun of the same name: `latest` shows only the newest.
  r = await control('POST', '/check-runs', { number: 1, name: 'test', conclusion: 'success' });
  r = await get(`/repos/octo/demo/commits/${sha}/check-runs`);
  assert.equal(r.json.check_runs.find((c) => c.name === 'test').conclusion, 'success');
  r = await get(`/repos/octo/demo/commits/${sha}/check-runs?filter=all`);
  assert.equal(r.json.total_count, 3);
  // Update in place by id.
  r = await control('POST', '/check-runs', { id: lint.id, status: 'completed', conclusion: 'success' });
  assert.equal(r.status, 200);
  assert.deepEqual(r.json.deliveries.map((d) => d.action), ['completed']);
  r = await get('/repos/octo/demo/pulls/1');
  assert.equal(r.json.mergeable_state, 'clean');
});

test('re-running a failed Actions job, and the failed jobs of a workflow run', async () => {
  git(work, 'branch', 'demo/rerun', 'main');
  const sha = commitFile('demo/rerun', 'rerun.txt', 'flaky\n', 'a commit for re-runs');
  const log = '##[error]The runner has received a shutdown signal.\n';
  let r = await control('POST', '/check-runs', { sha, name: 'build', conclusion: 'failure', log });
  const first = r.json.checkRun;
  r = await control('POST', '/check-runs', { sha, name: 'lint', conclusion: 'failure', log: 'lint failed\n' });
  const lint = r.json.checkRun;
  r = await control('POST', '/check-runs', { sha, name: 'ext', conclusion: 'failure', app: 'other-ci' });
  const ext = r.json.checkRun;
  const since = hooks.length;

  r = await call('POST', `/repos/octo/demo/actions/jobs/${first.id}/rerun`);
  assert.equal(r.status, 201, r.text);
  assert.deepEqual(r.json, {});
  await waitHooks((h) => hooks.indexOf(h) >= since && h.event === 'check_run' && h.json.action === 'created' && h.json.check_run.name === 'build');
  r = await get(`/repos/octo/demo/commits/${sha}/check-runs`);
  const build = r.json.check_runs.find((c) => c.name === 'build');
  assert.notEqual(build.id, first.id, 'a re-run is a new job');
  assert.deepEqual([build.status, build.conclusion], ['queued', null]);
  r = await get(`/repos/octo/demo/commits/${sha}/check-runs?filter=all`);
  assert.equal(r.json.check_runs.filter((c) => c.name === 'build').length, 2, 'the old attempt is kept');
  // Neither the old attempt nor an unfinished job can be re-run; only Actions jobs are jobs.
  assert.equal((await call('POST', `/repos/octo/demo/actions/jobs/${first.id}/rerun`)).status, 403);
  assert.equal((await call('POST', `/repos/octo/demo/actions/jobs/${build.id}/rerun`)).status, 403);
  assert.equal((await call('POST', `/repos/octo/demo/actions/jobs/${ext.id}/rerun`)).status, 404);
  // The request body is validated like GitHub's.
  r = await call('POST', `/repos/octo/demo/actions/jobs/${lint.id}/rerun`, { body: { enable_debug_logging: 'yes' } });
  assert.equal(r.status, 422, r.text);

  // The whole run: still running (the build re-run is queued) → 403; once done, its failed jobs.
  assert.equal((await call('POST', `/repos/octo/demo/actions/runs/${runIdOf(first)}/rerun-failed-jobs`)).status, 403);
  await control('POST', '/check-runs', { id: build.id, conclusion: 'success' });
  r = await call('POST', `/repos/octo/demo/actions/runs/${runIdOf(first)}/rerun-failed-jobs`);
  assert.equal(r.status, 201, r.text);
  r = await get(`/repos/octo/demo/commits/${sha}/check-runs`);
  const latest = Object.fromEntries(r.json.check_runs.map((c) => [c.name, c.status]));
  assert.deepEqual(latest, { build: 'completed', lint: 'queued', ext: 'completed' });
  const state = await control('GET', '/state');
  const again = state.json.repos[0].checkRuns.find((c) => c.name === 'lint' && c.rerunOf === lint.id);
  assert.equal(again.runAttempt, 2);
});

// The workflow run id of a check run, from its details (a job's `html_url` names the run).
function runIdOf(run) {
  const m = /\/actions\/runs\/(\d+)/.exec(run.html_url || run.details_url || '');
  assert.ok(m, `no workflow run in ${run.html_url} / ${run.details_url}`);
  return Number(m[1]);
}

test('commit statuses: combined state and status webhook', async () => {
  let r = await control('POST', '/statuses', { number: 1, context: 'ci/legacy', state: 'pending' });
  assert.equal(r.status, 201, r.text);
  r = await get('/repos/octo/demo/commits/demo/fix/status?per_page=100');
  assert.equal(r.json.state, 'pending');
  r = await control('POST', '/statuses', { branch: 'demo/fix', context: 'ci/legacy', state: 'failure', description: 'broken', targetUrl: 'https://ci.example.com/1' });
  r = await get('/repos/octo/demo/commits/demo/fix/status');
  assert.equal(r.json.state, 'failure');
  assert.equal(r.json.total_count, 1);
  assert.equal(r.json.statuses[0].target_url, 'https://ci.example.com/1');
  const hook = (await waitHooks((h) => h.event === 'status', 2))[1];
  assert.equal(hook.json.state, 'failure');
  assert.equal(hook.json.sha, r.json.sha);
  assert.ok(hook.json.branches.some((b) => b.name === 'demo/fix'));
  // Through GitHub's own route too.
  r = await call('POST', `/repos/octo/demo/statuses/${r.json.sha}`, { body: { state: 'success', context: 'ci/legacy' } });
  assert.equal(r.status, 201, r.text);
  r = await get('/repos/octo/demo/commits/demo/fix/status');
  assert.equal(r.json.state, 'success');
  r = await get('/repos/octo/demo/commits/main/status');
  assert.equal(r.json.state, 'pending');
  assert.equal(r.json.total_count, 0);
});

test('reviews and review comments, with their webhooks', async () => {
  let r = await control('POST', '/reviews', {
    number: 1,
    user: 'alice',
    state: 'CHANGES_REQUESTED',
    body: 'Please rename',
    comments: [
      { path: 'a.txt', line: 3, body: 'Why upper case?' },
      { path: 'a.txt', line: 5, body: 'And here' },
    ],
  });
  assert.equal(r.status, 201, r.text);
  assert.equal(r.json.comments.length, 2);
  assert.match(r.json.comments[0].diff_hunk, /^@@ /);
  assert.deepEqual(
    r.json.deliveries.map((d) => `${d.event}.${d.action}`),
    ['pull_request_review.submitted', 'pull_request_review_comment.created', 'pull_request_review_comment.created'],
  );
  r = await get('/repos/octo/demo/pulls/1/reviews?per_page=100');
  assert.equal(r.status, 200);
  assert.equal(r.json[0].state, 'CHANGES_REQUESTED');
  assert.equal(r.json[0].user.login, 'alice');
  assert.equal(r.json[0].commit_id, bare('rev-parse', 'refs/heads/demo/fix'));
  r = await get('/repos/octo/demo/pulls/1/comments?per_page=100');
  assert.equal(r.json.length, 2);
  assert.equal(r.json[0].path, 'a.txt');
  assert.equal(r.json[0].line, 3);
  assert.equal(r.json[0].pull_request_review_id, (await get('/repos/octo/demo/pulls/1/reviews')).json[0].id);
  r = await control('POST', '/reviews', { number: 1, user: 'alice', state: 'APPROVED' });
  r = await get('/repos/octo/demo/pulls/1/reviews');
  assert.deepEqual(r.json.map((x) => x.state), ['CHANGES_REQUESTED', 'APPROVED']);
  r = await control('POST', '/reviews', { number: 1, user: 'alice', state: 'LGTM' });
  assert.equal(r.status, 400);

  // A review created through the API is the authenticated user's, with its line comments.
  const sha = bare('rev-parse', 'refs/heads/demo/fix');
  r = await call('POST', '/repos/octo/demo/pulls/1/reviews', {
    body: { commit_id: sha, event: 'REQUEST_CHANGES', body: 'From the API', comments: [{ path: 'a.txt', line: 3, side: 'RIGHT', body: 'Rename' }] },
  });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.state, 'CHANGES_REQUESTED');
  assert.equal(r.json.user.login, OWNER);
  assert.equal(r.json.commit_id, sha);
  const id = r.json.id;
  r = await get('/repos/octo/demo/pulls/1/comments?per_page=100');
  const mine = r.json.filter((c) => c.pull_request_review_id === id);
  assert.deepEqual(mine.map((c) => [c.path, c.line, c.body]), [['a.txt', 3, 'Rename']]);
  r = await call('POST', '/repos/octo/demo/pulls/1/reviews', { body: { event: 'REQUEST_CHANGES' } });
  assert.equal(r.status, 422, r.text);
  r = await call('POST', '/repos/octo/demo/pulls/1/reviews', { body: { event: 'APPROVE' } });
  assert.equal(r.status, 200, r.text);
  r = await get('/repos/octo/demo/pulls/1/reviews');
  assert.deepEqual(r.json.map((x) => x.state), ['CHANGES_REQUESTED', 'APPROVED', 'CHANGES_REQUESTED', 'APPROVED']);
});

test('issues, and the issue side of a pull request', async () => {
  let r = await control('POST', '/issues', { title: 'Login loops', body: 'Steps: ...' });
  assert.equal(r.status, 201);
  const n = r.json.issue.number;
  r = await get(`/repos/octo/demo/issues/${n}`);
  assert.equal(r.status, 200);
  assert.equal(r.json.title, 'Login loops');
  assert.equal(r.json.body, 'Steps: ...');
  assert.equal(r.json.html_url, `https://github.com/octo/demo/issues/${n}`);
  assert.equal(r.json.pull_request, undefined);
  r = await get('/repos/octo/demo/issues/1');
  assert.equal(r.json.pull_request.html_url, 'https://github.com/octo/demo/pull/1');

  r = await control('POST', '/issues', { title: 'Labelled', labels: ['bug', 'login'] });
  const m = r.json.issue.number;
  r = await get(`/repos/octo/demo/issues/${m}`);
  assert.deepEqual(r.json.labels.map((l) => l.name), ['bug', 'login']);
  const etag = r.headers.get('etag');
  assert.equal((await get(`/repos/octo/demo/issues/${m}`, { headers: { 'If-None-Match': etag } })).status, 304);
  r = await control('POST', `/issues/${m}/close`);
  assert.equal(r.status, 200, r.text);
  r = await get(`/repos/octo/demo/issues/${m}`, { headers: { 'If-None-Match': etag } });
  assert.equal(r.status, 200, 'a closed issue is a change');
  assert.deepEqual([r.json.state, r.json.state_reason], ['closed', 'completed']);
  assert.ok(r.json.closed_at);
  r = await control('POST', `/issues/${m}/reopen`);
  assert.equal(r.json.issue.state, 'open');
  assert.equal((await control('POST', '/issues/999/close')).status, 404);
});

test('listing issues: labels (all must match), state, pull requests included, pages, ETag', async () => {
  const made = [];
  for (const [title, labels] of [['Crash on start', ['agent', 'bug']], ['Docs typo', ['docs']], ['Slow query', ['agent']], ['Agent and docs', ['Agent', 'docs']]]) {
    const r = await control('POST', '/issues', { title, labels, body: `about ${title}` });
    assert.equal(r.status, 201, r.text);
    made.push(r.json.issue.number);
  }
  let r = await get('/repos/octo/demo/issues?labels=agent&state=open&per_page=100');
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.map((i) => i.number), [made[3], made[2], made[0]], 'newest first; label names match without case');
  r = await get('/repos/octo/demo/issues?labels=agent,docs&direction=asc');
  assert.deepEqual(r.json.map((i) => i.number), [made[3]], 'every label must match');
  r = await get('/repos/octo/demo/issues?labels=agent, bug&sort=created&direction=asc');
  assert.deepEqual(r.json.map((i) => i.title), ['Crash on start']);

  // Pull requests are in the list, with a `pull_request` key.
  r = await get('/repos/octo/demo/issues?state=all&per_page=100');
  const pulls = r.json.filter((i) => i.pull_request);
  assert.ok(pulls.length >= 1);
  assert.ok(pulls.every((i) => /\/pull\/\d+$/.test(i.html_url)));
  assert.ok(r.json.some((i) => !i.pull_request));

  // Pages with a Link header.
  r = await get('/repos/octo/demo/issues?state=all&per_page=2&direction=asc');
  assert.equal(r.json.length, 2);
  assert.match(r.headers.get('link'), /[?&]page=2>; rel="next"/);
  const last = Number(/[?&]page=(\d+)>; rel="last"/.exec(r.headers.get('link'))[1]);
  const seen = [];
  for (let page = 1; page <= last; page++) seen.push(...(await get(`/repos/octo/demo/issues?state=all&per_page=2&direction=asc&page=${page}`)).json.map((i) => i.number));
  assert.equal(new Set(seen).size, seen.length, 'no item on two pages');
  assert.deepEqual(seen, [...seen].sort((a, b) => a - b));

  // Conditional: unchanged → 304 (not counted); a closed issue changes the open list.
  r = await get('/repos/octo/demo/issues?labels=agent');
  const etag = r.headers.get('etag');
  const remaining = Number(r.headers.get('x-ratelimit-remaining'));
  const again = await get('/repos/octo/demo/issues?labels=agent', { headers: { 'If-None-Match': etag } });
  assert.equal(again.status, 304);
  assert.equal(Number(again.headers.get('x-ratelimit-remaining')), remaining);
  await control('POST', `/issues/${made[2]}/close`, {});
  r = await get('/repos/octo/demo/issues?labels=agent', { headers: { 'If-None-Match': etag } });
  assert.equal(r.status, 200);
  assert.deepEqual(r.json.map((i) => i.number), [made[3], made[0]]);
  r = await get('/repos/octo/demo/issues?labels=agent&state=closed');
  assert.deepEqual(r.json.map((i) => [i.number, i.state, i.closed_by.login]), [[made[2], 'closed', OWNER]]);

  r = await get('/repos/octo/demo/issues?state=bogus');
  assert.equal(r.status, 422);
  r = await get('/repos/octo/demo/issues?assignee=*');
  assert.deepEqual(r.json, [], 'nobody is assigned in the stand-in');
  r = await get('/repos/octo/demo/issues?creator=nobody');
  assert.deepEqual(r.json, []);
});

test('labels and the issues webhooks: opened, labeled, unlabeled, closed, reopened', async () => {
  const since = hooks.length;
  let r = await control('POST', '/issues', { title: 'Hooked', labels: ['triage'], user: 'alice' });
  assert.equal(r.status, 201, r.text);
  const n = r.json.issue.number;
  assert.deepEqual(r.json.deliveries.map((d) => `${d.event}.${d.action}.${d.status}`), ['issues.opened.204', 'issues.labeled.204']);
  r = await control('POST', `/issues/${n}/labels`, { labels: ['agent', 'triage'], user: 'bob' });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.labels, ['triage', 'agent']);
  assert.deepEqual(r.json.deliveries.map((d) => `${d.event}.${d.action}`), ['issues.labeled'], 'a label already there is no event');
  r = await control('DELETE', `/issues/${n}/labels/triage`);
  assert.deepEqual(r.json.labels, ['agent']);
  assert.deepEqual(r.json.deliveries.map((d) => `${d.event}.${d.action}`), ['issues.unlabeled']);
  assert.equal((await control('DELETE', `/issues/${n}/labels/triage`)).status, 404);
  assert.equal((await control('POST', `/issues/${n}/labels`, { labels: [] })).status, 400);
  assert.equal((await control('POST', '/issues/999/labels', { labels: ['x'] })).status, 404);
  r = await control('POST', `/issues/${n}/close`, { user: 'carol' });
  assert.deepEqual(r.json.deliveries.map((d) => `${d.event}.${d.action}`), ['issues.closed']);
  r = await control('POST', `/issues/${n}/close`, {});
  assert.deepEqual(r.json.deliveries, [], 'closing a closed issue is no event');
  r = await control('POST', `/issues/${n}/reopen`, {});
  assert.deepEqual(r.json.deliveries.map((d) => `${d.event}.${d.action}`), ['issues.reopened']);

  const got = await waitHooks((h) => hooks.indexOf(h) >= since && h.event === 'issues', 6);
  assert.deepEqual(got.map((h) => h.json.action), ['opened', 'labeled', 'labeled', 'unlabeled', 'closed', 'reopened']);
  assert.deepEqual(got.map((h) => h.json.issue.number), Array(6).fill(n));
  assert.deepEqual(got.map((h) => h.json.label?.name ?? null), [null, 'triage', 'agent', 'triage', null, null]);
  assert.deepEqual(got[2].json.issue.labels.map((l) => l.name), ['triage', 'agent'], 'the issue as it is after the change');
  assert.deepEqual(got.map((h) => h.json.sender.login), ['alice', 'alice', 'bob', OWNER, 'carol', OWNER]);
  assert.equal(got[4].json.issue.state, 'closed');
  assert.equal(got[4].json.issue.closed_by.login, 'carol');
  assert.equal(got[5].json.issue.state, 'open');
  assert.equal(got[0].json.issue.html_url, `https://github.com/octo/demo/issues/${n}`);
});

test('pagination with Link headers', async () => {
  for (let i = 0; i < 25; i++) await control('POST', '/statuses', { branch: 'demo/rebase', context: `ctx-${i}`, state: 'success' });
  let r = await get('/repos/octo/demo/commits/demo/rebase/status?per_page=10');
  assert.equal(r.json.statuses.length, 10);
  assert.equal(r.json.total_count, 25);
  const link = r.headers.get('link');
  assert.match(link, /[?&]page=2>; rel="next"/);
  assert.match(link, /[?&]page=3>; rel="last"/);
  const next = /<([^>]+)>; rel="next"/.exec(link)[1];
  assert.ok(next.startsWith(base));
  r = await get('/repos/octo/demo/commits/demo/rebase/status?per_page=10&page=3');
  assert.equal(r.json.statuses.length, 5);
  assert.match(r.headers.get('link'), /rel="prev"/);
  assert.doesNotMatch(r.headers.get('link'), /rel="next"/);
  r = await get('/repos/octo/demo/pulls?per_page=100');
  assert.equal(r.headers.get('link'), null);
});

test('injected faults: 502, secondary and primary rate limits, per route', async () => {
  let r = await control('POST', '/faults', { status: 502, count: 2 });
  assert.equal(r.status, 201);
  assert.equal((await get('/repos/octo/demo/pulls/1')).status, 502);
  assert.equal((await get('/repos/octo/demo')).status, 502);
  assert.equal((await get('/repos/octo/demo/pulls/1')).status, 200);

  await control('POST', '/faults', { status: 429, headers: { 'Retry-After': '2' } });
  r = await get('/repos/octo/demo/pulls/1');
  assert.equal(r.status, 429);
  assert.equal(r.headers.get('retry-after'), '2');
  assert.match(r.json.message, /secondary rate limit/);

  await control('POST', '/faults', { status: 403, headers: { 'X-RateLimit-Remaining': '0' }, resetIn: 60 });
  r = await get('/repos/octo/demo/pulls/1');
  assert.equal(r.status, 403);
  assert.equal(r.headers.get('x-ratelimit-remaining'), '0');
  const reset = Number(r.headers.get('x-ratelimit-reset'));
  assert.ok(reset > Date.now() / 1000 + 50 && reset < Date.now() / 1000 + 70);
  assert.match(r.json.message, /API rate limit exceeded/);

  await control('POST', '/faults', { status: 503, route: 'GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews' });
  assert.equal((await get('/repos/octo/demo/pulls/1')).status, 200);
  assert.equal((await get('/repos/octo/demo/pulls/1/reviews')).status, 503);
  assert.equal((await get('/repos/octo/demo/pulls/1/reviews')).status, 200);
  assert.deepEqual((await control('GET', '/faults')).json.faults, []);

  // Without a status a fault only delays: the request is then answered for real.
  r = await control('POST', '/faults', { delayMs: 300, route: 'GET /repos/{owner}/{repo}' });
  assert.equal(r.status, 201);
  const t0 = Date.now();
  r = await get('/repos/octo/demo');
  assert.equal(r.status, 200);
  assert.equal(r.json.full_name, 'octo/demo');
  assert.ok(Date.now() - t0 >= 290, 'the request waited for the delay');
  assert.equal((await control('POST', '/faults', {})).status, 400);

  // The stand-in's own budget: exhausted means 403 until the reset.
  const saved = (await control('GET', '/rate-limit')).json.rate;
  await control('POST', '/rate-limit', { remaining: 0 });
  r = await get('/repos/octo/demo');
  assert.equal(r.status, 403);
  assert.equal(r.headers.get('x-ratelimit-remaining'), '0');
  assert.equal((await get('/rate_limit')).status, 200);
  await control('POST', '/rate-limit', { remaining: saved.remaining });
  assert.equal((await get('/repos/octo/demo')).status, 200);
});

test('a response that does not match the schema is caught: 500 and stderr', async () => {
  let r = await control('POST', '/corrupt', { route: 'GET /repos/{owner}/{repo}/pulls/{pull_number}', delete: ['head.sha'], set: { number: 'one' } });
  assert.equal(r.status, 201);
  r = await get('/repos/octo/demo/pulls/1');
  assert.equal(r.status, 500);
  assert.match(r.json.message, /does not validate/);
  const paths = r.json.errors.map((e) => `${e.path} ${e.message}`).join('\n');
  assert.match(paths, /\/head must have required property 'sha'/);
  assert.match(paths, /\/number must be integer/);
  await new Promise((res) => setTimeout(res, 50));
  assert.match(stderr, /BUG: invalid response/);
  assert.equal((await get('/repos/octo/demo/pulls/1')).status, 200, 'only the next response is corrupted');
  assert.equal((await control('GET', '/bugs')).json.bugs.length, 1);
});

test('the validator itself rejects a broken object (in process)', () => {
  const { Description } = require('../lib/openapi');
  const { OPERATIONS } = require('../lib/standin');
  const d = new Description({ operations: OPERATIONS.filter(([m, p]) => p === '/repos/{owner}/{repo}/pulls/{pull_number}') });
  const op = d.ops.get('GET /repos/{owner}/{repo}/pulls/{pull_number}');
  assert.ok(d.validateResponse(op, 200, {}).some((e) => e.message.includes("required property 'head'")));
  assert.ok(d.validateResponse(op, 404, { message: 'Not Found' }).length === 0);
  assert.ok(d.validateResponse(op, 201, {}).length > 0, 'undocumented success status');
  // OpenAPI `nullable` is honoured: a null where the description allows it, not elsewhere.
  const good = { message: 'x', documentation_url: 'y' };
  assert.equal(d.check('schema__basic-error', good).length, 0);
});

test('mergeable override, and a real conflict computed by git', async () => {
  let r = await control('POST', '/pulls/1/mergeable', { mergeable: false });
  assert.equal(r.status, 200);
  assert.equal(r.json.pullRequest.mergeable, false);
  assert.equal(r.json.pullRequest.mergeable_state, 'dirty');
  r = await call('PUT', '/repos/octo/demo/pulls/1/merge', { body: { merge_method: 'merge' } });
  assert.equal(r.status, 405);
  assert.equal(r.json.message, 'Pull Request is not mergeable');
  r = await control('POST', '/pulls/1/mergeable', { mergeable: null });
  assert.equal(r.json.pullRequest.mergeable, null);
  assert.equal(r.json.pullRequest.mergeable_state, 'unknown');
  r = await control('DELETE', '/pulls/1/mergeable');
  assert.equal(r.json.pullRequest.mergeable, true);

  r = await call('POST', '/repos/octo/demo/pulls', { body: { title: 'Beta', head: 'demo/conflict', base: 'main' } });
  assert.equal(r.status, 201);
  const conflictNumber = r.json.number;
  commitFile('main', 'b.txt', 'gamma\n', 'Gamma on main');
  r = await get(`/repos/octo/demo/pulls/${conflictNumber}`);
  assert.equal(r.json.mergeable, false);
  assert.equal(r.json.mergeable_state, 'dirty');
  r = await call('PUT', `/repos/octo/demo/pulls/${conflictNumber}/merge`, { body: {} });
  assert.equal(r.status, 405);
});

test('merge for real: 409 on a stale sha, then a merge commit on the base branch', async () => {
  const head = bare('rev-parse', 'refs/heads/demo/fix');
  const mainBefore = bare('rev-parse', 'refs/heads/main');
  let r = await call('PUT', '/repos/octo/demo/pulls/1/merge', { body: { merge_method: 'merge', sha: '0'.repeat(40) } });
  assert.equal(r.status, 409);
  assert.match(r.json.message, /Head branch was modified/);
  r = await call('PUT', '/repos/octo/demo/pulls/1/merge', { body: { merge_method: 'merge', sha: head } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.merged, true);
  const mainAfter = bare('rev-parse', 'refs/heads/main');
  assert.equal(r.json.sha, mainAfter);
  assert.deepEqual(bare('rev-list', '--parents', '-n', '1', mainAfter).split(' ').slice(1), [mainBefore, head]);
  assert.match(bare('log', '-1', '--format=%s', mainAfter), /^Merge pull request #1 from octo\/demo\/fix$/);
  assert.equal(bare('show', `${mainAfter}:a.txt`), 'one\ntwo\nTHREE\nfour\nFIVE');
  assert.equal(bare('show', `${mainAfter}:b.txt`), 'gamma', 'the earlier main commit is kept');

  r = await get('/repos/octo/demo/pulls/1');
  assert.equal(r.json.state, 'closed');
  assert.equal(r.json.merged, true);
  assert.equal(r.json.merge_commit_sha, mainAfter);
  assert.equal(r.json.merged_by.login, OWNER);
  assert.ok(r.json.merged_at);
  const [hook] = await waitHooks((h) => h.event === 'pull_request' && h.json.action === 'closed' && h.json.number === 1);
  assert.equal(hook.json.pull_request.merged, true);

  r = await call('PUT', '/repos/octo/demo/pulls/1/merge', { body: {} });
  assert.equal(r.status, 405);
  r = await get('/repos/octo/demo/pulls?head=octo:demo/fix&state=all');
  assert.equal(r.json[0].state, 'closed');
  assert.ok(r.json[0].merged_at);
});

test('squash and rebase merges', async () => {
  let r = await call('POST', '/repos/octo/demo/pulls', { body: { title: 'Add c', head: 'demo/squash', base: 'main' } });
  const squash = r.json.number;
  const before = bare('rev-parse', 'refs/heads/main');
  r = await call('PUT', `/repos/octo/demo/pulls/${squash}/merge`, { body: { merge_method: 'squash' } });
  assert.equal(r.status, 200, r.text);
  const after = bare('rev-parse', 'refs/heads/main');
  assert.deepEqual(bare('rev-list', '--parents', '-n', '1', after).split(' ').slice(1), [before]);
  assert.equal(bare('log', '-1', '--format=%s', after), `Add c (#${squash})`);
  assert.equal(bare('show', `${after}:c.txt`), 'c1\nc2');

  r = await call('POST', '/repos/octo/demo/pulls', { body: { title: 'Add d', head: 'demo/rebase', base: 'main' } });
  const rebase = r.json.number;
  r = await call('PUT', `/repos/octo/demo/pulls/${rebase}/merge`, { body: { merge_method: 'rebase' } });
  assert.equal(r.status, 200, r.text);
  const rebased = bare('rev-parse', 'refs/heads/main');
  assert.equal(bare('log', '-1', '--format=%s %an', rebased), 'Add d Agent');
  assert.deepEqual(bare('rev-list', '--parents', '-n', '1', rebased).split(' ').slice(1), [after]);
  assert.equal(bare('show', `${rebased}:d.txt`), 'd');
});

test('close and reopen through the control API and PATCH', async () => {
  let r = await call('POST', '/repos/octo/demo/pulls', { body: { title: 'Add e', head: 'demo/close', base: 'main', draft: true } });
  const n = r.json.number;
  assert.equal(r.json.draft, true);
  assert.equal(r.json.mergeable_state, 'draft');
  r = await control('POST', `/pulls/${n}/close`, {});
  assert.equal(r.status, 200);
  assert.equal(r.json.pullRequest.state, 'closed');
  assert.equal(r.json.pullRequest.merged, false);
  assert.deepEqual(r.json.deliveries.map((d) => `${d.event}.${d.action}.${d.status}`), ['pull_request.closed.204']);
  r = await control('POST', `/pulls/${n}/reopen`, {});
  assert.equal(r.json.pullRequest.state, 'open');
  r = await call('PATCH', `/repos/octo/demo/pulls/${n}`, { body: { state: 'closed', title: 'Add e (dropped)' } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.state, 'closed');
  assert.equal(r.json.title, 'Add e (dropped)');
  r = await get(`/repos/octo/demo/pulls?state=closed&head=octo:demo/close`);
  assert.equal(r.json.length, 1);
});

test('webhook deliveries are signed with the secret (X-Hub-Signature-256)', async () => {
  const { sign } = require('../lib/webhooks');
  // GitHub's documented test vector.
  assert.equal(sign("It's a Secret to Everybody", 'Hello, World!'), 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17');
  assert.ok(hooks.length >= 10);
  for (const h of hooks) {
    const expected = `sha256=${crypto.createHmac('sha256', SECRET).update(h.raw).digest('hex')}`;
    assert.equal(h.headers['x-hub-signature-256'], expected);
    assert.match(h.headers['x-github-delivery'], /^[0-9a-f-]{36}$/);
    assert.equal(h.headers['content-type'], 'application/json');
    assert.equal(h.json.repository.full_name, REPO);
    assert.ok(h.json.sender.login);
  }
  const events = new Set(hooks.map((h) => `${h.event}.${h.json.action ?? ''}`));
  for (const e of ['pull_request.opened', 'pull_request.synchronize', 'pull_request.closed', 'pull_request.reopened', 'check_run.created', 'check_run.completed', 'status.', 'pull_request_review.submitted', 'pull_request_review_comment.created', 'issues.opened', 'issues.labeled', 'issues.unlabeled', 'issues.closed', 'issues.reopened', 'push.']) {
    assert.ok(events.has(e), `received ${e}`);
  }
  const r = await control('GET', '/webhooks');
  assert.ok(r.json.deliveries.every((d) => !d.invalid), 'every payload validated against the description');
});

test('request counts by route, full state, refresh', async () => {
  let r = await control('GET', '/requests');
  assert.equal(r.status, 200);
  const pull = r.json.byRoute['GET /repos/{owner}/{repo}/pulls/{pull_number}'];
  assert.ok(pull.total >= 10);
  assert.ok(pull.byStatus['304'] >= 1);
  assert.ok(pull.byStatus['502'] >= 1);
  assert.ok(r.json.byRoute['GET /repos/{owner}/{repo}/branches'].byStatus['404'] >= 1);
  assert.ok(r.json.total > r.json.counted);

  await control('POST', '/refresh', {});
  const newHead = commitFile('demo/conflict', 'b.txt', 'gamma\n', 'Resolve');
  r = await control('POST', '/refresh', {});
  assert.equal(r.status, 200);
  assert.equal(r.json.synchronized.length, 1);
  assert.equal(r.json.synchronized[0].after, newHead);
  assert.deepEqual(r.json.deliveries.map((d) => `${d.event}.${d.action}`), ['push.null', 'pull_request.synchronize']);

  r = await control('GET', '/state');
  assert.equal(r.status, 200);
  const repo = r.json.repos[0];
  assert.equal(repo.fullName, REPO);
  assert.equal(repo.pulls.find((p) => p.number === 1).merged, true);
  const conflict = repo.pulls.find((p) => p.head.ref === 'demo/conflict');
  assert.equal(conflict.head.sha, newHead);
  assert.equal(conflict.mergeable, true, 'resolved on the branch');
  assert.ok(repo.checkRuns.length >= 3);
  assert.equal(r.json.bugs.length, 1, 'only the deliberate corruption');

  r = await control('DELETE', '/requests');
  assert.equal(r.json.total, 0);
  r = await control('GET', '/nope');
  assert.equal(r.status, 404);
  assert.ok(r.json.routes.length > 5);
});

test('push deliveries when a branch moves, appears or goes', async () => {
  await control('POST', '/refresh', {});
  const since = hooks.length;
  git(work, 'branch', 'demo/pushed', 'main');
  const first = commitFile('demo/pushed', 'p.txt', 'p\n', 'Add p');
  let r = await control('POST', '/refresh', {});
  assert.deepEqual(r.json.deliveries.map((d) => `${d.event}.${d.status}`), ['push.204']);
  fs.writeFileSync(path.join(work, 'p.txt'), 'p2\n');
  fs.writeFileSync(path.join(work, 'q.txt'), 'q\n');
  git(work, 'rm', '-q', 'b.txt');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'Change p, add q, drop b');
  git(work, 'push', '-q', 'origin', 'demo/pushed');
  const second = git(work, 'rev-parse', 'HEAD');
  r = await control('POST', '/refresh', {});
  assert.deepEqual(r.json.deliveries.map((d) => d.event), ['push']);
  r = await control('POST', '/refresh', {});
  assert.deepEqual(r.json.deliveries, [], 'nothing moved');
  git(work, 'push', '-q', 'origin', '--force', `${first}:refs/heads/demo/pushed`);
  await control('POST', '/refresh', {});
  git(work, 'push', '-q', 'origin', '--delete', 'demo/pushed');
  await control('POST', '/refresh', {});

  const got = await waitHooks((h) => hooks.indexOf(h) >= since && h.event === 'push', 4);
  const [created, moved, forced, deleted] = got.map((h) => h.json);
  assert.deepEqual([created.ref, created.created, created.deleted, created.forced, created.before], ['refs/heads/demo/pushed', true, false, false, '0'.repeat(40)]);
  assert.deepEqual(created.commits.map((c) => [c.id, c.message, c.added]), [[first, 'Add p', ['p.txt']]]);
  assert.equal(created.head_commit.id, first);
  assert.deepEqual([moved.before, moved.after, moved.created, moved.forced], [first, second, false, false]);
  assert.deepEqual(moved.commits.map((c) => [c.added, c.removed, c.modified]), [[['q.txt'], ['b.txt'], ['p.txt']]]);
  assert.match(moved.compare, /\/compare\/[0-9a-f]{12}\.\.\.[0-9a-f]{12}$/);
  assert.deepEqual([forced.before, forced.after, forced.forced, forced.commits.length], [second, first, true, 0]);
  assert.deepEqual([deleted.deleted, deleted.after, deleted.head_commit, deleted.commits], [true, '0'.repeat(40), null, []]);
  for (const p of got) {
    assert.equal(p.json.repository.clone_url, 'https://github.com/octo/demo.git');
    assert.equal(p.json.repository.html_url, 'https://github.com/octo/demo');
    assert.equal(p.json.repository.ssh_url, 'git@github.com:octo/demo.git');
    assert.equal(p.json.repository.git_url, 'git://github.com/octo/demo.git');
    assert.equal(typeof p.json.repository.pushed_at, 'number');
    assert.equal(p.json.pusher.name, OWNER);
  }
});

test('a pull request merged into the default branch closes the issues its body names', async () => {
  const a = (await control('POST', '/issues', { title: 'Closed by keyword', labels: ['agent'] })).json.issue.number;
  const b = (await control('POST', '/issues', { title: 'Also closed' })).json.issue.number;
  const c = (await control('POST', '/issues', { title: 'Only mentioned' })).json.issue.number;
  const d = (await control('POST', '/issues', { title: 'Other repository' })).json.issue.number;
  git(work, 'fetch', '-q', 'origin');
  git(work, 'checkout', '-q', '-b', 'demo/closes', 'origin/main');
  git(work, 'push', '-q', 'origin', 'demo/closes');
  commitFile('demo/closes', 'closes.txt', 'x\n', 'Work for the issues');
  let r = await call('POST', '/repos/octo/demo/pulls', {
    body: { title: 'Fix several', head: 'demo/closes', base: 'main', body: `Closes #${a}, and it RESOLVES: octo/demo#${b}.\nSee #${c}; fixes other/repo#${d}` },
  });
  assert.equal(r.status, 201, r.text);
  const number = r.json.number;
  const since = hooks.length;
  const mainBefore = bare('rev-parse', 'refs/heads/main');
  r = await control('POST', `/pulls/${number}/merge`, { user: 'dave' });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.deliveries.map((x) => `${x.event}.${x.action ?? ''}`), ['push.', 'pull_request.closed', 'issues.closed', 'issues.closed']);
  const states = Object.fromEntries((await get('/repos/octo/demo/issues?state=all&per_page=100')).json.map((i) => [i.number, i.state]));
  assert.deepEqual([states[a], states[b], states[c], states[d]], ['closed', 'closed', 'open', 'open']);
  r = await get(`/repos/octo/demo/issues/${a}`);
  assert.equal(r.json.closed_by.login, 'dave');
  assert.equal(r.json.state_reason, 'completed');
  const got = await waitHooks((h) => hooks.indexOf(h) >= since && (h.event === 'issues' || h.event === 'push'), 3);
  const push = got.find((h) => h.event === 'push').json;
  assert.deepEqual([push.ref, push.before, push.after], ['refs/heads/main', mainBefore, bare('rev-parse', 'refs/heads/main')]);
  assert.equal(push.pusher.name, 'dave');
  assert.deepEqual(got.filter((h) => h.event === 'issues').map((h) => [h.json.action, h.json.issue.number, h.json.sender.login]), [['closed', a, 'dave'], ['closed', b, 'dave']]);
});
