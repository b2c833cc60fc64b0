// The stand-in: state, GitLab's REST v4 routes, the control API under /_standin/, and the HTTP
// pipeline (auth, injected faults, rate limit, validation, conditional GETs, pagination).
// README.md lists the rules of GitLab it enforces and where each is documented.
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');

const { Git } = require('./git');
const { Render } = require('./render');
const { Schemas } = require('./schemas');
const { Webhooks } = require('./webhooks');
const U = require('./util');

const { Reply, message, ControlError, bad, tick } = U;
// GitLab's username rule, simplified: letters, digits, '_', '-' and '.', not starting with '-'.
const USERNAME = /^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,254}$/;
const ZERO = '0'.repeat(40);
const FINISHED = ['success', 'failed', 'canceled', 'skipped'];
const JOB_STATUSES = ['success', 'failed', 'running', 'pending', 'canceled', 'created', 'skipped', 'manual'];
const REVIEW_STATES = ['requested_changes', 'approved', 'reviewed', 'unreviewed', 'review_started'];

function pipelineStatus(jobs) {
  const live = jobs.filter((j) => !j.retried);
  if (!live.length) return 'created';
  const has = (s) => live.some((j) => j.status === s);
  if (has('running')) return 'running';
  if (has('pending') || has('created')) return live.some((j) => FINISHED.includes(j.status)) ? 'running' : 'pending';
  if (live.some((j) => j.status === 'failed' && !j.allowFailure)) return 'failed';
  if (has('canceled')) return 'canceled';
  return 'success';
}

function sortBy(items, orderBy, sort, fields) {
  const key = fields[orderBy] || fields.default;
  const dir = sort === 'asc' ? 1 : -1;
  return [...items].sort((a, b) => (key(a) < key(b) ? -dir : key(a) > key(b) ? dir : 0));
}

class StandIn {
  // projects: [{path: 'group/name', gitDir}]; token (belongs to username); identities:
  // [{token, username}], more tokens each acting as its own user; webhook: {url, token}; webUrl.
  // members: [{username, level}], more members of every project with their access level (the
  // owner is an Owner (50), each identity a Developer (30)).
  constructor({ projects = [], token = null, identities = [], members = [], webhook = null, username = 'octo', webUrl = 'http://gitlab.example', log } = {}) {
    this.memberSpecs = members;
    this.log = log || ((line) => process.stderr.write(`gitlab-standin: ${line}\n`));
    this.specs = projects;
    this.token = token || null;
    this.username = username;
    // token -> username. With no token at all there is no auth and every request acts as
    // `username`.
    this.tokens = new Map(this.token ? [[this.token, username]] : []);
    for (const i of identities) {
      if (!i.token || !i.username) throw new Error('an identity needs a token and a username');
      if (this.tokens.has(i.token) && this.tokens.get(i.token) !== i.username) throw new Error(`token of ${i.username} already belongs to ${this.tokens.get(i.token)}`);
      this.tokens.set(i.token, i.username);
    }
    this.webUrl = webUrl.replace(/\/+$/, '');
    this.webhook = webhook;
    this.render = new Render({ webUrl: this.webUrl });
    this.projects = [];
    this.bugs = [];
    this.faults = [];
    this.corruptions = [];
    this.mutex = new U.Mutex();
    // GitLab.com throttles authenticated API traffic per user: one window per user.
    this.rateLimit = 2000;
    this.windows = new Map();
    this.resetCounters();
    this.nextIdValue = 5000;
    this.routes = this.apiRoutes();
  }

  nextId() {
    this.nextIdValue += 1 + Math.floor(Math.random() * 5);
    return this.nextIdValue;
  }

  resetCounters() {
    this.counts = { total: 0, counted: 0, byRoute: {}, byUser: {} };
  }

  // Every user a request can act as: --username and the users of the tokens.
  users() {
    return [...new Set([this.username, ...this.tokens.values()])];
  }

  async init() {
    this.schemas = new Schemas({ log: this.log });
    this.hooks = new Webhooks({ url: this.webhook?.url, token: this.webhook?.token, instance: this.webUrl, schemas: this.schemas, log: this.log, bug: (what, errors) => this.bug(what, errors) });
    for (const spec of this.specs) await this.addProject(spec.path, spec.gitDir);
    if (!this.projects.length) throw new Error('give at least one --project and --git-dir');
  }

  async addProject(path, gitDir) {
    const m = /^([A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)*)\/([A-Za-z0-9_.-]+)$/.exec(path || '');
    if (!m) throw new Error(`project must be GROUP/NAME, not ${JSON.stringify(path)}`);
    const git = new Git(gitDir);
    const check = await git.run(['rev-parse', '--git-dir'], { allowCodes: [0, 128] });
    if (check.code !== 0) throw new Error(`${gitDir} is not a git repository`);
    const created = Date.now() - 86400000;
    const p = {
      id: U.stableId(`project:${path}`, 900000),
      path,
      namespace: m[1],
      name: m[2],
      owner: this.username,
      git,
      gitDir,
      defaultBranch: await git.defaultBranch(),
      createdAt: created,
      lastActivity: created,
      mergeRequests: [],
      pipelines: [],
      jobs: [],
      issues: [],
      movedIssues: [],
      // mergeRequestsAuthorApproval is GitLab's merge_requests_author_approval: false by
      // default, so the author of a merge request cannot approve it.
      settings: { approvalsRequired: 0, onlyAllowMergeIfPipelineSucceeds: false, mergeRequestsAuthorApproval: false },
      heads: new Map((await git.branches()).map((b) => [b.name, b.sha])),
      apiBase: '',
      // username -> access level (GitLab's numbers: 10 Guest, 20 Reporter, 30 Developer, 40
      // Maintainer, 50 Owner).
      members: new Map([
        ...[...this.tokens.values()].map((u) => [u, 30]),
        ...this.memberSpecs.map((m) => [m.username, m.level]),
        [this.username, 50],
      ]),
    };
    this.projects.push(p);
    return p;
  }

  listen(port = 0, host = '127.0.0.1') {
    this.server = http.createServer((req, res) => this.handle(req, res));
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        const addr = this.server.address();
        this.origin = `http://${host}:${addr.port}`;
        for (const p of this.projects) p.apiBase = `${this.origin}/api/v4`;
        resolve(addr.port);
      });
    });
  }

  close() {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  bug(what, errors) {
    const entry = { at: new Date().toISOString(), what, errors: (errors || []).slice(0, 20) };
    this.bugs.push(entry);
    this.log(`BUG: ${what}: ${JSON.stringify(entry.errors)}`);
  }

  async handle(req, res) {
    let reply;
    const url = new URL(req.url, 'http://localhost');
    try {
      const raw = await U.readBody(req);
      if (url.pathname.startsWith('/api/v4/') || url.pathname === '/api/v4') reply = await this.api(req, url, raw);
      else if (url.pathname.startsWith('/_standin/')) reply = await this.control(req, url, raw);
      else {
        this.log(`unimplemented: ${req.method} ${url.pathname}`);
        reply = message(404, '404 Not Found');
      }
    } catch (e) {
      this.log(`error on ${req.method} ${req.url}: ${e.stack || e.message}`);
      reply = message(500, `500 Internal Server Error: ${e.message}`);
    }
    this.send(res, reply, req.method);
  }

  send(res, reply, method) {
    const headers = { ...reply.headers };
    let body = '';
    if (reply.status !== 304 && reply.body !== undefined && reply.body !== null) {
      body = bodyText(reply);
      headers['Content-Type'] ||= reply.text ? 'text/plain; charset=utf-8' : 'application/json';
    }
    headers['Content-Length'] = Buffer.byteLength(body);
    res.writeHead(reply.status, headers);
    res.end(method === 'HEAD' ? undefined : body);
  }

  // --- the API pipeline ---

  // The user's one-minute window, started or renewed as needed.
  window(user) {
    const now = Math.floor(Date.now() / 1000);
    let w = this.windows.get(user);
    if (!w) {
      w = { remaining: this.rateLimit, reset: now + 60, observed: 0 };
      this.windows.set(user, w);
    }
    if (now >= w.reset) Object.assign(w, { reset: now + 60, remaining: this.rateLimit, observed: 0 });
    return w;
  }

  rateHeaders(user) {
    const w = this.window(user);
    return {
      'RateLimit-Name': 'throttle_authenticated_api',
      'RateLimit-Limit': String(this.rateLimit),
      'RateLimit-Remaining': String(Math.max(0, w.remaining)),
      'RateLimit-Reset': String(w.reset),
      'RateLimit-Observed': String(w.observed),
      'RateLimit-ResetTime': new Date(w.reset * 1000).toUTCString(),
    };
  }

  count(route, status, counted, path, user) {
    this.counts.total += 1;
    if (counted) this.counts.counted += 1;
    const r = (this.counts.byRoute[route] ||= { total: 0, byStatus: {}, byPath: {} });
    r.total += 1;
    r.byStatus[status] = (r.byStatus[status] || 0) + 1;
    r.byPath[path] = (r.byPath[path] || 0) + 1;
    if (user) this.counts.byUser[user] = (this.counts.byUser[user] || 0) + 1;
  }

  match(method, pathname) {
    const parts = pathname.replace(/^\/api\/v4/, '').split('/').filter(Boolean);
    for (const r of this.routes) {
      if (r.method !== method && !(method === 'HEAD' && r.method === 'GET')) continue;
      if (r.segs.length !== parts.length) continue;
      const params = {};
      let ok = true;
      for (let i = 0; i < parts.length; i++) {
        const s = r.segs[i];
        if (s.startsWith(':')) params[s.slice(1)] = decodeURIComponent(parts[i]);
        else if (s !== parts[i]) {
          ok = false;
          break;
        }
      }
      if (ok) return { route: r, params };
    }
    return null;
  }

  async api(req, url, raw) {
    const found = this.match(req.method, url.pathname);
    const routeName = found ? `${found.route.method} ${found.route.template}` : `${req.method} (unmatched)`;
    let reply;
    let counted = false;
    // The user the request acts as: its token's, or --username when there is no auth.
    let caller = this.username;
    if (this.tokens.size) {
      const auth = req.headers.authorization || '';
      const given = req.headers['private-token'] || (/^Bearer\s+(.+)$/i.exec(auth) || [])[1];
      caller = (given !== undefined && this.tokens.get(given)) || null;
      if (!caller) reply = message(401, '401 Unauthorized');
    }
    if (!reply) {
      const w = this.window(caller);
      if (w.remaining <= 0) {
        // Rack::Attack's answer in GitLab: plain text, not JSON.
        reply = new Reply(429, 'Retry later\n', { text: true });
        reply.headers = { 'Content-Type': 'text/plain', 'Retry-After': String(Math.max(1, w.reset - Math.floor(Date.now() / 1000))) };
      } else {
        w.remaining -= 1;
        w.observed += 1;
        counted = true;
      }
    }
    if (!reply) {
      const fault = this.takeFault(routeName);
      if (fault) {
        if (fault.delayMs) await new Promise((r) => setTimeout(r, fault.delayMs));
        if (fault.status) reply = new Reply(fault.status, fault.body !== undefined ? fault.body : { message: `${fault.status} injected fault` }, { headers: fault.headers || {} });
      }
    }
    if (!reply && !found) {
      this.log(`unimplemented: ${req.method} ${url.pathname}`);
      reply = message(404, '404 Not Found');
    }
    if (!reply) {
      let input;
      try {
        input = { ...Object.fromEntries(url.searchParams), ...U.parseBody(raw, req.headers['content-type']) };
        for (const k of new Set(url.searchParams.keys())) if (k.endsWith('[]')) input[k.slice(0, -2)] = url.searchParams.getAll(k);
      } catch (e) {
        input = null;
        reply = message(400, `400 Bad request - ${e.message}`);
      }
      if (input) {
        const p = found.route.global ? null : this.projectFor(found.params.id);
        if (!p && !found.route.global) reply = message(404, '404 Project Not Found');
        else reply = await this.mutex.run(() => found.route.handler(p, found.params, input, url, caller));
        if (reply.list) reply = this.paginate(reply, input, url);
        reply = this.checked(reply, routeName);
      }
    }
    if (caller) reply.headers = { ...this.rateHeaders(caller), ...reply.headers };
    if ((req.method === 'GET' || req.method === 'HEAD') && reply.status === 200) reply = this.conditional(reply, req.headers['if-none-match']);
    this.count(routeName, reply.status, counted, url.pathname.replace(/^\/api\/v4/, ''), caller);
    return reply;
  }

  // What GitLab's Rails stack does to a 200 answer to a GET or HEAD: Rack::ETag sets a weak ETag,
  // the first 32 hex digits of the SHA-256 of the body, unless the body is empty (then
  // Cache-Control is no-cache and there is no ETag); Rack::ConditionalGet answers 304 with an
  // empty body when If-None-Match equals that ETag exactly (no lists, no `*`). This holds for
  // every route, the job trace included.
  conditional(reply, ifNoneMatch) {
    const body = bodyText(reply);
    if (body === '') {
      reply.headers['Cache-Control'] ||= 'no-cache';
      return reply;
    }
    const etag = `W/"${crypto.createHash('sha256').update(body).digest('hex').slice(0, 32)}"`;
    reply.headers.ETag = etag;
    reply.headers['Cache-Control'] ||= 'max-age=0, private, must-revalidate';
    if (ifNoneMatch === etag) {
      const headers = { ...reply.headers };
      delete headers['Content-Type'];
      return new Reply(304, null, { headers });
    }
    return reply;
  }

  takeFault(routeName) {
    const f = this.faults.find((x) => x.remaining > 0 && (!x.route || x.route === routeName));
    if (!f) return null;
    f.remaining -= 1;
    f.used += 1;
    return f;
  }

  // Fills, corrupts (when asked to) and validates a 2xx answer against its schema type.
  checked(reply, routeName) {
    if (!reply.type || reply.status >= 300 || reply.text) return reply;
    let body = this.schemas.fill(reply.type, reply.body);
    if (reply.noteType) for (const d of Array.isArray(body) ? body : [body]) d.notes = (d.notes || []).map((n) => this.schemas.fill(reply.noteType, n));
    for (const c of this.corruptions) {
      if (c.remaining <= 0 || (c.route && c.route !== routeName)) continue;
      c.remaining -= 1;
      body = structuredClone(body);
      for (const [k, v] of Object.entries(c.set || {})) U.setPath(body, k, v, false);
      for (const k of c.delete || []) U.setPath(body, k, undefined, true);
    }
    let errors = this.schemas.validate(reply.type, body);
    if (reply.noteType) {
      const notes = (Array.isArray(body) ? body : [body]).flatMap((d, i) => (d.notes || []).map((n, j) => [i, j, n]));
      for (const [i, j, n] of notes) for (const e of this.schemas.validate(reply.noteType, n)) errors.push({ ...e, instancePath: `${Array.isArray(body) ? `/${i}` : ''}/notes/${j}${e.instancePath}` });
    }
    if (errors.length) {
      this.bug(`${routeName} answer does not validate against ${reply.type}`, errors);
      return new Reply(500, { message: '500 Internal Server Error', standin: `answer does not validate against ${reply.type}`, errors: errors.slice(0, 20) });
    }
    reply.body = body;
    return reply;
  }

  paginate(reply, input, url) {
    const all = reply.body;
    const perPage = Math.min(100, Math.max(1, Number(input.per_page) || 20));
    const total = all.length;
    const pages = Math.max(1, Math.ceil(total / perPage));
    const page = Math.max(1, Number(input.page) || 1);
    reply.body = all.slice((page - 1) * perPage, page * perPage);
    const link = (n) => {
      const u = new URL(url.pathname + url.search, this.origin);
      u.searchParams.set('page', String(n));
      u.searchParams.set('per_page', String(perPage));
      return u.toString();
    };
    const links = [];
    if (page > 1) links.push(`<${link(page - 1)}>; rel="prev"`);
    if (page < pages) links.push(`<${link(page + 1)}>; rel="next"`);
    links.push(`<${link(1)}>; rel="first"`, `<${link(pages)}>; rel="last"`);
    reply.headers = {
      ...reply.headers,
      Link: links.join(', '),
      'X-Page': String(page),
      'X-Per-Page': String(perPage),
      'X-Next-Page': page < pages ? String(page + 1) : '',
      'X-Prev-Page': page > 1 ? String(page - 1) : '',
      'X-Total': String(total),
      'X-Total-Pages': String(pages),
    };
    return reply;
  }

  projectFor(id) {
    if (id === undefined || id === null || id === '') return this.projects[0];
    const s = String(id);
    return this.projects.find((p) => String(p.id) === s || p.path.toLowerCase() === s.toLowerCase()) || null;
  }

  // --- the model ---

  mr(p, iid) {
    return p.mergeRequests.find((m) => m.iid === Number(iid)) || null;
  }

  latestPipeline(p, sha) {
    return p.pipelines.filter((pl) => pl.sha === sha).sort((a, b) => b.id - a.id)[0] || null;
  }

  // Why `user` may not approve `mr` ('approved' or 'author'), or null when they may. GitLab's
  // ApprovalState#eligible_for_approval_by?: a user approves once, and the author only when
  // the project allows it (merge_requests_author_approval).
  approvalRefusal(p, mr, user) {
    if (mr.approvals.has(user)) return 'approved';
    if (mr.author === user && !p.settings.mergeRequestsAuthorApproval) return 'author';
    return null;
  }

  // The approval state of `mr` as `viewer` sees it (user_has_approved, user_can_approve).
  async approvalsFor(p, mr, viewer) {
    return this.render.approvals(p, await this.mrView(p, mr), { viewer, canApprove: !this.approvalRefusal(p, mr, viewer) });
  }

  // The live view of a merge request: heads re-read from the repository while it is open.
  async mrView(p, mr) {
    let head;
    let targetHead;
    let base;
    let hasConflicts = false;
    let changedPaths = [];
    if (mr.state === 'opened' || mr.state === 'closed') {
      head = (await p.git.branchSha(mr.sourceBranch)) || mr.knownHead;
      targetHead = (await p.git.branchSha(mr.targetBranch)) || mr.knownTarget;
      base = (await p.git.mergeBase(targetHead, head)) || targetHead;
      const mt = await p.git.mergeTree(targetHead, head);
      hasConflicts = !mt.clean;
      changedPaths = await p.git.diffPaths(targetHead, head);
    } else {
      ({ head, targetHead, base, changedPaths } = mr.frozen);
    }
    const approvalsRequired = p.settings.approvalsRequired;
    const approvalsLeft = Math.max(0, approvalsRequired - mr.approvals.size);
    const pipeline = this.latestPipeline(p, head);
    let detailed = 'mergeable';
    if (mr.state !== 'opened') detailed = 'not_open';
    else if (mr.draft) detailed = 'draft_status';
    else if (hasConflicts) detailed = 'conflict';
    else if (approvalsLeft > 0) detailed = 'not_approved';
    else if (p.settings.onlyAllowMergeIfPipelineSucceeds && (!pipeline || pipeline.status !== 'success')) detailed = pipeline && ['running', 'pending', 'created'].includes(pipeline.status) ? 'ci_still_running' : 'ci_must_pass';
    return { mr, head, targetHead, base, hasConflicts, changedPaths, approvalsRequired, approvalsLeft, pipeline, detailed, mergeStatus: hasConflicts ? 'cannot_be_merged' : 'can_be_merged' };
  }

  async commit(p, sha) {
    return p.git.commitInfo(sha);
  }

  emit(out, event, type, payload) {
    const d = this.hooks.deliver(event, type, payload);
    if (d) out.push(d);
  }

  async emitMr(p, mr, action, actor, out, extra) {
    const v = await this.mrView(p, mr);
    this.emit(out, 'Merge Request Hook', 'WebhookMergeRequestEventSchema', this.schemas.fill('WebhookMergeRequestEventSchema', this.render.mergeRequestHook(p, v, await this.commit(p, v.head), action, actor, extra)));
  }

  async emitPipeline(p, pl, out) {
    const jobs = p.jobs.filter((j) => j.pipelineId === pl.id && !j.retried);
    const mr = pl.mrIid ? this.mr(p, pl.mrIid) : null;
    const v = mr ? await this.mrView(p, mr) : null;
    this.emit(out, 'Pipeline Hook', 'WebhookPipelineEventSchema', this.schemas.fill('WebhookPipelineEventSchema', this.render.pipelineHook(p, pl, jobs, await this.commit(p, pl.sha), v)));
  }

  async emitJob(p, j, out) {
    const pl = p.pipelines.find((x) => x.id === j.pipelineId);
    this.emit(out, 'Job Hook', 'WebhookJobEventSchema', this.schemas.fill('WebhookJobEventSchema', this.render.jobHook(p, j, pl, await this.commit(p, pl.sha))));
  }

  emitIssue(p, issue, action, actor, out, changes) {
    this.emit(out, 'Issue Hook', 'WebhookIssueEventSchema', this.schemas.fill('WebhookIssueEventSchema', this.render.issueHook(p, issue, action, actor, changes)));
  }

  async emitPush(p, branch, before, after, pusher, out) {
    const shas = /^0+$/.test(after) ? [] : await p.git.commitsBetween(/^0+$/.test(before) ? null : before, after, 20);
    const commits = [];
    for (const sha of shas) commits.push({ ...(await this.commit(p, sha)), files: await p.git.changedFiles(sha) });
    const payload = this.render.pushHook(p, { ref: `refs/heads/${branch}`, before, after, commits, pusher, total: shas.length });
    this.emit(out, 'Push Hook', 'WebhookPushEventSchema', this.schemas.fill('WebhookPushEventSchema', payload));
  }

  async resolveCommit(p, input) {
    if (input.sha) {
      const sha = await p.git.resolve(String(input.sha));
      if (!sha) throw bad(`unknown commit ${input.sha}`);
      const branch = (await p.git.branches()).find((b) => b.sha === sha);
      return { sha, branch: branch ? branch.name : input.ref || p.defaultBranch };
    }
    if (input.branch) {
      const sha = await p.git.branchSha(String(input.branch));
      if (!sha) throw bad(`unknown branch ${input.branch}`);
      return { sha, branch: String(input.branch) };
    }
    if (input.iid !== undefined) {
      const mr = this.mr(p, input.iid);
      if (!mr) throw new ControlError(404, `no merge request !${input.iid}`);
      const v = await this.mrView(p, mr);
      return { sha: v.head, branch: mr.sourceBranch, mr };
    }
    throw bad('name a commit by sha, branch or iid');
  }

  settleJob(j, status, log) {
    const now = tick();
    if (!JOB_STATUSES.includes(status)) throw bad(`job status must be one of ${JOB_STATUSES.join(', ')}`);
    j.status = status;
    if (log !== undefined) j.log = String(log);
    if (status !== 'pending' && status !== 'created' && !j.startedAt) j.startedAt = now;
    if (FINISHED.includes(status)) j.finishedAt = now;
    else j.finishedAt = null;
    j.updatedAt = now;
  }

  recompute(p, pl, explicit) {
    const jobs = p.jobs.filter((j) => j.pipelineId === pl.id);
    const before = pl.status;
    pl.status = explicit || pipelineStatus(jobs);
    const now = tick();
    pl.updatedAt = now;
    if (pl.status !== 'pending' && pl.status !== 'created' && !pl.startedAt) pl.startedAt = now;
    if (FINISHED.includes(pl.status)) {
      pl.finishedAt = pl.finishedAt && before === pl.status ? pl.finishedAt : now;
      pl.duration = Math.max(0, Math.round((pl.finishedAt - (pl.startedAt || pl.createdAt)) / 1000));
    } else {
      pl.finishedAt = null;
      pl.duration = null;
    }
  }

  addJob(p, pl, spec, { retryOf } = {}) {
    const now = tick();
    const j = {
      id: this.nextId(),
      pipelineId: pl.id,
      name: String(spec.name || 'test'),
      stage: String(spec.stage || 'test'),
      status: 'pending',
      log: spec.log !== undefined ? String(spec.log) : '',
      allowFailure: U.truthy(spec.allowFailure ?? spec.allow_failure ?? false),
      retried: false,
      retryCount: retryOf ? (retryOf.retryCount || 0) + 1 : 0,
      createdAt: now,
      startedAt: null,
      finishedAt: null,
      sha: pl.sha,
      ref: pl.ref,
    };
    if (!spec.name && !retryOf) throw bad('every job needs a name');
    this.settleJob(j, spec.status || 'pending', spec.log);
    p.jobs.push(j);
    return j;
  }

  async createMr(p, input) {
    const { source_branch: source, target_branch: target } = input;
    let title = input.title;
    if (!source || !target || !title) return message(400, '400 Bad request - source_branch, target_branch, title are missing');
    const head = await p.git.branchSha(String(source));
    const targetHead = await p.git.branchSha(String(target));
    if (!head || !targetHead) return new Reply(404, { message: '404 Branch Not Found' });
    if (source === target) return new Reply(422, { message: ['You can\'t use same project/branch for source and target'] });
    const dup = p.mergeRequests.find((m) => m.state === 'opened' && m.sourceBranch === source && m.targetBranch === target);
    if (dup) return new Reply(409, { message: [`Another open merge request already exists for this source branch: !${dup.iid}`] });
    title = String(title);
    let draft = U.truthy(input.draft);
    if (/^(\[draft\]|\(draft\)|draft:|draft -|\[wip\]|wip:)\s*/i.test(title)) draft = true;
    if (draft && !/^draft:/i.test(title)) title = `Draft: ${title.replace(/^(\[draft\]|\(draft\)|draft -|\[wip\]|wip:)\s*/i, '')}`;
    const now = tick();
    const mr = {
      id: this.nextId(),
      iid: p.mergeRequests.reduce((n, m) => Math.max(n, m.iid), 0) + 1,
      title,
      description: input.description != null ? String(input.description) : null,
      sourceBranch: String(source),
      targetBranch: String(target),
      author: input.author || this.username,
      state: 'opened',
      draft,
      labels: input.labels ? String(input.labels).split(',').filter(Boolean) : [],
      squash: U.truthy(input.squash),
      shouldRemoveSourceBranch: input.remove_source_branch !== undefined ? U.truthy(input.remove_source_branch) : null,
      forceRemoveSourceBranch: U.truthy(input.remove_source_branch),
      createdAt: now,
      updatedAt: now,
      mergedAt: null,
      mergedBy: null,
      closedAt: null,
      closedBy: null,
      mergeCommitSha: null,
      squashCommitSha: null,
      knownHead: head,
      knownTarget: targetHead,
      approvals: new Map(),
      reviewers: new Map(),
      discussions: [],
      frozen: null,
    };
    p.mergeRequests.push(mr);
    return mr;
  }

  // Merges for real: a merge commit (or a squash commit and a merge commit) on the target.
  async mergeMr(p, mr, { sha, squash, message: msg, removeSource, actor }, out) {
    const v = await this.mrView(p, mr);
    if (mr.state !== 'opened' || mr.draft || v.approvalsLeft > 0) return message(405, '405 Method Not Allowed');
    if (p.settings.onlyAllowMergeIfPipelineSucceeds && (!v.pipeline || v.pipeline.status !== 'success')) return message(405, '405 Method Not Allowed');
    if (sha && sha !== v.head) return message(409, `SHA does not match HEAD of source branch: ${v.head}`);
    if (v.hasConflicts) return message(406, 'Branch cannot be merged');
    const doSquash = squash !== undefined ? U.truthy(squash) : mr.squash;
    const mt = await p.git.mergeTree(v.targetHead, v.head);
    const headInfo = await this.commit(p, v.head);
    const author = { name: this.render.user(actor).name, email: this.render.email(actor) };
    let squashSha = null;
    let parent2 = v.head;
    if (doSquash) {
      squashSha = await p.git.commitTree(mt.tree, [v.targetHead], `${mr.title}\n`, headInfo.author);
      parent2 = squashSha;
    }
    const text = msg ? `${msg}\n` : `Merge branch '${mr.sourceBranch}' into '${mr.targetBranch}'\n\n${mr.title}\n\nSee merge request ${p.path}!${mr.iid}\n`;
    const mergeSha = await p.git.commitTree(mt.tree, [v.targetHead, parent2], text, author);
    if (!(await p.git.updateBranch(mr.targetBranch, mergeSha, v.targetHead))) return message(406, 'Branch cannot be merged');
    const now = tick();
    Object.assign(mr, { state: 'merged', mergedAt: now, mergedBy: actor, updatedAt: now, mergeCommitSha: mergeSha, squashCommitSha: squashSha, squash: doSquash });
    mr.frozen = { head: v.head, targetHead: v.targetHead, base: v.base, changedPaths: v.changedPaths };
    p.lastActivity = now;
    const before = p.heads.get(mr.targetBranch) || v.targetHead;
    p.heads.set(mr.targetBranch, mergeSha);
    if (U.truthy(removeSource) || mr.forceRemoveSourceBranch) {
      if (await p.git.deleteBranch(mr.sourceBranch, v.head)) p.heads.delete(mr.sourceBranch);
    }
    await this.emitMr(p, mr, 'merge', actor, out);
    await this.emitPush(p, mr.targetBranch, before, mergeSha, actor, out);
    return null;
  }

  async addDiscussion(p, mr, { body, position, author, individual }) {
    if (!body || !String(body).trim()) return message(400, '400 Bad request - body is missing');
    const now = tick();
    const note = { id: this.nextId(), body: String(body), author, createdAt: now, updatedAt: now, type: individual ? null : 'DiscussionNote', position: null };
    if (position) {
      const v = await this.mrView(p, mr);
      const newPath = position.new_path || position.old_path;
      if (!newPath || !v.changedPaths.includes(newPath)) return message(400, '400 Bad request - Note {:line_code=>["can\'t be blank", "must be a valid line code"], :position=>["is incomplete"]}');
      note.type = 'DiffNote';
      note.position = {
        base_sha: position.base_sha || v.base,
        start_sha: position.start_sha || v.targetHead,
        head_sha: position.head_sha || v.head,
        old_path: position.old_path || newPath,
        new_path: newPath,
        position_type: position.position_type || 'text',
        old_line: position.old_line != null ? Number(position.old_line) : null,
        new_line: position.new_line != null ? Number(position.new_line) : null,
      };
      const hash = crypto.createHash('sha1').update(newPath).digest('hex');
      note.lineCode = `${hash}_${note.position.old_line || 0}_${note.position.new_line || 0}`;
    }
    const d = { id: crypto.randomBytes(20).toString('hex'), individual: !!individual, notes: [note] };
    mr.discussions.push(d);
    mr.updatedAt = now;
    return { d, note };
  }

  async emitNote(p, mr, d, note, out) {
    const v = await this.mrView(p, mr);
    this.emit(out, 'Note Hook', 'WebhookMergeRequestNoteEventSchema', this.schemas.fill('WebhookMergeRequestNoteEventSchema', this.render.noteHook(p, v, d, note, await this.commit(p, v.head))));
  }

  issue(p, iid) {
    return p.issues.find((i) => i.iid === Number(iid)) || null;
  }

  // Records who added and removed which labels of an issue, going from `before` to `after`.
  labelEvents(issue, before, after, actor) {
    const at = tick();
    for (const name of before) if (!after.includes(name)) issue.labelEvents.push({ id: this.nextId(), user: actor, label: name, action: 'remove', at });
    for (const name of after) if (!before.includes(name)) issue.labelEvents.push({ id: this.nextId(), user: actor, label: name, action: 'add', at });
  }

  newIssue(p, { title, description, labels, author, projectId, projectPath, iid }) {
    const now = tick();
    const i = {
      id: this.nextId(),
      iid,
      projectId: projectId || p.id,
      projectPath: projectPath || p.path,
      title: String(title),
      description: description != null ? String(description) : null,
      labels: normalizeLabels(labels),
      state: 'opened',
      author,
      createdAt: now,
      updatedAt: now,
      closedAt: null,
      closedBy: null,
      movedToId: null,
      labelEvents: [],
    };
    i.webUrl = `${this.webUrl}/${i.projectPath}/-/issues/${i.iid}`;
    return i;
  }

  // --- GitLab's routes ---

  apiRoutes() {
    const routes = [];
    // Handlers get (project, params, input, url, caller); `caller` is the user the request acts
    // as. A global route has no project (and no :id).
    const add = (method, template, handler, { global = false } = {}) => routes.push({ method, template, segs: template.split('/').filter(Boolean), handler, global });
    const R = this.render;
    const needMr = (fn) => async (p, params, input, url, caller) => {
      const mr = this.mr(p, params.iid);
      if (!mr) return message(404, '404 Not found');
      return fn(p, mr, input, url, caller);
    };

    add('GET', '/user', async (p, params, input, url, caller) => new Reply(200, R.currentUser(caller), { type: 'ExpandedUserSchema' }), { global: true });

    add('GET', '/projects/:id', async (p) => new Reply(200, R.project(p), { type: 'ProjectSchema' }));

    // A member of the project by user id, inherited memberships included; 404 for a user who is
    // none (GitLab answers `404 Not found` the same for an unknown user).
    add('GET', '/projects/:id/members/all/:user_id', async (p, params) => {
      for (const [username, level] of p.members) {
        if (String(R.user(username).id) === String(params.user_id)) return new Reply(200, R.member(username, level));
      }
      return message(404, '404 Not found');
    });

    // The project's approval settings (Premium and up), merge_requests_author_approval among them.
    add('GET', '/projects/:id/approvals', async (p) => new Reply(200, R.approvalSettings(p), { type: 'ProjectLevelMergeRequestApprovalSchema' }));

    add('GET', '/projects/:id/merge_requests', async (p, params, q) => {
      let list = p.mergeRequests;
      if (q.source_branch) list = list.filter((m) => m.sourceBranch === q.source_branch);
      if (q.target_branch) list = list.filter((m) => m.targetBranch === q.target_branch);
      const state = q.state || 'all';
      if (state !== 'all') list = list.filter((m) => m.state === state);
      if (q.iids) list = list.filter((m) => [].concat(q.iids).map(Number).includes(m.iid));
      list = sortBy(list, q.order_by, q.sort, { default: (m) => m.createdAt, updated_at: (m) => m.updatedAt, title: (m) => m.title });
      const body = [];
      for (const m of list) body.push(R.mergeRequest(p, await this.mrView(p, m)));
      return new Reply(200, body, { type: 'MergeRequestSchema[]', list: true });
    });

    add('POST', '/projects/:id/merge_requests', async (p, params, input, url, caller) => {
      const mr = await this.createMr(p, { ...input, author: caller });
      if (mr instanceof Reply) return mr;
      const out = [];
      await this.emitMr(p, mr, 'open', caller, out);
      return new Reply(201, R.mergeRequest(p, await this.mrView(p, mr), { expanded: true }), { type: 'ExpandedMergeRequestSchema' });
    });

    add('GET', '/projects/:id/merge_requests/:iid', needMr(async (p, mr) => new Reply(200, R.mergeRequest(p, await this.mrView(p, mr), { expanded: true }), { type: 'ExpandedMergeRequestSchema' })));

    add('PUT', '/projects/:id/merge_requests/:iid/merge', needMr(async (p, mr, input, url, caller) => {
      const out = [];
      const err = await this.mergeMr(p, mr, { sha: input.sha, squash: input.squash, message: input.squash ? input.squash_commit_message : input.merge_commit_message, removeSource: input.should_remove_source_branch, actor: caller }, out);
      if (err) return err;
      return new Reply(200, R.mergeRequest(p, await this.mrView(p, mr), { expanded: true }), { type: 'ExpandedMergeRequestSchema' });
    }));

    add('GET', '/projects/:id/merge_requests/:iid/approvals', needMr(async (p, mr, input, url, caller) => new Reply(200, await this.approvalsFor(p, mr, caller), { type: 'MergeRequestLevelMergeRequestApprovalSchema' })));

    // GitLab checks the sha first (409), then asks ApprovalService, whose refusal (approved
    // already, or the author while merge_requests_author_approval is false) is
    // `unauthorized!`: 401 {"message":"401 Unauthorized"}.
    add('POST', '/projects/:id/merge_requests/:iid/approve', needMr(async (p, mr, input, url, caller) => {
      const v = await this.mrView(p, mr);
      if (input.sha && input.sha !== v.head) return message(409, `SHA does not match HEAD of source branch: ${v.head}`);
      if (this.approvalRefusal(p, mr, caller)) return message(401, '401 Unauthorized');
      mr.approvals.set(caller, tick());
      mr.updatedAt = tick();
      await this.emitMr(p, mr, 'approved', caller, []);
      return new Reply(201, await this.approvalsFor(p, mr, caller), { type: 'MergeRequestLevelMergeRequestApprovalSchema' });
    }));

    add('POST', '/projects/:id/merge_requests/:iid/unapprove', needMr(async (p, mr, input, url, caller) => {
      if (!mr.approvals.has(caller)) return message(404, '404 Not found');
      mr.approvals.delete(caller);
      mr.updatedAt = tick();
      await this.emitMr(p, mr, 'unapproved', caller, []);
      return new Reply(201, await this.approvalsFor(p, mr, caller), { type: 'MergeRequestLevelMergeRequestApprovalSchema' });
    }));

    add('GET', '/projects/:id/merge_requests/:iid/reviewers', needMr(async (p, mr) => new Reply(200, R.reviewers(p, mr), { type: 'MergeRequestReviewerSchema[]' })));

    add('GET', '/projects/:id/merge_requests/:iid/discussions', needMr(async (p, mr) => {
      const r = new Reply(200, mr.discussions.map((d) => R.discussion(p, mr, d)), { type: 'DiscussionSchema[]', list: true });
      r.noteType = 'MergeRequestDiscussionNoteSchema';
      return r;
    }));

    add('POST', '/projects/:id/merge_requests/:iid/discussions', needMr(async (p, mr, input, url, caller) => {
      const res = await this.addDiscussion(p, mr, { body: input.body, position: input.position, author: caller, individual: false });
      if (res instanceof Reply) return res;
      await this.emitNote(p, mr, res.d, res.note, []);
      const r = new Reply(201, R.discussion(p, mr, res.d), { type: 'DiscussionSchema' });
      r.noteType = 'MergeRequestDiscussionNoteSchema';
      return r;
    }));

    add('PUT', '/projects/:id/merge_requests/:iid/discussions/:discussion_id', async (p, params, input, url, caller) => {
      const mr = this.mr(p, params.iid);
      const d = mr && mr.discussions.find((x) => x.id === params.discussion_id);
      if (!d) return message(404, '404 Not found');
      if (input.resolved === undefined) return message(400, '400 Bad request - resolved is missing');
      const resolved = U.truthy(input.resolved);
      const resolvable = d.notes.filter((n) => n.type === 'DiffNote' || n.type === 'DiscussionNote');
      if (resolvable.length === 0) return message(400, '400 Bad request - Discussion is not resolvable');
      const now = tick();
      for (const n of resolvable) {
        n.resolved = resolved;
        n.resolvedBy = resolved ? caller : null;
        n.resolvedAt = resolved ? now : null;
        n.updatedAt = now;
      }
      mr.updatedAt = now;
      const r = new Reply(200, R.discussion(p, mr, d), { type: 'DiscussionSchema' });
      r.noteType = 'MergeRequestDiscussionNoteSchema';
      return r;
    });

    add('POST', '/projects/:id/merge_requests/:iid/notes', needMr(async (p, mr, input, url, caller) => {
      const res = await this.addDiscussion(p, mr, { body: input.body, author: caller, individual: true });
      if (res instanceof Reply) return res;
      await this.emitNote(p, mr, res.d, res.note, []);
      return new Reply(201, R.note(p, mr, res.d, res.note), { type: 'MergeRequestNoteSchema' });
    }));

    add('GET', '/projects/:id/pipelines', async (p, params, q) => {
      let list = p.pipelines;
      if (q.sha) list = list.filter((x) => x.sha === q.sha);
      if (q.ref) list = list.filter((x) => x.ref === q.ref);
      if (q.status) list = list.filter((x) => x.status === q.status);
      if (q.source) list = list.filter((x) => x.source === q.source);
      list = sortBy(list, q.order_by, q.sort, { default: (x) => x.id, updated_at: (x) => x.updatedAt, status: (x) => x.status, ref: (x) => x.ref });
      return new Reply(200, list.map((x) => R.pipeline(p, x)), { type: 'PipelineSchema[]', list: true });
    });

    add('GET', '/projects/:id/pipelines/:pipeline_id', async (p, params) => {
      const pl = p.pipelines.find((x) => x.id === Number(params.pipeline_id));
      if (!pl) return message(404, '404 Not found');
      return new Reply(200, R.pipeline(p, pl), { type: 'PipelineSchema' });
    });

    const jobList = async (p, jobs, q) => {
      let list = jobs;
      if (!U.truthy(q.include_retried)) list = list.filter((j) => !j.retried);
      const scope = [].concat(q.scope || []).filter(Boolean);
      if (scope.length) list = list.filter((j) => scope.includes(j.status));
      list = [...list].sort((a, b) => b.id - a.id);
      const body = [];
      for (const j of list) {
        const pl = p.pipelines.find((x) => x.id === j.pipelineId);
        body.push(R.job(p, j, pl, await this.commit(p, pl.sha)));
      }
      return new Reply(200, body, { type: 'JobSchema[]', list: true });
    };

    add('GET', '/projects/:id/pipelines/:pipeline_id/jobs', async (p, params, q) => {
      const pl = p.pipelines.find((x) => x.id === Number(params.pipeline_id));
      if (!pl) return message(404, '404 Not found');
      return jobList(p, p.jobs.filter((j) => j.pipelineId === pl.id), q);
    });

    add('GET', '/projects/:id/jobs', async (p, params, q) => jobList(p, p.jobs, q));

    add('GET', '/projects/:id/jobs/:job_id', async (p, params) => {
      const j = p.jobs.find((x) => x.id === Number(params.job_id));
      if (!j) return message(404, '404 Not found');
      const pl = p.pipelines.find((x) => x.id === j.pipelineId);
      return new Reply(200, R.job(p, j, pl, await this.commit(p, pl.sha)), { type: 'JobSchema' });
    });

    // The raw log, rendered by Rails like any other answer, so it is conditional the same way
    // (see conditional()): a weak ETag of the log, none for an empty log.
    add('GET', '/projects/:id/jobs/:job_id/trace', async (p, params) => {
      const j = p.jobs.find((x) => x.id === Number(params.job_id));
      if (!j) return message(404, '404 Not found');
      return new Reply(200, U.trace(j), { text: true, headers: { 'Content-Disposition': `infile; filename="${j.id}.log"` } });
    });

    add('POST', '/projects/:id/jobs/:job_id/retry', async (p, params) => {
      const j = p.jobs.find((x) => x.id === Number(params.job_id));
      if (!j) return message(404, '404 Not found');
      if (!FINISHED.includes(j.status) || j.retried) return message(403, '403 Forbidden  - Job is not retryable');
      const pl = p.pipelines.find((x) => x.id === j.pipelineId);
      j.retried = true;
      const nj = this.addJob(p, pl, { name: j.name, stage: j.stage, status: 'pending', allowFailure: j.allowFailure }, { retryOf: j });
      this.recompute(p, pl);
      await this.emitJob(p, nj, []);
      await this.emitPipeline(p, pl, []);
      return new Reply(201, R.job(p, nj, pl, await this.commit(p, pl.sha)), { type: 'JobSchema' });
    });

    add('GET', '/projects/:id/issues', async (p, params, q) => {
      let list = p.issues;
      const state = q.state || 'all';
      if (state !== 'all') list = list.filter((i) => i.state === state);
      const labels = normalizeLabels(q.labels);
      if (labels.length) list = list.filter((i) => labels.every((l) => i.labels.includes(l)));
      if (q.iids) list = list.filter((i) => [].concat(q.iids).map(Number).includes(i.iid));
      list = sortBy(list, q.order_by, q.sort, { default: (i) => i.createdAt, updated_at: (i) => i.updatedAt, title: (i) => i.title });
      return new Reply(200, list.map((i) => R.issue(p, i)), { type: 'IssueSchema[]', list: true });
    });

    // Who added and removed which label of an issue, oldest first.
    add('GET', '/projects/:id/issues/:iid/resource_label_events', async (p, params) => {
      const i = this.issue(p, params.iid);
      if (!i) return message(404, '404 Not found');
      return new Reply(200, i.labelEvents.map((e) => R.labelEvent(p, i, e)), { type: 'LabelEventSchema[]', list: true });
    });

    add('GET', '/projects/:id/issues/:iid', async (p, params) => {
      const i = this.issue(p, params.iid);
      if (!i) return message(404, '404 Not found');
      return new Reply(200, R.issue(p, i), { type: 'IssueSchema' });
    });

    return routes;
  }

  // --- the control API ---

  async control(req, url, raw) {
    let input;
    try {
      input = { ...Object.fromEntries(url.searchParams), ...U.parseBody(raw, 'application/json') };
    } catch (e) {
      return new Reply(400, { error: `bad JSON body: ${e.message}` });
    }
    try {
      return await this.mutex.run(() => this.controlRoute(req.method, url.pathname.replace(/^\/_standin/, ''), input, url));
    } catch (e) {
      if (e instanceof ControlError) return new Reply(e.status, { error: e.message });
      throw e;
    }
  }

  async answer(status, body, out) {
    const deliveries = await Promise.all(out);
    return new Reply(status, { ...body, deliveries: deliveries.map((d) => ({ event: d.event, status: d.status, ...(d.invalid ? { invalid: true } : {}), ...(d.error ? { error: d.error } : {}) })) });
  }

  controlProject(input) {
    const p = this.projectFor(input.project);
    if (!p) throw new ControlError(404, `no project ${input.project}`);
    return p;
  }

  async controlRoute(method, path, input, url) {
    const key = `${method} ${path.replace(/\/\d+(?=\/|$)/g, '/:n')}`;
    const num = (path.match(/\/(\d+)(?:\/|$)/) || [])[1];
    const out = [];
    const R = this.render;
    const p = key.startsWith('GET') || key.startsWith('DELETE') ? this.projects[0] : this.controlProject(input);
    const needMr = async () => {
      const iid = num ?? input.iid;
      const mr = this.mr(p, iid);
      if (!mr) throw new ControlError(404, `no merge request !${iid}`);
      return mr;
    };
    switch (key) {
      case 'POST /pipelines': {
        let pl;
        if (input.id !== undefined) {
          pl = p.pipelines.find((x) => x.id === Number(input.id));
          if (!pl) throw new ControlError(404, `no pipeline ${input.id}`);
          for (const spec of input.jobs || []) {
            const j = p.jobs.find((x) => x.pipelineId === pl.id && !x.retried && x.name === spec.name);
            if (j) this.settleJob(j, spec.status || j.status, spec.log);
            else this.addJob(p, pl, spec);
          }
        } else {
          const c = await this.resolveCommit(p, input);
          let mrHere = c.mr || null;
          for (const m of p.mergeRequests.filter((x) => x.state === 'opened')) if (!mrHere && (await this.mrView(p, m)).head === c.sha) mrHere = m;
          const now = tick();
          pl = {
            id: this.nextId(),
            iid: p.pipelines.reduce((n, x) => Math.max(n, x.iid), 0) + 1,
            sha: c.sha,
            ref: c.branch,
            status: 'created',
            source: mrHere ? 'merge_request_event' : input.source || 'push',
            user: input.user || this.username,
            createdAt: now,
            updatedAt: now,
            startedAt: null,
            finishedAt: null,
            duration: null,
            mrIid: mrHere ? mrHere.iid : null,
          };
          p.pipelines.push(pl);
          for (const spec of input.jobs || []) this.addJob(p, pl, spec);
        }
        this.recompute(p, pl, input.status);
        await this.emitPipeline(p, pl, out);
        for (const j of p.jobs.filter((x) => x.pipelineId === pl.id && !x.retried && FINISHED.includes(x.status))) await this.emitJob(p, j, out);
        const jobs = p.jobs.filter((x) => x.pipelineId === pl.id);
        const commit = await this.commit(p, pl.sha);
        return this.answer(201, { pipeline: R.pipeline(p, pl), jobs: jobs.map((j) => R.job(p, j, pl, commit)) }, out);
      }
      case 'POST /jobs/:n': {
        const j = p.jobs.find((x) => x.id === Number(num));
        if (!j) throw new ControlError(404, `no job ${num}`);
        if (!input.status) throw bad('give status');
        const pl = p.pipelines.find((x) => x.id === j.pipelineId);
        this.settleJob(j, input.status, input.log);
        this.recompute(p, pl);
        await this.emitJob(p, j, out);
        await this.emitPipeline(p, pl, out);
        return this.answer(200, { job: R.job(p, j, pl, await this.commit(p, pl.sha)), pipeline: R.pipeline(p, pl) }, out);
      }
      case 'POST /notes': {
        const mr = await needMr();
        const v = await this.mrView(p, mr);
        const position = input.path ? { new_path: input.path, old_path: input.path, new_line: input.line != null ? Number(input.line) : null, base_sha: v.base, start_sha: v.targetHead, head_sha: v.head, position_type: 'text' } : null;
        const res = await this.addDiscussion(p, mr, { body: input.body, position, author: input.user || 'reviewer', individual: false });
        if (res instanceof Reply) throw new ControlError(400, res.body.message);
        await this.emitNote(p, mr, res.d, res.note, out);
        return this.answer(201, { discussion: R.discussion(p, mr, res.d) }, out);
      }
      case 'POST /members': {
        // Adds `user` to the project at `level`, or removes them with level 0.
        const user = String(input.user || '');
        const level = Number(input.level);
        if (!USERNAME.test(user)) throw new ControlError(400, `${JSON.stringify(input.user)} is not a GitLab username`);
        if (![0, 5, 10, 15, 20, 30, 40, 50].includes(level)) throw new ControlError(400, `level must be one of GitLab's access levels (10, 20, 30, 40, 50) or 0, not ${JSON.stringify(input.level)}`);
        if (level === 0) p.members.delete(user);
        else p.members.set(user, level);
        return new Reply(200, { project: p.path, members: Object.fromEntries([...p.members].sort()) });
      }
      case 'POST /approve':
      case 'POST /unapprove': {
        const mr = await needMr();
        const user = String(input.user || 'reviewer');
        if (key === 'POST /approve') {
          // A person approving in the web UI meets the same rule as the API.
          if (this.approvalRefusal(p, mr, user) === 'author') throw new ControlError(401, `401 Unauthorized: ${user} opened !${mr.iid} and the project prevents approval by the author (mergeRequestsAuthorApproval is false)`);
          mr.approvals.set(user, tick());
        } else mr.approvals.delete(user);
        mr.updatedAt = tick();
        await this.emitMr(p, mr, key === 'POST /approve' ? 'approved' : 'unapproved', user, out);
        return this.answer(200, { approvals: await this.approvalsFor(p, mr, user) }, out);
      }
      case 'POST /reviewers': {
        const mr = await needMr();
        if (!input.user) throw bad('give user');
        const state = input.state || 'unreviewed';
        if (!REVIEW_STATES.includes(state)) throw bad(`state must be one of ${REVIEW_STATES.join(', ')}`);
        const prev = mr.reviewers.get(input.user);
        mr.reviewers.set(input.user, { state, createdAt: prev ? prev.createdAt : tick() });
        mr.updatedAt = tick();
        await this.emitMr(p, mr, 'update', input.user, out, { changes: prev ? {} : { reviewers: { previous: [], current: [R.hookUser(input.user)] } } });
        return this.answer(200, { reviewers: R.reviewers(p, mr) }, out);
      }
      case 'POST /settings': {
        const known = ['project', 'approvalsRequired', 'onlyAllowMergeIfPipelineSucceeds', 'mergeRequestsAuthorApproval'];
        const unknown = Object.keys(input).filter((k) => !known.includes(k));
        if (unknown.length) throw bad(`unknown settings ${unknown.join(', ')} (known: ${known.slice(1).join(', ')})`);
        if (input.mergeRequestsAuthorApproval !== undefined && ![true, false, 'true', 'false'].includes(input.mergeRequestsAuthorApproval)) throw bad('mergeRequestsAuthorApproval must be true or false');
        if (input.approvalsRequired !== undefined) p.settings.approvalsRequired = Math.max(0, Number(input.approvalsRequired) || 0);
        if (input.onlyAllowMergeIfPipelineSucceeds !== undefined) p.settings.onlyAllowMergeIfPipelineSucceeds = U.truthy(input.onlyAllowMergeIfPipelineSucceeds);
        if (input.mergeRequestsAuthorApproval !== undefined) p.settings.mergeRequestsAuthorApproval = U.truthy(input.mergeRequestsAuthorApproval);
        return new Reply(200, { settings: p.settings });
      }
      case 'POST /merge_requests/:n/close':
      case 'POST /merge_requests/:n/reopen': {
        const mr = await needMr();
        const close = key.endsWith('close');
        if (close ? mr.state !== 'opened' : mr.state !== 'closed') throw new ControlError(409, `merge request !${mr.iid} is ${mr.state}`);
        const now = tick();
        Object.assign(mr, close ? { state: 'closed', closedAt: now, closedBy: input.user || this.username } : { state: 'opened', closedAt: null, closedBy: null });
        mr.updatedAt = now;
        await this.emitMr(p, mr, close ? 'close' : 'reopen', input.user || this.username, out);
        return this.answer(200, { mergeRequest: R.mergeRequest(p, await this.mrView(p, mr)) }, out);
      }
      case 'POST /merge_requests/:n/merge': {
        const mr = await needMr();
        const err = await this.mergeMr(p, mr, { sha: input.sha, squash: input.squash, actor: input.user || 'maintainer' }, out);
        if (err) throw new ControlError(err.status, err.body.message);
        return this.answer(200, { mergeRequest: R.mergeRequest(p, await this.mrView(p, mr)) }, out);
      }
      case 'POST /issues': {
        if (!input.title) throw bad('give title');
        const issue = this.newIssue(p, { ...input, author: input.user || this.username, iid: p.issues.reduce((n, i) => Math.max(n, i.iid), 0) + 1 });
        // Labels an issue is opened with (a description template's `/label`) are added as its author.
        this.labelEvents(issue, [], issue.labels, issue.author);
        p.issues.push(issue);
        this.emitIssue(p, issue, 'open', issue.author, out);
        return this.answer(201, { issue: R.issue(p, issue) }, out);
      }
      case 'POST /issues/:n/close':
      case 'POST /issues/:n/reopen':
      case 'POST /issues/:n/move':
      case 'POST /issues/:n/labels': {
        const issue = this.issue(p, num);
        if (!issue) throw new ControlError(404, `no issue #${num}`);
        const actor = input.user || this.username;
        const now = tick();
        const verb = key.split('/').pop();
        let action = 'update';
        let changes = {};
        if (verb === 'close' || verb === 'move') {
          if (issue.state !== 'opened') throw new ControlError(409, `issue #${issue.iid} is ${issue.state}`);
          if (verb === 'move') {
            const hidden = { id: p.id + 1, path: `${p.namespace}/${p.name}-moved` };
            const moved = this.newIssue(p, { ...issue, author: issue.author, projectId: hidden.id, projectPath: hidden.path, iid: p.movedIssues.length + 1 });
            p.movedIssues.push(moved);
            issue.movedToId = moved.id;
          }
          Object.assign(issue, { state: 'closed', closedAt: now, closedBy: actor });
          action = 'close';
          changes = { state_id: { previous: 1, current: 2 } };
        } else if (verb === 'reopen') {
          if (issue.state !== 'closed') throw new ControlError(409, `issue #${issue.iid} is ${issue.state}`);
          Object.assign(issue, { state: 'opened', closedAt: null, closedBy: null, movedToId: null });
          action = 'reopen';
          changes = { state_id: { previous: 2, current: 1 } };
        } else {
          const prev = issue.labels;
          issue.labels = normalizeLabels(input.labels);
          this.labelEvents(issue, prev, issue.labels, actor);
          changes = { labels: { previous: prev.map((l) => R.hookLabel(p, l)), current: issue.labels.map((l) => R.hookLabel(p, l)) } };
        }
        issue.updatedAt = now;
        this.emitIssue(p, issue, action, actor, out, changes);
        return this.answer(200, { issue: R.issue(p, issue) }, out);
      }
      case 'POST /refresh': {
        for (const proj of input.project ? [p] : this.projects) await this.refresh(proj, out);
        return this.answer(200, { branches: Object.fromEntries([...p.heads]) }, out);
      }
      case 'POST /faults': {
        if (!input.status && !input.delayMs) throw bad('give status and/or delayMs');
        const f = { id: this.faults.length + 1, status: input.status ? Number(input.status) : null, remaining: Number(input.count ?? 1), used: 0, headers: input.headers || {}, body: input.body, route: input.route || null, delayMs: Number(input.delayMs) || 0 };
        this.faults.push(f);
        return new Reply(201, { fault: f });
      }
      case 'GET /faults':
        return new Reply(200, { faults: this.faults });
      case 'DELETE /faults':
        this.faults = [];
        return new Reply(200, { faults: [] });
      case 'POST /rate-limit': {
        for (const k of ['limit', 'remaining', 'resetIn']) {
          if (input[k] !== undefined && !(Number.isInteger(Number(input[k])) && Number(input[k]) >= 0)) throw bad(`${k} must be a whole number >= 0`);
        }
        if (input.user !== undefined && !this.users().includes(String(input.user))) throw bad(`no user ${input.user} (users: ${this.users().join(', ')})`);
        if (input.limit !== undefined) this.rateLimit = Number(input.limit);
        // Without `user`, every user's window changes.
        const users = input.user !== undefined ? [String(input.user)] : this.users();
        for (const u of users) {
          const w = this.window(u);
          if (input.remaining !== undefined) w.remaining = Number(input.remaining);
          else if (input.limit !== undefined) w.remaining = this.rateLimit;
          if (input.resetIn !== undefined) w.reset = Math.floor(Date.now() / 1000) + Number(input.resetIn);
        }
        return new Reply(200, this.rateState(users[0]));
      }
      case 'GET /rate-limit':
        return new Reply(200, this.rateState(this.username));
      case 'POST /corrupt': {
        if (!input.set && !input.delete) throw bad('give set {path: value} and/or delete [paths]');
        const c = { route: input.route || null, set: input.set || {}, delete: [].concat(input.delete || []), remaining: Number(input.count ?? 1) };
        this.corruptions.push(c);
        return new Reply(201, { corruption: c });
      }
      case 'GET /corrupt':
        return new Reply(200, { corruptions: this.corruptions });
      case 'DELETE /corrupt':
        this.corruptions = [];
        return new Reply(200, { corruptions: [] });
      case 'GET /requests':
        return new Reply(200, this.counts);
      case 'DELETE /requests':
        this.resetCounters();
        return new Reply(200, this.counts);
      case 'GET /state':
        return new Reply(200, await this.state());
      case 'GET /webhooks':
        return new Reply(200, { deliveries: this.hooks.summary({ payloads: U.truthy(input.payloads) }) });
      case 'DELETE /webhooks':
        this.hooks.deliveries = [];
        return new Reply(200, { deliveries: [] });
      case 'GET /bugs':
        return new Reply(200, { bugs: this.bugs });
      case 'DELETE /bugs':
        this.bugs = [];
        return new Reply(200, { bugs: [] });
      default:
        return new Reply(404, { error: `no control route ${method} /_standin${path}` });
    }
  }

  // Re-reads the branches: a Push Hook per moved, new or deleted branch, and a Merge Request Hook
  // (action "update", with oldrev) per open merge request whose source head moved.
  async refresh(p, out) {
    const now = new Map((await p.git.branches()).map((b) => [b.name, b.sha]));
    for (const [name, sha] of now) if (p.heads.get(name) !== sha) await this.emitPush(p, name, p.heads.get(name) || ZERO, sha, this.username, out);
    for (const [name, sha] of p.heads) if (!now.has(name)) await this.emitPush(p, name, sha, ZERO, this.username, out);
    p.heads = now;
    for (const mr of p.mergeRequests.filter((m) => m.state === 'opened')) {
      const head = now.get(mr.sourceBranch);
      if (head && head !== mr.knownHead) {
        const oldrev = mr.knownHead;
        mr.knownHead = head;
        mr.updatedAt = tick();
        await this.emitMr(p, mr, 'update', this.username, out, { oldrev });
      }
    }
  }

  // `rate`: the window of `user` (for callers that use one user); `windows`: every user's.
  rateState(user) {
    const windows = Object.fromEntries(this.users().map((u) => [u, { ...this.window(u) }]));
    return { rate: { limit: this.rateLimit, ...windows[user] }, windows };
  }

  async state() {
    const projects = [];
    for (const p of this.projects) {
      const mergeRequests = [];
      for (const mr of p.mergeRequests) {
        const v = await this.mrView(p, mr);
        mergeRequests.push({ iid: mr.iid, title: mr.title, state: mr.state, draft: mr.draft, sourceBranch: mr.sourceBranch, targetBranch: mr.targetBranch, sha: v.head, detailedMergeStatus: v.detailed, hasConflicts: v.hasConflicts, mergeCommitSha: mr.mergeCommitSha, squashCommitSha: mr.squashCommitSha });
      }
      projects.push({
        path: p.path,
        id: p.id,
        settings: p.settings,
        branches: Object.fromEntries(p.heads),
        mergeRequests,
        pipelines: p.pipelines.map((x) => ({ id: x.id, iid: x.iid, sha: x.sha, ref: x.ref, status: x.status, source: x.source })),
        jobs: p.jobs.map((j) => ({ id: j.id, pipelineId: j.pipelineId, name: j.name, stage: j.stage, status: j.status, retried: j.retried, allowFailure: j.allowFailure })),
        discussions: p.mergeRequests.flatMap((mr) => mr.discussions.map((d) => ({ iid: mr.iid, id: d.id, individual: d.individual, notes: d.notes.map((n) => ({ id: n.id, author: n.author, body: n.body, type: n.type, position: n.position })) }))),
        approvals: p.mergeRequests.map((mr) => ({ iid: mr.iid, users: [...mr.approvals.keys()] })),
        reviewers: p.mergeRequests.map((mr) => ({ iid: mr.iid, reviewers: [...mr.reviewers.entries()].map(([user, r]) => ({ user, state: r.state })) })),
        issues: p.issues.map((i) => ({ iid: i.iid, id: i.id, title: i.title, state: i.state, labels: i.labels, movedToId: i.movedToId })),
      });
    }
    return { users: this.users(), projects };
  }
}

// The bytes of an answer's body as sent.
function bodyText(reply) {
  if (reply.body === undefined || reply.body === null) return '';
  if (reply.text) return String(reply.body);
  return typeof reply.body === 'string' && reply.raw ? reply.body : JSON.stringify(reply.body);
}

function normalizeLabels(labels) {
  if (labels == null || labels === '') return [];
  return (Array.isArray(labels) ? labels : String(labels).split(',')).map((l) => String(l).trim()).filter(Boolean);
}

module.exports = { StandIn, pipelineStatus };
