// Self-test of the GitLab stand-in: starts server.js on port 0 against a scratch bare repository
// and exercises every REST route, the control API, validation and webhook deliveries.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');

const TOKEN = 'glpat-test-token';
const HOOK_TOKEN = 'hook-secret';
// Two more identities: --identity TOKEN=USER.
const RITA = 'glpat-rita-token';
const OSCAR = 'glpat-oscar-token';

function git(dir, args, env = {}) {
  return execFileSync('git', args, { cwd: dir, env: { ...process.env, GIT_AUTHOR_NAME: 'Dev', GIT_AUTHOR_EMAIL: 'dev@example.com', GIT_COMMITTER_NAME: 'Dev', GIT_COMMITTER_EMAIL: 'dev@example.com', ...env }, encoding: 'utf8' }).trim();
}

// Writes `files` ({name: content}) in the work tree `work`, commits them and pushes `branch` (if
// any) to origin.
function commit(work, branch, files, message) {
  for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(work, name), content);
  git(work, ['add', '.']);
  git(work, ['commit', '-q', '-m', message]);
  if (branch) git(work, ['push', '-q', 'origin', branch]);
}

function makeRepo() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gitlab-standin-'));
  const bare = path.join(root, 'origin.git');
  const work = path.join(root, 'work');
  git(root, ['init', '-q', '--bare', '-b', 'main', bare]);
  git(root, ['clone', '-q', bare, work]);
  git(work, ['checkout', '-q', '-b', 'main']);
  commit(work, 'main', { 'README.md': 'hello\n', 'shared.txt': 'base\n' }, 'initial');
  git(work, ['checkout', '-q', '-b', 'feature']);
  commit(work, 'feature', { 'src.txt': 'one\ntwo\nthree\n' }, 'add src');
  git(work, ['checkout', '-q', 'main']);
  git(work, ['checkout', '-q', '-b', 'clash']);
  commit(work, 'clash', { 'shared.txt': 'clash\n' }, 'clash');
  git(work, ['checkout', '-q', 'main']);
  commit(work, 'main', { 'shared.txt': 'main moved\n' }, 'main moves');
  git(work, ['checkout', '-q', '-b', 'squashy']);
  commit(work, null, { 'sq.txt': 'a\n' }, 'sq 1');
  commit(work, 'squashy', { 'sq.txt': 'a\nb\n' }, 'sq 2');
  return { root, bare, work };
}

function receiver() {
  const got = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      res.writeHead(200);
      res.end('ok');
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, got, url: `http://127.0.0.1:${server.address().port}/hook` })));
}

// Starts server.js; gives up after 30 s (the first start generates the schemas, about 5 s).
function start(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(__dirname, '..', 'server.js'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let errText = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not listen within 30 s: ${errText}`));
    }, 30000);
    child.stderr.on('data', (d) => { errText += d; if (process.env.STANDIN_STDERR) process.stderr.write(d); });
    child.stdout.on('data', (d) => {
      out += d;
      const m = /^listening on 127\.0\.0\.1:(\d+)\n/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, port: Number(m[1]), stderr: () => errText });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited ${code}: ${errText}`));
    });
  });
}

let ctx;

async function call(method, p, { body, headers = {}, token = TOKEN, raw = false } = {}) {
  const h = { ...headers };
  if (token) h['PRIVATE-TOKEN'] = token;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  const res = await fetch(`http://127.0.0.1:${ctx.port}${p}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(10000) });
  const text = await res.text();
  let json = null;
  if (!raw && text && /json/.test(res.headers.get('content-type') || '')) json = JSON.parse(text);
  return { status: res.status, headers: res.headers, json, text };
}

const P = '/api/v4/projects/acme%2Fwidgets';
const api = (method, p, opts) => call(method, `${P}${p}`, opts);
const control = (method, p, body) => call(method, `/_standin${p}`, { body, token: null });

test.before(async () => {
  const repo = makeRepo();
  const hooks = await receiver();
  const srv = await start(['--port', '0', '--project', 'acme/widgets', '--git-dir', repo.bare, '--token', TOKEN, '--identity', `${RITA}=rita`, '--identity', `${OSCAR}=oscar`, '--webhook-url', hooks.url, '--webhook-token', HOOK_TOKEN, '--username', 'octo', '--web-url', 'http://gitlab.example']).catch((e) => {
    hooks.server.close();
    fs.rmSync(repo.root, { recursive: true, force: true });
    throw e;
  });
  ctx = { ...srv, repo, hooks };
});

test.after(() => {
  if (!ctx) return;
  ctx.child.kill('SIGTERM');
  ctx.hooks.server.close();
  fs.rmSync(ctx.repo.root, { recursive: true, force: true });
});

test('auth, project and unknown routes', async () => {
  assert.equal((await api('GET', '', { token: null })).status, 401);
  assert.deepEqual((await api('GET', '', { token: 'wrong' })).json, { message: '401 Unauthorized' });
  const bearer = await call('GET', P, { token: null, headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(bearer.status, 200);
  const r = await api('GET', '');
  assert.equal(r.json.path_with_namespace, 'acme/widgets');
  assert.equal(r.json.default_branch, 'main');
  const byId = await call('GET', `/api/v4/projects/${r.json.id}`);
  assert.equal(byId.json.id, r.json.id);
  assert.ok(r.headers.get('ratelimit-limit'));
  assert.match(r.headers.get('etag'), /^W\/"[0-9a-f]+"$/);
  const again = await api('GET', '', { headers: { 'If-None-Match': r.headers.get('etag') } });
  assert.equal(again.status, 304);
  assert.equal(again.text, '');
  const nf = await api('GET', '/nothing/here');
  assert.equal(nf.status, 404);
  assert.deepEqual(nf.json, { message: '404 Not Found' });
});

test('merge requests: create, duplicate, list, view, conflicts, draft', async () => {
  const created = await api('POST', '/merge_requests', { body: { source_branch: 'feature', target_branch: 'main', title: 'Add src', description: 'Closes #1' } });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.json.iid, 1);
  assert.equal(created.json.web_url, 'http://gitlab.example/acme/widgets/-/merge_requests/1');
  assert.deepEqual(created.json.references, { short: '!1', relative: '!1', full: 'acme/widgets!1' });
  const dup = await api('POST', '/merge_requests', { body: { source_branch: 'feature', target_branch: 'main', title: 'again' } });
  assert.equal(dup.status, 409);
  assert.deepEqual(dup.json, { message: ['Another open merge request already exists for this source branch: !1'] });
  const clash = await api('POST', '/merge_requests', { body: { source_branch: 'clash', target_branch: 'main', title: 'Clash' } });
  const draft = await api('POST', '/merge_requests', { body: { source_branch: 'squashy', target_branch: 'main', title: 'Draft: squash me' } });
  assert.equal(draft.json.draft, true);

  const one = await api('GET', '/merge_requests/1');
  const head = git(ctx.repo.work, ['rev-parse', 'origin/feature']);
  const mainHead = git(ctx.repo.work, ['rev-parse', 'origin/main']);
  assert.equal(one.json.sha, head);
  assert.equal(one.json.diff_refs.head_sha, head);
  assert.equal(one.json.diff_refs.start_sha, mainHead);
  assert.equal(one.json.diff_refs.base_sha, git(ctx.repo.work, ['merge-base', 'origin/main', 'origin/feature']));
  assert.equal(one.json.detailed_merge_status, 'mergeable');
  assert.equal(one.json.merge_status, 'can_be_merged');
  assert.equal(one.json.has_conflicts, false);
  const c = await api('GET', `/merge_requests/${clash.json.iid}`);
  assert.equal(c.json.has_conflicts, true);
  assert.equal(c.json.detailed_merge_status, 'conflict');
  assert.equal((await api('GET', `/merge_requests/${draft.json.iid}`)).json.detailed_merge_status, 'draft_status');

  const list = await api('GET', '/merge_requests?state=opened&per_page=2&order_by=created_at&sort=asc');
  assert.equal(list.status, 200);
  assert.deepEqual(list.json.map((m) => m.iid), [1, 2]);
  assert.equal(list.headers.get('x-total'), '3');
  assert.equal(list.headers.get('x-total-pages'), '2');
  assert.equal(list.headers.get('x-next-page'), '2');
  assert.match(list.headers.get('link'), /rel="next"/);
  assert.match(list.headers.get('link'), new RegExp(`http://127\\.0\\.0\\.1:${ctx.port}/`));
  const page2 = await api('GET', '/merge_requests?state=opened&per_page=2&order_by=created_at&sort=asc&page=2');
  assert.deepEqual(page2.json.map((m) => m.iid), [3]);
  assert.equal(page2.headers.get('x-next-page'), '');
  const bySource = await api('GET', '/merge_requests?source_branch=clash');
  assert.deepEqual(bySource.json.map((m) => m.iid), [2]);
});

test('approvals, reviewers and approval-gated merge', async () => {
  await control('POST', '/settings', { approvalsRequired: 1 });
  let a = await api('GET', '/merge_requests/1/approvals');
  assert.equal(a.json.approvals_left, 1);
  assert.equal((await api('GET', '/merge_requests/1')).json.detailed_merge_status, 'not_approved');
  assert.equal((await api('PUT', '/merge_requests/1/merge', { body: {} })).status, 405);
  assert.equal((await api('POST', '/merge_requests/1/approve', { body: { sha: 'f'.repeat(40) } })).status, 409);
  // octo opened !1, so another user approves it.
  const ok = await api('POST', '/merge_requests/1/approve', { body: {}, token: OSCAR });
  assert.equal(ok.status, 201, ok.text);
  assert.equal(ok.json.approvals_left, 0);
  const un = await api('POST', '/merge_requests/1/unapprove', { body: {}, token: OSCAR });
  assert.equal(un.json.approvals_left, 1);
  const r = await control('POST', '/approve', { iid: 1, user: 'alice' });
  assert.equal(r.json.deliveries[0].event, 'Merge Request Hook');
  assert.equal(r.json.deliveries[0].status, 200);
  a = await api('GET', '/merge_requests/1/approvals');
  assert.equal(a.json.approved_by[0].user.username, 'alice');
  const rv = await control('POST', '/reviewers', { iid: 1, user: 'bob', state: 'requested_changes' });
  assert.equal(rv.json.deliveries[0].status, 200);
  const reviewers = await api('GET', '/merge_requests/1/reviewers');
  assert.equal(reviewers.json[0].user.username, 'bob');
  assert.equal(reviewers.json[0].state, 'requested_changes');
  await control('POST', '/unapprove', { iid: 1, user: 'alice' });
  await control('POST', '/approve', { iid: 1, user: 'alice' });
});

test('discussions and notes', async () => {
  const mr = (await api('GET', '/merge_requests/1')).json;
  const pos = { ...mr.diff_refs, position_type: 'text', new_path: 'src.txt', old_path: 'src.txt', new_line: 2 };
  const d = await api('POST', '/merge_requests/1/discussions', { body: { body: 'nit', position: pos } });
  assert.equal(d.status, 201, d.text);
  assert.equal(d.json.notes[0].type, 'DiffNote');
  assert.equal(d.json.notes[0].position.new_line, 2);
  const badPath = await api('POST', '/merge_requests/1/discussions', { body: { body: 'x', position: { ...pos, new_path: 'nope.txt', old_path: 'nope.txt' } } });
  assert.equal(badPath.status, 400);
  const n = await call('POST', `${P}/merge_requests/1/notes`, { headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
  assert.equal(n.status, 400);
  const form = await fetch(`http://127.0.0.1:${ctx.port}${P}/merge_requests/1/notes`, { method: 'POST', headers: { 'PRIVATE-TOKEN': TOKEN, 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'body=general+remark', signal: AbortSignal.timeout(10000) });
  assert.equal(form.status, 201);
  assert.equal((await form.json()).body, 'general remark');
  const c = await control('POST', '/notes', { iid: 1, user: 'carol', body: 'please fix', path: 'src.txt', line: 3 });
  assert.equal(c.status, 201, c.text);
  assert.equal(c.json.discussion.notes[0].position.new_line, 3);
  assert.equal(c.json.deliveries[0].event, 'Note Hook');
  const plain = await control('POST', '/notes', { iid: 1, user: 'carol', body: 'thread' });
  assert.equal(plain.json.discussion.notes[0].type, 'DiscussionNote');
  const list = await api('GET', '/merge_requests/1/discussions');
  assert.equal(list.json.length, 4);
  assert.equal(list.json[1].individual_note, true);
  const hook = ctx.hooks.got.find((h) => h.body.object_kind === 'note' && h.body.object_attributes.position);
  assert.equal(hook.headers['x-gitlab-event'], 'Note Hook');
  assert.equal(hook.body.object_attributes.noteable_type, 'MergeRequest');
  assert.equal(hook.body.merge_request.iid, 1);
  const id = c.json.discussion.id;
  const resolved = await api('PUT', `/merge_requests/1/discussions/${id}?resolved=true`);
  assert.equal(resolved.status, 200, resolved.text);
  assert.equal(resolved.json.notes[0].resolved, true);
  assert.equal(resolved.json.notes[0].resolved_by.username, 'octo');
  const again = (await api('GET', '/merge_requests/1/discussions')).json.find((x) => x.id === id);
  assert.equal(again.notes[0].resolved, true);
  const reopened = await api('PUT', `/merge_requests/1/discussions/${id}`, { body: { resolved: false } });
  assert.equal(reopened.json.notes[0].resolved, false);
  assert.equal(reopened.json.notes[0].resolved_by, null);
  const general = list.json.find((x) => x.individual_note);
  assert.equal((await api('PUT', `/merge_requests/1/discussions/${general.id}?resolved=true`)).status, 400);
  assert.equal((await api('PUT', '/merge_requests/1/discussions/nope?resolved=true')).status, 404);
});

test('members: the owner, the identities and those added, each with its access level', async () => {
  const me = (await call('GET', '/api/v4/user')).json;
  const member = (id) => api('GET', `/members/all/${id}`);
  let r = await member(me.id);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.username, 'octo');
  assert.equal(r.json.access_level, 50);
  const rita = (await call('GET', '/api/v4/user', { token: RITA })).json;
  assert.equal((await member(rita.id)).json.access_level, 30, 'an identity is a Developer');
  // A user is a member once added, with the id every other answer gives them (a note of theirs).
  const note = await control('POST', '/notes', { iid: 1, user: 'drive-by', body: 'hello' });
  assert.equal(note.status, 201, note.text);
  const id = note.json.discussion.notes[0].author.id;
  assert.equal((await member(id)).status, 404, 'not a member yet');
  r = await control('POST', '/members', { user: 'drive-by', level: 20 });
  assert.equal(r.status, 200, r.text);
  assert.equal((await member(id)).json.access_level, 20);
  r = await control('POST', '/members', { user: 'drive-by', level: 0 });
  assert.equal(r.status, 200, r.text);
  assert.equal((await member(id)).status, 404, 'removed');
  const stranger = 999999999;
  r = await member(stranger);
  assert.equal(r.status, 404);
  assert.deepEqual(r.json, { message: '404 Not found' });
  assert.equal((await control('POST', '/members', { user: 'x', level: 35 })).status, 400);
});

test('pipelines, jobs, trace, retry', async () => {
  const r = await control('POST', '/pipelines', { iid: 1, jobs: [{ name: 'build', stage: 'build', status: 'success', log: 'compiled' }, { name: 'unit', status: 'failed', log: 'assertion failed' }, { name: 'lint', status: 'failed', allowFailure: true }] });
  assert.equal(r.status, 201, r.text);
  assert.equal(r.json.pipeline.status, 'failed');
  assert.equal(r.json.pipeline.source, 'merge_request_event');
  assert.equal(r.json.pipeline.ref, 'feature');
  assert.deepEqual(r.json.deliveries.map((d) => d.event), ['Pipeline Hook', 'Job Hook', 'Job Hook', 'Job Hook']);
  const plId = r.json.pipeline.id;
  const sha = r.json.pipeline.sha;
  const list = await api('GET', `/pipelines?sha=${sha}&order_by=id&sort=desc`);
  assert.equal(list.json[0].id, plId);
  assert.equal((await api('GET', '/pipelines?ref=feature&status=failed')).json.length, 1);
  assert.equal((await api('GET', `/pipelines/${plId}`)).json.status, 'failed');
  const jobs = await api('GET', `/pipelines/${plId}/jobs`);
  assert.equal(jobs.json.length, 3);
  const unit = jobs.json.find((j) => j.name === 'unit');
  assert.equal((await api('GET', `/jobs/${unit.id}`)).json.name, 'unit');
  assert.ok((await api('GET', '/jobs?scope[]=success')).json.every((j) => j.status === 'success'));
  const failedOnly = await api('GET', `/pipelines/${plId}/jobs?scope[]=failed`);
  assert.equal(failedOnly.json.length, 2);
  const tr = await api('GET', `/jobs/${unit.id}/trace`);
  assert.match(tr.headers.get('content-type'), /text\/plain/);
  assert.match(tr.text, /section_start:\d+:step_script\r\x1b\[0K/);
  assert.match(tr.text, /assertion failed/);
  assert.match(tr.text, /section_end:\d+:step_script\r\x1b\[0K/);
  const running = await control('POST', '/pipelines', { branch: 'clash', jobs: [{ name: 'slow', status: 'running' }] });
  assert.equal(running.json.pipeline.status, 'running');
  assert.equal((await api('POST', `/jobs/${running.json.jobs[0].id}/retry`)).status, 403);
  const retried = await api('POST', `/jobs/${unit.id}/retry`);
  assert.equal(retried.status, 201, retried.text);
  assert.notEqual(retried.json.id, unit.id);
  assert.equal(retried.json.status, 'pending');
  assert.equal(retried.json.pipeline.id, plId);
  assert.equal((await api('GET', `/pipelines/${plId}/jobs`)).json.length, 3);
  const all = await api('GET', `/pipelines/${plId}/jobs?include_retried=true`);
  assert.equal(all.json.length, 4);
  assert.equal(all.json.find((j) => j.id === unit.id).retried, true);
  const upd = await control('POST', `/jobs/${retried.json.id}`, { status: 'success', log: 'ok now' });
  assert.equal(upd.json.pipeline.status, 'success');
  assert.ok(upd.json.deliveries.some((d) => d.event === 'Job Hook'));
  const ph = ctx.hooks.got.filter((h) => h.body.object_kind === 'pipeline').pop();
  assert.equal(ph.body.object_attributes.status, 'success');
  assert.equal(ph.body.merge_request.iid, 1);
  const upd2 = await control('POST', '/pipelines', { id: running.json.pipeline.id, jobs: [{ name: 'slow', status: 'success' }] });
  assert.equal(upd2.json.pipeline.status, 'success');
});

test('merge: sha mismatch, conflicts, real merge commit, squash, push hook', async () => {
  const mr = (await api('GET', '/merge_requests/1')).json;
  const wrong = await api('PUT', '/merge_requests/1/merge', { body: { sha: 'a'.repeat(40) } });
  assert.equal(wrong.status, 409);
  assert.equal(wrong.json.message, `SHA does not match HEAD of source branch: ${mr.sha}`);
  await control('POST', '/approve', { iid: 2, user: 'alice' });
  assert.equal((await api('PUT', '/merge_requests/2/merge', { body: {} })).status, 406);
  const merged = await api('PUT', '/merge_requests/1/merge', { body: { sha: mr.sha, should_remove_source_branch: true } });
  assert.equal(merged.status, 200, merged.text);
  assert.equal(merged.json.state, 'merged');
  const mainHead = execFileSync('git', ['--git-dir', ctx.repo.bare, 'rev-parse', 'refs/heads/main'], { encoding: 'utf8' }).trim();
  assert.equal(merged.json.merge_commit_sha, mainHead);
  const parents = execFileSync('git', ['--git-dir', ctx.repo.bare, 'log', '-1', '--format=%P', mainHead], { encoding: 'utf8' }).trim().split(' ');
  assert.equal(parents.length, 2);
  assert.equal(parents[1], mr.sha);
  assert.equal((await api('PUT', '/merge_requests/1/merge', { body: {} })).status, 405);
  assert.equal((await api('GET', '/merge_requests/1')).json.detailed_merge_status, 'not_open');
  // squash merge of the draft, once it is ready and approved (a human merge via control)
  await control('POST', '/approve', { iid: 3, user: 'alice' });
  assert.equal((await api('PUT', '/merge_requests/3/merge', { body: {} })).status, 405);
  const s = await control('POST', '/merge_requests/3/close', {});
  assert.equal(s.json.mergeRequest.state, 'closed');
  await control('POST', '/merge_requests/3/reopen', {});
  const mrs = await api('GET', '/merge_requests?state=merged');
  assert.deepEqual(mrs.json.map((m) => m.iid), [1]);
  const pushes = ctx.hooks.got.filter((h) => h.body.object_kind === 'push');
  assert.equal(pushes.pop().body.after, mainHead);
  const mergeHook = ctx.hooks.got.find((h) => h.body.object_kind === 'merge_request' && h.body.object_attributes.action === 'merge');
  assert.equal(mergeHook.headers['x-gitlab-token'], HOOK_TOKEN);
  assert.equal(mergeHook.headers['user-agent'], 'GitLab/17.6.0');
  assert.equal(mergeHook.headers['x-gitlab-instance'], 'http://gitlab.example');
  assert.ok(mergeHook.headers['x-gitlab-event-uuid']);
  // squash: a fresh non-draft merge request from squashy
  await control('POST', '/merge_requests/3/close', {});
  const sq = await api('POST', '/merge_requests', { body: { source_branch: 'squashy', target_branch: 'main', title: 'Squash it' } });
  await control('POST', '/approve', { iid: sq.json.iid, user: 'alice' });
  const sm = await api('PUT', `/merge_requests/${sq.json.iid}/merge`, { body: { squash: true } });
  assert.equal(sm.status, 200, sm.text);
  assert.ok(sm.json.squash_commit_sha);
  const sqParents = execFileSync('git', ['--git-dir', ctx.repo.bare, 'log', '-1', '--format=%P', sm.json.squash_commit_sha], { encoding: 'utf8' }).trim().split(' ');
  assert.equal(sqParents.length, 1);
  await control('POST', '/settings', { approvalsRequired: 0 });
});

test('refresh sends push and update hooks', async () => {
  const w = ctx.repo.work;
  git(w, ['fetch', '-q', 'origin']);
  git(w, ['checkout', '-q', '-B', 'clash', 'origin/clash']);
  commit(w, 'clash', { 'more.txt': 'more\n' }, 'more');
  const r = await control('POST', '/refresh', {});
  assert.deepEqual(r.json.deliveries.map((d) => d.event), ['Push Hook', 'Merge Request Hook']);
  const upd = ctx.hooks.got.filter((h) => h.body.object_kind === 'merge_request').pop();
  assert.equal(upd.body.object_attributes.action, 'update');
  assert.ok(upd.body.object_attributes.oldrev);
  assert.equal((await api('GET', '/merge_requests/2')).json.sha, git(w, ['rev-parse', 'HEAD']));
  // a new branch, announced by refresh, merged by a human through the control API
  git(w, ['checkout', '-q', '-B', 'human', 'origin/main']);
  commit(w, 'human', { 'human.txt': 'by hand\n' }, 'human change');
  const created = await control('POST', '/refresh', {});
  const push = ctx.hooks.got.filter((h) => h.body.object_kind === 'push').pop();
  assert.equal(created.json.deliveries[0].event, 'Push Hook');
  assert.equal(push.body.before, '0'.repeat(40));
  assert.equal(push.body.ref, 'refs/heads/human');
  const mr = await api('POST', '/merge_requests', { body: { source_branch: 'human', target_branch: 'main', title: 'Human' } });
  const merged = await control('POST', `/merge_requests/${mr.json.iid}/merge`, { user: 'maintainer' });
  assert.equal(merged.status, 200, merged.text);
  assert.equal(merged.json.mergeRequest.state, 'merged');
  assert.equal(merged.json.mergeRequest.merged_by.username, 'maintainer');
  assert.deepEqual(merged.json.deliveries.map((d) => d.event), ['Merge Request Hook', 'Push Hook']);
});

test('issues', async () => {
  const a = await control('POST', '/issues', { title: 'Bug', labels: ['bug', 'p1'] });
  assert.equal(a.status, 201);
  assert.equal(a.json.deliveries[0].event, 'Issue Hook');
  await control('POST', '/issues', { title: 'Other', labels: 'bug' });
  assert.equal((await api('GET', '/issues?labels=bug,p1')).json.length, 1);
  assert.equal((await api('GET', '/issues?labels=bug&state=opened')).json.length, 2);
  const one = await api('GET', '/issues/1');
  const etag = one.headers.get('etag');
  await control('POST', '/issues/1/labels', { labels: ['bug'] });
  const changed = await api('GET', '/issues/1', { headers: { 'If-None-Match': etag } });
  assert.equal(changed.status, 200);
  assert.deepEqual(changed.json.labels, ['bug']);
  await control('POST', '/issues/1/close', {});
  assert.equal((await api('GET', '/issues?state=closed')).json.length, 1);
  await control('POST', '/issues/1/reopen', {});
  const mv = await control('POST', '/issues/2/move', {});
  assert.equal(mv.json.issue.state, 'closed');
  assert.ok(mv.json.issue.moved_to_id);
  assert.equal((await api('GET', '/issues/2')).json.moved_to_id, mv.json.issue.moved_to_id);
  const ih = ctx.hooks.got.filter((h) => h.body.object_kind === 'issue').pop();
  assert.equal(ih.body.object_attributes.action, 'close');
});

test("an issue's label events name who added and removed each label", async () => {
  const a = await control('POST', '/issues', { title: 'From a template', labels: ['agent'], user: 'outsider' });
  const n = a.json.issue.iid;
  await control('POST', `/issues/${n}/labels`, { labels: ['bug'], user: 'octo' });
  await control('POST', `/issues/${n}/labels`, { labels: ['bug', 'agent'], user: 'octo' });
  const r = await api('GET', `/issues/${n}/resource_label_events`);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.map((e) => [e.action, e.label.name, e.user.username]), [['add', 'agent', 'outsider'], ['remove', 'agent', 'octo'], ['add', 'bug', 'octo'], ['add', 'agent', 'octo']]);
  assert.equal(r.json[0].resource_type, 'Issue');
  assert.equal((await api('GET', '/issues/999/resource_label_events')).status, 404);
});

test('validation catches a corrupted answer', async () => {
  await control('POST', '/corrupt', { route: 'GET /projects/:id/merge_requests/:iid', set: { iid: 'not-a-number' }, delete: ['diff_refs'] });
  const r = await api('GET', '/merge_requests/1');
  assert.equal(r.status, 500);
  assert.ok(r.json.errors.length >= 2);
  const bugs = await control('GET', '/bugs');
  assert.ok(bugs.json.bugs.some((b) => /ExpandedMergeRequestSchema/.test(b.what)));
  assert.match(ctx.stderr(), /BUG: /);
  assert.equal((await api('GET', '/merge_requests/1')).status, 200);
  await control('DELETE', '/bugs');
});

test('faults, rate limit, request counts, state, webhooks log', async () => {
  await control('POST', '/faults', { status: 502, route: 'GET /projects/:id/pipelines', count: 1 });
  assert.equal((await api('GET', '/pipelines')).status, 502);
  assert.equal((await api('GET', '/pipelines')).status, 200);
  await control('POST', '/faults', { delayMs: 50, route: 'GET /projects/:id' });
  const t0 = Date.now();
  assert.equal((await api('GET', '')).status, 200);
  assert.ok(Date.now() - t0 >= 45);
  assert.equal((await control('GET', '/faults')).json.faults.length, 2);
  await control('DELETE', '/faults');
  await control('POST', '/rate-limit', { remaining: 1, resetIn: 30 });
  assert.equal((await api('GET', '')).status, 200);
  const limited = await api('GET', '');
  assert.equal(limited.status, 429);
  assert.equal(limited.headers.get('content-type'), 'text/plain');
  assert.equal(limited.text, 'Retry later\n');
  assert.ok(Number(limited.headers.get('retry-after')) > 0);
  await control('POST', '/rate-limit', { limit: 2000, resetIn: 60 });
  const counts = await control('GET', '/requests');
  assert.ok(counts.json.byRoute['GET /projects/:id/merge_requests'].total >= 3);
  assert.ok(counts.json.byRoute['GET /projects/:id'].byStatus['429'] >= 1);
  await control('DELETE', '/requests');
  assert.equal((await control('GET', '/requests')).json.total, 0);
  const state = await control('GET', '/state');
  const p = state.json.projects[0];
  assert.equal(p.path, 'acme/widgets');
  for (const k of ['mergeRequests', 'pipelines', 'jobs', 'discussions', 'approvals', 'reviewers', 'issues']) assert.ok(Array.isArray(p[k]), k);
  const hooks = await control('GET', '/webhooks?payloads=1');
  assert.ok(hooks.json.deliveries.length > 10);
  assert.ok(hooks.json.deliveries.every((d) => !d.invalid), JSON.stringify(hooks.json.deliveries.filter((d) => d.invalid).map((d) => d.errors)));
  const kinds = new Set(ctx.hooks.got.map((h) => h.headers['x-gitlab-event']));
  for (const k of ['Merge Request Hook', 'Pipeline Hook', 'Job Hook', 'Note Hook', 'Issue Hook', 'Push Hook']) assert.ok(kinds.has(k), k);
  assert.deepEqual((await control('GET', '/bugs')).json.bugs, []);
});

// A branch of `name` off origin/main with one new file, pushed to the bare repository.
function branch(name, file) {
  const w = ctx.repo.work;
  git(w, ['fetch', '-q', 'origin']);
  git(w, ['checkout', '-q', '-B', name, 'origin/main']);
  commit(w, name, { [file]: `${name}\n` }, `${name} change`);
}

test('identities: each token acts as its own user', async () => {
  const me = await call('GET', '/api/v4/user');
  assert.equal(me.status, 200, me.text);
  assert.equal(me.json.username, 'octo');
  const rita = await call('GET', '/api/v4/user', { token: RITA });
  assert.equal(rita.json.username, 'rita');
  assert.equal(rita.json.email, 'rita@users.noreply.gitlab.example');
  assert.equal((await call('GET', '/api/v4/user', { token: OSCAR })).json.username, 'oscar');
  assert.deepEqual((await call('GET', '/api/v4/user', { token: 'glpat-nobody' })).json, { message: '401 Unauthorized' });
  assert.equal((await call('GET', '/api/v4/user', { token: null })).status, 401);
  const bearer = await call('GET', '/api/v4/user', { token: null, headers: { Authorization: `Bearer ${OSCAR}` } });
  assert.equal(bearer.json.username, 'oscar');

  branch('rita-fix', 'rita.txt');
  const mr = await api('POST', '/merge_requests', { body: { source_branch: 'rita-fix', target_branch: 'main', title: 'Rita fixes' }, token: RITA });
  assert.equal(mr.status, 201, mr.text);
  assert.equal(mr.json.author.username, 'rita');
  const hook = ctx.hooks.got.filter((h) => h.body.object_kind === 'merge_request').pop();
  assert.equal(hook.body.user.username, 'rita');
  assert.equal(hook.body.object_attributes.action, 'open');
  const iid = mr.json.iid;
  const note = await api('POST', `/merge_requests/${iid}/notes`, { body: { body: 'looks fine' }, token: OSCAR });
  assert.equal(note.json.author.username, 'oscar');
  const thread = await api('POST', `/merge_requests/${iid}/discussions`, { body: { body: 'one question' }, token: OSCAR });
  assert.equal(thread.json.notes[0].author.username, 'oscar');
  const resolved = await api('PUT', `/merge_requests/${iid}/discussions/${thread.json.id}?resolved=true`, { token: RITA });
  assert.equal(resolved.json.notes[0].resolved_by.username, 'rita');
  const counts = (await control('GET', '/requests')).json;
  assert.ok(counts.byUser.rita >= 3 && counts.byUser.oscar >= 3, JSON.stringify(counts.byUser));
  assert.deepEqual((await control('GET', '/state')).json.users, ['octo', 'rita', 'oscar']);
  assert.deepEqual((await control('GET', '/bugs')).json.bugs, []);
});

test('the author cannot approve their own merge request unless the project allows it', async () => {
  const iid = (await api('GET', '/merge_requests?source_branch=rita-fix')).json[0].iid;
  const settings = await api('GET', '/approvals');
  assert.equal(settings.status, 200, settings.text);
  assert.equal(settings.json.merge_requests_author_approval, false);
  // The sha is checked first, then the author.
  assert.equal((await api('POST', `/merge_requests/${iid}/approve`, { body: { sha: 'e'.repeat(40) }, token: RITA })).status, 409);
  const self = await api('POST', `/merge_requests/${iid}/approve`, { body: {}, token: RITA });
  assert.equal(self.status, 401);
  assert.deepEqual(self.json, { message: '401 Unauthorized' });
  let a = await api('GET', `/merge_requests/${iid}/approvals`, { token: RITA });
  assert.equal(a.json.user_can_approve, false);
  assert.deepEqual(a.json.approved_by, []);
  const human = await control('POST', '/approve', { iid, user: 'rita' });
  assert.equal(human.status, 401);
  assert.match(human.json.error, /prevents approval by the author/);
  assert.equal((await api('GET', `/merge_requests/${iid}/approvals`, { token: OSCAR })).json.user_can_approve, true);
  const other = await api('POST', `/merge_requests/${iid}/approve`, { body: {}, token: OSCAR });
  assert.equal(other.status, 201, other.text);
  assert.deepEqual(other.json.approved_by.map((x) => x.user.username), ['oscar']);
  assert.equal(other.json.user_has_approved, true);
  assert.equal(other.json.user_can_approve, false);
  assert.equal((await api('POST', `/merge_requests/${iid}/approve`, { body: {}, token: OSCAR })).status, 401);

  const allow = await control('POST', '/settings', { mergeRequestsAuthorApproval: true });
  assert.equal(allow.json.settings.mergeRequestsAuthorApproval, true);
  assert.equal((await api('GET', '/approvals')).json.merge_requests_author_approval, true);
  a = await api('GET', `/merge_requests/${iid}/approvals`, { token: RITA });
  assert.equal(a.json.user_can_approve, true);
  const now = await api('POST', `/merge_requests/${iid}/approve`, { body: {}, token: RITA });
  assert.equal(now.status, 201, now.text);
  assert.deepEqual(now.json.approved_by.map((x) => x.user.username).sort(), ['oscar', 'rita']);
  assert.equal((await control('POST', '/settings', { mergeRequestsAuthorApproval: 'maybe' })).status, 400);
  assert.equal((await control('POST', '/settings', { mergeRequestAuthorApproval: true })).status, 400);
  await control('POST', '/settings', { mergeRequestsAuthorApproval: false });
  assert.equal((await api('GET', '/approvals')).json.merge_requests_author_approval, false);
});

test('job trace: conditional like every answer, exact match only, every read counted', async () => {
  const r = await control('POST', '/pipelines', { branch: 'rita-fix', jobs: [{ name: 'probe', status: 'running', log: 'tick 1' }, { name: 'queued', status: 'pending' }] });
  const probe = r.json.jobs.find((j) => j.name === 'probe').id;
  const queued = r.json.jobs.find((j) => j.name === 'queued').id;
  await control('DELETE', '/requests');
  const first = await api('GET', `/jobs/${probe}/trace`);
  assert.equal(first.status, 200);
  assert.match(first.text, /tick 1/);
  assert.equal(first.headers.get('content-disposition'), `infile; filename="${probe}.log"`);
  const etag = first.headers.get('etag');
  assert.match(etag, /^W\/"[0-9a-f]{32}"$/);
  const same = await api('GET', `/jobs/${probe}/trace`, { headers: { 'If-None-Match': etag } });
  assert.equal(same.status, 304);
  assert.equal(same.text, '');
  // Rack::ConditionalGet compares the whole header with the ETag: a list never matches.
  assert.equal((await api('GET', `/jobs/${probe}/trace`, { headers: { 'If-None-Match': `W/"0000", ${etag}` } })).status, 200);
  await control('POST', `/jobs/${probe}`, { status: 'running', log: 'tick 1\ntick 2' });
  const grown = await api('GET', `/jobs/${probe}/trace`, { headers: { 'If-None-Match': etag } });
  assert.equal(grown.status, 200);
  assert.match(grown.text, /tick 2/);
  assert.notEqual(grown.headers.get('etag'), etag);
  // An empty log has no ETag, so a conditional read of it is always answered in full.
  const empty = await api('GET', `/jobs/${queued}/trace`, { headers: { 'If-None-Match': '*' } });
  assert.equal(empty.status, 200);
  assert.equal(empty.text, '');
  assert.equal(empty.headers.get('etag'), null);
  assert.equal(empty.headers.get('cache-control'), 'no-cache');
  const counts = (await control('GET', '/requests')).json;
  const traces = counts.byRoute['GET /projects/:id/jobs/:job_id/trace'];
  assert.equal(traces.total, 5);
  assert.deepEqual(traces.byStatus, { 200: 4, 304: 1 });
  assert.equal(traces.byPath[`/projects/acme%2Fwidgets/jobs/${probe}/trace`], 4);
  assert.equal(counts.counted, 5);
});

test('rate limit: one window per user, 429 in plain text', async (t) => {
  t.after(() => control('POST', '/rate-limit', { limit: 2000, resetIn: 60 }));
  assert.equal((await control('POST', '/rate-limit', { user: 'nobody', remaining: 0 })).status, 400);
  const set = await control('POST', '/rate-limit', { user: 'rita', remaining: 0, resetIn: 30 });
  assert.equal(set.json.rate.remaining, 0);
  assert.equal(set.json.windows.octo.remaining > 0, true);
  const limited = await call('GET', '/api/v4/user', { token: RITA });
  assert.equal(limited.status, 429);
  assert.equal(limited.text, 'Retry later\n');
  assert.equal(limited.headers.get('ratelimit-name'), 'throttle_authenticated_api');
  assert.equal(limited.headers.get('ratelimit-remaining'), '0');
  assert.ok(Number(limited.headers.get('retry-after')) > 0);
  const octo = await call('GET', '/api/v4/user');
  assert.equal(octo.status, 200);
  assert.equal(octo.headers.get('ratelimit-name'), 'throttle_authenticated_api');
  await control('POST', '/rate-limit', { limit: 2000, resetIn: 60 });
  assert.equal((await call('GET', '/api/v4/user', { token: RITA })).status, 200);
  assert.deepEqual((await control('GET', '/bugs')).json.bugs, []);
});
