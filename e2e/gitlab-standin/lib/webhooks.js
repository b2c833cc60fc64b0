// Webhook deliveries as GitLab makes them: one POST per event, JSON body, `X-Gitlab-Event`,
// `X-Gitlab-Token`, `X-Gitlab-Event-UUID`, `X-Gitlab-Webhook-UUID`, `X-Gitlab-Instance` and
// `User-Agent: GitLab/17.6.0`. Payloads are validated first; deliveries go out one at a time.
'use strict';

const crypto = require('node:crypto');
const http = require('node:http');
const https = require('node:https');

const TIMEOUT_MS = 10000;

function post(url, body, headers) {
  return new Promise((resolve) => {
    const u = new URL(url);
    const lib = u.protocol === 'https:' ? https : http;
    const started = Date.now();
    const req = lib.request(u, { method: 'POST', headers: { ...headers, 'Content-Length': Buffer.byteLength(body) }, timeout: TIMEOUT_MS }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, response: Buffer.concat(chunks).toString('utf8').slice(0, 2000), durationMs: Date.now() - started }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${TIMEOUT_MS} ms`)));
    req.on('error', (e) => resolve({ status: null, error: e.message, durationMs: Date.now() - started }));
    req.end(body);
  });
}

class Webhooks {
  constructor({ url, token, instance, schemas, log, bug }) {
    this.url = url || null;
    this.token = token || '';
    this.instance = instance;
    this.schemas = schemas;
    this.log = log;
    this.bug = bug;
    this.webhookUuid = crypto.randomUUID();
    this.deliveries = [];
    this.queue = Promise.resolve();
  }

  // Validates `payload` against `type` and queues it; resolves to the delivery record. Nothing is
  // recorded without --webhook-url. A payload that does not validate is not sent.
  deliver(event, type, payload) {
    if (!this.url) return null;
    const id = crypto.randomUUID();
    const record = { id, event, objectKind: payload.object_kind, action: payload.object_attributes?.action || null, schema: type, at: new Date().toISOString(), status: null };
    this.deliveries.push(record);
    const errors = this.schemas.validate(type, payload);
    record.payload = payload;
    if (errors.length) {
      record.invalid = true;
      record.errors = errors;
      this.bug(`webhook ${event} does not validate against ${type}`, errors);
      return Promise.resolve(record);
    }
    const body = JSON.stringify(payload);
    const headers = {
      'Content-Type': 'application/json',
      'User-Agent': 'GitLab/17.6.0',
      'X-Gitlab-Event': event,
      'X-Gitlab-Event-UUID': id,
      'X-Gitlab-Webhook-UUID': this.webhookUuid,
      'X-Gitlab-Instance': this.instance,
    };
    if (this.token) headers['X-Gitlab-Token'] = this.token;
    const attempt = this.queue.then(async () => {
      Object.assign(record, await post(this.url, body, headers));
      if (record.error || record.status >= 300) this.log(`webhook ${event} ${id}: ${record.error || `HTTP ${record.status}`}`);
      return record;
    });
    this.queue = attempt.catch(() => {});
    return attempt;
  }

  summary({ payloads = false } = {}) {
    return this.deliveries.map(({ payload, ...rest }) => (payloads ? { ...rest, payload } : rest));
  }
}

module.exports = { Webhooks };
