'use strict';
// GitHub's rate limits, kept per identity (the login a token authenticates as).
//
// Primary limits: one budget per resource, `core` for REST and `graphql` for GraphQL, 5,000 an
// hour each, each with its own reset time. Secondary limits: content-creating requests (at most
// 80 a minute and 500 an hour), REST points (at most 900 a minute: 1 for GET, HEAD and OPTIONS, 5
// for other methods) and GraphQL points (at most 2,000 a minute: 1 for a query, 5 for a
// mutation). The secondary limits are sliding windows; a request that does not fit is refused
// with the number of seconds after which it would.

const clock = require('./clock');

const HOUR_MS = 3600000;
const MINUTE_MS = 60000;
const PRIMARY_LIMIT = 5000;
const RESOURCES = ['core', 'graphql'];

const SECONDARY_DEFAULTS = Object.freeze({
  contentPerMinute: 80,
  contentPerHour: 500,
  restPointsPerMinute: 900,
  graphqlPointsPerMinute: 2000,
  // GitHub answers a secondary limit of the REST API with 403 or 429; 403 unless a test asks.
  restStatus: 403,
});

// Milliseconds until a request of `weight` fits under `limit` in a sliding window of `windowMs`
// holding `entries` ([{at, weight}], oldest first); 0 when it fits now.
function waitFor(entries, windowMs, limit, weight, now) {
  let sum = 0;
  for (const e of entries) sum += e.weight;
  if (sum + weight <= limit) return 0;
  if (weight > limit) return windowMs;
  for (const e of entries) {
    sum -= e.weight;
    if (sum + weight <= limit) return Math.max(e.at + windowMs - now, 1);
  }
  return windowMs;
}

function within(entries, windowMs, now) {
  return entries.filter((e) => e.at > now - windowMs);
}

function total(entries) {
  return entries.reduce((s, e) => s + e.weight, 0);
}

class Limits {
  constructor() {
    this.secondary = { ...SECONDARY_DEFAULTS };
    this.primary = new Map(); // login -> {core, graphql}: {limit, remaining, reset}
    this.windows = new Map(); // login -> {content, rest, graphql}: [{at, weight}]
  }

  // ------------------------------------------------------------ primary

  // The primary budget of `login` for `resource`, renewed once its hour has passed.
  bucket(login, resource) {
    let buckets = this.primary.get(login);
    if (!buckets) {
      buckets = {};
      this.primary.set(login, buckets);
    }
    const nowSec = Math.floor(clock.now() / 1000);
    let b = buckets[resource];
    if (!b) {
      b = { limit: PRIMARY_LIMIT, remaining: PRIMARY_LIMIT, reset: nowSec + 3600 };
      buckets[resource] = b;
    } else if (nowSec >= b.reset) {
      b.remaining = b.limit;
      b.reset = nowSec + 3600;
    }
    return b;
  }

  charge(login, resource, amount) {
    const b = this.bucket(login, resource);
    b.remaining = Math.max(0, b.remaining - amount);
    return b;
  }

  headers(login, resource) {
    const b = this.bucket(login, resource);
    return {
      'X-RateLimit-Limit': String(b.limit),
      'X-RateLimit-Remaining': String(b.remaining),
      'X-RateLimit-Reset': String(b.reset),
      'X-RateLimit-Used': String(b.limit - b.remaining),
      'X-RateLimit-Resource': resource,
    };
  }

  setPrimary(login, resource, { limit, remaining, resetIn }) {
    if (!RESOURCES.includes(resource)) throw new Error(`resource must be one of ${RESOURCES.join(', ')}`);
    const b = this.bucket(login, resource);
    if (limit !== undefined) b.limit = Number(limit);
    if (remaining !== undefined) b.remaining = Number(remaining);
    if (resetIn !== undefined) b.reset = Math.floor(clock.now() / 1000) + Number(resetIn);
    return b;
  }

  describe(b) {
    return { limit: b.limit, remaining: b.remaining, reset: b.reset, used: b.limit - b.remaining };
  }

  // Every identity's budgets: {login: {core, graphql}}.
  allPrimary() {
    const out = {};
    for (const login of this.primary.keys()) out[login] = Object.fromEntries(RESOURCES.map((r) => [r, this.describe(this.bucket(login, r))]));
    return out;
  }

  resetPrimary() {
    this.primary = new Map();
  }

  // ------------------------------------------------------------ secondary

  window(login) {
    let w = this.windows.get(login);
    if (!w) {
      w = { content: [], rest: [], graphql: [] };
      this.windows.set(login, w);
    }
    const now = clock.now();
    w.content = within(w.content, HOUR_MS, now);
    w.rest = within(w.rest, MINUTE_MS, now);
    w.graphql = within(w.graphql, MINUTE_MS, now);
    return w;
  }

  // Whether a request fits the secondary limits of `login`: null when it does, else
  // {limit, retryAfter} naming the first limit it exceeds and the seconds to wait. `points` are
  // REST points (kind 'rest') or GraphQL points (kind 'graphql'); `content` marks a
  // content-creating request.
  checkSecondary(login, { kind, points, content }) {
    const w = this.window(login);
    const now = clock.now();
    const s = this.secondary;
    const waits = [];
    if (content) {
      const lastMinute = within(w.content, MINUTE_MS, now);
      const m = waitFor(lastMinute, MINUTE_MS, s.contentPerMinute, 1, now);
      if (m) waits.push({ limit: 'contentPerMinute', ms: m });
      const h = waitFor(w.content, HOUR_MS, s.contentPerHour, 1, now);
      if (h) waits.push({ limit: 'contentPerHour', ms: h });
    }
    const key = kind === 'graphql' ? 'graphqlPointsPerMinute' : 'restPointsPerMinute';
    const p = waitFor(w[kind], MINUTE_MS, s[key], points, now);
    if (p) waits.push({ limit: key, ms: p });
    if (!waits.length) return null;
    const longest = waits.reduce((a, b) => (b.ms > a.ms ? b : a));
    return { limit: waits[0].limit, limits: waits.map((x) => x.limit), retryAfter: Math.max(1, Math.ceil(longest.ms / 1000)) };
  }

  chargeSecondary(login, { kind, points, content }) {
    const w = this.window(login);
    const at = clock.now();
    w[kind].push({ at, weight: points });
    if (content) w.content.push({ at, weight: 1 });
  }

  usage(login) {
    const w = this.window(login);
    const now = clock.now();
    return {
      contentLastMinute: within(w.content, MINUTE_MS, now).length,
      contentLastHour: w.content.length,
      restPointsLastMinute: total(w.rest),
      graphqlPointsLastMinute: total(w.graphql),
    };
  }

  allUsage() {
    const out = {};
    for (const login of this.windows.keys()) out[login] = this.usage(login);
    return out;
  }

  // Applies {contentPerMinute?, contentPerHour?, restPointsPerMinute?, graphqlPointsPerMinute?,
  // restStatus?}; throws a message on a bad value.
  setSecondary(input) {
    const next = { ...this.secondary };
    for (const k of ['contentPerMinute', 'contentPerHour', 'restPointsPerMinute', 'graphqlPointsPerMinute']) {
      if (input[k] === undefined) continue;
      const v = Number(input[k]);
      if (!Number.isInteger(v) || v < 0) throw new Error(`${k} must be a non-negative integer`);
      next[k] = v;
    }
    if (input.restStatus !== undefined) {
      const v = Number(input.restStatus);
      if (v !== 403 && v !== 429) throw new Error('restStatus must be 403 or 429 (the statuses GitHub documents)');
      next.restStatus = v;
    }
    this.secondary = next;
  }

  // Back to GitHub's documented limits, with no usage.
  resetSecondary() {
    this.secondary = { ...SECONDARY_DEFAULTS };
    this.windows = new Map();
  }
}

module.exports = { Limits, SECONDARY_DEFAULTS, PRIMARY_LIMIT, RESOURCES, waitFor };
