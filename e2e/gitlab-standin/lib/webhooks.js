// Webhook deliveries as GitLab makes them: one POST per event, JSON body, `X-Gitlab-Event`,
// `X-Gitlab-Token`, `X-Gitlab-Event-UUID`, `X-Gitlab-Webhook-UUID`, `X-Gitlab-Instance` and
// `User-Agent: GitLab/17.6.0`. Payloads are validated first; deliveries go out one at a time.
'use strict';

const crypto = require('node:crypto');
const { Deliveries } = require('../../standin-kit/webhooks.js');

class Webhooks extends Deliveries {
  constructor({ url, token, instance, schemas, log, bug }) {
    super({ url, log });
    this.token = token || '';
    this.instance = instance;
    this.schemas = schemas;
    this.bug = bug;
    this.webhookUuid = crypto.randomUUID();
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
      this.bug(`webhook ${event} does not validate against ${type}`, errors);
      return this.refuse(record, errors);
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
    return this.send(record, body, headers, `webhook ${event} ${id}`);
  }
}

module.exports = { Webhooks };
