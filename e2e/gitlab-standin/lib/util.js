// Small shared pieces: replies, errors, timestamps, stable ids, request bodies, a mutex and
// the trace format of GitLab's job logs.
'use strict';

const { readBody } = require('../../standin-kit/http.js');
const { Mutex } = require('../../standin-kit/mutex.js');

const crypto = require('node:crypto');

class Reply {
  constructor(status, body, { headers = {}, type = null, list = false, text = false } = {}) {
    this.status = status;
    this.body = body;
    this.headers = headers;
    this.type = type; // schema type name ('X' or 'X[]') the body must validate against
    this.list = list; // paginate the array body
    this.text = text; // body is text/plain
  }
}

function message(status, msg) {
  return new Reply(status, { message: msg });
}

class ControlError extends Error {
  constructor(status, msg) {
    super(msg);
    this.status = status;
  }
}

function bad(msg) {
  return new ControlError(400, msg);
}

let lastMs = 0;
// A strictly increasing wall-clock millisecond, so that every change moves `updated_at`.
function tick() {
  lastMs = Math.max(Date.now(), lastMs + 1);
  return lastMs;
}

function iso(ms) {
  return ms == null ? null : new Date(ms).toISOString();
}

// The format of timestamps in GitLab's webhook payloads: "2024-05-01 10:00:00 UTC".
function hookTime(ms) {
  return ms == null ? null : `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

function stableId(text, range = 9000000) {
  const h = crypto.createHash('sha256').update(text).digest();
  return 1000 + (h.readUInt32BE(0) % range);
}

// Form-encoded or JSON request bodies as GitLab accepts them.
function parseBody(raw, contentType = '') {
  const text = raw.toString('utf8');
  if (!text.trim()) return {};
  if (/json/.test(contentType) || /^\s*[{[]/.test(text)) {
    const v = JSON.parse(text);
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error('body must be a JSON object');
    return v;
  }
  const out = {};
  for (const [k, v] of new URLSearchParams(text)) {
    const m = /^([^[]+)\[([^\]]*)\]$/.exec(k);
    if (m && m[2] === '') (out[m[1]] ||= []).push(v);
    else if (m) (out[m[1]] ||= {})[m[2]] = v;
    else out[k] = v;
  }
  return out;
}

function truthy(v) {
  return v === true || v === 'true' || v === '1' || v === 1;
}

// Sets (or deletes) a dotted path in an object; `*` applies to every element of an array.
function setPath(obj, path, value, del) {
  const parts = String(path).split('.');
  const walk = (node, i) => {
    if (node == null || typeof node !== 'object') return;
    const p = parts[i];
    if (p === '*' && Array.isArray(node)) {
      if (i === parts.length - 1) node.forEach((_, j) => (del ? node.splice(j, 1) : (node[j] = value)));
      else node.forEach((n) => walk(n, i + 1));
      return;
    }
    const key = Array.isArray(node) && /^\d+$/.test(p) ? Number(p) : p;
    if (i === parts.length - 1) {
      if (del) delete node[key];
      else node[key] = structuredClone(value);
    } else walk(node[key], i + 1);
  };
  walk(obj, 0);
}

const ESC = '\x1b';

// A job log the way GitLab's runner writes it: collapsible sections with
// `section_start:<epoch>:<name>\r\e[0K` / `section_end:<epoch>:<name>\r\e[0K` markers and ANSI
// colours around the headers, the given text as the script's output, then the verdict.
function trace(job) {
  if (job.status === 'pending' || job.status === 'created') return '';
  const t0 = Math.floor((job.startedAt || job.createdAt) / 1000);
  const t1 = Math.floor((job.finishedAt || Date.now()) / 1000);
  const start = (name, t, header) => `section_start:${t}:${name}\r${ESC}[0K${ESC}[0K${ESC}[36;1m${header}${ESC}[0;m\n`;
  const end = (name, t) => `section_end:${t}:${name}\r${ESC}[0K`;
  let out = `${ESC}[0KRunning with gitlab-runner 17.6.0 (a1b2c3d4)${ESC}[0;m\n`;
  out += `${ESC}[0K  on shared-runner-1 xk2Zq3Tt, system ID: s_0123456789ab${ESC}[0;m\n`;
  out += start('prepare_executor', t0, 'Preparing the "docker" executor');
  out += `${ESC}[0KUsing Docker executor with image alpine:3.20 ...${ESC}[0;m\n`;
  out += end('prepare_executor', t0);
  out += start('get_sources', t0, 'Getting source from Git repository');
  out += `${ESC}[32;1mFetching changes with git depth set to 20...${ESC}[0;m\n`;
  out += `${ESC}[32;1mChecking out ${job.sha.slice(0, 8)} as detached HEAD (ref is ${job.ref})...${ESC}[0;m\n`;
  out += end('get_sources', t0);
  out += start('step_script', t0, 'Executing "step_script" stage of the job script');
  const text = job.log || '';
  if (text) out += text.endsWith('\n') ? text : `${text}\n`;
  if (job.status === 'running') return out;
  out += end('step_script', t1);
  out += start('cleanup_file_variables', t1, 'Cleaning up project directory and file based variables');
  out += end('cleanup_file_variables', t1);
  if (job.status === 'success') out += `${ESC}[32;1mJob succeeded${ESC}[0;m\n`;
  else if (job.status === 'canceled') out += `${ESC}[31;1mERROR: Job failed: canceled${ESC}[0;m\n`;
  else out += `${ESC}[31;1mERROR: Job failed: exit code 1${ESC}[0;m\n`;
  return out;
}

module.exports = { Reply, message, ControlError, bad, tick, iso, hookTime, stableId, readBody, parseBody, truthy, Mutex, setPath, trace };
