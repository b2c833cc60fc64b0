// The HTTP server: Linear's `POST /graphql` (authentication, rate-limit headers, faults, Linear's
// error shapes) and the control API under /_standin/ that changes issues the way a person in
// Linear's app would, sending the data change webhooks.
'use strict';

const http = require('node:http');
const crypto = require('node:crypto');
const graphql = require('graphql');
const { Store, PRIORITY_LABELS, ORG_URL_KEY } = require('./store');
const { Api, complexity, operationKey } = require('./graphql-api');
const { Webhooks } = require('./webhooks');
const { checkSchema, loadSchema } = require('./check-schema');

const HOUR_MS = 3600 * 1000;
const REQUEST_LIMIT = 1500;
const COMPLEXITY_LIMIT = 250000;
const MAX_BODY = 4 * 1024 * 1024;

const { readBody: readAll } = require('../../standin-kit/http.js');

// A request's body as text.
const readBody = async (req) => (await readAll(req, MAX_BODY)).toString('utf8');

function linearError(message, code, type, extra = {}) {
  return { errors: [{ message, extensions: { code, type, userError: true, userPresentableMessage: extra.userPresentableMessage || message, ...extra } }] };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class StandIn {
  constructor({ teams, token, webhook, schemaFile, log }) {
    this.log = log || ((m) => process.stderr.write(`linear-standin: ${m}\n`));
    if (!teams || !teams.length) throw new Error('give at least one --team KEY:Name');
    this.schema = loadSchema(schemaFile);
    const problems = checkSchema(this.schema);
    if (problems.length) {
      const e = new Error(`the schema subset disagrees with @linear/sdk:\n  ${problems.join('\n  ')}`);
      e.problems = problems;
      throw e;
    }
    this.token = token || null;
    this.store = new Store(teams);
    this.bugs = [];
    this.graphqlCorruptions = [];
    this.api = new Api(this.store, { corrupt: this.graphqlCorruptions });
    this.webhooks = new Webhooks({ ...(webhook || {}), log: this.log, bug: (b) => this.bug(b) });
    this.organizationId = crypto.randomUUID();
    this.faults = [];
    this.resetRequests();
    this.resetRate();
  }

  bug(b) {
    const record = { at: new Date().toISOString(), ...b };
    this.bugs.push(record);
    this.log(`BUG: ${b.where}: ${JSON.stringify(b.errors).slice(0, 2000)}`);
  }

  resetRequests() {
    this.requests = { total: 0, byOperation: {}, log: [] };
  }

  resetRate() {
    const now = Date.now();
    this.rate = {
      limit: REQUEST_LIMIT,
      remaining: REQUEST_LIMIT,
      resetAt: now + HOUR_MS,
      complexityLimit: COMPLEXITY_LIMIT,
      complexityRemaining: COMPLEXITY_LIMIT,
      complexityResetAt: now + HOUR_MS,
    };
  }

  rateHeaders(cost) {
    const r = this.rate;
    const h = {
      'X-RateLimit-Requests-Limit': String(r.limit),
      'X-RateLimit-Requests-Remaining': String(Math.max(0, r.remaining)),
      'X-RateLimit-Requests-Reset': String(r.resetAt),
      'X-RateLimit-Complexity-Limit': String(r.complexityLimit),
      'X-RateLimit-Complexity-Remaining': String(Math.max(0, r.complexityRemaining)),
      'X-RateLimit-Complexity-Reset': String(r.complexityResetAt),
    };
    if (cost !== undefined) h['X-Complexity'] = String(cost);
    return h;
  }

  listen(port, host) {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((e) => {
        this.log(`error handling ${req.method} ${req.url}: ${e.stack || e}`);
        if (!res.headersSent) this.send(res, 500, { errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR', type: 'internal error' } }] });
      });
    });
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => resolve(this.server.address().port));
    });
  }

  close() {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  send(res, status, body, headers = {}) {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text), ...headers });
    res.end(text);
  }

  async handle(req, res) {
    const url = new URL(req.url, 'http://localhost');
    if (url.pathname.startsWith('/_standin/') || url.pathname === '/_standin') return this.control(req, res, url);
    if (url.pathname === '/graphql' && req.method === 'POST') return this.graphql(req, res);
    if (url.pathname === '/graphql') return this.send(res, 405, linearError('Only POST is supported', 'BAD_REQUEST', 'invalid input'), { Allow: 'POST' });
    return this.send(res, 404, { errors: [{ message: 'Not found', extensions: { code: 'NOT_FOUND' } }] });
  }

  authorized(req) {
    if (!this.token) return true;
    const h = req.headers.authorization || '';
    return h === this.token || h === `Bearer ${this.token}`;
  }

  async graphql(req, res) {
    const raw = await readBody(req);
    if (!this.authorized(req)) {
      return this.send(
        res,
        400,
        linearError('Authentication required, not authenticated', 'AUTHENTICATION_ERROR', 'authentication error', {
          statusCode: 401,
          userPresentableMessage: 'You need to authenticate to access this operation.',
        }),
      );
    }
    let body;
    try {
      body = JSON.parse(raw);
      if (!body || typeof body !== 'object' || typeof body.query !== 'string') throw new Error('the body needs a "query" string');
    } catch (e) {
      return this.send(res, 400, linearError(`Bad request: ${e.message}`, 'BAD_REQUEST', 'invalid input'), this.rateHeaders());
    }
    const { query, variables = {}, operationName } = body;
    let document = null;
    let parseError = null;
    try {
      document = graphql.parse(query);
    } catch (e) {
      parseError = e;
    }
    const op = operationKey(document, operationName);
    this.requests.total++;
    this.requests.byOperation[op] = (this.requests.byOperation[op] || 0) + 1;
    this.requests.log.push({ at: new Date().toISOString(), operation: op, operationName: operationName || null, variables });
    if (this.requests.log.length > 1000) this.requests.log.shift();

    // Faults (POST /_standin/faults).
    const fi = this.faults.findIndex((f) => !f.operation || f.operation === op);
    if (fi >= 0) {
      const f = this.faults[fi];
      if (--f.count <= 0) this.faults.splice(fi, 1);
      if (f.delayMs) await sleep(f.delayMs);
      if (f.status) {
        const fb = f.body !== undefined ? f.body : { errors: [{ message: `Injected fault (HTTP ${f.status})`, extensions: { code: 'INTERNAL_SERVER_ERROR', type: 'internal error' } }] };
        return this.send(res, f.status, fb, { ...this.rateHeaders(), ...(f.headers || {}) });
      }
    }

    // Rate limits: requests and complexity per hour.
    const now = Date.now();
    if (now >= this.rate.resetAt) {
      this.rate.remaining = this.rate.limit;
      this.rate.resetAt = now + HOUR_MS;
    }
    if (now >= this.rate.complexityResetAt) {
      this.rate.complexityRemaining = this.rate.complexityLimit;
      this.rate.complexityResetAt = now + HOUR_MS;
    }
    const cost = document ? complexity(document, operationName, variables) : 0;
    if (this.rate.remaining <= 0 || this.rate.complexityRemaining < cost) {
      return this.send(res, 400, linearError('Rate limit exceeded', 'RATELIMITED', 'ratelimited', { statusCode: 429, userPresentableMessage: 'Rate limit exceeded' }), this.rateHeaders(0));
    }
    this.rate.remaining--;
    this.rate.complexityRemaining -= cost;
    const headers = this.rateHeaders(cost);

    if (parseError) {
      return this.send(res, 400, { errors: [{ message: parseError.message, locations: parseError.locations, extensions: { code: 'GRAPHQL_PARSE_FAILED', type: 'graphql error', userError: true } }] }, headers);
    }
    const validation = graphql.validate(this.schema, document);
    if (validation.length) {
      return this.send(res, 400, { errors: validation.map((e) => ({ message: e.message, locations: e.locations, extensions: { code: 'GRAPHQL_VALIDATION_FAILED', type: 'graphql error', userError: true } })) }, headers);
    }
    const result = await graphql.execute({ schema: this.schema, document, rootValue: this.api.root(), variableValues: variables, operationName });
    if (result.errors && !('data' in result)) {
      // Variables that do not coerce, or no such operation.
      return this.send(res, 400, { errors: result.errors.map((e) => ({ message: e.message, locations: e.locations, extensions: { code: 'INVALID_INPUT', type: 'invalid input', userError: true, userPresentableMessage: e.message } })) }, headers);
    }
    if (result.errors) {
      const unexpected = result.errors.filter((e) => !e.extensions?.code);
      if (unexpected.length) {
        this.bug({ where: `graphql ${op}`, errors: unexpected.map((e) => ({ message: e.message, path: e.path })) });
        return this.send(res, 500, { errors: result.errors.map((e) => ({ message: e.message, path: e.path, extensions: e.extensions?.code ? e.extensions : { code: 'INTERNAL_SERVER_ERROR', type: 'internal error', standinBug: true } })), data: result.data }, headers);
      }
      return this.send(res, 200, { errors: result.errors.map((e) => ({ message: e.message, path: e.path, locations: e.locations, extensions: e.extensions })), data: result.data }, headers);
    }
    return this.send(res, 200, { data: result.data }, headers);
  }

  // ---- webhooks ----

  actor() {
    const v = this.store.viewer;
    return { id: v.id, name: v.name, email: v.email, type: 'user', url: `https://linear.app/${ORG_URL_KEY}/profiles/${v.displayName}` };
  }

  webhookData(i) {
    const store = this.store;
    const team = store.issueTeam(i);
    const state = store.stateById(i.stateId);
    const labels = i.labelIds.map((id) => store.label(id));
    const v = store.viewer;
    const data = {
      id: i.id,
      createdAt: i.createdAt,
      updatedAt: i.updatedAt,
      archivedAt: i.archivedAt,
      number: i.number,
      identifier: i.identifier,
      title: i.title,
      description: i.description,
      priority: i.priority,
      priorityLabel: PRIORITY_LABELS[i.priority],
      prioritySortOrder: i.number,
      sortOrder: -i.seq,
      startedAt: i.startedAt,
      completedAt: i.completedAt,
      canceledAt: i.canceledAt,
      addedToTeamAt: i.createdAt,
      teamId: team.id,
      team: { id: team.id, key: team.key, name: team.name },
      stateId: state.id,
      state: { id: state.id, name: state.name, type: state.type, color: state.color },
      labelIds: [...i.labelIds],
      labels: labels.map((l) => ({ id: l.id, name: l.name, color: l.color })),
      creatorId: i.creatorId,
      creator: { id: v.id, name: v.name, email: v.email, url: `https://linear.app/${ORG_URL_KEY}/profiles/${v.displayName}` },
      assigneeId: i.assigneeId,
      previousIdentifiers: [...i.previousIdentifiers],
      subscriberIds: [i.creatorId],
      reactionData: {},
      releases: [],
      url: store.url(i),
      botActor: null,
    };
    for (const k of Object.keys(data)) if (data[k] === null) delete data[k];
    return data;
  }

  async announce(action, issue, before) {
    if (!this.webhooks.enabled) return [];
    const data = this.webhookData(issue);
    const payload = { action, type: 'Issue', actor: this.actor(), createdAt: new Date().toISOString(), data, url: data.url, organizationId: this.organizationId };
    if (before) {
      const updatedFrom = {};
      for (const [k, v] of Object.entries(before)) {
        if (JSON.stringify(v) !== JSON.stringify(data[k])) updatedFrom[k] = v === undefined ? null : v;
      }
      payload.updatedFrom = updatedFrom;
    }
    const record = await this.webhooks.deliver(payload);
    return record ? [this.deliverySummary(record)] : [];
  }

  deliverySummary(d) {
    const { payload, response, ...rest } = d;
    return rest;
  }

  // The fields updatedFrom may name, before a change.
  snapshotForUpdate(issue) {
    const d = this.webhookData(issue);
    const keep = ['updatedAt', 'number', 'identifier', 'title', 'description', 'priority', 'teamId', 'stateId', 'labelIds', 'startedAt', 'completedAt', 'canceledAt', 'archivedAt', 'previousIdentifiers'];
    const out = {};
    for (const k of keep) out[k] = d[k] === undefined ? null : d[k];
    return out;
  }

  // ---- control API ----

  async control(req, res, url) {
    const p = url.pathname.replace(/\/+$/, '');
    const method = req.method;
    let body = {};
    if (method === 'POST' || method === 'PUT' || method === 'PATCH') {
      const raw = await readBody(req);
      try {
        body = raw ? JSON.parse(raw) : {};
      } catch (e) {
        return this.send(res, 400, { error: `bad JSON: ${e.message}` });
      }
    }
    const ok = (value, status = 200) => this.send(res, status, value);
    const fail = (status, error) => this.send(res, status, { error });
    let m;
    try {
      if (p === '/_standin/issues' && method === 'POST') {
        const issue = this.store.createIssue({ team: body.team, title: body.title, description: body.description, labels: body.labels || [], state: body.state, priority: body.priority ?? 0 });
        const deliveries = await this.announce('create', issue);
        return ok({ issue: this.store.describe(issue), deliveries }, 201);
      }
      if ((m = p.match(/^\/_standin\/issues\/([^/]+)(?:\/(state|labels|move|archive))?$/))) {
        const issue = this.store.issue(decodeURIComponent(m[1]));
        if (!issue) return fail(404, `no issue ${decodeURIComponent(m[1])}`);
        const action = m[2];
        if (!action && method === 'GET') return ok({ issue: this.store.describe(issue) });
        if (method !== 'POST' || !action) return fail(405, `${method} ${p} is not a control route`);
        const before = this.snapshotForUpdate(issue);
        if (action === 'state') {
          if (!body.state) return fail(400, 'state is required');
          this.store.setState(issue, body.state);
          const deliveries = await this.announce('update', issue, before);
          return ok({ issue: this.store.describe(issue), deliveries });
        }
        if (action === 'labels') {
          if (!Array.isArray(body.labels)) return fail(400, 'labels (a list of names) is required');
          this.store.setLabels(issue, body.labels);
          const deliveries = await this.announce('update', issue, before);
          return ok({ issue: this.store.describe(issue), deliveries });
        }
        if (action === 'move') {
          if (!body.team) return fail(400, 'team is required');
          this.store.move(issue, body.team);
          const deliveries = await this.announce('update', issue, before);
          return ok({ issue: this.store.describe(issue), deliveries });
        }
        if (action === 'archive') {
          this.store.archive(issue);
          const deliveries = await this.announce('remove', issue);
          return ok({ issue: this.store.describe(issue), deliveries });
        }
      }
      if (p === '/_standin/faults') {
        if (method === 'POST') {
          const f = { status: body.status ?? null, count: body.count ?? 1, body: body.body, headers: body.headers || {}, delayMs: body.delayMs || 0, operation: body.operation || null };
          if (f.status !== null && (!Number.isInteger(f.status) || f.status < 100 || f.status > 599)) return fail(400, 'status must be an HTTP status');
          if (!Number.isInteger(f.count) || f.count < 1) return fail(400, 'count must be a positive integer');
          if (!f.status && !f.delayMs) return fail(400, 'give status, delayMs or both');
          this.faults.push(f);
          return ok({ faults: this.faults }, 201);
        }
        if (method === 'GET') return ok({ faults: this.faults });
        if (method === 'DELETE') {
          this.faults.length = 0;
          return ok({ faults: [] });
        }
      }
      if (p === '/_standin/rate-limit') {
        if (method === 'POST') {
          const now = Date.now();
          if (body.limit !== undefined) this.rate.limit = body.limit;
          if (body.remaining !== undefined) this.rate.remaining = body.remaining;
          else if (body.limit !== undefined) this.rate.remaining = Math.min(this.rate.remaining, body.limit);
          if (body.resetIn !== undefined) this.rate.resetAt = now + body.resetIn * 1000;
          if (body.complexityLimit !== undefined) this.rate.complexityLimit = body.complexityLimit;
          if (body.complexityRemaining !== undefined) this.rate.complexityRemaining = body.complexityRemaining;
          if (body.complexityResetIn !== undefined) this.rate.complexityResetAt = now + body.complexityResetIn * 1000;
          return ok({ rate: this.rate });
        }
        if (method === 'GET') return ok({ rate: this.rate });
        if (method === 'DELETE') {
          this.resetRate();
          return ok({ rate: this.rate });
        }
      }
      if (p === '/_standin/corrupt' && method === 'POST') {
        const c = { count: body.count ?? 1, set: body.set || {}, delete: body.delete || [] };
        if (body.target === 'webhook') this.webhooks.corrupt(c);
        else if (body.target === 'graphql') this.graphqlCorruptions.push(c);
        else return fail(400, 'target is "graphql" (the next issue resolved) or "webhook" (the next payload)');
        return ok({ corrupt: c }, 201);
      }
      if (p === '/_standin/requests') {
        if (method === 'GET') {
          const out = { total: this.requests.total, byOperation: this.requests.byOperation };
          if (url.searchParams.get('log')) out.log = this.requests.log;
          return ok(out);
        }
        if (method === 'DELETE') {
          this.resetRequests();
          return ok({ total: 0, byOperation: {} });
        }
      }
      if (p === '/_standin/state' && method === 'GET') {
        return ok({ ...this.store.snapshot(), faults: this.faults, rate: this.rate, organizationId: this.organizationId, webhookId: this.webhooks.webhookId });
      }
      if (p === '/_standin/webhooks' && method === 'GET') return ok({ url: this.webhooks.url, deliveries: this.webhooks.summary({ payloads: !!url.searchParams.get('payloads') }) });
      if (p === '/_standin/bugs' && method === 'GET') return ok({ bugs: this.bugs });
      if (p === '/_standin/reset' && method === 'POST') {
        this.store.reset();
        this.faults.length = 0;
        this.graphqlCorruptions.length = 0;
        this.webhooks.deliveries.length = 0;
        this.bugs.length = 0;
        this.resetRequests();
        this.resetRate();
        return ok({ reset: true });
      }
    } catch (e) {
      return fail(400, e.message);
    }
    return fail(404, `no control route ${method} ${p}`);
  }
}

module.exports = { StandIn, REQUEST_LIMIT, COMPLEXITY_LIMIT };
