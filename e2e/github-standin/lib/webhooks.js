'use strict';
// Webhook deliveries as GitHub makes them: one POST per event, JSON body, `X-GitHub-Event`,
// `X-GitHub-Delivery`, `X-Hub-Signature-256: sha256=<HMAC-SHA256 hex of the body>` (and the
// legacy SHA-1 `X-Hub-Signature`). Deliveries go out one at a time, in order.

const crypto = require('node:crypto');
const http = require('node:http');
const https = require('node:https');

const HOOK_ID = 481516234;
const DELIVERY_TIMEOUT_MS = 10000;

function sign(secret, body, algorithm = 'sha256') {
  return `${algorithm}=${crypto.createHmac(algorithm, secret).update(body).digest('hex')}`;
}

function post(url, body, headers) {
  return new Promise((resolve) => {
    const u = new URL(url);
    const lib = u.protocol === 'https:' ? https : http;
    const started = Date.now();
    const req = lib.request(u, { method: 'POST', headers: { ...headers, 'Content-Length': Buffer.byteLength(body) }, timeout: DELIVERY_TIMEOUT_MS }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode, response: Buffer.concat(chunks).toString('utf8').slice(0, 2000), durationMs: Date.now() - started }),
      );
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${DELIVERY_TIMEOUT_MS} ms`)));
    req.on('error', (e) => resolve({ status: null, error: e.message, durationMs: Date.now() - started }));
    req.end(body);
  });
}

class Webhooks {
  constructor({ url, secret, description, log }) {
    this.url = url || null;
    this.secret = secret || '';
    this.description = description;
    this.log = log;
    this.deliveries = [];
    this.queue = Promise.resolve();
  }

  get enabled() {
    return !!this.url;
  }

  // Validates and queues one delivery of `event` (schema: the description's x-webhooks name,
  // e.g. 'check-run-completed'). Resolves to the delivery record once it has been attempted.
  // A payload that does not validate is not sent: its record has `invalid` and the errors.
  deliver(event, schemaName, payload, { targetId } = {}) {
    const id = crypto.randomUUID();
    const record = { id, event, action: payload.action || null, schema: schemaName, at: new Date().toISOString(), status: null };
    this.deliveries.push(record);
    const errors = this.description.validateWebhook(schemaName, payload);
    if (errors.length) {
      record.invalid = true;
      record.errors = errors;
      this.log(`BUG: webhook ${event} (${schemaName}) does not validate against the description: ${JSON.stringify(errors.slice(0, 10))}`);
      return Promise.resolve(record);
    }
    const body = JSON.stringify(payload);
    record.payload = payload;
    const headers = {
      'Content-Type': 'application/json',
      Accept: '*/*',
      'User-Agent': 'GitHub-Hookshot/standin',
      'X-GitHub-Event': event,
      'X-GitHub-Delivery': id,
      'X-GitHub-Hook-ID': String(HOOK_ID),
      'X-GitHub-Hook-Installation-Target-ID': String(targetId ?? 0),
      'X-GitHub-Hook-Installation-Target-Type': 'repository',
    };
    if (this.secret) {
      headers['X-Hub-Signature'] = sign(this.secret, body, 'sha1');
      headers['X-Hub-Signature-256'] = sign(this.secret, body, 'sha256');
    }
    const attempt = this.queue.then(async () => {
      const result = await post(this.url, body, headers);
      Object.assign(record, result);
      if (result.error || result.status >= 300) this.log(`webhook ${event} ${id} to ${this.url}: ${result.error || `HTTP ${result.status}`}`);
      return record;
    });
    this.queue = attempt.catch(() => {});
    return attempt;
  }

  summary({ payloads = false } = {}) {
    return this.deliveries.map((d) => {
      const { payload, ...rest } = d;
      return payloads ? d : rest;
    });
  }
}

module.exports = { Webhooks, sign, HOOK_ID };
