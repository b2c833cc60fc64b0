'use strict';
// The stand-in: state, GitHub's REST routes and GraphQL endpoint, the control API under
// /_standin/, and the HTTP pipeline (identities, injected faults, primary and secondary rate
// limits, conditional GETs, pagination, response validation).

const crypto = require('node:crypto');
const http = require('node:http');

const { readBody } = require('../../standin-kit/http.js');
const { Mutex } = require('../../standin-kit/mutex.js');

const clock = require('./clock');
const { Description } = require('./openapi');
const { Git } = require('./git');
const { GraphQLApi } = require('./graphql');
const { Resolvers } = require('./graphql-resolvers');
const { Limits, SECONDARY_DEFAULTS } = require('./limits');
const { Render, ACTIONS_APP, iso, userId, combinedState } = require('./render');
const { Webhooks } = require('./webhooks');

const DOCS = 'https://docs.github.com/rest';
const SECONDARY_DOCS = 'https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits';
const SECONDARY_MESSAGE = 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.';
const GRAPHQL_DOCS = 'https://docs.github.com/graphql';

// A login as identities name it (e.g. `octo`, `review-bot`, `ci-app[bot]`).
const LOGIN = /^[^\s=:/]+$/;

// The GitHub operations the stand-in implements (method, path template as in the description).
const OPERATIONS = [
  ['GET', '/rate_limit'],
  ['GET', '/user'],
  ['GET', '/repos/{owner}/{repo}'],
  ['GET', '/repos/{owner}/{repo}/pulls'],
  ['POST', '/repos/{owner}/{repo}/pulls'],
  ['GET', '/repos/{owner}/{repo}/pulls/{pull_number}'],
  ['PATCH', '/repos/{owner}/{repo}/pulls/{pull_number}'],
  ['PUT', '/repos/{owner}/{repo}/pulls/{pull_number}/merge'],
  ['GET', '/repos/{owner}/{repo}/pulls/{pull_number}/reviews'],
  ['POST', '/repos/{owner}/{repo}/pulls/{pull_number}/reviews'],
  ['GET', '/repos/{owner}/{repo}/pulls/{pull_number}/comments'],
  ['GET', '/repos/{owner}/{repo}/issues'],
  ['GET', '/repos/{owner}/{repo}/issues/{issue_number}'],
  ['GET', '/repos/{owner}/{repo}/issues/{issue_number}/events'],
  ['GET', '/repos/{owner}/{repo}/collaborators/{username}/permission'],
  ['GET', '/repos/{owner}/{repo}/commits/{ref}/check-runs'],
  ['GET', '/repos/{owner}/{repo}/commits/{ref}/status'],
  ['GET', '/repos/{owner}/{repo}/check-runs/{check_run_id}'],
  ['POST', '/repos/{owner}/{repo}/check-runs'],
  ['PATCH', '/repos/{owner}/{repo}/check-runs/{check_run_id}'],
  ['POST', '/repos/{owner}/{repo}/statuses/{sha}'],
  ['GET', '/repos/{owner}/{repo}/actions/jobs/{job_id}/logs'],
  ['POST', '/repos/{owner}/{repo}/actions/jobs/{job_id}/rerun'],
  ['POST', '/repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs'],
];

const WEBHOOKS = [
  'check-run-created',
  'check-run-completed',
  'pull-request-opened',
  'pull-request-closed',
  'pull-request-reopened',
  'pull-request-synchronize',
  'pull-request-edited',
  'pull-request-review-submitted',
  'pull-request-review-comment-created',
  'status',
  'issues-opened',
  'issues-closed',
  'issues-reopened',
  'issues-labeled',
  'issues-unlabeled',
  'push',
];

const ZERO_SHA = '0'.repeat(40);

// GitHub's closing keywords: in a pull request's body they close the named issues of the same
// repository once the pull request is merged into the default branch.
const CLOSING_KEYWORDS = /\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+(?:([A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+))?#(\d+)\b/gi;

const CHECK_STATUSES = ['queued', 'in_progress', 'completed', 'waiting', 'requested', 'pending'];
const CHECK_CONCLUSIONS = ['success', 'failure', 'neutral', 'cancelled', 'skipped', 'timed_out', 'action_required', 'stale', 'startup_failure'];
const STATUS_STATES = ['error', 'failure', 'pending', 'success'];
const REVIEW_STATES = ['APPROVED', 'CHANGES_REQUESTED', 'COMMENTED', 'DISMISSED', 'PENDING'];

// An answer being built: status, JSON body (or raw text), headers.
class Reply {
  constructor(status, body, headers = {}) {
    this.status = status;
    this.body = body;
    this.headers = headers;
  }
}

function error(status, message, extra = {}) {
  return new Reply(status, { message, documentation_url: DOCS, status: String(status), ...extra });
}

function validationFailed(errors, message = 'Validation Failed') {
  return new Reply(422, { message, errors, documentation_url: `${DOCS}/pulls/pulls`, status: '422' });
}

class ControlError extends Error {
  constructor(status, message, extra) {
    super(message);
    this.status = status;
    this.extra = extra;
  }
}

function bad(message) {
  return new ControlError(400, message);
}

function nowMs() {
  return clock.now();
}

function setPath(obj, path, value, del) {
  const parts = path.split('.');
  let node = obj;
  for (const p of parts.slice(0, -1)) {
    if (node == null || typeof node !== 'object') return;
    node = node[/^\d+$/.test(p) && Array.isArray(node) ? Number(p) : p];
  }
  if (node == null || typeof node !== 'object') return;
  const last = parts[parts.length - 1];
  if (del) delete node[last];
  else node[last] = value;
}

class StandIn {
  // repos: [{fullName: 'owner/name', gitDir}]; token: a credential that authenticates as
  // `login`, or null; identities: [{token, login}], more credentials with the login each
  // authenticates as; webhook: {url, secret} or null; basePath: '/' or e.g. '/api/v3'; html: web
  // UI base URL; login: the user `token` authenticates as, and every request's user when no
  // credential is configured (default: the first repository's owner); collaborators: logins
  // with access to every repository (their `author_association` is COLLABORATOR).
  constructor({ repos = [], token = null, identities = [], webhook = null, basePath = '/', html = 'https://github.com', login = null, collaborators = [], log, description, graphql, warm = true } = {}) {
    this.collaboratorSpecs = collaborators;
    this.warm = warm;
    this.log = log || ((line) => process.stderr.write(`github-standin: ${line}\n`));
    this.description = description || new Description({ operations: OPERATIONS, webhooks: WEBHOOKS });
    this.graphql = graphql || new GraphQLApi();
    this.token = token || null;
    this.identitySpecs = identities;
    this.tokens = new Map(); // credential -> login, filled by init()
    this.basePath = basePath === '/' ? '' : `/${basePath.replace(/^\/+|\/+$/g, '')}`;
    this.htmlBase = html;
    this.login = login;
    this.repoSpecs = repos;
    this.webhooks = new Webhooks({ url: webhook?.url, secret: webhook?.secret, description: this.description, log: this.log });
    this.repos = new Map(); // lower-case full name -> repo
    this.nextIdValue = 1000000;
    this.bugs = [];
    this.handlers = this.apiHandlers();
    this.resetCounters();
    this.faults = [];
    this.corruptions = [];
    this.limits = new Limits();
    this.logSecret = crypto.randomBytes(16).toString('hex');
    this.startedAt = nowMs();
  }

  nextId() {
    this.nextIdValue += 1 + Math.floor(Math.random() * 7);
    return this.nextIdValue;
  }

  resetCounters() {
    const resource = () => ({ requests: 0, counted: 0, byIdentity: {} });
    this.counts = { total: 0, counted: 0, byRoute: {}, byResource: { core: resource(), graphql: resource() } };
    this.requestLog = [];
  }

  async addRepo(fullName, gitDir) {
    const m = /^([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+)$/.exec(fullName || '');
    if (!m) throw bad(`repository must be OWNER/NAME, not ${JSON.stringify(fullName)}`);
    if (!gitDir) throw bad(`repository ${fullName} needs a git directory`);
    const git = new Git(gitDir);
    const check = await git.run(['rev-parse', '--git-dir'], { allowCodes: [0, 128] });
    if (check.code !== 0) throw bad(`${gitDir} is not a git repository: ${check.stderr.trim()}`);
    const created = nowMs() - 86400000;
    const repo = {
      owner: m[1],
      name: m[2],
      fullName,
      ownerType: 'User',
      id: userId(`repo:${fullName}`),
      gitDir,
      git,
      private: false,
      description: `${m[2]} (GitHub stand-in)`,
      defaultBranch: await git.defaultBranch(),
      createdAt: created,
      updatedAt: created,
      pushedAt: created,
      nextNumber: 1,
      pulls: new Map(),
      issues: new Map(),
      checkRuns: [],
      statuses: [],
      reviews: [],
      comments: [],
      // Lower-case logins invited to collaborate (the owner needs no invitation).
      collaborators: new Set((this.collaboratorSpecs || []).map((l) => l.toLowerCase())),
      mergeLock: new Mutex(),
      // The branch heads last announced (a `push` delivery goes out when one moves).
      heads: new Map((await git.branches()).map((b) => [b.name, b.sha])),
    };
    this.repos.set(fullName.toLowerCase(), repo);
    return repo;
  }

  async init() {
    for (const r of this.repoSpecs) await this.addRepo(r.fullName, r.gitDir);
    if (!this.login) this.login = this.repos.size ? [...this.repos.values()][0].owner : 'octocat';
    const add = (token, login) => {
      if (!token) throw new Error('an identity needs a token');
      if (!LOGIN.test(login || '')) throw new Error(`${JSON.stringify(login)} is not a GitHub login`);
      const known = this.tokens.get(token);
      if (known && known !== login) throw new Error(`token ${token.slice(0, 4)}... is given for both ${known} and ${login}`);
      this.tokens.set(token, login);
    };
    if (this.token) add(this.token, this.login);
    for (const { token, login } of this.identitySpecs) add(token, login);
  }

  // The logins requests can be made as (the default login first).
  get identities() {
    return [...new Set([this.login, ...this.tokens.values()])];
  }

  // The GraphQL endpoint: `/graphql` under the base path, except under GitHub Enterprise Server's
  // REST base path `/api/v3`, whose GraphQL endpoint is `/api/graphql`.
  get graphqlPath() {
    if (/\/v3$/.test(this.basePath)) return `${this.basePath.replace(/\/v3$/, '')}/graphql`;
    return `${this.basePath}/graphql`;
  }

  // The REST base URL objects and links carry; set once the server listens.
  setOrigin(origin) {
    this.origin = origin.replace(/\/$/, '');
    this.render = new Render({ api: this.origin + this.basePath, html: this.htmlBase });
  }

  listen(port = 0, host = '127.0.0.1') {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((e) => {
        this.log(`internal error on ${req.method} ${req.url}: ${e.stack || e}`);
        if (!res.headersSent) {
          res.writeHead(500, { 'Content-Type': 'application/json; charset=utf-8' });
          res.end(JSON.stringify({ message: `stand-in internal error: ${e.message}`, documentation_url: DOCS }));
        } else res.destroy();
      });
    });
    this.server.keepAliveTimeout = 5000;
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        const addr = this.server.address();
        this.setOrigin(`http://${host}:${addr.port}`);
        if (this.warm) this.description.warmUp();
        resolve(addr.port);
      });
    });
  }

  close() {
    return new Promise((resolve) => {
      if (!this.server) return resolve();
      this.server.closeAllConnections?.();
      this.server.close(() => resolve());
    });
  }

  bug(kind, detail) {
    const entry = { kind, at: new Date().toISOString(), ...detail };
    this.bugs.push(entry);
    this.log(`BUG: ${kind}: ${JSON.stringify(detail)}`);
  }

  // ---------------------------------------------------------------- HTTP pipeline

  async handle(req, res) {
    const url = new URL(req.url, 'http://standin');
    const raw = await readBody(req);
    if (url.pathname === '/_standin' || url.pathname.startsWith('/_standin/')) {
      return this.send(res, await this.control(req, url, raw), req.method);
    }
    const reply = await this.api(req, url, raw);
    this.send(res, reply, req.method);
  }

  send(res, reply, method) {
    const headers = { ...reply.headers };
    let payload = '';
    if (reply.raw !== undefined) {
      payload = reply.raw;
    } else if (reply.body !== undefined) {
      payload = JSON.stringify(reply.body, null, 2);
      headers['Content-Type'] = headers['Content-Type'] || 'application/json; charset=utf-8';
    }
    headers['Content-Length'] = Buffer.byteLength(payload);
    res.writeHead(reply.status, headers);
    res.end(method === 'HEAD' ? undefined : payload);
  }

  // Counts an API request: in total and by route, and by resource and identity. `amount` is what
  // it was charged: 1 or 0 requests for `core`, the points of the call for `graphql`.
  countRequest(route, status, login, resource, amount) {
    this.counts.total += 1;
    if (resource === 'core' && amount) this.counts.counted += amount;
    const r = (this.counts.byRoute[route] = this.counts.byRoute[route] || { total: 0, byStatus: {} });
    r.total += 1;
    r.byStatus[status] = (r.byStatus[status] || 0) + 1;
    if (!login) return;
    const res = this.counts.byResource[resource];
    const who = (res.byIdentity[login] = res.byIdentity[login] || { requests: 0, counted: 0 });
    res.requests += 1;
    who.requests += 1;
    res.counted += amount;
    who.counted += amount;
  }

  // The login a request authenticates as; a Reply (401) when it does not.
  authenticate(req, graphql) {
    if (!this.tokens.size) return { login: this.login };
    const auth = req.headers.authorization || '';
    const m = /^(?:bearer|token)\s+(\S+)\s*$/i.exec(auth);
    if (!auth) {
      if (graphql) return { reply: new Reply(401, { message: 'This endpoint requires you to be authenticated.', documentation_url: `${GRAPHQL_DOCS}/guides/forming-calls-with-graphql#authenticating-with-graphql` }) };
      return { reply: error(401, 'Requires authentication') };
    }
    if (!m || !this.tokens.has(m[1])) {
      return { reply: graphql ? new Reply(401, { message: 'Bad credentials', documentation_url: GRAPHQL_DOCS }) : error(401, 'Bad credentials') };
    }
    return { login: this.tokens.get(m[1]) };
  }

  secondaryReply(verdict, status) {
    return new Reply(status, { message: SECONDARY_MESSAGE, documentation_url: SECONDARY_DOCS }, { 'Retry-After': String(verdict.retryAfter) });
  }

  async api(req, url, raw) {
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    let path = url.pathname;
    const graphql = req.method === 'POST' && (path.replace(/\/+$/, '') || '/') === this.graphqlPath;
    let matched = null;
    const inside = !graphql && (!this.basePath || path === this.basePath || path.startsWith(`${this.basePath}/`));
    if (inside) {
      path = path.slice(this.basePath.length) || '/';
      if (path.length > 1) path = path.replace(/\/+$/, '');
      matched = this.description.match(method, path);
    }
    const op = matched?.op || null;
    let route;
    if (graphql) route = 'POST /graphql';
    else route = op ? op.key : `${method} ${(inside && this.description.knownToGitHub(method, path)) || path}`;
    const resource = graphql ? 'graphql' : 'core';
    const requestId = `${crypto.randomBytes(2).toString('hex').toUpperCase()}:${crypto.randomBytes(3).toString('hex').toUpperCase()}:${crypto.randomBytes(4).toString('hex').toUpperCase()}`;
    const common = {
      'X-GitHub-Request-Id': requestId,
      'X-GitHub-Media-Type': graphql ? 'github.v4; format=json' : 'github.v3; format=json',
      'X-GitHub-Api-Version-Selected': '2022-11-28',
      Vary: 'Accept, Authorization, Cookie, X-GitHub-OTP',
    };
    let login = null;
    // `charge`: a REST answer counted against the primary limit (charged here, 1); `points`: the
    // points a GraphQL call was already charged (only counted here).
    const finish = (reply, { charge = false, points = 0, note } = {}) => {
      if (charge && login) this.limits.charge(login, 'core', 1);
      reply.headers = { ...common, ...this.limits.headers(login || this.login, resource), ...reply.headers };
      this.countRequest(route, reply.status, login, resource, graphql ? points : charge ? 1 : 0);
      const entry = { at: new Date(nowMs()).toISOString(), method: req.method, path: url.pathname + url.search, route, status: reply.status, login };
      if (note) entry.note = note;
      this.requestLog.push(entry);
      if (this.requestLog.length > 2000) this.requestLog.shift();
      return reply;
    };

    // Authentication: a request is made as the identity its token authenticates as.
    const auth = this.authenticate(req, graphql);
    if (auth.reply) return finish(this.checked(op, auth.reply));
    login = auth.login;

    // Injected faults.
    const fi = this.faults.findIndex((f) => !f.route || f.route === route || (f.route.endsWith('*') && route.startsWith(f.route.slice(0, -1))));
    if (fi >= 0) {
      const fault = this.faults[fi];
      fault.remaining -= 1;
      if (fault.remaining <= 0) this.faults.splice(fi, 1);
      if (fault.delayMs) await new Promise((r) => setTimeout(r, fault.delayMs));
      // A fault without a status only delays the request, which is then answered for real: the
      // repository may change meanwhile, as it can on GitHub between a client's read and write.
      if (fault.status !== null) {
        const reply = this.checked(op, new Reply(fault.status, fault.body));
        const out = finish(reply);
        Object.assign(out.headers, fault.headers);
        return out;
      }
    }

    if (graphql) return this.graphqlCall(raw, login, finish);

    // Primary limit (the `core` budget of the identity; `/rate_limit` is free).
    const isRateLimitRoute = op?.key === 'GET /rate_limit';
    if (op && !isRateLimitRoute && this.limits.bucket(login, 'core').remaining <= 0) {
      return finish(
        this.checked(op, new Reply(403, { message: `API rate limit exceeded for user ID ${userId(login)}. If you reach out to GitHub Support for help, please include the request ID ${requestId}.`, documentation_url: `${DOCS}/overview/rate-limits-for-the-rest-api` })),
        { note: 'primary rate limit' },
      );
    }

    // Secondary limits: REST points (GET, HEAD and OPTIONS 1, other methods 5), and
    // content-creating requests. A request past them is not carried out.
    const shape = { kind: 'rest', points: ['GET', 'HEAD', 'OPTIONS'].includes(req.method) ? 1 : 5, content: ['POST', 'PATCH', 'PUT', 'DELETE'].includes(req.method) };
    const verdict = this.limits.checkSecondary(login, shape);
    if (verdict) return finish(this.checked(op, this.secondaryReply(verdict, this.limits.secondary.restStatus)), { note: `secondary rate limit: ${verdict.limits.join(', ')}` });
    this.limits.chargeSecondary(login, shape);

    if (!op) {
      if (route !== `${method} ${path}`) this.log(`not implemented: ${route} (answered 404)`);
      return finish(this.checked(null, error(404, 'Not Found')), { charge: true });
    }

    let reply = await this.dispatch(req, url, raw, op, matched.params, login);
    reply = this.checked(op, reply, route);

    // Conditional GET: a matching If-None-Match gets 304 without counting against the primary
    // limit (it was counted against the secondary points above).
    if (method === 'GET' && reply.status === 200 && reply.body !== undefined) {
      const etag = `W/"${crypto.createHash('sha256').update(JSON.stringify(reply.body)).digest('hex')}"`;
      reply.headers.ETag = etag;
      reply.headers['Cache-Control'] = 'private, max-age=60, s-maxage=60';
      const inm = req.headers['if-none-match'];
      if (inm) {
        const tags = inm.split(',').map((t) => t.trim().replace(/^W\//, ''));
        if (tags.includes('*') || tags.includes(etag.replace(/^W\//, ''))) {
          return finish(new Reply(304, undefined, { ETag: etag, 'Cache-Control': reply.headers['Cache-Control'] }));
        }
      }
    }
    return finish(reply, { charge: !isRateLimitRoute });
  }

  // A call to the GraphQL endpoint by `login`: parsed and validated against GitHub's schema, its
  // pagination and node limits checked, its cost charged to the identity's `graphql` budget and
  // its points (1, or 5 for a mutation) to the GraphQL secondary points, then executed.
  async graphqlCall(raw, login, finish) {
    let body;
    try {
      body = raw.length ? JSON.parse(raw.toString('utf8')) : undefined;
    } catch {
      return finish(new Reply(400, { message: 'Problems parsing JSON', documentation_url: GRAPHQL_DOCS, status: '400' }));
    }
    const prepared = this.graphql.prepare(body);
    const mutation = !!prepared.mutation;
    // A call costs at least one point, a rejected one too.
    const cost = prepared.errors ? 1 : prepared.cost;
    const bucket = this.limits.bucket(login, 'graphql');
    if (bucket.remaining <= 0 || cost > bucket.remaining) {
      // GitHub answers an exhausted GraphQL budget with 200 and an error.
      return finish(new Reply(200, { errors: [{ type: 'RATE_LIMIT', code: 'graphql_rate_limit', message: `API rate limit already exceeded for user ID ${userId(login)}.` }] }), { note: 'primary rate limit' });
    }
    const shape = { kind: 'graphql', points: mutation ? 5 : 1, content: mutation };
    const verdict = this.limits.checkSecondary(login, shape);
    if (verdict) return finish(this.checked(null, this.secondaryReply(verdict, 403)), { note: `secondary rate limit: ${verdict.limits.join(', ')}` });
    this.limits.chargeSecondary(login, shape);
    this.limits.charge(login, 'graphql', cost);
    if (prepared.errors) return finish(new Reply(200, { errors: prepared.errors }), { points: cost });

    const reported = new Set();
    const onUnimplemented = (info) => {
      const field = `${info.parentType.name}.${info.fieldName}`;
      if (reported.has(field)) return;
      reported.add(field);
      const where = [];
      for (let p = info.path; p; p = p.prev) where.unshift(p.key);
      this.bug('graphql field not implemented', { field, path: where, note: 'answered null' });
    };
    const { body: out, bugs } = await this.graphql.run(prepared, new Resolvers(this).root(login, { cost, nodes: prepared.nodes, bucket }), { onUnimplemented });
    for (const b of bugs) this.bug('graphql execution error', b);
    return finish(new Reply(200, out), { points: cost });
  }

  // Applies a pending corruption (self-test hook), then validates the body against the
  // operation's response schema; an invalid body becomes a 500 naming the errors.
  checked(op, reply, route) {
    if (reply.raw !== undefined) return reply;
    const ci = route ? this.corruptions.findIndex((c) => !c.route || c.route === route) : -1;
    if (ci >= 0 && reply.body !== undefined && reply.status < 300) {
      const c = this.corruptions[ci];
      c.remaining -= 1;
      if (c.remaining <= 0) this.corruptions.splice(ci, 1);
      reply.body = JSON.parse(JSON.stringify(reply.body));
      for (const [p, v] of Object.entries(c.set || {})) setPath(reply.body, p, v, false);
      for (const p of c.delete || []) setPath(reply.body, p, undefined, true);
    }
    const errors = this.description.validateResponse(op, reply.status, reply.body);
    if (errors.length === 0) return reply;
    const what = `${op ? op.key : 'unrouted'} -> ${reply.status}`;
    this.bug('invalid response', { route: what, errors: errors.slice(0, 20) });
    return new Reply(500, {
      message: `github-standin bug: the ${reply.status} response of ${op ? op.key : 'this route'} does not validate against GitHub's OpenAPI description`,
      documentation_url: DOCS,
      errors: errors.slice(0, 50),
    });
  }

  async dispatch(req, url, raw, op, params, login) {
    // Query parameters, coerced and checked against their schemas.
    const query = {};
    const problems = [];
    for (const p of op.parameters.filter((x) => x.in === 'query')) {
      if (!url.searchParams.has(p.name)) continue;
      let v = url.searchParams.get(p.name);
      if ((p.type === 'integer' || p.type === 'number') && /^-?\d+(\.\d+)?$/.test(v)) v = Number(v);
      if (p.type === 'boolean' && (v === 'true' || v === 'false')) v = v === 'true';
      const errs = this.description.check(p.schemaKey, v);
      if (errs.length) problems.push({ resource: 'Search', field: p.name, code: 'invalid', value: url.searchParams.get(p.name), message: `${p.name} ${errs[0].message}` });
      query[p.name] = v;
    }
    if (problems.length) return validationFailed(problems);
    for (const p of op.parameters.filter((x) => x.in === 'path')) {
      if (p.type === 'integer' && !/^\d+$/.test(params[p.name])) return error(404, 'Not Found');
      if (p.type === 'integer') params[p.name] = Number(params[p.name]);
    }

    // Request body.
    let body;
    if (raw.length) {
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        return error(400, 'Problems parsing JSON');
      }
    }
    if (op.request) {
      const errs = this.description.validateRequest(op, body);
      if (errs.length) {
        return validationFailed(
          errs.map((e) => ({
            resource: op.operationId.split('/')[0],
            field: e.params?.missingProperty || e.path.replace(/^\//, '').replace(/\//g, '.') || null,
            code: e.params?.missingProperty ? 'missing_field' : 'invalid',
            message: `${e.path === '/' ? 'body' : e.path} ${e.message}`,
          })),
          'Invalid request.',
        );
      }
    }

    let repo = null;
    if (params.owner !== undefined) {
      repo = this.repos.get(`${params.owner}/${params.repo}`.toLowerCase());
      if (!repo) return error(404, 'Not Found');
    }
    const handler = this.handlers[op.key];
    try {
      return await handler({ req, url, query, params, body: body ?? {}, repo, login });
    } catch (e) {
      if (e instanceof ControlError) return error(e.status, e.message);
      throw e;
    }
  }

  // Slices a list by `page` / `per_page` and sets GitHub's Link header.
  paginate(ctx, items) {
    const perPage = Math.min(Math.max(Number(ctx.query.per_page) || 30, 1), 100);
    const page = Math.max(Number(ctx.query.page) || 1, 1);
    const last = Math.max(Math.ceil(items.length / perPage), 1);
    const slice = items.slice((page - 1) * perPage, page * perPage);
    const headers = {};
    if (last > 1) {
      const link = (p, rel) => {
        const u = new URL(ctx.url.pathname + ctx.url.search, this.origin);
        u.searchParams.set('page', String(p));
        return `<${u.toString()}>; rel="${rel}"`;
      };
      const parts = [];
      if (page > 1) parts.push(link(Math.min(page - 1, last), 'prev'));
      if (page < last) parts.push(link(page + 1, 'next'), link(last, 'last'));
      if (page > 1) parts.push(link(1, 'first'));
      if (parts.length) headers.Link = parts.join(', ');
    }
    return { slice, headers, total: items.length };
  }

  // ---------------------------------------------------------------- state helpers

  pull(repo, number) {
    return repo.pulls.get(Number(number)) || null;
  }

  // Re-reads the head and base of an open pull request from the bare repository (emitting
  // `pull_request.synchronize` when the head moved) and computes mergeability and statistics.
  //
  // Mergeability as GitHub shows it: GitHub computes it in a background job that a read starts,
  // so the first read after the pull request was opened (or reopened), or after its head or base
  // moved, answers `mergeable: null` and `mergeable_state: "unknown"`, and later reads answer the
  // computed value. `read: true` is such a read (it starts the job); `fresh: true` shows the
  // state right after an event (a webhook of `opened`, `reopened`, `synchronize`); otherwise
  // the view only looks. An override set through the control API is shown at once. `computed`
  // holds the value the job computes, which merging uses. `heads` (a Map of branch to SHA read
  // once) spares a git call per branch when many pull requests are looked at together.
  async view(repo, pr, deliveries, { read = false, fresh = false, heads = null } = {}) {
    const branchSha = (ref) => (heads ? heads.get(ref) || null : repo.git.branchSha(ref));
    if (pr.state === 'open') {
      const head = await branchSha(pr.head.ref);
      if (head && head !== pr.head.sha) {
        const before = pr.head.sha;
        await this.announceBranch(repo, pr.head.ref, head, deliveries);
        pr.head.sha = head;
        pr.updatedAt = nowMs();
        repo.pushedAt = pr.updatedAt;
        const d = this.emitPull(repo, pr, 'synchronize', pr.user, { before, after: head });
        if (deliveries && d) deliveries.push(d);
      }
      const base = await branchSha(pr.base.ref);
      if (base) pr.base.sha = base;
    }
    const headSha = pr.head.sha;
    const baseSha = pr.base.sha;
    let mergeable = null;
    let mergeableState = 'unknown';
    let stats = pr.frozenStats;
    if (pr.state === 'open') {
      stats = await repo.git.stats(baseSha, headSha);
      if (pr.mergeable !== undefined) mergeable = pr.mergeable;
      else mergeable = (await repo.git.mergeTree(baseSha, headSha)).clean;
      if (pr.mergeableState) mergeableState = pr.mergeableState;
      else if (mergeable === null) mergeableState = 'unknown';
      else if (mergeable === false) mergeableState = 'dirty';
      else if (pr.draft) mergeableState = 'draft';
      else if (this.checksUnsettled(repo, headSha)) mergeableState = 'unstable';
      else mergeableState = 'clean';
    }
    const computed = { mergeable, mergeableState };
    if (pr.state === 'open' && pr.mergeable === undefined) {
      const job = `${baseSha}..${headSha}`;
      if (fresh || pr.mergeJob !== job) {
        if (read && !fresh) pr.mergeJob = job;
        mergeable = null;
        mergeableState = 'unknown';
      }
    }
    const reviewComments = repo.comments.filter((c) => c.number === pr.number).length;
    return { headSha, baseSha, mergeable, mergeableState, computed, stats: stats || { commits: 0, additions: 0, deletions: 0, changedFiles: 0 }, reviewComments };
  }

  checksUnsettled(repo, sha) {
    const runs = this.latestRuns(repo, sha);
    const statuses = this.latestStatuses(repo, sha);
    const badRun = runs.some((r) => r.status !== 'completed' || !['success', 'neutral', 'skipped'].includes(r.conclusion));
    const badStatus = statuses.some((s) => s.state !== 'success');
    return badRun || badStatus;
  }

  latestRuns(repo, sha) {
    const byName = new Map();
    for (const r of repo.checkRuns) if (r.headSha === sha && (!byName.has(r.name) || byName.get(r.name).id < r.id)) byName.set(r.name, r);
    return [...byName.values()];
  }

  latestStatuses(repo, sha) {
    const byContext = new Map();
    for (const s of repo.statuses) if (s.sha === sha && (!byContext.has(s.context) || byContext.get(s.context).id < s.id)) byContext.set(s.context, s);
    return [...byContext.values()].sort((a, b) => b.id - a.id);
  }

  async openPullsAt(repo, sha) {
    const out = [];
    for (const pr of repo.pulls.values()) {
      if (pr.state !== 'open') continue;
      const v = await this.view(repo, pr);
      if (v.headSha === sha) out.push(this.render.pullMinimal(repo, pr, v));
    }
    return out;
  }

  // `opts` as for view(): {read} for GitHub's reads of the pull request, {fresh} right after it
  // was opened.
  async renderPull(repo, pr, deliveries, opts) {
    return this.render.pull(repo, pr, await this.view(repo, pr, deliveries, opts));
  }

  async renderRun(repo, run) {
    return this.render.checkRun(repo, run, await this.openPullsAt(repo, run.headSha));
  }

  // ---------------------------------------------------------------- webhooks

  emit(event, schema, payload, repo) {
    if (!this.webhooks.enabled) return null;
    return this.webhooks.deliver(event, schema, payload, { targetId: repo.id }).then((d) => {
      if (d.invalid) this.bug('invalid webhook', { event, schema, errors: d.errors.slice(0, 20) });
      return d;
    });
  }

  senderFor(login) {
    return this.render.user(login);
  }

  // Queues a pull_request delivery; its payload is built when the delivery is queued.
  // As GitHub's payloads of `opened`, `reopened` and `synchronize` show, mergeability is not
  // computed yet when those are sent (null, "unknown").
  emitPull(repo, pr, action, senderLogin, extra = {}) {
    if (!this.webhooks.enabled) return null;
    return (async () => {
      const v = await this.view(repo, pr, null, { fresh: ['opened', 'reopened', 'synchronize'].includes(action) });
      const payload = { action, number: pr.number, pull_request: this.render.pull(repo, pr, v), ...extra, repository: this.render.repo(repo), sender: this.senderFor(senderLogin) };
      return this.emit('pull_request', `pull-request-${action}`, payload, repo);
    })();
  }

  async emitCheckRun(repo, run, action) {
    if (!this.webhooks.enabled) return null;
    const cr = await this.renderRun(repo, run);
    const app = cr.app;
    const statusForSuite = run.status === 'completed' ? 'completed' : 'in_progress';
    cr.check_suite = {
      id: run.checkSuiteId,
      node_id: `CS_kwDO${run.checkSuiteId}`,
      head_branch: (await this.branchOf(repo, run.headSha)) || null,
      head_sha: run.headSha,
      status: statusForSuite,
      conclusion: run.status === 'completed' ? run.conclusion : null,
      url: `${this.render.api}/repos/${repo.fullName}/check-suites/${run.checkSuiteId}`,
      before: null,
      after: run.headSha,
      pull_requests: cr.pull_requests,
      app,
      created_at: iso(run.startedAt),
      updated_at: iso(run.completedAt || run.startedAt),
    };
    const payload = { action, check_run: cr, repository: this.render.repo(repo), sender: this.senderFor(`${run.app}[bot]`) };
    return this.emit('check_run', `check-run-${action}`, payload, repo);
  }

  async branchOf(repo, sha) {
    const branches = await repo.git.branches();
    return branches.find((b) => b.sha === sha)?.name;
  }

  async emitStatus(repo, s) {
    if (!this.webhooks.enabled) return null;
    const info = await repo.git.commitInfo(s.sha);
    const branches = (await repo.git.branches())
      .filter((b) => b.sha === s.sha)
      .map((b) => ({ name: b.name, commit: { sha: b.sha, url: `${this.render.api}/repos/${repo.fullName}/commits/${b.sha}` }, protected: false }));
    const st = this.render.status(repo, s);
    const payload = {
      id: s.id,
      sha: s.sha,
      name: repo.fullName,
      target_url: s.targetUrl,
      avatar_url: st.avatar_url,
      context: s.context,
      description: s.description,
      state: s.state,
      commit: this.render.commit(repo, info),
      branches,
      created_at: iso(s.createdAt),
      updated_at: iso(s.updatedAt),
      repository: this.render.repo(repo),
      sender: this.senderFor(s.creator),
    };
    return this.emit('status', 'status', payload, repo);
  }

  // Queues an `issues` delivery (opened, closed, reopened, labeled, unlabeled); `label` is the
  // label name of labeled and unlabeled.
  emitIssue(repo, issue, action, senderLogin, { label } = {}) {
    if (!this.webhooks.enabled) return null;
    const payload = { action, issue: this.render.issue(repo, issue), repository: this.render.repo(repo), sender: this.senderFor(senderLogin) };
    if (label !== undefined) payload.label = this.render.label(repo, label);
    return this.emit('issues', `issues-${action}`, payload, repo);
  }

  // Records that `branch` now points at `sha` (null: deleted) and, when that is news, queues a
  // `push` delivery onto `deliveries`. The payload is built before this resolves, so deliveries
  // queued after it go out after it.
  async announceBranch(repo, branch, sha, deliveries, pusher = this.login) {
    const before = repo.heads.get(branch) || ZERO_SHA;
    const after = sha || ZERO_SHA;
    if (before === after) return;
    if (sha) repo.heads.set(branch, sha);
    else repo.heads.delete(branch);
    repo.pushedAt = nowMs();
    if (!this.webhooks.enabled) return;
    const payload = await this.pushPayload(repo, branch, before, after, pusher);
    const d = this.emit('push', 'push', payload, repo);
    if (deliveries) deliveries.push(d);
  }

  // Re-reads every branch of the bare repository and announces the ones that moved, appeared or
  // went since they were last seen.
  async scanBranches(repo, deliveries) {
    const now = await repo.git.branches();
    const seen = new Set();
    for (const b of now) {
      seen.add(b.name);
      await this.announceBranch(repo, b.name, b.sha, deliveries);
    }
    for (const name of [...repo.heads.keys()]) if (!seen.has(name)) await this.announceBranch(repo, name, null, deliveries);
  }

  // GitHub's `push` payload: the ref, before and after, and up to 20 of the pushed commits with
  // the files each added, removed and modified.
  async pushPayload(repo, branch, before, after, pusher) {
    const created = before === ZERO_SHA;
    const deleted = after === ZERO_SHA;
    const forced = !created && !deleted && !(await repo.git.isAncestor(before, after));
    let shas = [];
    if (!deleted) {
      const others = [...repo.heads.entries()].filter(([name]) => name !== branch).map(([, sha]) => sha);
      const range = created ? [after, '--not', ...others] : [`${before}..${after}`];
      const r = await repo.git.run(['rev-list', '--reverse', ...range]);
      shas = r.stdout.split('\n').filter(Boolean).slice(-20);
    }
    const commits = [];
    for (const sha of shas) commits.push(this.render.pushCommit(repo, await repo.git.commitInfo(sha), await repo.git.changedFiles(sha)));
    const head = deleted ? null : commits.find((c) => c.id === after) || this.render.pushCommit(repo, await repo.git.commitInfo(after), await repo.git.changedFiles(after));
    const short = (sha) => sha.slice(0, 12);
    const compare = created ? `${this.htmlBase}/${repo.fullName}/commit/${short(after)}` : `${this.htmlBase}/${repo.fullName}/compare/${short(before)}...${short(after)}`;
    const login = pusher || this.login;
    return {
      ref: `refs/heads/${branch}`,
      before,
      after,
      repository: this.render.pushRepo(repo),
      pusher: { name: login, email: `${userId(login)}+${login}@users.noreply.github.com` },
      sender: this.senderFor(login),
      created,
      deleted,
      forced,
      base_ref: null,
      compare,
      commits,
      head_commit: head,
    };
  }

  // The issues of this repository a merged pull request's body names with a closing keyword.
  closingReferences(repo, pr) {
    const numbers = new Set();
    for (const m of String(pr.body || '').matchAll(CLOSING_KEYWORDS)) {
      if (m[1] && m[1].toLowerCase() !== repo.fullName.toLowerCase()) continue;
      numbers.add(Number(m[2]));
    }
    return [...numbers].map((n) => repo.issues.get(n)).filter(Boolean);
  }

  // Closes an issue as `actor`; returns the deliveries.
  closeIssue(repo, issue, actor) {
    if (issue.state === 'closed') return [];
    const now = nowMs();
    Object.assign(issue, { state: 'closed', closedAt: now, updatedAt: now, closedBy: actor });
    return [this.emitIssue(repo, issue, 'closed', actor)];
  }

  reopenIssue(repo, issue, actor) {
    if (issue.state === 'open') return [];
    Object.assign(issue, { state: 'open', closedAt: null, updatedAt: nowMs(), closedBy: null });
    return [this.emitIssue(repo, issue, 'reopened', actor)];
  }

  // Records a `labeled` or `unlabeled` event of an issue or pull request, as its events list
  // shows it: who (`actor`) did it to which label, and when.
  recordEvent(item, event, actor, label) {
    const events = item.events || (item.events = []);
    events.push({ id: this.nextId(), event, actor, label, createdAt: nowMs() });
  }

  // The issue or pull request numbered `number` (labels live on both, as on GitHub).
  labelable(repo, number) {
    const item = repo.issues.get(Number(number)) || this.pull(repo, number);
    if (!item) throw new ControlError(404, `no issue or pull request #${number} in ${repo.fullName}`);
    return item;
  }

  // Adds labels (names; ones already there are left as they are); returns the deliveries.
  addLabels(repo, item, names, actor) {
    const deliveries = [];
    for (const name of names) {
      if (typeof name !== 'string' || !name.trim()) throw bad('a label is a non-empty string');
      const labels = item.labels || (item.labels = []);
      if (labels.some((l) => l.toLowerCase() === name.toLowerCase())) continue;
      labels.push(name);
      item.updatedAt = nowMs();
      this.recordEvent(item, 'labeled', actor, name);
      if (repo.issues.get(item.number) === item) deliveries.push(this.emitIssue(repo, item, 'labeled', actor, { label: name }));
    }
    return deliveries;
  }

  removeLabel(repo, item, name, actor) {
    const labels = item.labels || [];
    const i = labels.findIndex((l) => l.toLowerCase() === String(name).toLowerCase());
    if (i < 0) throw new ControlError(404, `#${item.number} has no label ${name}`);
    const [removed] = labels.splice(i, 1);
    item.updatedAt = nowMs();
    this.recordEvent(item, 'unlabeled', actor, removed);
    return repo.issues.get(item.number) === item ? [this.emitIssue(repo, item, 'unlabeled', actor, { label: removed })] : [];
  }

  // ---------------------------------------------------------------- operations shared by the API and the control routes

  async resolveSha(repo, { sha, branch, number, ref }) {
    if (number !== undefined) {
      const pr = this.pull(repo, number);
      if (!pr) throw new ControlError(404, `no pull request #${number} in ${repo.fullName}`);
      return (await this.view(repo, pr)).headSha;
    }
    if (branch !== undefined) {
      const s = await repo.git.branchSha(branch);
      if (!s) throw new ControlError(404, `no branch ${branch} in ${repo.fullName}`);
      return s;
    }
    const r = sha ?? ref;
    if (r === undefined) throw bad('name the commit: sha, branch or number (a pull request)');
    const s = await repo.git.resolve(String(r));
    if (!s) throw new ControlError(404, `no commit ${r} in ${repo.fullName}`);
    return s;
  }

  // Creates or updates a check run; returns [run, deliveries].
  async upsertCheckRun(repo, input) {
    const deliveries = [];
    const status = input.status || (input.conclusion ? 'completed' : 'completed');
    if (!CHECK_STATUSES.includes(status)) throw bad(`status must be one of ${CHECK_STATUSES.join(', ')}`);
    let conclusion = input.conclusion ?? null;
    if (status === 'completed' && !conclusion) conclusion = 'success';
    if (conclusion !== null && !CHECK_CONCLUSIONS.includes(conclusion)) throw bad(`conclusion must be one of ${CHECK_CONCLUSIONS.join(', ')}`);
    const now = nowMs();
    let run = input.id !== undefined ? repo.checkRuns.find((r) => r.id === Number(input.id)) : null;
    if (input.id !== undefined && !run) throw new ControlError(404, `no check run ${input.id} in ${repo.fullName}`);
    const created = !run;
    if (!run) {
      if (!input.name) throw bad('a check run needs a name');
      const headSha = await this.resolveSha(repo, input);
      const app = input.app || ACTIONS_APP.slug;
      const suiteKey = `${headSha}:${app}`;
      repo.suites = repo.suites || new Map();
      if (!repo.suites.has(suiteKey)) repo.suites.set(suiteKey, { id: this.nextId(), runId: this.nextId() });
      const suite = repo.suites.get(suiteKey);
      run = {
        id: this.nextId(),
        name: String(input.name),
        headSha,
        app,
        checkSuiteId: suite.id,
        runId: suite.runId,
        externalId: input.externalId ?? '',
        startedAt: now,
        completedAt: null,
        status,
        conclusion: null,
        output: { title: null, summary: null, text: null },
        log: '',
        detailsUrl: input.detailsUrl || null,
      };
      repo.checkRuns.push(run);
    }
    const wasCompleted = run.status === 'completed';
    run.status = status;
    run.conclusion = status === 'completed' ? conclusion : null;
    run.completedAt = status === 'completed' ? run.completedAt || now : null;
    const out = input.output || {};
    for (const k of ['title', 'summary', 'text']) {
      const v = input[k] ?? out[k];
      if (v !== undefined) run.output[k] = v === null ? null : String(v);
    }
    if (run.status === 'completed' && run.output.title === null) run.output.title = `${run.name}: ${run.conclusion}`;
    if (run.status === 'completed' && run.output.summary === null) run.output.summary = `The ${run.name} check ${run.conclusion === 'success' ? 'passed' : `ended with ${run.conclusion}`}.`;
    if (input.detailsUrl !== undefined) run.detailsUrl = input.detailsUrl;
    if (input.log !== undefined) run.log = input.timestamps ? timestamped(String(input.log), run.startedAt) : String(input.log);
    if (created) deliveries.push(this.emitCheckRun(repo, run, 'created'));
    if (run.status === 'completed' && (created || !wasCompleted)) deliveries.push(this.emitCheckRun(repo, run, 'completed'));
    return [run, deliveries];
  }

  // Re-runs a completed Actions job as GitHub does: a new check run (a new job id) of the same
  // name, suite and workflow run on the same commit, queued, with `runAttempt` one higher. The
  // old run stays as it was; `filter=latest` lists the new one. Returns [run, deliveries].
  rerunJob(repo, old) {
    const now = nowMs();
    const run = {
      ...old,
      id: this.nextId(),
      startedAt: now,
      completedAt: null,
      status: 'queued',
      conclusion: null,
      output: { title: null, summary: null, text: null },
      log: '',
      rerunOf: old.id,
      runAttempt: (old.runAttempt || 1) + 1,
    };
    repo.checkRuns.push(run);
    return [run, [this.emitCheckRun(repo, run, 'created')]];
  }

  // The job cannot be re-run: GitHub's 403.
  notRerunnable(run) {
    return error(403, `This job (${run.id}) cannot be re-run: ${run.status === 'completed' ? 'a newer attempt exists' : 'it has not completed'}.`);
  }

  async createStatus(repo, input, sha) {
    if (!STATUS_STATES.includes(input.state)) throw bad(`state must be one of ${STATUS_STATES.join(', ')}`);
    const now = nowMs();
    const s = {
      id: this.nextId(),
      sha: sha || (await this.resolveSha(repo, input)),
      context: input.context || 'default',
      state: input.state,
      description: input.description ?? null,
      targetUrl: input.target_url ?? input.targetUrl ?? null,
      creator: input.creator || this.login,
      createdAt: now,
      updatedAt: now,
    };
    repo.statuses.push(s);
    return [s, [this.emitStatus(repo, s)]];
  }

  async closePull(repo, pr, actor) {
    if (pr.state === 'closed') return [];
    const v = await this.view(repo, pr);
    pr.frozenStats = v.stats;
    pr.state = 'closed';
    pr.closedAt = pr.updatedAt = nowMs();
    return [this.emitPull(repo, pr, 'closed', actor)];
  }

  async reopenPull(repo, pr, actor) {
    if (pr.state === 'open') return [];
    if (pr.merged) throw new ControlError(422, 'a merged pull request cannot be reopened');
    pr.state = 'open';
    pr.closedAt = null;
    pr.updatedAt = nowMs();
    pr.mergeJob = null;
    return [this.emitPull(repo, pr, 'reopened', actor)];
  }

  // Merges for real in the bare repository. Returns a Reply (200, 405, 409).
  mergePull(repo, pr, { method = 'merge', sha, title, message, actor }) {
    return repo.mergeLock.run(async () => {
      if (pr.state !== 'open') return error(405, 'Pull Request is not mergeable');
      const v = await this.view(repo, pr);
      if (sha && sha !== v.headSha) return new Reply(409, { message: 'Head branch was modified. Review and try the merge again.', documentation_url: `${DOCS}/pulls/pulls#merge-a-pull-request` });
      if (pr.draft) return new Reply(405, { message: 'Pull Request is still a draft', documentation_url: `${DOCS}/pulls/pulls#merge-a-pull-request` });
      if (v.computed.mergeable === false || v.computed.mergeableState === 'blocked' || v.computed.mergeableState === 'dirty') {
        return new Reply(405, { message: 'Pull Request is not mergeable', documentation_url: `${DOCS}/pulls/pulls#merge-a-pull-request` });
      }
      let commitTitle = title;
      let commitMessage = message;
      if (method === 'merge') {
        commitTitle = commitTitle || `Merge pull request #${pr.number} from ${repo.owner}/${pr.head.ref}`;
        commitMessage = commitMessage ?? pr.title;
      } else if (method === 'squash') {
        commitTitle = commitTitle || `${pr.title} (#${pr.number})`;
        if (commitMessage === undefined) {
          const log = await repo.git.run(['log', '--reverse', '--format=* %s', `${v.baseSha}..${v.headSha}`]);
          commitMessage = log.stdout.trim();
        }
      }
      const login = actor || this.login;
      const author = { name: login, email: `${userId(login)}+${login}@users.noreply.github.com` };
      const result = await repo.git.merge({ base: v.baseSha, head: v.headSha, method, title: commitTitle, message: commitMessage, author });
      if (result.conflict) {
        return new Reply(405, { message: 'Pull Request is not mergeable', documentation_url: `${DOCS}/pulls/pulls#merge-a-pull-request` });
      }
      if (!(await repo.git.updateBranch(pr.base.ref, result.sha, v.baseSha))) {
        return new Reply(409, { message: 'Base branch was modified. Review and try the merge again.', documentation_url: `${DOCS}/pulls/pulls#merge-a-pull-request` });
      }
      const now = nowMs();
      pr.frozenStats = v.stats;
      Object.assign(pr, { state: 'closed', merged: true, mergedAt: now, closedAt: now, updatedAt: now, mergedBy: login, mergeCommitSha: result.sha });
      pr.base.sha = v.baseSha;
      repo.pushedAt = now;
      const deliveries = [];
      await this.announceBranch(repo, pr.base.ref, result.sha, deliveries, login);
      deliveries.push(this.emitPull(repo, pr, 'closed', login));
      // Merged into the default branch, the pull request closes the issues its body names.
      if (pr.base.ref === repo.defaultBranch) {
        for (const issue of this.closingReferences(repo, pr)) deliveries.push(...this.closeIssue(repo, issue, login));
      }
      const reply = new Reply(200, { sha: result.sha, merged: true, message: 'Pull Request successfully merged' });
      reply.deliveries = deliveries.filter(Boolean);
      return reply;
    });
  }

  async addReview(repo, input) {
    const pr = this.pull(repo, input.number);
    if (!pr) throw new ControlError(404, `no pull request #${input.number} in ${repo.fullName}`);
    const state = String(input.state || '').toUpperCase();
    if (!REVIEW_STATES.includes(state)) throw bad(`state must be one of ${REVIEW_STATES.join(', ')}`);
    if (!input.user) throw bad('a review needs a user (login)');
    const own = selfReviewRefusal(pr, String(input.user), state);
    if (own) throw new ControlError(422, own);
    const v = await this.view(repo, pr);
    const now = nowMs();
    const review = { id: this.nextId(), number: pr.number, user: String(input.user), body: input.body ?? '', state, commitId: input.commitId || v.headSha, submittedAt: now };
    repo.reviews.push(review);
    const comments = [];
    for (const c of input.comments || []) {
      if (!c.path || !c.body) throw bad('each review comment needs a path and a body');
      const line = c.line === undefined || c.line === null ? null : Number(c.line);
      const hunk = (line !== null && (await repo.git.diffHunk(v.baseSha, review.commitId, c.path, line))) || `@@ -${line ?? 1},1 +${line ?? 1},1 @@\n ${c.path}`;
      const comment = {
        id: this.nextId(),
        number: pr.number,
        reviewId: review.id,
        path: String(c.path),
        line,
        startLine: c.startLine ?? null,
        side: c.side || 'RIGHT',
        body: String(c.body),
        user: review.user,
        commitId: review.commitId,
        diffHunk: hunk,
        inReplyTo: c.inReplyTo ?? null,
        createdAt: now,
        updatedAt: now,
      };
      repo.comments.push(comment);
      comments.push(comment);
    }
    pr.updatedAt = now;
    const deliveries = [];
    if (this.webhooks.enabled) {
      const simplePr = this.render.pull(repo, pr, await this.view(repo, pr));
      const reviewJson = this.render.review(repo, review);
      deliveries.push(
        this.emit('pull_request_review', 'pull-request-review-submitted', { action: 'submitted', review: reviewJson, pull_request: simplePr, repository: this.render.repo(repo), sender: this.senderFor(review.user) }, repo),
      );
      for (const c of comments) {
        deliveries.push(
          this.emit(
            'pull_request_review_comment',
            'pull-request-review-comment-created',
            { action: 'created', comment: this.render.reviewComment(repo, c), pull_request: simplePr, repository: this.render.repo(repo), sender: this.senderFor(c.user) },
            repo,
          ),
        );
      }
    }
    return [review, comments, deliveries];
  }

  // ---------------------------------------------------------------- GitHub routes

  apiHandlers() {
    const h = {};

    h['GET /rate_limit'] = async ({ login }) => {
      return new Reply(200, this.render.rateLimit(this.limits.bucket(login, 'core'), this.limits.bucket(login, 'graphql'), Math.floor(nowMs() / 1000)));
    };

    // The authenticated user, with the private profile fields a token with the `user` scope sees.
    h['GET /user'] = async ({ login }) => new Reply(200, this.render.privateUser(login, { createdAt: this.startedAt - 86400000 * 400 }));

    h['GET /repos/{owner}/{repo}'] = async ({ repo }) => new Reply(200, this.render.repo(repo, { full: true }));

    h['GET /repos/{owner}/{repo}/pulls'] = async (ctx) => {
      const { repo, query } = ctx;
      const state = query.state || 'open';
      let list = [...repo.pulls.values()];
      if (state !== 'all') list = list.filter((p) => p.state === state);
      if (query.head) {
        const [owner, ref] = query.head.includes(':') ? query.head.split(/:(.*)/s) : [null, query.head];
        list = list.filter((p) => (owner === null || owner.toLowerCase() === repo.owner.toLowerCase()) && (!ref || p.head.ref === ref));
      }
      if (query.base) list = list.filter((p) => p.base.ref === query.base);
      const sort = query.sort || 'created';
      const key = sort === 'updated' ? (p) => p.updatedAt : (p) => p.createdAt * 1e4 + p.number;
      const dir = query.direction || 'desc';
      list.sort((a, b) => (dir === 'asc' ? key(a) - key(b) : key(b) - key(a)));
      const page = this.paginate(ctx, list);
      const items = [];
      for (const pr of page.slice) items.push(this.render.pullSimple(repo, pr, await this.view(repo, pr)));
      return new Reply(200, items, page.headers);
    };

    // The pull request is authored by the identity that creates it.
    h['POST /repos/{owner}/{repo}/pulls'] = async ({ repo, body, login }) => {
      const headSpec = String(body.head);
      let headOwner = repo.owner;
      let headRef = headSpec;
      if (headSpec.includes(':')) [headOwner, headRef] = headSpec.split(/:(.*)/s);
      const errs = [];
      if (headOwner.toLowerCase() !== repo.owner.toLowerCase()) errs.push({ resource: 'PullRequest', field: 'head', code: 'invalid' });
      const baseSha = await repo.git.branchSha(body.base);
      if (!baseSha) errs.push({ resource: 'PullRequest', field: 'base', code: 'invalid' });
      const headSha = errs.length ? null : await repo.git.branchSha(headRef);
      if (!errs.length && !headSha) errs.push({ resource: 'PullRequest', field: 'head', code: 'invalid' });
      let issue = null;
      if (body.issue !== undefined) {
        issue = repo.issues.get(Number(body.issue));
        if (!issue) errs.push({ resource: 'PullRequest', field: 'issue', code: 'invalid' });
      }
      if (!body.title && !issue) errs.push({ resource: 'PullRequest', field: 'title', code: 'missing_field' });
      if (errs.length) return validationFailed(errs);
      const existing = [...repo.pulls.values()].find((p) => p.state === 'open' && p.head.ref === headRef && p.base.ref === body.base);
      if (existing) return validationFailed([{ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${repo.owner}:${headRef}.` }]);
      const count = await repo.git.run(['rev-list', '--count', `${baseSha}..${headSha}`]);
      if (Number(count.stdout.trim()) === 0) {
        return validationFailed([{ resource: 'PullRequest', code: 'custom', message: `No commits between ${body.base} and ${headRef}` }]);
      }
      const now = nowMs();
      let number;
      if (issue) {
        number = issue.number;
        repo.issues.delete(number);
      } else number = repo.nextNumber++;
      const pr = {
        number,
        id: this.nextId(),
        issueId: issue ? issue.issueId : this.nextId(),
        title: body.title || issue.title,
        body: body.body ?? (issue ? issue.body : null),
        head: { ref: headRef, sha: headSha },
        base: { ref: body.base, sha: baseSha },
        draft: !!body.draft,
        state: 'open',
        merged: false,
        mergedAt: null,
        mergedBy: null,
        mergeCommitSha: null,
        closedAt: null,
        createdAt: now,
        updatedAt: now,
        user: login,
        maintainerCanModify: body.maintainer_can_modify ?? false,
        mergeable: undefined,
        mergeableState: undefined,
      };
      repo.pulls.set(number, pr);
      this.emitPull(repo, pr, 'opened', pr.user);
      const json = await this.renderPull(repo, pr, null, { fresh: true });
      return new Reply(201, json, { Location: json.url });
    };

    h['GET /repos/{owner}/{repo}/pulls/{pull_number}'] = async ({ repo, params }) => {
      const pr = this.pull(repo, params.pull_number);
      if (!pr) return error(404, 'Not Found');
      return new Reply(200, await this.renderPull(repo, pr, null, { read: true }));
    };

    h['PATCH /repos/{owner}/{repo}/pulls/{pull_number}'] = async ({ repo, params, body, login }) => {
      const pr = this.pull(repo, params.pull_number);
      if (!pr) return error(404, 'Not Found');
      if (body.base !== undefined && !(await repo.git.branchSha(body.base))) return validationFailed([{ resource: 'PullRequest', field: 'base', code: 'invalid' }]);
      const changes = {};
      for (const k of ['title', 'body']) if (body[k] !== undefined && body[k] !== pr[k]) changes[k] = { from: pr[k] ?? '' };
      if (body.title !== undefined) pr.title = body.title;
      if (body.body !== undefined) pr.body = body.body;
      if (body.base !== undefined && body.base !== pr.base.ref) {
        changes.base = { ref: { from: pr.base.ref }, sha: { from: pr.base.sha } };
        pr.base.ref = body.base;
      }
      if (body.maintainer_can_modify !== undefined) pr.maintainerCanModify = body.maintainer_can_modify;
      pr.updatedAt = nowMs();
      if (Object.keys(changes).length) this.emitPull(repo, pr, 'edited', login, { changes });
      if (body.state === 'closed') await this.closePull(repo, pr, login);
      if (body.state === 'open') {
        if (pr.merged) return validationFailed([{ resource: 'PullRequest', code: 'custom', message: 'state cannot be changed. The pull request is merged.' }]);
        await this.reopenPull(repo, pr, login);
      }
      return new Reply(200, await this.renderPull(repo, pr, null, { read: true }));
    };

    h['PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge'] = async ({ repo, params, body, login }) => {
      const pr = this.pull(repo, params.pull_number);
      if (!pr) return error(404, 'Not Found');
      return this.mergePull(repo, pr, { method: body.merge_method || 'merge', sha: body.sha, title: body.commit_title, message: body.commit_message, actor: login });
    };

    h['GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews'] = async (ctx) => {
      const { repo, params } = ctx;
      const pr = this.pull(repo, params.pull_number);
      if (!pr) return error(404, 'Not Found');
      const list = repo.reviews.filter((r) => r.number === pr.number && r.state !== 'PENDING').sort((a, b) => a.id - b.id);
      const page = this.paginate(ctx, list);
      return new Reply(200, page.slice.map((r) => this.render.review(repo, r)), page.headers);
    };

    // A review by the authenticated user: `event` APPROVE, REQUEST_CHANGES or COMMENT (a review
    // without one stays PENDING, as on GitHub), with line comments on the head's diff. The
    // pull request's author may comment but not approve or request changes.
    h['POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews'] = async ({ repo, params, body, login }) => {
      const pr = this.pull(repo, params.pull_number);
      if (!pr) return error(404, 'Not Found');
      const states = { APPROVE: 'APPROVED', REQUEST_CHANGES: 'CHANGES_REQUESTED', COMMENT: 'COMMENTED' };
      const state = body.event ? states[body.event] : 'PENDING';
      const unprocessable = (why) => new Reply(422, { message: 'Unprocessable Entity', errors: [why], documentation_url: `${DOCS}/pulls/reviews#create-a-review-for-a-pull-request`, status: '422' });
      if (!state) return unprocessable(`event ${body.event} is not one of APPROVE, REQUEST_CHANGES, COMMENT`);
      const own = selfReviewRefusal(pr, login, state);
      if (own) return unprocessable(own);
      if (state !== 'APPROVED' && state !== 'PENDING' && !body.body) return unprocessable(`Body is required for ${body.event} event`);
      const comments = (body.comments || []).map((c) => ({ path: c.path, line: c.line, body: c.body, startLine: c.start_line, side: c.side }));
      const [review, , deliveries] = await this.addReview(repo, { number: pr.number, user: login, state, body: body.body, commitId: body.commit_id, comments });
      const reply = new Reply(200, this.render.review(repo, review));
      reply.deliveries = deliveries;
      return reply;
    };

    h['GET /repos/{owner}/{repo}/pulls/{pull_number}/comments'] = async (ctx) => {
      const { repo, params, query } = ctx;
      const pr = this.pull(repo, params.pull_number);
      if (!pr) return error(404, 'Not Found');
      let list = repo.comments.filter((c) => c.number === pr.number);
      if (query.since) {
        const since = Date.parse(query.since);
        if (!Number.isNaN(since)) list = list.filter((c) => c.updatedAt >= since);
      }
      const key = query.sort === 'updated' ? (c) => c.updatedAt * 1e4 + (c.id % 1e4) : (c) => c.id;
      const dir = query.direction || 'asc';
      list.sort((a, b) => (dir === 'asc' ? key(a) - key(b) : key(b) - key(a)));
      const page = this.paginate(ctx, list);
      return new Reply(200, page.slice.map((c) => this.render.reviewComment(repo, c)), page.headers);
    };

    // Issues and pull requests together, as GitHub lists them (a pull request has a
    // `pull_request` key). `labels` is a comma list that must all match; the stand-in has no
    // assignees, milestones, mentions or issue types, so those filters match only `none`.
    h['GET /repos/{owner}/{repo}/issues'] = async (ctx) => {
      const { repo, query } = ctx;
      const items = [];
      for (const issue of repo.issues.values()) items.push({ item: issue, pull: false });
      for (const pr of repo.pulls.values()) {
        await this.view(repo, pr);
        items.push({ item: pr, pull: true });
      }
      const state = query.state || 'open';
      const wanted = String(query.labels || '')
        .split(',')
        .map((l) => l.trim().toLowerCase())
        .filter(Boolean);
      const since = query.since ? Date.parse(query.since) : NaN;
      const none = (v) => v === undefined || v === 'none';
      let list = items.filter(({ item }) => {
        if (state !== 'all' && item.state !== state) return false;
        const have = (item.labels || []).map((l) => l.toLowerCase());
        if (!wanted.every((l) => have.includes(l))) return false;
        if (query.creator && query.creator.toLowerCase() !== item.user.toLowerCase()) return false;
        if (!Number.isNaN(since) && item.updatedAt < since) return false;
        return none(query.assignee) && none(query.milestone) && query.mentioned === undefined && none(query.type);
      });
      const key = query.sort === 'updated' ? ({ item }) => item.updatedAt * 1e4 + item.number : ({ item }) => item.createdAt * 1e4 + item.number;
      const dir = query.direction || 'desc';
      list.sort((a, b) => (dir === 'asc' ? key(a) - key(b) : key(b) - key(a)));
      const page = this.paginate(ctx, list);
      return new Reply(200, page.slice.map(({ item, pull }) => this.render.issue(repo, item, { pull })), page.headers);
    };

    h['GET /repos/{owner}/{repo}/issues/{issue_number}'] = async ({ repo, params }) => {
      const n = params.issue_number;
      const issue = repo.issues.get(n);
      if (issue) return new Reply(200, this.render.issue(repo, issue));
      const pr = this.pull(repo, n);
      if (pr) {
        await this.view(repo, pr);
        return new Reply(200, this.render.issue(repo, pr, { pull: true }));
      }
      return error(404, 'Not Found');
    };

    // The label events of an issue or pull request, oldest first (the stand-in records no other
    // kind of issue event).
    h['GET /repos/{owner}/{repo}/issues/{issue_number}/events'] = async (ctx) => {
      const { repo, params } = ctx;
      const n = params.issue_number;
      const item = repo.issues.get(n) || this.pull(repo, n);
      if (!item) return error(404, 'Not Found');
      const page = this.paginate(ctx, item.events || []);
      return new Reply(200, page.slice.map((e) => this.render.issueEvent(repo, e)), page.headers);
    };

    // A user's permission on the repository: `admin` for its owner, `write` for a collaborator,
    // `read` for anyone else (the stand-in's repositories are public). Only a caller who may push
    // to the repository may ask.
    h['GET /repos/{owner}/{repo}/collaborators/{username}/permission'] = async ({ repo, params, login: caller }) => {
      if (!['OWNER', 'COLLABORATOR'].includes(this.render.association(repo, caller))) {
        return new Reply(403, { message: 'Must have push access to view collaborator permission.', documentation_url: `${DOCS}/collaborators/collaborators#get-repository-permissions-for-a-user` });
      }
      const login = String(params.username);
      const association = this.render.association(repo, login);
      const permission = association === 'OWNER' ? 'admin' : association === 'COLLABORATOR' ? 'write' : 'read';
      return new Reply(200, { permission, role_name: permission, user: { ...this.render.user(login), role_name: permission } });
    };

    h['GET /repos/{owner}/{repo}/commits/{ref}/check-runs'] = async (ctx) => {
      const { repo, params, query } = ctx;
      const sha = await repo.git.resolve(params.ref);
      if (!sha) return validationFailed([{ resource: 'Commit', field: 'sha', code: 'invalid' }], `No commit found for SHA: ${params.ref}`);
      let runs = query.filter === 'all' ? repo.checkRuns.filter((r) => r.headSha === sha) : this.latestRuns(repo, sha);
      if (query.check_name) runs = runs.filter((r) => r.name === query.check_name);
      if (query.status) runs = runs.filter((r) => r.status === query.status);
      if (query.app_id) runs = runs.filter((r) => this.render.app(r.app).id === Number(query.app_id));
      runs.sort((a, b) => b.id - a.id);
      const page = this.paginate(ctx, runs);
      const pulls = await this.openPullsAt(repo, sha);
      return new Reply(200, { total_count: page.total, check_runs: page.slice.map((r) => this.render.checkRun(repo, r, pulls)) }, page.headers);
    };

    h['GET /repos/{owner}/{repo}/commits/{ref}/status'] = async (ctx) => {
      const { repo, params } = ctx;
      const sha = await repo.git.resolve(params.ref);
      if (!sha) return error(404, 'Not Found');
      const latest = this.latestStatuses(repo, sha);
      const page = this.paginate(ctx, latest);
      const json = this.render.combinedStatus(repo, sha, page.slice, latest.length);
      json.state = combinedState(latest);
      return new Reply(200, json, page.headers);
    };

    h['GET /repos/{owner}/{repo}/check-runs/{check_run_id}'] = async ({ repo, params }) => {
      const run = repo.checkRuns.find((r) => r.id === params.check_run_id);
      if (!run) return error(404, 'Not Found');
      return new Reply(200, await this.renderRun(repo, run));
    };

    h['POST /repos/{owner}/{repo}/check-runs'] = async ({ repo, body }) => {
      const [run, deliveries] = await this.upsertCheckRun(repo, {
        name: body.name,
        sha: body.head_sha,
        status: body.status || (body.conclusion ? 'completed' : 'queued'),
        conclusion: body.conclusion,
        detailsUrl: body.details_url,
        externalId: body.external_id,
        output: body.output,
      });
      await Promise.all(deliveries);
      return new Reply(201, await this.renderRun(repo, run));
    };

    h['PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}'] = async ({ repo, params, body }) => {
      const run = repo.checkRuns.find((r) => r.id === params.check_run_id);
      if (!run) return error(404, 'Not Found');
      const [updated] = await this.upsertCheckRun(repo, {
        id: run.id,
        status: body.status || (body.conclusion ? 'completed' : run.status),
        conclusion: body.conclusion ?? run.conclusion,
        detailsUrl: body.details_url,
        output: body.output,
      });
      return new Reply(200, await this.renderRun(repo, updated));
    };

    h['POST /repos/{owner}/{repo}/statuses/{sha}'] = async ({ repo, params, body, login }) => {
      const sha = await repo.git.resolve(params.sha);
      if (!sha) return validationFailed([{ resource: 'Status', field: 'sha', code: 'invalid' }], `No commit found for SHA: ${params.sha}`);
      const [s] = await this.createStatus(repo, { ...body, creator: login }, sha);
      return new Reply(201, this.render.statusFull(repo, s), { Location: `${this.render.api}/repos/${repo.fullName}/statuses/${sha}` });
    };

    h['GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs'] = async ({ repo, params }) => {
      const run = repo.checkRuns.find((r) => r.id === params.job_id && r.app === ACTIONS_APP.slug);
      if (!run) return error(404, 'Not Found');
      // The link expires after a minute, as GitHub documents.
      const expires = Math.floor(nowMs() / 1000) + 60;
      const location = `${this.origin}/_standin/job-logs/${repo.fullName}/${run.id}?sig=${this.logSignature(repo.fullName, run.id, expires)}&expires=${expires}`;
      return new Reply(302, undefined, { Location: location });
    };

    h['POST /repos/{owner}/{repo}/actions/jobs/{job_id}/rerun'] = async ({ repo, params }) => {
      const run = repo.checkRuns.find((r) => r.id === params.job_id && r.app === ACTIONS_APP.slug);
      if (!run) return error(404, 'Not Found');
      const newer = repo.checkRuns.some((r) => r.rerunOf === run.id);
      if (run.status !== 'completed' || newer) return this.notRerunnable(run);
      const [, deliveries] = this.rerunJob(repo, run);
      await Promise.all(deliveries);
      return new Reply(201, {});
    };

    h['POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs'] = async ({ repo, params }) => {
      const jobs = repo.checkRuns.filter((r) => r.runId === params.run_id && r.app === ACTIONS_APP.slug);
      if (!jobs.length) return error(404, 'Not Found');
      const latest = this.latestRuns(repo, jobs[0].headSha).filter((r) => r.runId === params.run_id && r.app === ACTIONS_APP.slug);
      if (latest.some((r) => r.status !== 'completed')) return error(403, `The workflow run ${params.run_id} is still running.`);
      const failed = latest.filter((r) => !['success', 'neutral', 'skipped'].includes(r.conclusion));
      const deliveries = failed.flatMap((r) => this.rerunJob(repo, r)[1]);
      await Promise.all(deliveries);
      return new Reply(201, {});
    };

    return h;
  }

  // ---------------------------------------------------------------- control API

  // The signature of a job-log download URL (storage, not the API) that expires at `expires`.
  logSignature(fullName, runId, expires) {
    return crypto.createHmac('sha256', this.logSecret).update(`${fullName}/${runId}/${expires}`).digest('hex').slice(0, 32);
  }

  repoFor(input) {
    if (input.repo) {
      const r = this.repos.get(String(input.repo).toLowerCase());
      if (!r) throw new ControlError(404, `unknown repository ${input.repo}`);
      return r;
    }
    if (this.repos.size === 0) throw bad('no repository is configured');
    return [...this.repos.values()][0];
  }

  async settle(deliveries) {
    const done = (await Promise.all(deliveries.filter(Boolean))).filter(Boolean);
    const summary = done.map(({ payload, ...rest }) => rest);
    const invalid = done.filter((d) => d.invalid);
    return { summary, invalid };
  }

  async control(req, url, raw) {
    const path = url.pathname.replace(/\/+$/, '');
    const method = req.method;
    let input = {};
    if (raw.length) {
      try {
        input = JSON.parse(raw.toString('utf8'));
      } catch {
        return new Reply(400, { message: 'the body is not JSON' });
      }
      if (input === null || typeof input !== 'object' || Array.isArray(input)) return new Reply(400, { message: 'the body must be a JSON object' });
    }
    for (const [k, v] of url.searchParams) if (input[k] === undefined && k !== 'sig' && k !== 'expires') input[k] = v;
    try {
      const reply = await this.controlRoute(method, path, input, url);
      if (reply) return reply;
      return new Reply(404, { message: `no control route ${method} ${path}`, routes: CONTROL_ROUTES });
    } catch (e) {
      if (e instanceof ControlError) return new Reply(e.status, { message: e.message, ...(e.extra || {}) });
      throw e;
    }
  }

  async withDeliveries(status, body, deliveries) {
    const { summary, invalid } = await this.settle(deliveries);
    if (invalid.length) {
      return new Reply(500, { message: 'github-standin bug: a webhook payload does not validate against the description', ...body, deliveries: summary });
    }
    return new Reply(status, { ...body, deliveries: summary });
  }

  async controlRoute(method, path, input, url) {
    let m;
    if (method === 'GET' && (path === '/_standin' || path === '/_standin/routes')) return new Reply(200, { routes: CONTROL_ROUTES });

    if (method === 'GET' && (m = /^\/_standin\/job-logs\/([^/]+\/[^/]+)\/(\d+)$/.exec(path))) {
      const repo = this.repos.get(m[1].toLowerCase());
      const run = repo?.checkRuns.find((r) => r.id === Number(m[2]));
      const expires = Number(url.searchParams.get('expires'));
      if (!run || url.searchParams.get('sig') !== this.logSignature(repo.fullName, run.id, expires)) {
        const nf = new Reply(404, undefined, { 'Content-Type': 'application/xml' });
        nf.raw = '<?xml version="1.0" encoding="utf-8"?><Error><Code>BlobNotFound</Code><Message>The specified blob does not exist.</Message></Error>';
        return nf;
      }
      if (nowMs() / 1000 > expires) {
        const gone = new Reply(403, undefined, { 'Content-Type': 'application/xml' });
        gone.raw = '<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code><Message>Signature not valid in the specified time frame.</Message></Error>';
        return gone;
      }
      const r = new Reply(200, undefined, { 'Content-Type': 'text/plain; charset=utf-8' });
      r.raw = run.log;
      return r;
    }

    if (method === 'POST' && path === '/_standin/check-runs') {
      const repo = this.repoFor(input);
      const [run, deliveries] = await this.upsertCheckRun(repo, input);
      return this.withDeliveries(input.id === undefined ? 201 : 200, { checkRun: await this.renderRun(repo, run) }, deliveries);
    }

    if (method === 'POST' && path === '/_standin/statuses') {
      const repo = this.repoFor(input);
      const [s, deliveries] = await this.createStatus(repo, input);
      return this.withDeliveries(201, { status: this.render.statusFull(repo, s) }, deliveries);
    }

    if (path === '/_standin/collaborators' && (method === 'POST' || method === 'DELETE')) {
      const repo = this.repoFor(input);
      if (!LOGIN.test(input.login || '')) throw bad(`${JSON.stringify(input.login)} is not a GitHub login`);
      if (method === 'POST') repo.collaborators.add(input.login.toLowerCase());
      else repo.collaborators.delete(input.login.toLowerCase());
      return new Reply(200, { repo: repo.fullName, collaborators: [...repo.collaborators].sort() });
    }

    if (method === 'POST' && path === '/_standin/reviews') {
      const repo = this.repoFor(input);
      const [review, comments, deliveries] = await this.addReview(repo, input);
      return this.withDeliveries(201, { review: this.render.review(repo, review), comments: comments.map((c) => this.render.reviewComment(repo, c)) }, deliveries);
    }

    if (method === 'POST' && path === '/_standin/issues') {
      const repo = this.repoFor(input);
      if (!input.title) throw bad('an issue needs a title');
      const now = nowMs();
      const issue = {
        number: repo.nextNumber++,
        issueId: this.nextId(),
        title: String(input.title),
        body: input.body ?? null,
        user: input.user || repo.owner,
        labels: [],
        state: 'open',
        createdAt: now,
        updatedAt: now,
        closedAt: null,
        closedBy: null,
      };
      if (input.labels !== undefined && !Array.isArray(input.labels)) throw bad('labels is a list of names');
      repo.issues.set(issue.number, issue);
      // As on GitHub, an issue opened with labels is announced as opened, then labeled per label.
      const labels = input.labels || [];
      for (const l of labels) if (typeof l !== 'string' || !l.trim()) throw bad('a label is a non-empty string');
      issue.labels = [...new Set(labels)];
      // Labels an issue is opened with (an issue form's `labels`) are applied as its author.
      for (const name of issue.labels) this.recordEvent(issue, 'labeled', issue.user, name);
      const deliveries = [this.emitIssue(repo, issue, 'opened', issue.user)];
      const shown = { ...issue, labels: [] };
      for (const name of issue.labels) {
        shown.labels = [...shown.labels, name];
        if (this.webhooks.enabled) {
          deliveries.push(this.emit('issues', 'issues-labeled', { action: 'labeled', issue: this.render.issue(repo, { ...shown }), label: this.render.label(repo, name), repository: this.render.repo(repo), sender: this.senderFor(issue.user) }, repo));
        }
      }
      return this.withDeliveries(201, { issue: this.render.issue(repo, issue) }, deliveries);
    }

    if (method === 'POST' && (m = /^\/_standin\/issues\/(\d+)\/(close|reopen)$/.exec(path))) {
      const repo = this.repoFor(input);
      const issue = repo.issues.get(Number(m[1]));
      if (!issue) throw new ControlError(404, `no issue #${m[1]} in ${repo.fullName}`);
      const actor = input.user || repo.owner;
      const deliveries = m[2] === 'close' ? this.closeIssue(repo, issue, actor) : this.reopenIssue(repo, issue, actor);
      return this.withDeliveries(200, { issue: this.render.issue(repo, issue) }, deliveries);
    }

    if ((m = /^\/_standin\/issues\/(\d+)\/labels(?:\/(.+))?$/.exec(path))) {
      const repo = this.repoFor(input);
      const item = this.labelable(repo, m[1]);
      const actor = input.user || repo.owner;
      let deliveries = null;
      if (method === 'POST' && m[2] === undefined) {
        if (!Array.isArray(input.labels) || input.labels.length === 0) throw bad('labels is a non-empty list of names');
        deliveries = this.addLabels(repo, item, input.labels, actor);
      } else if (method === 'DELETE' && m[2] !== undefined) {
        deliveries = this.removeLabel(repo, item, decodeURIComponent(m[2]), actor);
      }
      if (deliveries) return this.withDeliveries(200, { number: item.number, labels: [...(item.labels || [])] }, deliveries);
    }

    if ((m = /^\/_standin\/pulls\/(\d+)\/(close|reopen|mergeable|merge)$/.exec(path))) {
      const repo = this.repoFor(input);
      const pr = this.pull(repo, m[1]);
      if (!pr) throw new ControlError(404, `no pull request #${m[1]} in ${repo.fullName}`);
      const actor = input.user || repo.owner;
      if (method === 'POST' && m[2] === 'close') {
        const deliveries = await this.closePull(repo, pr, actor);
        return this.withDeliveries(200, { pullRequest: await this.renderPull(repo, pr) }, deliveries);
      }
      if (method === 'POST' && m[2] === 'reopen') {
        const deliveries = await this.reopenPull(repo, pr, actor);
        return this.withDeliveries(200, { pullRequest: await this.renderPull(repo, pr) }, deliveries);
      }
      if (m[2] === 'mergeable' && (method === 'POST' || method === 'DELETE')) {
        if (method === 'DELETE') {
          pr.mergeable = undefined;
          pr.mergeableState = undefined;
        } else {
          if (!('mergeable' in input) || ![true, false, null].includes(input.mergeable)) throw bad('mergeable must be true, false or null');
          pr.mergeable = input.mergeable;
          pr.mergeableState = input.mergeableState || undefined;
        }
        pr.updatedAt = nowMs();
        return new Reply(200, { pullRequest: await this.renderPull(repo, pr) });
      }
      if (method === 'POST' && m[2] === 'merge') {
        const reply = await this.mergePull(repo, pr, { method: input.method || 'merge', sha: input.sha, actor });
        if (reply.status !== 200) return reply;
        return this.withDeliveries(200, { result: reply.body, pullRequest: await this.renderPull(repo, pr) }, reply.deliveries);
      }
    }

    if (method === 'POST' && path === '/_standin/refresh') {
      const deliveries = [];
      const synchronized = [];
      for (const repo of input.repo ? [this.repoFor(input)] : this.repos.values()) {
        await this.scanBranches(repo, deliveries);
        for (const pr of repo.pulls.values()) {
          const before = deliveries.length;
          const old = pr.head.sha;
          await this.view(repo, pr, deliveries);
          if (pr.head.sha !== old || deliveries.length > before) synchronized.push({ repo: repo.fullName, number: pr.number, before: old, after: pr.head.sha });
        }
      }
      return this.withDeliveries(200, { synchronized }, deliveries);
    }

    if (path === '/_standin/faults') {
      if (method === 'GET') return new Reply(200, { faults: this.faults });
      if (method === 'DELETE') {
        this.faults = [];
        return new Reply(200, { faults: [] });
      }
      if (method === 'POST') {
        const delayOnly = input.status === undefined && Number(input.delayMs) > 0;
        const status = delayOnly ? null : Number(input.status);
        if (!delayOnly && (!Number.isInteger(status) || status < 300 || status > 599)) throw bad('status must be an HTTP error status (300-599), or absent with delayMs');
        const headers = { ...(input.headers || {}) };
        if (input.resetIn !== undefined) headers['X-RateLimit-Reset'] = String(Math.floor(nowMs() / 1000) + Number(input.resetIn));
        for (const [k, v] of Object.entries(headers)) headers[k] = String(v);
        const fault = { id: this.nextId(), route: input.route || null, remaining: Number(input.count ?? 1), status, headers, body: delayOnly ? null : input.body ?? defaultFaultBody(status, headers), delayMs: Number(input.delayMs || 0) };
        if (!(fault.remaining >= 1)) throw bad('count must be at least 1');
        this.faults.push(fault);
        return new Reply(201, { fault, faults: this.faults });
      }
    }

    if (path === '/_standin/corrupt' && method === 'POST') {
      const c = { route: input.route || null, remaining: Number(input.count ?? 1), set: input.set || {}, delete: input.delete || [] };
      this.corruptions.push(c);
      return new Reply(201, { corruption: c });
    }

    if (path === '/_standin/rate-limit' && (method === 'POST' || method === 'GET')) {
      const login = input.login || this.login;
      const resource = input.resource || 'core';
      if (!['core', 'graphql'].includes(resource)) throw bad('resource must be core or graphql');
      if (method === 'POST') this.limits.setPrimary(login, resource, input);
      return new Reply(200, { login, resource, rate: this.limits.describe(this.limits.bucket(login, resource)), rates: this.allRates() });
    }

    if (path === '/_standin/secondary-limits') {
      if (method === 'POST') {
        try {
          this.limits.setSecondary(input);
        } catch (e) {
          throw bad(e.message);
        }
      }
      if (method === 'DELETE') this.limits.resetSecondary();
      if (['GET', 'POST', 'DELETE'].includes(method)) {
        return new Reply(200, { limits: { ...this.limits.secondary }, defaults: { ...SECONDARY_DEFAULTS }, usage: this.secondaryUsage() });
      }
    }

    if (path === '/_standin/clock') {
      if (method === 'POST') {
        const seconds = Number(input.advance);
        if (!Number.isFinite(seconds) || seconds <= 0) throw bad('advance is a positive number of seconds');
        clock.advance(seconds);
      }
      if (method === 'POST' || method === 'GET') return new Reply(200, { now: new Date(nowMs()).toISOString(), offsetSeconds: clock.offset() / 1000 });
    }

    if (path === '/_standin/requests') {
      if (method === 'DELETE') {
        this.resetCounters();
        return new Reply(200, { ...this.counts });
      }
      if (method === 'GET') {
        const body = { ...this.counts, rate: this.limits.describe(this.limits.bucket(this.login, 'core')), rates: this.allRates(), bugs: this.bugs.length };
        if (input.log) body.log = this.requestLog;
        return new Reply(200, body);
      }
    }

    if (path === '/_standin/webhooks' && method === 'GET') {
      return new Reply(200, { url: this.webhooks.url, deliveries: this.webhooks.summary({ payloads: !!input.payloads }) });
    }

    if (path === '/_standin/bugs' && method === 'GET') return new Reply(200, { bugs: this.bugs });

    if (path === '/_standin/repos' && method === 'POST') {
      const repo = await this.addRepo(input.repo, input.gitDir);
      return new Reply(201, { repository: this.render.repo(repo, { full: true }) });
    }

    if (path === '/_standin/reset' && method === 'POST') {
      for (const repo of this.repos.values()) {
        Object.assign(repo, { nextNumber: 1, pulls: new Map(), issues: new Map(), checkRuns: [], statuses: [], reviews: [], comments: [], suites: new Map() });
        repo.heads = new Map((await repo.git.branches()).map((b) => [b.name, b.sha]));
      }
      this.faults = [];
      this.corruptions = [];
      this.bugs = [];
      this.webhooks.deliveries = [];
      clock.reset();
      this.limits.resetPrimary();
      this.limits.resetSecondary();
      this.resetCounters();
      return new Reply(200, { reset: true });
    }

    if (path === '/_standin/state' && method === 'GET') return new Reply(200, await this.stateSnapshot());

    return null;
  }

  // Every identity's primary budgets, {login: {core, graphql}}.
  allRates() {
    const out = {};
    for (const login of this.identities) out[login] = { core: this.limits.describe(this.limits.bucket(login, 'core')), graphql: this.limits.describe(this.limits.bucket(login, 'graphql')) };
    return { ...this.limits.allPrimary(), ...out };
  }

  secondaryUsage() {
    const out = {};
    for (const login of this.identities) out[login] = this.limits.usage(login);
    return { ...this.limits.allUsage(), ...out };
  }

  async stateSnapshot() {
    const repos = [];
    for (const repo of this.repos.values()) {
      const pulls = [];
      for (const pr of repo.pulls.values()) {
        const v = await this.view(repo, pr);
        pulls.push({
          number: pr.number,
          title: pr.title,
          body: pr.body,
          user: pr.user,
          state: pr.state,
          merged: pr.merged,
          mergedAt: pr.mergedAt && iso(pr.mergedAt),
          mergedBy: pr.mergedBy,
          mergeCommitSha: pr.mergeCommitSha,
          draft: pr.draft,
          head: { ref: pr.head.ref, sha: v.headSha },
          base: { ref: pr.base.ref, sha: v.baseSha },
          mergeable: v.computed.mergeable,
          mergeableState: v.computed.mergeableState,
          mergeableShown: v.mergeable,
          mergeableOverride: pr.mergeable === undefined ? 'computed' : pr.mergeable,
          htmlUrl: `${this.htmlBase}/${repo.fullName}/pull/${pr.number}`,
        });
      }
      repos.push({
        fullName: repo.fullName,
        gitDir: repo.gitDir,
        defaultBranch: repo.defaultBranch,
        branches: await repo.git.branches(),
        pulls,
        heads: Object.fromEntries(repo.heads),
        issues: [...repo.issues.values()].map((i) => ({ number: i.number, title: i.title, body: i.body, state: i.state, user: i.user, labels: i.labels, closedBy: i.closedBy })),
        checkRuns: repo.checkRuns.map((r) => ({ id: r.id, name: r.name, headSha: r.headSha, status: r.status, conclusion: r.conclusion, app: r.app, output: r.output, logBytes: Buffer.byteLength(r.log), rerunOf: r.rerunOf ?? null, runAttempt: r.runAttempt || 1 })),
        statuses: repo.statuses.map((s) => ({ id: s.id, sha: s.sha, context: s.context, state: s.state, description: s.description, targetUrl: s.targetUrl })),
        reviews: repo.reviews.map((r) => ({ id: r.id, number: r.number, user: r.user, state: r.state, body: r.body, commitId: r.commitId })),
        comments: repo.comments.map((c) => ({ id: c.id, number: c.number, reviewId: c.reviewId, user: c.user, path: c.path, line: c.line, body: c.body })),
      });
    }
    return {
      login: this.login,
      identities: this.identities,
      apiUrl: this.render.api,
      graphqlUrl: this.origin + this.graphqlPath,
      auth: this.tokens.size ? 'token required' : 'none',
      repos,
      rate: this.limits.describe(this.limits.bucket(this.login, 'core')),
      rates: this.allRates(),
      secondaryLimits: { limits: { ...this.limits.secondary }, usage: this.secondaryUsage() },
      clockOffsetSeconds: clock.offset() / 1000,
      faults: this.faults,
      requests: this.counts,
      webhooks: { url: this.webhooks.url, deliveries: this.webhooks.summary() },
      bugs: this.bugs,
    };
  }
}

// GitHub's refusal of a review by the pull request's own author that approves or requests
// changes (a comment is allowed); null when the review is allowed.
function selfReviewRefusal(pr, login, state) {
  if (pr.user.toLowerCase() !== String(login).toLowerCase()) return null;
  if (state === 'APPROVED') return 'Can not approve your own pull request';
  if (state === 'CHANGES_REQUESTED') return 'Can not request changes on your own pull request';
  return null;
}

function timestamped(text, startMs) {
  return text
    .split('\n')
    .map((line, i) => `${new Date(startMs + i * 10).toISOString().replace('Z', '0000Z')} ${line}`)
    .join('\n');
}

function defaultFaultBody(status, headers) {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  if (status === 403 && lower['x-ratelimit-remaining'] === '0') {
    return { message: 'API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.', documentation_url: `${DOCS}/overview/rate-limits-for-the-rest-api` };
  }
  if (status === 403 || status === 429) {
    return { message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.', documentation_url: `${DOCS}/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits` };
  }
  const messages = { 401: 'Bad credentials', 404: 'Not Found', 409: 'Conflict', 422: 'Validation Failed', 500: 'Server Error', 502: 'Server Error', 503: 'Service Unavailable', 504: 'We couldn\'t respond to your request in time. Sorry about that. Please try resubmitting your request and contact us if the problem persists.' };
  return { message: messages[status] || http.STATUS_CODES[status] || 'Error', documentation_url: DOCS };
}

const CONTROL_ROUTES = [
  'POST /_standin/check-runs {repo?, sha|branch|number, name, status?, conclusion?, log?, timestamps?, title?, summary?, text?, app?, detailsUrl?, id? (update)}',
  'POST /_standin/statuses {repo?, sha|branch|number, context, state, description?, targetUrl?, creator?}',
  'POST /_standin/reviews {repo?, number, user, state: APPROVED|CHANGES_REQUESTED|COMMENTED|DISMISSED, body?, comments?: [{path, line, body, startLine?, side?, inReplyTo?}]}',
  'POST /_standin/issues {repo?, title, body?, user?, labels?}  (issues opened, then labeled per label)',
  'POST /_standin/issues/{number}/close · /reopen {repo?, user?}  (issues closed / reopened)',
  'POST /_standin/issues/{number}/labels {repo?, labels: [name], user?}  (issues labeled per new label)',
  'DELETE /_standin/issues/{number}/labels/{name} {repo?, user?}  (issues unlabeled)',
  'POST /_standin/pulls/{number}/close {repo?, user?}',
  'POST /_standin/pulls/{number}/reopen {repo?, user?}',
  'POST /_standin/pulls/{number}/merge {repo?, user?, method?, sha?}',
  'POST /_standin/pulls/{number}/mergeable {repo?, mergeable: true|false|null, mergeableState?}',
  'DELETE /_standin/pulls/{number}/mergeable  (back to computing it from git)',
  'POST /_standin/refresh {repo?}  (re-read branch heads; pull_request.synchronize for moved heads)',
  'POST /_standin/faults {count?, status, headers?, resetIn?, body?, route?, delayMs?}; GET|DELETE /_standin/faults',
  'POST /_standin/corrupt {route?, count?, set?: {"a.b": value}, delete?: ["a.b"]}',
  'GET|POST /_standin/rate-limit {login?, resource?: core|graphql, limit?, remaining?, resetIn?}',
  'GET|POST|DELETE /_standin/secondary-limits {contentPerMinute?, contentPerHour?, restPointsPerMinute?, graphqlPointsPerMinute?, restStatus?: 403|429}  (DELETE: the documented defaults, usage cleared)',
  'GET|POST /_standin/clock {advance: seconds}',
  'GET|DELETE /_standin/requests [?log=1]',
  'GET /_standin/webhooks [?payloads=1]',
  'GET /_standin/bugs',
  'GET /_standin/state',
  'POST|DELETE /_standin/collaborators {repo?, login}  (invite or remove a collaborator)',
  'POST /_standin/repos {repo, gitDir}',
  'POST /_standin/reset',
];

module.exports = { StandIn, OPERATIONS, WEBHOOKS, CONTROL_ROUTES };
