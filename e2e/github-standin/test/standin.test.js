'use strict';
// Self-test: starts server.js on a temporary bare repository and exercises every GitHub route,
// the GraphQL endpoint, the control API, identities, conditional GETs, primary and secondary
// rate limits, faults, validation, real merges and signed webhooks.

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
const REVIEWER_TOKEN = 'ghp_standinReviewerToken0123456';
const REVIEWER = 'review-bot';
const BURST_TOKEN = 'ghp_standinBurstToken012345678';
const BURST = 'burst-bot';
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

// The description and GraphQL schema for the in-process tests, loaded once.
let inProcess;
function inProcessApis() {
  if (!inProcess) {
    const { Description } = require('../lib/openapi');
    const { GraphQLApi } = require('../lib/graphql');
    const { OPERATIONS } = require('../lib/standin');
    const keep = ['/repos/{owner}/{repo}/pulls/{pull_number}', '/repos/{owner}/{repo}', '/user'];
    inProcess = { description: new Description({ operations: OPERATIONS.filter(([, p]) => keep.includes(p)) }), graphql: new GraphQLApi() };
  }
  return inProcess;
}
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
  child = spawn(process.execPath, [SERVER, '--port', '0', '--repo', REPO, '--git-dir', origin, '--token', TOKEN, '--identity', `${REVIEWER_TOKEN}=${REVIEWER}`, `--identity=${BURST_TOKEN}=${BURST}`, '--webhook-url', hookUrl, '--webhook-secret', SECRET], {
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
  // The first read of a new pull request starts GitHub's mergeability job (mergeable null); the
  // reads below see the computed value.
  await get('/repos/octo/demo/pulls/1');
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

  // A review created through the API is the authenticated user's (here the reviewer identity:
  // the author may not approve or request changes), with its line comments.
  const sha = bare('rev-parse', 'refs/heads/demo/fix');
  const asReviewer = { auth: `Bearer ${REVIEWER_TOKEN}` };
  r = await call('POST', '/repos/octo/demo/pulls/1/reviews', {
    ...asReviewer,
    body: { commit_id: sha, event: 'REQUEST_CHANGES', body: 'From the API', comments: [{ path: 'a.txt', line: 3, side: 'RIGHT', body: 'Rename' }] },
  });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.state, 'CHANGES_REQUESTED');
  assert.equal(r.json.user.login, REVIEWER);
  assert.equal(r.json.commit_id, sha);
  const id = r.json.id;
  r = await get('/repos/octo/demo/pulls/1/comments?per_page=100');
  const mine = r.json.filter((c) => c.pull_request_review_id === id);
  assert.deepEqual(mine.map((c) => [c.path, c.line, c.body]), [['a.txt', 3, 'Rename']]);
  r = await call('POST', '/repos/octo/demo/pulls/1/reviews', { ...asReviewer, body: { event: 'REQUEST_CHANGES' } });
  assert.equal(r.status, 422, r.text);
  assert.deepEqual(r.json.errors, ['Body is required for REQUEST_CHANGES event']);
  r = await call('POST', '/repos/octo/demo/pulls/1/reviews', { ...asReviewer, body: { event: 'APPROVE' } });
  assert.equal(r.status, 200, r.text);
  r = await get('/repos/octo/demo/pulls/1/reviews');
  assert.deepEqual(r.json.map((x) => x.state), ['CHANGES_REQUESTED', 'APPROVED', 'CHANGES_REQUESTED', 'APPROVED']);
});

test('author_association: OWNER, COLLABORATOR once invited, NONE for anyone else', async () => {
  let r = await control('POST', '/reviews', { number: 1, user: 'drive-by', state: 'COMMENTED', body: 'run this', comments: [{ path: 'a.txt', line: 3, body: 'and this' }] });
  assert.equal(r.status, 201, r.text);
  assert.equal(r.json.review.author_association, 'NONE');
  const reviews = async () => (await get('/repos/octo/demo/pulls/1/reviews?per_page=100')).json.filter((x) => x.user.login === 'drive-by');
  const comments = async () => (await get('/repos/octo/demo/pulls/1/comments?per_page=100')).json.filter((x) => x.user.login === 'drive-by');
  assert.deepEqual((await reviews()).map((x) => x.author_association), ['NONE']);
  assert.deepEqual((await comments()).map((x) => x.author_association), ['NONE']);
  assert.equal((await get('/repos/octo/demo/pulls/1')).json.author_association, 'OWNER');
  r = await control('POST', '/collaborators', { login: 'Drive-By' });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual((await reviews()).map((x) => x.author_association), ['COLLABORATOR']);
  assert.deepEqual((await comments()).map((x) => x.author_association), ['COLLABORATOR']);
  r = await control('DELETE', '/collaborators', { login: 'drive-by' });
  assert.deepEqual((await reviews()).map((x) => x.author_association), ['NONE']);
  assert.equal((await control('POST', '/collaborators', { login: 'a b' })).status, 400);
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

test("an issue's label events name who applied each label; a user's permission follows their association", async () => {
  let r = await control('POST', '/issues', { title: 'From a form', labels: ['agent'], user: 'outsider' });
  const n = r.json.issue.number;
  assert.equal(r.json.issue.author_association, 'NONE');
  await control('DELETE', `/issues/${n}/labels/agent`, { user: OWNER });
  await control('POST', `/issues/${n}/labels`, { labels: ['agent'], user: OWNER });
  r = await get(`/repos/octo/demo/issues/${n}/events`);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.map((e) => [e.event, e.label.name, e.actor.login]), [['labeled', 'agent', 'outsider'], ['unlabeled', 'agent', OWNER], ['labeled', 'agent', OWNER]]);
  assert.equal((await get('/repos/octo/demo/issues/9999/events')).status, 404);

  const permission = async (login) => (await get(`/repos/octo/demo/collaborators/${login}/permission`)).json;
  assert.deepEqual([(await permission(OWNER)).permission, (await permission('outsider')).permission], ['admin', 'read']);
  assert.equal((await permission('outsider')).user.login, 'outsider');
  await control('POST', '/collaborators', { login: 'outsider' });
  const p = await permission('outsider');
  assert.deepEqual([p.permission, p.role_name, p.user.login], ['write', 'write', 'outsider']);
  await control('DELETE', '/collaborators', { login: 'outsider' });
  // Only someone who may push asks: the reviewer's identity is no collaborator here.
  r = await get(`/repos/octo/demo/collaborators/${OWNER}/permission`, { auth: `Bearer ${REVIEWER_TOKEN}` });
  assert.equal(r.status, 403, r.text);
  assert.equal(r.json.message, 'Must have push access to view collaborator permission.');
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
  const d = inProcessApis().description;
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
  assert.equal(r.json.mergeable, null, 'the first read after the base moved starts the job');
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
  assert.equal(r.json.mergeable_state, 'unknown', 'not computed yet when created');
  await get(`/repos/octo/demo/pulls/${n}`);
  assert.equal((await get(`/repos/octo/demo/pulls/${n}`)).json.mergeable_state, 'draft');
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

// ---------------------------------------------------------------- identities, limits, GraphQL

const asReviewer = { auth: `Bearer ${REVIEWER_TOKEN}` };
const asBurst = { auth: `Bearer ${BURST_TOKEN}` };

// A GraphQL call (POST /graphql) as `token`.
function gql(query, variables, { token = TOKEN, at = '/graphql' } = {}) {
  return call('POST', at, { body: variables === undefined ? { query } : { query, variables }, auth: token ? `Bearer ${token}` : null });
}

// The query aoctl's client sends, verbatim.
const OPEN_PULLS = `query OpenPulls($owner: String!, $name: String!, $first: Int!, $after: String) {
  rateLimit { cost limit remaining resetAt }
  repository(owner: $owner, name: $name) {
    pullRequests(states: OPEN, first: $first, after: $after, orderBy: {field: CREATED_AT, direction: ASC}) {
      pageInfo { hasNextPage endCursor }
      nodes {
        number
        headRefName
        headRefOid
        baseRefOid
        isDraft
        mergeable
        updatedAt
        author { login }
        commits(last: 1) {
          nodes {
            commit {
              oid
              statusCheckRollup {
                state
                contexts(first: 100) {
                  nodes {
                    __typename
                    ... on CheckRun { databaseId name status conclusion }
                    ... on StatusContext { context state }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}`;

// A new branch off the current main with one commit.
function branchWithCommit(branch, file) {
  git(work, 'fetch', '-q', 'origin');
  git(work, 'checkout', '-q', '-B', branch, 'origin/main');
  git(work, 'push', '-q', 'origin', branch);
  return commitFile(branch, file, `${file}\n`, `Add ${file}`);
}

let reviewerPull;
test('identities: --identity tokens authenticate as their login; GET /user with ETag; pull requests authored by their creator', async () => {
  let r = await get('/user');
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.login, OWNER);
  assert.equal(r.json.two_factor_authentication, true, 'the private profile of the authenticated user');
  const etag = r.headers.get('etag');
  const used = Number(r.headers.get('x-ratelimit-used'));
  r = await get('/user', { headers: { 'If-None-Match': etag } });
  assert.equal(r.status, 304);
  assert.equal(Number(r.headers.get('x-ratelimit-used')), used, 'a 304 is not counted');
  r = await get('/user', asReviewer);
  assert.equal(r.json.login, REVIEWER);
  assert.notEqual(r.headers.get('etag'), etag);
  const reviewerUsed = Number(r.headers.get('x-ratelimit-used'));
  assert.ok(reviewerUsed < used, 'each identity has its own budget');
  assert.equal((await get('/user', { auth: 'Bearer nope' })).json.message, 'Bad credentials');
  assert.equal((await get('/user', { auth: null })).status, 401);

  branchWithCommit('demo/by-reviewer', 'reviewer.txt');
  const since = hooks.length;
  r = await call('POST', '/repos/octo/demo/pulls', { ...asReviewer, body: { title: 'From the reviewer bot', head: 'demo/by-reviewer', base: 'main' } });
  assert.equal(r.status, 201, r.text);
  reviewerPull = r.json.number;
  assert.equal(r.json.user.login, REVIEWER);
  const [hook] = await waitHooks((h) => hooks.indexOf(h) >= since && h.event === 'pull_request' && h.json.action === 'opened');
  assert.equal(hook.json.sender.login, REVIEWER);
  assert.equal(hook.json.pull_request.user.login, REVIEWER);

  const bad = require('node:child_process').spawnSync(process.execPath, [SERVER, '--identity', 'no-login-given'], { encoding: 'utf8', timeout: 10000 });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--identity needs TOKEN=LOGIN/);
});

test("self-review: the author may comment on a pull request but not approve it or request changes (GitHub's 422)", async () => {
  const path = `/repos/octo/demo/pulls/${reviewerPull}/reviews`;
  let r = await call('POST', path, { ...asReviewer, body: { event: 'APPROVE' } });
  assert.equal(r.status, 422, r.text);
  assert.equal(r.json.message, 'Unprocessable Entity');
  assert.deepEqual(r.json.errors, ['Can not approve your own pull request']);
  assert.match(r.json.documentation_url, /^https:\/\/docs\.github\.com\/rest\/pulls\/reviews#create-a-review-for-a-pull-request$/);
  r = await call('POST', path, { ...asReviewer, body: { event: 'REQUEST_CHANGES', body: 'Needs work' } });
  assert.equal(r.status, 422, r.text);
  assert.deepEqual(r.json.errors, ['Can not request changes on your own pull request']);
  r = await call('POST', path, { ...asReviewer, body: { event: 'COMMENT', body: 'A note from the author' } });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual([r.json.state, r.json.user.login], ['COMMENTED', REVIEWER]);
  r = await call('POST', path, { body: { event: 'APPROVE' } });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual([r.json.state, r.json.user.login], ['APPROVED', OWNER]);
  r = await get(path);
  assert.deepEqual(r.json.map((x) => [x.state, x.user.login]), [['COMMENTED', REVIEWER], ['APPROVED', OWNER]], 'refused reviews were not created');
  // A person on GitHub's web interface is refused the same way.
  r = await control('POST', '/reviews', { number: reviewerPull, user: REVIEWER, state: 'APPROVED' });
  assert.equal(r.status, 422);
  assert.match(r.json.message, /Can not approve your own pull request/);
});

test('secondary limit: content-creating requests per minute and per hour (403, Retry-After, not carried out)', async () => {
  const sha = bare('rev-parse', 'refs/heads/main');
  const contexts = async () => (await get(`/repos/octo/demo/commits/${sha}/status?per_page=100`)).json.statuses.map((s) => s.context);
  const post = (context) => call('POST', `/repos/octo/demo/statuses/${sha}`, { ...asBurst, body: { state: 'success', context } });
  try {
    let r = await control('POST', '/secondary-limits', { contentPerMinute: 2 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.limits.contentPerMinute, 2);
    assert.deepEqual(r.json.defaults, { contentPerMinute: 80, contentPerHour: 500, restPointsPerMinute: 900, graphqlPointsPerMinute: 2000, restStatus: 403 });
    assert.equal((await post('burst-1')).status, 201);
    assert.equal((await post('burst-2')).status, 201);
    r = await post('burst-3');
    assert.equal(r.status, 403, r.text);
    assert.equal(r.json.message, 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.');
    assert.equal(r.json.documentation_url, 'https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits');
    const wait = Number(r.headers.get('retry-after'));
    assert.ok(wait >= 1 && wait <= 60, `Retry-After ${wait}`);
    assert.notEqual(r.headers.get('x-ratelimit-remaining'), '0', 'not the primary limit');
    assert.ok(!(await contexts()).includes('burst-3'), 'the refused request was not carried out');
    assert.equal((await get('/repos/octo/demo', asBurst)).status, 200, 'reads are not content-creating');
    r = await control('GET', '/secondary-limits');
    assert.equal(r.json.usage[BURST].contentLastMinute, 2);

    await control('POST', '/clock', { advance: wait + 1 });
    assert.equal((await post('burst-3')).status, 201, 'accepted once the minute has passed');
    assert.ok((await contexts()).includes('burst-3'));

    // Per hour: three in the last hour, a limit of four.
    await control('POST', '/secondary-limits', { contentPerMinute: 80, contentPerHour: 4 });
    assert.equal((await post('burst-4')).status, 201);
    r = await post('burst-5');
    assert.equal(r.status, 403);
    assert.ok(Number(r.headers.get('retry-after')) > 60, 'the hour window, not the minute');
    await control('POST', '/clock', { advance: 61 });
    assert.equal((await post('burst-5')).status, 403, 'still within the hour');
    assert.equal((await control('POST', '/secondary-limits', { contentPerMinute: -1 })).status, 400);
  } finally {
    await control('DELETE', '/secondary-limits');
  }
});

test('secondary limit: REST points per minute count every request, 304s too; GraphQL points per minute', async () => {
  try {
    await control('POST', '/secondary-limits', { restPointsPerMinute: 6 });
    let r = await get('/repos/octo/demo', asBurst);
    assert.equal(r.status, 200);
    const etag = r.headers.get('etag');
    const used = r.headers.get('x-ratelimit-used');
    for (let i = 0; i < 5; i++) {
      r = await get('/repos/octo/demo', { ...asBurst, headers: { 'If-None-Match': etag } });
      assert.equal(r.status, 304);
      assert.equal(r.headers.get('x-ratelimit-used'), used, 'a 304 does not count against the primary limit');
    }
    r = await get('/repos/octo/demo', { ...asBurst, headers: { 'If-None-Match': etag } });
    assert.equal(r.status, 403, 'the seventh point of the minute');
    assert.match(r.json.message, /secondary rate limit/);
    assert.ok(Number(r.headers.get('retry-after')) >= 1);
    assert.equal((await get('/repos/octo/demo')).status, 200, 'another identity has its own points');
    // Control routes are neither limited nor counted.
    assert.equal((await control('GET', '/state')).status, 200);
    assert.equal((await control('GET', '/secondary-limits')).json.usage[BURST].restPointsLastMinute, 6);

    // A POST costs 5 points; a limit can answer 429 instead of 403.
    await control('POST', '/clock', { advance: 61 });
    await control('POST', '/secondary-limits', { restStatus: 429 });
    const sha = bare('rev-parse', 'refs/heads/main');
    r = await call('POST', `/repos/octo/demo/statuses/${sha}`, { ...asBurst, body: { state: 'success', context: 'points-1' } });
    assert.equal(r.status, 201, r.text);
    r = await call('POST', `/repos/octo/demo/statuses/${sha}`, { ...asBurst, body: { state: 'success', context: 'points-2' } });
    assert.equal(r.status, 429);
    assert.ok(r.headers.get('retry-after'));
    assert.equal((await get('/repos/octo/demo', asBurst)).status, 200, '5 + 1 points fit');
    assert.equal((await control('POST', '/secondary-limits', { restStatus: 500 })).status, 400);

    // GraphQL: 1 point a query.
    await control('POST', '/secondary-limits', { graphqlPointsPerMinute: 2 });
    const before = (await gql('{ rateLimit { remaining } }', undefined, { token: BURST_TOKEN })).json.data.rateLimit.remaining;
    assert.equal((await gql('{ viewer { login } }', undefined, { token: BURST_TOKEN })).status, 200);
    r = await gql('{ rateLimit { remaining } }', undefined, { token: BURST_TOKEN });
    assert.equal(r.status, 403, r.text);
    assert.match(r.json.message, /secondary rate limit/);
    assert.ok(Number(r.headers.get('retry-after')) >= 1);
    assert.equal(r.headers.get('x-ratelimit-resource'), 'graphql');
    await control('POST', '/clock', { advance: 61 });
    r = await gql('{ rateLimit { remaining } }', undefined, { token: BURST_TOKEN });
    assert.equal(r.json.data.rateLimit.remaining, before - 2, 'the refused call was not charged');
  } finally {
    await control('DELETE', '/secondary-limits');
  }
});

test('primary limits per identity and per resource: core and graphql, each with its X-RateLimit-* headers', async () => {
  let r = await get('/rate_limit', asReviewer);
  const { core, graphql } = r.json.resources;
  r = await gql('{ viewer { login } rateLimit { cost remaining used limit } }', undefined, { token: REVIEWER_TOKEN });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.data.viewer.login, REVIEWER);
  assert.deepEqual(
    ['limit', 'remaining', 'used', 'resource'].map((h) => r.headers.get(`x-ratelimit-${h}`)),
    ['5000', String(graphql.remaining - 1), String(graphql.used + 1), 'graphql'],
  );
  assert.deepEqual([r.json.data.rateLimit.cost, r.json.data.rateLimit.remaining], [1, graphql.remaining - 1]);
  r = await get('/rate_limit', asReviewer);
  assert.equal(r.json.resources.core.remaining, core.remaining, 'GraphQL does not use the core budget');
  assert.equal(r.json.resources.graphql.remaining, graphql.remaining - 1);

  try {
    await control('POST', '/rate-limit', { login: REVIEWER, resource: 'graphql', remaining: 0 });
    r = await gql('{ viewer { login } }', undefined, { token: REVIEWER_TOKEN });
    assert.equal(r.status, 200);
    assert.deepEqual([r.json.errors[0].type, r.json.errors[0].code], ['RATE_LIMIT', 'graphql_rate_limit']);
    assert.match(r.json.errors[0].message, /^API rate limit already exceeded for user ID \d+\.$/);
    assert.equal(r.headers.get('x-ratelimit-remaining'), '0');
    assert.equal((await get('/repos/octo/demo', asReviewer)).status, 200, 'REST has its own budget');
    assert.equal((await gql('{ viewer { login } }')).json.data.viewer.login, OWNER, 'another identity has its own budget');

    await control('POST', '/rate-limit', { login: REVIEWER, resource: 'core', remaining: 0 });
    r = await get('/repos/octo/demo', asReviewer);
    assert.equal(r.status, 403);
    assert.match(r.json.message, /^API rate limit exceeded for user ID/);
    assert.equal(r.headers.get('x-ratelimit-resource'), 'core');
    assert.equal((await get('/repos/octo/demo')).status, 200);
    r = await control('GET', '/rate-limit?login=review-bot&resource=graphql');
    assert.equal(r.json.rate.remaining, 0);
  } finally {
    await control('POST', '/rate-limit', { login: REVIEWER, resource: 'graphql', remaining: 5000 });
    await control('POST', '/rate-limit', { login: REVIEWER, resource: 'core', remaining: 5000 });
  }
});

test('mergeable is null on the first read after a pull request opens or its head or base moves; an override wins', async () => {
  branchWithCommit('demo/mergeable', 'mergeable.txt');
  const since = hooks.length;
  let r = await call('POST', '/repos/octo/demo/pulls', { body: { title: 'Mergeability', head: 'demo/mergeable', base: 'main' } });
  assert.equal(r.status, 201, r.text);
  const n = r.json.number;
  assert.deepEqual([r.json.mergeable, r.json.mergeable_state], [null, 'unknown']);
  const [opened] = await waitHooks((h) => hooks.indexOf(h) >= since && h.event === 'pull_request' && h.json.action === 'opened');
  assert.deepEqual([opened.json.pull_request.mergeable, opened.json.pull_request.mergeable_state], [null, 'unknown'], 'as in GitHub\'s opened payloads');
  const read = async () => {
    const x = await get(`/repos/octo/demo/pulls/${n}`);
    return [x.json.mergeable, x.json.mergeable_state];
  };
  assert.deepEqual(await read(), [null, 'unknown'], 'the first read starts the job');
  assert.deepEqual(await read(), [true, 'clean']);
  assert.deepEqual(await read(), [true, 'clean']);

  // The head moves: null again, and the synchronize payload says so too.
  commitFile('demo/mergeable', 'mergeable.txt', 'two\n', 'Change it');
  assert.deepEqual(await read(), [null, 'unknown']);
  const [sync] = await waitHooks((h) => hooks.indexOf(h) >= since && h.event === 'pull_request' && h.json.action === 'synchronize' && h.json.number === n);
  assert.equal(sync.json.pull_request.mergeable, null);
  assert.deepEqual(await read(), [true, 'clean']);

  // The base moves; GraphQL reads start the same job as REST reads.
  git(work, 'fetch', '-q', 'origin');
  git(work, 'checkout', '-q', '-B', 'main', 'origin/main');
  const mainSha = commitFile('main', 'elsewhere.txt', 'x\n', 'Unrelated change on main');
  const q = `query($n: Int!) { repository(owner: "octo", name: "demo") { pullRequest(number: $n) { mergeable baseRefOid } } }`;
  r = await gql(q, { n });
  assert.equal(r.json.data.repository.pullRequest.mergeable, 'UNKNOWN');
  assert.equal(r.json.data.repository.pullRequest.baseRefOid, mainSha);
  assert.equal((await gql(q, { n })).json.data.repository.pullRequest.mergeable, 'MERGEABLE');
  assert.deepEqual(await read(), [true, 'clean'], 'REST sees the job GraphQL started');
  commitFile('main', 'elsewhere.txt', 'y\n', 'Another change on main');
  assert.deepEqual(await read(), [null, 'unknown']);
  assert.deepEqual(await read(), [true, 'clean']);

  // An override wins at once, also on a fresh head.
  commitFile('demo/mergeable', 'mergeable.txt', 'four\n', 'And again');
  await control('POST', `/pulls/${n}/mergeable`, { mergeable: false });
  assert.deepEqual(await read(), [false, 'dirty']);
  assert.equal((await gql(q, { n })).json.data.repository.pullRequest.mergeable, 'CONFLICTING');
  await control('DELETE', `/pulls/${n}/mergeable`);
  const state = (await control('GET', '/state')).json.repos[0].pulls.find((p) => p.number === n);
  assert.deepEqual([state.mergeable, state.mergeableShown], [true, null], 'the state shows the computed value and what a read would show');
  await control('POST', `/pulls/${n}/close`, {});
});

test('job logs: the 302 is counted against the primary limit and in /_standin/requests; the download of its URL is not', async () => {
  const run = (await control('POST', '/check-runs', { branch: 'main', name: 'logs', conclusion: 'failure', log: 'boom\n' })).json.checkRun;
  await control('DELETE', '/requests');
  const before = (await get('/rate_limit')).json.resources.core.used;
  const r = await get(`/repos/octo/demo/actions/jobs/${run.id}/logs`);
  assert.equal(r.status, 302);
  assert.equal(Number(r.headers.get('x-ratelimit-used')), before + 1, 'the 302 counts');
  const download = await fetch(r.headers.get('location'));
  assert.equal(await download.text(), 'boom\n');
  assert.equal((await get('/rate_limit')).json.resources.core.used, before + 1, 'the download does not');
  const counts = (await control('GET', '/requests')).json;
  assert.equal(counts.total, 3, 'two /rate_limit reads and the 302');
  assert.equal(counts.counted, 1);
  assert.deepEqual(counts.byRoute['GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs'], { total: 1, byStatus: { 302: 1 } });
  assert.ok(!Object.keys(counts.byRoute).some((k) => k.includes('job-logs')), 'the download is storage, not the API');
  // The link expires after a minute.
  await control('POST', '/clock', { advance: 61 });
  assert.equal((await fetch(r.headers.get('location'))).status, 403);
  assert.deepEqual(counts.byResource.core.byIdentity[OWNER], { requests: 3, counted: 1 });
  assert.deepEqual([counts.byResource.graphql.requests, counts.byResource.graphql.counted], [0, 0]);
});

test('GraphQL: the OpenPulls query agrees with REST (pull requests, heads, check runs, statuses, mergeable, author)', async () => {
  // A pull request with a failing check, a re-run and a status on its head.
  branchWithCommit('demo/graphql', 'graphql.txt');
  let r = await call('POST', '/repos/octo/demo/pulls', { ...asReviewer, body: { title: 'GraphQL', head: 'demo/graphql', base: 'main', draft: true } });
  assert.equal(r.status, 201, r.text);
  await control('POST', '/check-runs', { branch: 'demo/graphql', name: 'build', conclusion: 'failure' });
  await control('POST', '/check-runs', { branch: 'demo/graphql', name: 'build', status: 'in_progress' });
  await control('POST', '/check-runs', { branch: 'demo/graphql', name: 'lint', conclusion: 'success' });
  await control('POST', '/statuses', { branch: 'demo/graphql', context: 'ci/legacy', state: 'error' });
  await control('DELETE', '/requests');

  const vars = { owner: 'octo', name: 'demo', first: 100, after: null };
  r = await gql(OPEN_PULLS, vars);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.errors, undefined, r.text);
  assert.equal(r.json.data.rateLimit.cost, 2, '1 + 100 + 100 requests, divided by 100 and rounded');
  assert.equal(String(r.json.data.rateLimit.remaining), r.headers.get('x-ratelimit-remaining'));
  const counts = (await control('GET', '/requests')).json.byResource.graphql;
  assert.deepEqual([counts.requests, counts.counted], [1, 2], 'the points charged are counted');
  assert.equal((await gql(OPEN_PULLS, { ...vars, first: 10 })).json.data.rateLimit.cost, 1, '21 requests round to 0; the minimum is 1');

  // Read the mergeability once more, so that GraphQL and REST both show the computed value.
  r = await gql(OPEN_PULLS, vars);
  const nodes = r.json.data.repository.pullRequests.nodes;
  const rest = (await get('/repos/octo/demo/pulls?state=open&per_page=100&direction=asc')).json;
  assert.deepEqual(nodes.map((p) => p.number), rest.map((p) => p.number).sort((a, b) => a - b));
  for (const node of nodes) {
    const pr = (await get(`/repos/octo/demo/pulls/${node.number}`)).json;
    assert.equal(node.headRefName, pr.head.ref);
    assert.equal(node.headRefOid, pr.head.sha);
    assert.equal(node.baseRefOid, pr.base.sha);
    assert.equal(node.isDraft, pr.draft);
    assert.equal(node.updatedAt, pr.updated_at);
    assert.equal(node.author.login, pr.user.login);
    assert.equal(node.mergeable, { true: 'MERGEABLE', false: 'CONFLICTING', null: 'UNKNOWN' }[String(pr.mergeable)], `#${node.number}`);
    assert.equal(node.commits.nodes[0].commit.oid, pr.head.sha);
    const runs = (await get(`/repos/octo/demo/commits/${pr.head.sha}/check-runs?per_page=100`)).json.check_runs;
    const statuses = (await get(`/repos/octo/demo/commits/${pr.head.sha}/status?per_page=100`)).json.statuses;
    const rollup = node.commits.nodes[0].commit.statusCheckRollup;
    if (!runs.length && !statuses.length) {
      assert.equal(rollup, null);
      continue;
    }
    const contexts = rollup.contexts.nodes;
    assert.deepEqual(
      contexts.filter((c) => c.__typename === 'CheckRun').map((c) => [c.databaseId, c.name, c.status, c.conclusion]).sort(),
      runs.map((c) => [c.id, c.name, c.status.toUpperCase(), c.conclusion && c.conclusion.toUpperCase()]).sort(),
    );
    assert.deepEqual(
      contexts.filter((c) => c.__typename === 'StatusContext').map((c) => [c.context, c.state]).sort(),
      statuses.map((s) => [s.context, s.state.toUpperCase()]).sort(),
    );
  }
  const mine = nodes.find((p) => p.headRefName === 'demo/graphql');
  assert.deepEqual([mine.author.login, mine.isDraft], [REVIEWER, true]);
  assert.equal(mine.commits.nodes[0].commit.statusCheckRollup.state, 'ERROR', 'the errored status; the failed build was re-run');

  // Pages of one.
  const seen = [];
  let after = null;
  for (let i = 0; i < 50; i++) {
    const page = (await gql(OPEN_PULLS, { ...vars, first: 1, after })).json.data.repository.pullRequests;
    seen.push(...page.nodes.map((p) => p.number));
    if (!page.pageInfo.hasNextPage) break;
    after = page.pageInfo.endCursor;
  }
  assert.deepEqual(seen, nodes.map((p) => p.number));
  r = await gql(OPEN_PULLS, { ...vars, after: 'bm90LWEtY3Vyc29y' });
  assert.equal(r.json.errors[0].type, 'INVALID_CURSOR_ARGUMENTS');
  assert.equal((await gql('{ viewer { login } }', undefined, { token: REVIEWER_TOKEN })).json.data.viewer.login, REVIEWER);
});

test('GraphQL: invalid calls answer 200 with GitHub\'s errors; pagination and node limits; authentication', async () => {
  let r = await gql('query { viewer { login foo } }');
  assert.equal(r.status, 200);
  assert.equal(r.json.data, undefined);
  assert.deepEqual(r.json.errors, [
    { message: "Field 'foo' doesn't exist on type 'User'", locations: [{ line: 1, column: 24 }], path: ['query', 'viewer', 'foo'], extensions: { code: 'undefinedField', typeName: 'User', fieldName: 'foo' } },
  ]);
  r = await gql('query { viewer { login }');
  assert.equal(r.status, 200);
  assert.deepEqual(r.json.errors[0].locations, [{ line: 1, column: 25 }]);
  r = await gql(OPEN_PULLS, { owner: 'octo', first: 10 });
  assert.equal(r.status, 200);
  assert.equal(r.json.errors[0].message, 'Variable $name of type String! was provided invalid value');
  r = await gql('{ repository(owner: "octo", name: "demo") { pullRequests(first: 101) { totalCount } } }');
  assert.equal(r.json.errors[0].message, 'Requesting 101 records on the `pullRequests` connection exceeds the `first` limit of 100 records.');
  r = await gql('{ repository(owner: "octo", name: "demo") { pullRequests(last: 0) { totalCount } } }');
  assert.ok(r.json.errors, 'first and last must be within 1..100');
  r = await gql('{ repository(owner: "octo", name: "demo") { pullRequests { totalCount } } }');
  assert.equal(r.json.errors[0].message, 'You must provide a `first` or `last` value to properly paginate the `pullRequests` connection.');
  r = await gql('{ repository(owner: "octo", name: "demo") { pullRequests(first: 100) { nodes { commits(first: 100) { nodes { commit { statusCheckRollup { contexts(first: 100) { totalCount } } } } } } } } }');
  assert.equal(r.json.errors[0].type, 'MAX_NODE_LIMIT_EXCEEDED');
  assert.match(r.json.errors[0].message, /requesting up to 1,000,000 possible nodes which exceeds the maximum limit of 500,000\.$/);
  r = await gql('{ repository(owner: "octo", name: "nope") { name } }');
  assert.deepEqual([r.json.data.repository, r.json.errors[0].type, r.json.errors[0].message], [null, 'NOT_FOUND', "Could not resolve to a Repository with the name 'octo/nope'."]);

  r = await gql('{ viewer { login } }', undefined, { token: null });
  assert.equal(r.status, 401);
  assert.equal(r.json.message, 'This endpoint requires you to be authenticated.');
  r = await fetch(`${base}/graphql`, { method: 'POST', headers: { Authorization: `Bearer ${TOKEN}` }, body: '{nope' });
  assert.equal(r.status, 400);
  assert.equal((await r.json()).message, 'Problems parsing JSON');
  assert.equal((await get('/graphql')).status, 404, 'GraphQL is POST only');
});

test('GraphQL: the cost and node counts of the documentation\'s examples', () => {
  const api = inProcessApis().graphql;
  const cost = api.prepare({
    query: `query { viewer { login repositories(first: 100) { edges { node { id issues(first: 50) { edges { node { id labels(first: 60) { edges { node { id name } } } } } } } } } } }`,
  });
  assert.deepEqual([cost.requests, cost.cost], [5101, 51]);
  const simple = api.prepare({ query: `query { viewer { repositories(first: 50) { edges { repository: node { name issues(first: 10) { totalCount edges { node { title bodyHTML } } } } } } } }` });
  assert.equal(simple.nodes, 550);
  const complex = api.prepare({
    query: `query {
      viewer {
        repositories(first: 50) {
          edges {
            repository: node {
              name
              pullRequests(first: 20) { edges { pullRequest: node { title comments(first: 10) { edges { comment: node { bodyHTML } } } } } }
              issues(first: 20) { totalCount edges { issue: node { title bodyHTML comments(first: 10) { edges { comment: node { bodyHTML } } } } } }
            }
          }
        }
        followers(first: 10) { edges { follower: node { login } } }
      }
    }`,
  });
  assert.equal(complex.errors, undefined, JSON.stringify(complex.errors));
  assert.equal(complex.nodes, 22060);
});

test('GraphQL: updatedAt moves with REST updated_at on a push, a review with a comment, an edit, a state change and labels', async () => {
  const n = reviewerPull;
  const q = `query($n: Int!) { repository(owner: "octo", name: "demo") { pullRequest(number: $n) { updatedAt } } }`;
  const both = async () => {
    const g = (await gql(q, { n })).json.data.repository.pullRequest.updatedAt;
    const rest = (await get(`/repos/octo/demo/pulls/${n}`)).json.updated_at;
    assert.equal(g, rest, 'GraphQL and REST agree');
    return g;
  };
  let last = await both();
  const moved = async (what) => {
    const now = await both();
    assert.ok(now > last, `${what} moves updatedAt (${last} -> ${now})`);
    last = now;
  };
  // Each step is two seconds later on the stand-in's clock (timestamps are in seconds).
  const step = () => control('POST', '/clock', { advance: 2 });
  await step();
  commitFile('demo/by-reviewer', 'reviewer.txt', 'pushed\n', 'A push to the head');
  await moved('a push to the head');
  await step();
  await control('POST', '/reviews', { number: n, user: 'alice', state: 'COMMENTED', body: 'Hm', comments: [{ path: 'reviewer.txt', line: 1, body: 'Why?' }] });
  await moved('a review with a comment');
  await step();
  assert.equal((await call('PATCH', `/repos/octo/demo/pulls/${n}`, { ...asReviewer, body: { title: 'From the reviewer bot (edited)' } })).status, 200);
  await moved('an edit');
  await step();
  await control('POST', `/pulls/${n}/close`, {});
  await moved('closing');
  await step();
  await control('POST', `/pulls/${n}/reopen`, {});
  await moved('reopening');
  await step();
  await control('POST', `/issues/${n}/labels`, { labels: ['agent'] });
  await moved('a label');
  await step();
  assert.equal(await both(), last, 'nothing else moves it');
});

test('GraphQL: a field the stand-in does not implement answers null and is reported as a stand-in bug', async () => {
  const before = (await control('GET', '/bugs')).json.bugs.length;
  const r = await gql('{ repository(owner: "octo", name: "demo") { nameWithOwner homepageUrl } }');
  assert.equal(r.status, 200);
  assert.deepEqual(r.json.data.repository, { nameWithOwner: 'octo/demo', homepageUrl: null });
  const bugs = (await control('GET', '/bugs')).json.bugs.slice(before);
  assert.deepEqual(bugs.map((b) => [b.kind, b.field]), [['graphql field not implemented', 'Repository.homepageUrl']]);
  await new Promise((res) => setTimeout(res, 50));
  assert.match(stderr, /BUG: graphql field not implemented: .*Repository\.homepageUrl/);
});

test("GraphQL at /api/graphql when the base path is GitHub Enterprise Server's /api/v3", async () => {
  const { StandIn } = require('../lib/standin');
  const { description, graphql } = inProcessApis();
  const ghes = new StandIn({ repos: [{ fullName: REPO, gitDir: origin }], basePath: '/api/v3', description, graphql, warm: false, log: () => {} });
  await ghes.init();
  const port = await ghes.listen(0, '127.0.0.1');
  try {
    const at = (p, init) => fetch(`http://127.0.0.1:${port}${p}`, init);
    let r = await at('/api/graphql', { method: 'POST', body: JSON.stringify({ query: '{ viewer { login } repository(owner: "octo", name: "demo") { nameWithOwner } }' }) });
    assert.equal(r.status, 200);
    assert.deepEqual((await r.json()).data, { viewer: { login: OWNER }, repository: { nameWithOwner: REPO } });
    r = await at('/api/v3/graphql', { method: 'POST', body: JSON.stringify({ query: '{ viewer { login } }' }) });
    assert.equal(r.status, 404);
    assert.equal((await at('/api/v3/repos/octo/demo')).status, 200);
    assert.equal(new StandIn({ basePath: '/custom', description, graphql }).graphqlPath, '/custom/graphql');
    assert.equal(new StandIn({ description, graphql }).graphqlPath, '/graphql');
  } finally {
    await ghes.close();
  }
});
