'use strict';
// Webhook deliveries as GitHub makes them: one POST per event, JSON body, `X-GitHub-Event`,
// `X-GitHub-Delivery`, `X-Hub-Signature-256: sha256=<HMAC-SHA256 hex of the body>` (and the
// legacy SHA-1 `X-Hub-Signature`). Deliveries go out one at a time, in order.

const crypto = require('node:crypto');
const { Deliveries } = require('../../standin-kit/webhooks.js');

const HOOK_ID = 481516234;

function sign(secret, body, algorithm = 'sha256') {
  return `${algorithm}=${crypto.createHmac(algorithm, secret).update(body).digest('hex')}`;
}

class Webhooks extends Deliveries {
  constructor({ url, secret, description, log }) {
    super({ url, log });
    this.secret = secret || '';
    this.description = description;
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
      this.log(`BUG: webhook ${event} (${schemaName}) does not validate against the description: ${JSON.stringify(errors.slice(0, 10))}`);
      return this.refuse(record, errors);
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
    return this.send(record, body, headers, `webhook ${event} ${id} to ${this.url}`);
  }
}

module.exports = { Webhooks, sign, HOOK_ID };
