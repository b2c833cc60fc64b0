// JSON Schemas for GitLab's answers and webhook payloads, generated from the TypeScript types
// of @gitbeaker/core (dist/index.d.ts) with ts-json-schema-generator, cached on disk keyed by
// the gitbeaker version, and checked with Ajv. Also fills the required fields the stand-in has
// no model for with neutral values of the declared type.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const Ajv = require('ajv');
const addFormats = require('ajv-formats');

const TYPES = [
  'MergeRequestSchema',
  'ExpandedMergeRequestSchema',
  'MergeRequestLevelMergeRequestApprovalSchema',
  'MergeRequestReviewerSchema',
  'DiscussionSchema',
  'MergeRequestDiscussionNoteSchema',
  'MergeRequestNoteSchema',
  'PipelineSchema',
  'JobSchema',
  'IssueSchema',
  'LabelEventSchema',
  'ProjectSchema',
  'ProjectLevelMergeRequestApprovalSchema',
  'ExpandedUserSchema',
  'WebhookMergeRequestEventSchema',
  'WebhookPipelineEventSchema',
  'WebhookJobEventSchema',
  'WebhookMergeRequestNoteEventSchema',
  'WebhookIssueEventSchema',
  'WebhookPushEventSchema',
];

function packageDir(name) {
  // The package's own directory, found through its package.json (dist/ is not in its exports).
  let dir = path.dirname(require.resolve(name));
  while (!fs.existsSync(path.join(dir, 'package.json'))) dir = path.dirname(dir);
  return dir;
}

function cacheFile() {
  const nodeModules = path.resolve(packageDir('@gitbeaker/core'), '..', '..');
  return path.join(nodeModules, '.cache', 'gitlab-schemas.json');
}

function generate(log) {
  const dir = packageDir('@gitbeaker/core');
  const version = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
  const file = cacheFile();
  try {
    const cached = JSON.parse(fs.readFileSync(file, 'utf8'));
    if (cached.gitbeaker === version && TYPES.every((t) => cached.schemas[t])) return cached.schemas;
  } catch {
    // no usable cache
  }
  const started = Date.now();
  const { createGenerator } = require('ts-json-schema-generator');
  const generator = createGenerator({
    path: path.join(dir, 'dist', 'index.d.ts'),
    type: '*',
    skipTypeCheck: true,
    expose: 'all',
    topRef: false,
    jsDoc: 'none',
    additionalProperties: true,
  });
  const schemas = {};
  for (const t of TYPES) schemas[t] = generator.createSchema(t);
  log(`generated ${TYPES.length} schemas from @gitbeaker/core ${version} in ${Date.now() - started} ms`);
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, JSON.stringify({ gitbeaker: version, schemas }));
  } catch (e) {
    log(`could not cache schemas in ${file}: ${e.message}`);
  }
  return schemas;
}

// Widenings of the generated schemas where @gitbeaker/core 43.8.0's typings contradict what
// GitLab 17 sends. Each only admits more; none removes anything.
const AMENDMENTS = [
  // GitLab 17 reports conflicts and rebases through detailed_merge_status; the union lacks them.
  function mergeStatuses(node) {
    const p = node.properties && node.properties.detailed_merge_status;
    if (p && Array.isArray(p.enum)) for (const v of ['conflict', 'need_rebase', 'requested_changes']) if (!p.enum.includes(v)) p.enum.push(v);
  },
  // Diff positions carry line numbers as integers (null for the side a line is absent from).
  function positionLines(node) {
    if (!node.properties || !node.properties.position_type || node.properties.position_type.const !== 'text') return;
    for (const k of ['new_line', 'old_line']) if (node.properties[k]) node.properties[k] = { type: ['string', 'number', 'null'] };
  },
  // Note hooks send noteable_id as an integer.
  function noteableId(node) {
    const p = node.properties;
    if (p && p.noteable_type && p.noteable_id && Array.isArray(p.noteable_id.type) && !p.noteable_id.type.includes('number')) p.noteable_id.type.push('number');
  },
  // Issues name the user who closed them as a user object (null while open), not a string.
  function closedBy(node) {
    const p = node.properties;
    if (p && p.closed_by && p.closed_by.type === 'string') p.closed_by = { type: ['string', 'object', 'null'] };
  },
  // A resolved thread's notes name who resolved it as a user object (null while unresolved).
  function resolvedBy(node) {
    const p = node.properties;
    if (p && p.resolved_by && p.resolved_by.type === 'string') p.resolved_by = { type: ['string', 'object', 'null'] };
    if (p && p.resolved_by && p.resolved_at && p.resolved_at.type === 'string') p.resolved_at = { type: ['string', 'null'] };
  },
  // ... and the issue they were moved to by its integer id.
  function movedToId(node) {
    const p = node.properties;
    if (p && p.moved_to_id && p.moved_to_id.type === 'string') p.moved_to_id = { type: ['string', 'number', 'null'] };
  },
  // GET /user sends private_profile as a boolean; the typings say string or null.
  function privateProfile(node) {
    const p = node.properties;
    if (p && p.private_profile && p.two_factor_enabled && Array.isArray(p.private_profile.type) && !p.private_profile.type.includes('boolean')) p.private_profile.type.push('boolean');
  },
];

function amend(schema) {
  const walk = (node) => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach(walk);
    for (const a of AMENDMENTS) a(node);
    for (const v of Object.values(node)) walk(v);
  };
  walk(schema);
  return schema;
}

class Schemas {
  constructor({ log = () => {} } = {}) {
    this.schemas = generate(log);
    for (const s of Object.values(this.schemas)) amend(s);
    this.ajv = new Ajv({ strict: false, allErrors: true, allowUnionTypes: true });
    addFormats(this.ajv);
    this.validators = new Map();
  }

  validator(type) {
    let v = this.validators.get(type);
    if (!v) {
      const schema = this.schemas[type];
      if (!schema) throw new Error(`no schema ${type}`);
      v = this.ajv.compile(schema);
      this.validators.set(type, v);
    }
    return v;
  }

  // Errors of `value` against `type`, or `type[]` for an array of them; [] when it validates.
  validate(type, value) {
    if (type.endsWith('[]')) {
      if (!Array.isArray(value)) return [{ instancePath: '', message: 'must be array' }];
      const errors = [];
      value.forEach((item, i) => {
        for (const e of this.validate(type.slice(0, -2), item)) errors.push({ ...e, instancePath: `/${i}${e.instancePath}` });
      });
      return errors;
    }
    const v = this.validator(type);
    if (v(value)) return [];
    return v.errors.map((e) => ({ instancePath: e.instancePath, message: e.message, params: e.params }));
  }

  // Adds every missing required property of `value` (recursively) with a neutral value of its
  // declared type. A null where the type does not admit null (GitLab sends null, the typings
  // say e.g. string) becomes that neutral value when required, and is dropped when optional.
  fill(type, value) {
    const root = this.schemas[type.replace(/\[\]$/, '')];
    const defs = root.definitions || {};
    if (type.endsWith('[]')) return value.map((v) => fillValue(root, v, defs, 0));
    return fillValue(root, value, defs, 0);
  }
}

function resolveRef(schema, defs) {
  let s = schema;
  let guard = 0;
  while (s && s.$ref && guard++ < 50) s = defs[decodeURIComponent(s.$ref.replace('#/definitions/', ''))] || defs[s.$ref.replace('#/definitions/', '')];
  return s || {};
}

function admitsNull(schema, defs) {
  const s = resolveRef(schema, defs);
  if (s.type === 'null' || (Array.isArray(s.type) && s.type.includes('null'))) return true;
  if (s.anyOf) return s.anyOf.some((b) => admitsNull(b, defs));
  return s.type === undefined && !s.anyOf && !s.properties && s.const === undefined && !s.enum;
}

function objectBranch(schema, defs, value) {
  const s = resolveRef(schema, defs);
  if (s.anyOf) {
    if (Array.isArray(value)) return s.anyOf.map((b) => resolveRef(b, defs)).find((b) => b.type === 'array') || s;
    if (value && typeof value === 'object') return s.anyOf.map((b) => resolveRef(b, defs)).find((b) => b.properties) || s;
  }
  return s;
}

function neutral(schema, defs, depth) {
  const s = resolveRef(schema, defs);
  if (depth > 8) return null;
  if (s.const !== undefined) return s.const;
  if (Array.isArray(s.enum)) return s.enum[0];
  if (admitsNull(s, defs)) return null;
  if (s.anyOf) return neutral(s.anyOf[0], defs, depth + 1);
  const t = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (t) {
    case 'string':
      return '';
    case 'number':
    case 'integer':
      return 0;
    case 'boolean':
      return false;
    case 'array':
      return [];
    case 'object':
    default:
      return fillValue(s, {}, defs, depth + 1);
  }
}

function fillValue(schema, value, defs, depth) {
  const s = objectBranch(schema, defs, value);
  if (Array.isArray(value)) {
    const items = s.items;
    return items && !Array.isArray(items) ? value.map((v) => fillValue(items, v, defs, depth + 1)) : value;
  }
  if (!value || typeof value !== 'object' || !s.properties) return value;
  const out = { ...value };
  for (const req of s.required || []) {
    if (!(req in out)) out[req] = neutral(s.properties[req] || {}, defs, depth);
  }
  for (const [k, v] of Object.entries(out)) {
    const ps = s.properties[k];
    if (!ps) continue;
    if (v === null && !admitsNull(ps, defs)) {
      if ((s.required || []).includes(k)) out[k] = neutral(ps, defs, depth + 1);
      else delete out[k];
    } else if (v && typeof v === 'object') out[k] = fillValue(ps, v, defs, depth + 1);
  }
  return out;
}

module.exports = { Schemas, TYPES };
