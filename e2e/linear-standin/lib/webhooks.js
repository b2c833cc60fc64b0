// Webhook deliveries as Linear makes them: one POST per data change, JSON body,
// `Linear-Signature: <hex HMAC-SHA256(secret, raw body)>`, `Linear-Delivery: <uuid>`,
// `Linear-Event: Issue`, `User-Agent: Linear-Webhook`. Each payload is validated against
// @linear/sdk's EntityWebhookPayloadWithIssueData before it is sent; one that does not
// validate is not sent and is recorded as a bug. Deliveries go out one at a time, in order.
'use strict';

const crypto = require('node:crypto');
const { Deliveries } = require('../../standin-kit/webhooks.js');
const { sdkTypes } = require('./sdk-types');

const PAYLOAD_TYPE = 'EntityWebhookPayloadWithIssueData';

function sign(secret, body) {
  return crypto.createHmac('sha256', secret).update(body).digest('hex');
}

// Sets (value given) or deletes (value undefined) a dotted path such as "data.title".
function mangle(obj, dotted, value, del) {
  const keys = dotted.split('.');
  let o = obj;
  for (const k of keys.slice(0, -1)) {
    if (o[k] === null || typeof o[k] !== 'object') o[k] = {};
    o = o[k];
  }
  if (del) delete o[keys[keys.length - 1]];
  else o[keys[keys.length - 1]] = value;
}

class Webhooks extends Deliveries {
  constructor({ url, secret, log, bug }) {
    super({ url, log });
    this.secret = secret || '';
    this.bug = bug;
    this.webhookId = crypto.randomUUID();
    this.corruptions = [];
  }

  // Mangles the next `count` payloads (to prove that validation catches a wrong one).
  corrupt({ count = 1, set = {}, delete: del = [] }) {
    this.corruptions.push({ count, set, delete: del });
  }

  // Validates and queues one delivery; resolves to its record once it has been attempted.
  deliver(payload) {
    if (!this.enabled) return Promise.resolve(null);
    const id = crypto.randomUUID();
    payload = { ...payload, webhookTimestamp: Date.now(), webhookId: this.webhookId };
    const c = this.corruptions[0];
    if (c) {
      payload = JSON.parse(JSON.stringify(payload));
      for (const [k, v] of Object.entries(c.set)) mangle(payload, k, v, false);
      for (const k of c.delete) mangle(payload, k, undefined, true);
      if (--c.count <= 0) this.corruptions.shift();
    }
    const record = { id, event: payload.type, action: payload.action, identifier: payload.data?.identifier ?? null, at: new Date().toISOString(), status: null };
    this.deliveries.push(record);
    const errors = sdkTypes().validate(payload, PAYLOAD_TYPE);
    if (errors.length) {
      this.bug({ where: `webhook ${payload.type} ${payload.action}`, errors });
      return this.refuse(record, errors);
    }
    const body = JSON.stringify(payload);
    record.payload = payload;
    const headers = {
      'Content-Type': 'application/json; charset=utf-8',
      'User-Agent': 'Linear-Webhook',
      'Linear-Delivery': id,
      'Linear-Event': payload.type,
    };
    if (this.secret) headers['Linear-Signature'] = sign(this.secret, body);
    return this.send(record, body, headers, `webhook ${payload.type} ${payload.action} ${id} to ${this.url}`);
  }
}

module.exports = { Webhooks, sign, PAYLOAD_TYPE };
