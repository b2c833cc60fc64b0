'use strict';
// GitHub's published REST description (@octokit/openapi): route matching, and JSON Schema
// validation of request bodies, responses and webhook payloads.
//
// The 13 MB description is parsed once at start. Only the operations and webhooks the stand-in
// implements are kept, with the transitive closure of the component schemas they reference
// (OpenAPI 3.0 `nullable` rewritten to JSON Schema); the rest is dropped. Validators are compiled
// lazily, one per (operation, status code), and cached.

const fs = require('node:fs');
const Ajv = require('ajv');
const addFormats = require('ajv-formats');

const DESCRIPTION_FILE = require.resolve('@octokit/openapi/generated/api.github.com.json');

// Schema keywords whose value is a schema, a list of schemas, or a map of schemas.
const SUB_SCHEMA = ['items', 'additionalProperties', 'not'];
const SUB_SCHEMA_LIST = ['allOf', 'anyOf', 'oneOf'];
const SUB_SCHEMA_MAP = ['properties', 'patternProperties'];

function unescapePointer(s) {
  return s.replace(/~1/g, '/').replace(/~0/g, '~');
}

function resolvePointer(doc, ref) {
  if (!ref.startsWith('#/')) throw new Error(`unsupported $ref ${ref}`);
  let node = doc;
  for (const part of ref.slice(2).split('/')) {
    node = node?.[unescapePointer(part)];
    if (node === undefined) throw new Error(`dangling $ref ${ref}`);
  }
  return node;
}

// Follows `$ref`s of non-schema objects (responses, parameters, request bodies).
function deref(doc, node) {
  while (node && node.$ref) node = resolvePointer(doc, node.$ref);
  return node;
}

// A copy of an OpenAPI 3.0 schema as JSON Schema (draft-07 as Ajv reads it): `nullable: true`
// becomes a `null` type (or an `anyOf` with `{type: null}` when the schema has no type), `enum`s
// of nullable schemas admit null, and every `$ref` to a component schema is recorded in `refs`.
function convert(schema, refs) {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return schema;
  const out = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === 'nullable' || k === 'example' || k === 'examples' || k === 'discriminator' || k === 'xml') continue;
    if (k.startsWith('x-')) continue;
    if (k === '$ref') {
      const m = /^#\/components\/schemas\/(.+)$/.exec(v);
      if (!m) throw new Error(`unsupported schema $ref ${v}`);
      refs.add(unescapePointer(m[1]));
      out.$ref = v;
    } else if (SUB_SCHEMA.includes(k) && typeof v === 'object') {
      out[k] = convert(v, refs);
    } else if (SUB_SCHEMA_LIST.includes(k)) {
      out[k] = v.map((s) => convert(s, refs));
    } else if (SUB_SCHEMA_MAP.includes(k)) {
      out[k] = Object.fromEntries(Object.entries(v).map(([name, s]) => [name, convert(s, refs)]));
    } else {
      out[k] = v;
    }
  }
  if (schema.nullable === true) {
    if (typeof out.type === 'string') {
      out.type = [out.type, 'null'];
      if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
      return out;
    }
    if (out.type === undefined) return { anyOf: [{ type: 'null' }, out] };
  }
  return out;
}

function templateRegex(template) {
  const names = [];
  const source = template
    .split('/')
    .map((seg) =>
      seg.replace(/\{([^}]+)\}|[^{]+/g, (m, name) => {
        if (name) {
          names.push(name);
          // A git ref may contain slashes (`commits/feature/x/status`), as GitHub accepts.
          return name === 'ref' ? '(.+?)' : '([^/]+)';
        }
        return m.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      }),
    )
    .join('/');
  return { regex: new RegExp(`^${source}$`), names };
}

function formatErrors(errors) {
  return (errors || []).map((e) => ({
    path: e.instancePath || '/',
    message: e.message,
    params: e.params,
    schemaPath: e.schemaPath,
  }));
}

class Description {
  // operations: [[METHOD, template]]; webhooks: names of x-webhooks entries (e.g. 'check-run-completed').
  constructor({ operations, webhooks = [], file = DESCRIPTION_FILE }) {
    const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    this.version = doc.info?.version;
    const refs = new Set();
    const definitions = {};
    this.ops = new Map();

    // Every path template of the description, to tell "GitHub has this route, the stand-in does
    // not" apart from a route GitHub does not have at all (both answer 404).
    this.allTemplates = Object.keys(doc.paths).map((t) => ({ template: t, ...templateRegex(t), methods: Object.keys(doc.paths[t]) }));

    for (const [method, template] of operations) {
      const item = doc.paths[template];
      const op = item?.[method.toLowerCase()];
      if (!op) throw new Error(`the description has no operation ${method} ${template}`);
      const key = `${method} ${template}`;
      const id = op.operationId.replace(/[^A-Za-z0-9_-]/g, '_');
      const entry = { key, method, template, operationId: op.operationId, ...templateRegex(template), responses: {}, request: null, parameters: [] };
      for (const p of [...(item.parameters || []), ...(op.parameters || [])]) {
        const param = deref(doc, p);
        const schemaKey = `param__${id}__${param.name}`;
        definitions[schemaKey] = convert(param.schema || {}, refs);
        entry.parameters.push({ name: param.name, in: param.in, required: !!param.required, schemaKey, type: param.schema?.type });
      }
      const body = deref(doc, op.requestBody);
      const bodySchema = body?.content?.['application/json']?.schema;
      if (bodySchema) {
        entry.request = { key: `request__${id}`, required: !!body.required };
        definitions[entry.request.key] = convert(bodySchema, refs);
      }
      for (const [code, r] of Object.entries(op.responses || {})) {
        const resp = deref(doc, r);
        const schema = resp?.content?.['application/json']?.schema;
        if (schema) {
          const k = `response__${id}__${code}`;
          definitions[k] = convert(schema, refs);
          entry.responses[code] = k;
        } else {
          entry.responses[code] = null; // documented without a JSON body (302, 304, 204)
        }
      }
      this.ops.set(key, entry);
    }

    this.webhooks = new Map();
    for (const name of webhooks) {
      const op = doc['x-webhooks']?.[name]?.post;
      if (!op) throw new Error(`the description has no webhook ${name}`);
      const schema = deref(doc, op.requestBody)?.content?.['application/json']?.schema;
      const k = `webhook__${name}`;
      definitions[k] = convert(schema, refs);
      this.webhooks.set(name, k);
    }

    // Shared error bodies, for statuses an operation does not document.
    for (const name of ['basic-error', 'validation-error']) {
      definitions[`schema__${name}`] = { $ref: `#/components/schemas/${name}` };
      refs.add(name);
    }

    // The transitive closure of referenced component schemas.
    const schemas = {};
    const pending = [...refs];
    while (pending.length) {
      const name = pending.pop();
      if (schemas[name]) continue;
      const found = new Set();
      const src = doc.components.schemas[name];
      if (!src) throw new Error(`dangling schema reference ${name}`);
      schemas[name] = convert(src, found);
      for (const n of found) if (!schemas[n]) pending.push(n);
    }
    this.schemaCount = Object.keys(schemas).length;

    this.ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true, logger: false });
    addFormats(this.ajv);
    for (const f of ['int32', 'int64', 'double', 'float', 'binary', 'repo.nwo', 'timestamp', 'uri-template']) {
      if (!this.ajv.formats[f]) this.ajv.addFormat(f, true);
    }
    this.ajv.addSchema({ $id: 'gh', definitions, components: { schemas } });
    this.validators = new Map();
  }

  validator(key) {
    let v = this.validators.get(key);
    if (!v) {
      v = this.ajv.compile({ $ref: `gh#/definitions/${key}` });
      this.validators.set(key, v);
    }
    return v;
  }

  // Compiles every response and webhook validator in the background, one per macrotask, so the
  // first requests do not pay for it while start-up stays short.
  warmUp() {
    const keys = [];
    for (const op of this.ops.values()) for (const k of Object.values(op.responses)) if (k) keys.push(k);
    for (const k of this.webhooks.values()) keys.push(k);
    const next = () => {
      const k = keys.shift();
      if (!k) return;
      this.validator(k);
      setTimeout(next, 0).unref();
    };
    setTimeout(next, 0).unref();
  }

  // Errors ([] when valid) of `value` against the definition `key`.
  check(key, value) {
    const v = this.validator(key);
    return v(value) ? [] : formatErrors(v.errors);
  }

  // The implemented operation for a method and path (without base path), with path parameters.
  match(method, path) {
    for (const op of this.ops.values()) {
      if (op.method !== method) continue;
      const m = op.regex.exec(path);
      if (m) {
        const params = {};
        op.names.forEach((n, i) => {
          params[n] = decodeURIComponent(m[i + 1]);
        });
        return { op, params };
      }
    }
    return null;
  }

  // Whether GitHub itself has a route for this method and path.
  knownToGitHub(method, path) {
    const m = method.toLowerCase();
    return this.allTemplates.find((t) => t.methods.includes(m) && t.regex.test(path))?.template || null;
  }

  // The schema key for an operation's response with `status`, or for GitHub's error shape when
  // the operation does not document that status; null when the status has no JSON body.
  responseKey(op, status) {
    const code = String(status);
    if (op && code in op.responses) return op.responses[code];
    if (status === 304 || status === 204 || (status >= 300 && status < 400)) return null;
    if (status === 422) return 'schema__validation-error';
    if (status >= 400) return 'schema__basic-error';
    return undefined; // an undocumented success status: a bug of the stand-in
  }

  validateResponse(op, status, body) {
    const key = this.responseKey(op, status);
    if (key === undefined) return [{ path: '/', message: `${op ? op.key : 'route'} does not document status ${status}` }];
    if (key === null) return body === undefined ? [] : [{ path: '/', message: `status ${status} of ${op?.key} has no JSON body` }];
    return this.check(key, body);
  }

  validateRequest(op, body) {
    if (!op.request) return [];
    if (body === undefined) return op.request.required ? [{ path: '/', message: 'a request body is required' }] : [];
    return this.check(op.request.key, body);
  }

  validateWebhook(name, payload) {
    const key = this.webhooks.get(name);
    if (!key) return [{ path: '/', message: `no webhook schema ${name}` }];
    return this.check(key, payload);
  }
}

module.exports = { Description, DESCRIPTION_FILE, convert, templateRegex };
