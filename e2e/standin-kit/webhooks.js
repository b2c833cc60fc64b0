'use strict';
// Sending webhooks as every stand-in does: one POST at a time, in order, each delivery recorded
// with its answer (status, the start of the response, how long it took) or the error that ended
// it. What a service puts in a delivery (its headers, its signature, the schema its payload is
// validated against) stays with that service's stand-in.

const http = require('node:http');
const https = require('node:https');
const { Mutex } = require('./mutex.js');

const DELIVERY_TIMEOUT_MS = 10000;

// POSTs `body` to `url`. Never rejects: resolves to {status, response (its first 2,000
// characters), durationMs}, or to {status: null, error, durationMs} when the request failed or
// had no answer within DELIVERY_TIMEOUT_MS.
function post(url, body, headers) {
  return new Promise((resolve) => {
    const u = new URL(url);
    const lib = u.protocol === 'https:' ? https : http;
    const started = Date.now();
    const req = lib.request(u, { method: 'POST', headers: { ...headers, 'Content-Length': Buffer.byteLength(body) }, timeout: DELIVERY_TIMEOUT_MS }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, response: Buffer.concat(chunks).toString('utf8').slice(0, 2000), durationMs: Date.now() - started }));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${DELIVERY_TIMEOUT_MS} ms`)));
    req.on('error', (e) => resolve({ status: null, error: e.message, durationMs: Date.now() - started }));
    req.end(body);
  });
}

// The deliveries of one stand-in to `url` (none: webhooks are off); `log(line)` hears of every
// attempt that failed. A stand-in's own Webhooks class extends it with what it sends.
class Deliveries {
  constructor({ url, log }) {
    this.url = url || null;
    this.log = log;
    this.deliveries = [];
    this.queue = new Mutex();
  }

  get enabled() {
    return !!this.url;
  }

  // Marks `record` (already in `deliveries`) as not sent: its payload did not validate.
  refuse(record, errors) {
    record.invalid = true;
    record.errors = errors;
    return Promise.resolve(record);
  }

  // Queues the POST of `body` for `record` (already in `deliveries`) after every earlier one;
  // resolves to the record with the answer added. A failure or an answer of 300 or more is logged
  // as `${what}: <error or HTTP status>`.
  send(record, body, headers, what) {
    return this.queue.run(async () => {
      Object.assign(record, await post(this.url, body, headers));
      if (record.error || record.status >= 300) this.log(`${what}: ${record.error || `HTTP ${record.status}`}`);
      return record;
    });
  }

  // The delivery records, with their payloads when `payloads`.
  summary({ payloads = false } = {}) {
    return this.deliveries.map((d) => {
      const { payload, ...rest } = d;
      return payloads ? d : rest;
    });
  }
}

module.exports = { Deliveries };
