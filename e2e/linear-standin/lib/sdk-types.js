// Reads the TypeScript declarations that @linear/sdk generates from Linear's GraphQL schema
// (dist/index-*.d.mts) into a small type model, and validates JSON values against it.
//
// Model: { objects: Map<name, {parts: [name], fields: Map<field, {type, optional}>}>,
//          unions: Map<name, [name]>, enums: Map<name, [value]>, scalars: Set<name> }.
// A type reference is {kind: 'named', name, nullable} | {kind: 'list', of, nullable} |
// {kind: 'literal', value, nullable}. Maybe<…>, InputMaybe<…> and an optional member (`?:`)
// make a reference nullable; Array<…> is a list.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

function sdkDir() {
  const pkg = require.resolve('@linear/sdk/package.json');
  return path.join(path.dirname(pkg), 'dist');
}

function sdkVersion() {
  return require('@linear/sdk/package.json').version;
}

function declarationFile() {
  const dir = sdkDir();
  const names = fs.readdirSync(dir).filter((n) => /^index-.*\.d\.mts$/.test(n));
  if (names.length !== 1) throw new Error(`expected one index-*.d.mts in @linear/sdk's dist, found ${names.length}`);
  return path.join(dir, names[0]);
}

// Walks `text` from `from`, passing over quoted strings and what stands inside brackets, and calls
// `at(c, i)` for each other character; returns the first index where `at` returns true, or the
// text's length.
function scanTop(text, from, at) {
  let depth = 0;
  let quote = null;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = null;
      continue;
    }
    if (c === '"' || c === "'") quote = c;
    else if (c === '{' || c === '<' || c === '(' || c === '[') depth++;
    else if (c === '}' || c === '>' || c === ')' || c === ']') depth--;
    else if (depth === 0 && at(c, i)) return i;
  }
  return text.length;
}

// Splits `text` at `sep` where no bracket is open.
function splitTop(text, sep) {
  const out = [];
  let start = 0;
  scanTop(text, 0, (c, i) => {
    if (c === sep) {
      out.push(text.slice(start, i));
      start = i + 1;
    }
    return false;
  });
  out.push(text.slice(start));
  return out.map((s) => s.trim()).filter((s) => s.length);
}

// Index of the `;` that ends a declaration starting at `from` (depth 0).
function endOfDeclaration(text, from) {
  return scanTop(text, from, (c) => c === ';');
}

function unwrap(expr, wrapper) {
  const prefix = `${wrapper}<`;
  if (expr.startsWith(prefix) && expr.endsWith('>')) return expr.slice(prefix.length, -1).trim();
  return null;
}

function parseTypeExpr(expr) {
  expr = expr.trim();
  const alternatives = splitTop(expr, '|');
  if (alternatives.length > 1) {
    const rest = alternatives.filter((a) => a !== 'null' && a !== 'undefined');
    const nullable = rest.length < alternatives.length;
    if (rest.length === 1) return { ...parseTypeExpr(rest[0]), nullable: nullable || parseTypeExpr(rest[0]).nullable };
    if (rest.every((a) => /^"[^"]*"$/.test(a))) return { kind: 'literal', values: rest.map((a) => a.slice(1, -1)), nullable };
    return { kind: 'anyOf', of: rest.map(parseTypeExpr), nullable };
  }
  for (const w of ['Maybe', 'InputMaybe']) {
    const inner = unwrap(expr, w);
    if (inner !== null) return { ...parseTypeExpr(inner), nullable: true };
  }
  const item = unwrap(expr, 'Array');
  if (item !== null) return { kind: 'list', of: parseTypeExpr(item), nullable: false };
  let m = expr.match(/^Scalars\["(\w+)"\]$/);
  if (m) return { kind: 'named', name: m[1], nullable: false };
  m = expr.match(/^"([^"]*)"$/);
  if (m) return { kind: 'literal', values: [m[1]], nullable: false };
  if (/^\w+$/.test(expr)) return { kind: 'named', name: expr, nullable: false };
  return { kind: 'other', text: expr, nullable: false };
}

function parseMembers(body) {
  const fields = new Map();
  for (const member of splitTop(body, ';')) {
    const m = member.match(/^(?:readonly\s+)?["']?(\w+)["']?(\?)?\s*:\s*([\s\S]+)$/);
    if (!m) continue;
    const type = parseTypeExpr(m[3]);
    const optional = !!m[2];
    if (optional) type.nullable = true;
    fields.set(m[1], { type, optional });
  }
  return fields;
}

function parseDeclarations(text) {
  text = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const model = { objects: new Map(), unions: new Map(), enums: new Map(), scalars: new Set() };
  const typeRe = /^(?:export\s+)?type (\w+)(<[^=]*>)? = /gm;
  let m;
  while ((m = typeRe.exec(text))) {
    const name = m[1];
    const start = m.index + m[0].length;
    const end = endOfDeclaration(text, start);
    const rhs = text.slice(start, end).trim();
    typeRe.lastIndex = end;
    if (m[2]) continue; // generic utility types (Maybe, Exact, …)
    if (name === 'Scalars' && rhs.startsWith('{')) {
      for (const key of parseMembers(rhs.slice(1, -1)).keys()) model.scalars.add(key);
      continue;
    }
    const parts = splitTop(rhs, '&');
    if (parts.every((p) => p.startsWith('{') || /^\w+$/.test(p))) {
      const fields = new Map();
      const bases = [];
      for (const p of parts) {
        if (p.startsWith('{')) for (const [k, v] of parseMembers(p.slice(1, -1))) fields.set(k, v);
        else bases.push(p);
      }
      if (parts.length === 1 && bases.length === 1) {
        model.unions.set(name, bases); // plain alias
      } else {
        model.objects.set(name, { bases, own: fields });
      }
      continue;
    }
    const alternatives = splitTop(rhs, '|');
    if (alternatives.length > 1 && alternatives.every((a) => /^\w+$/.test(a))) model.unions.set(name, alternatives);
  }
  const enumRe = /^(?:export\s+)?declare enum (\w+) \{([\s\S]*?)^\}/gm;
  while ((m = enumRe.exec(text))) {
    const values = [];
    for (const member of splitTop(m[2], ',')) {
      const v = member.match(/=\s*"([^"]*)"/);
      if (v) values.push(v[1]);
    }
    model.enums.set(m[1], values);
  }
  return model;
}

class SdkTypes {
  constructor(file = declarationFile()) {
    this.file = file;
    this.version = sdkVersion();
    this.model = parseDeclarations(fs.readFileSync(file, 'utf8'));
    this.resolved = new Map();
  }

  // Fields of an object type, with those of the types it intersects (later ones win).
  fields(name) {
    if (this.resolved.has(name)) return this.resolved.get(name);
    const obj = this.model.objects.get(name);
    if (!obj) return null;
    const out = new Map();
    for (const base of obj.bases) {
      const inherited = this.fields(base);
      if (inherited) for (const [k, v] of inherited) out.set(k, v);
    }
    for (const [k, v] of obj.own) out.set(k, v);
    this.resolved.set(name, out);
    return out;
  }

  has(name) {
    return this.model.objects.has(name) || this.model.unions.has(name) || this.model.enums.has(name) || this.model.scalars.has(name);
  }

  // Validates a JSON value against type `name`; returns a list of "path: problem" strings.
  validate(value, name, where = '$') {
    const errors = [];
    this.check(value, { kind: 'named', name, nullable: false }, where, errors);
    return errors;
  }

  check(value, ref, where, errors) {
    if (value === null || value === undefined) {
      if (!ref.nullable) errors.push(`${where}: ${value === undefined ? 'missing' : 'null'}, but required`);
      return;
    }
    switch (ref.kind) {
      case 'list':
        if (!Array.isArray(value)) errors.push(`${where}: expected a list`);
        else value.forEach((v, i) => this.check(v, ref.of, `${where}[${i}]`, errors));
        return;
      case 'literal':
        if (!ref.values.includes(value)) errors.push(`${where}: expected ${ref.values.map((v) => JSON.stringify(v)).join(' | ')}, got ${JSON.stringify(value)}`);
        return;
      case 'anyOf': {
        for (const alt of ref.of) {
          const sub = [];
          this.check(value, alt, where, sub);
          if (!sub.length) return;
        }
        errors.push(`${where}: matches none of the alternatives`);
        return;
      }
      case 'named':
        return this.checkNamed(value, ref.name, where, errors);
      default:
        return;
    }
  }

  checkNamed(value, name, where, errors) {
    const scalar = {
      String: 'string',
      ID: 'string',
      Boolean: 'boolean',
      Float: 'number',
      Int: 'number',
    }[name];
    if (scalar) {
      if (typeof value !== scalar) errors.push(`${where}: expected ${name}, got ${typeof value}`);
      else if (name === 'Int' && !Number.isInteger(value)) errors.push(`${where}: expected Int, got ${value}`);
      return;
    }
    if (name === 'DateTime') {
      if (typeof value !== 'string' || Number.isNaN(Date.parse(value))) errors.push(`${where}: expected an ISO 8601 DateTime, got ${JSON.stringify(value)}`);
      return;
    }
    if (name === 'JSONObject') {
      if (typeof value !== 'object' || Array.isArray(value)) errors.push(`${where}: expected a JSON object`);
      return;
    }
    if (this.model.scalars.has(name)) return; // JSON, UUID, …: anything
    if (this.model.enums.has(name)) {
      if (!this.model.enums.get(name).includes(value)) errors.push(`${where}: ${JSON.stringify(value)} is not a ${name}`);
      return;
    }
    if (this.model.unions.has(name)) {
      const members = this.model.unions.get(name);
      const attempts = [];
      for (const member of members) {
        const sub = [];
        this.checkNamed(value, member, where, sub);
        if (!sub.length) return;
        attempts.push(`${member}: ${sub[0]}`);
      }
      errors.push(`${where}: matches no member of ${name} (${attempts.join('; ')})`);
      return;
    }
    const fields = this.fields(name);
    if (!fields) {
      errors.push(`${where}: unknown type ${name}`);
      return;
    }
    if (typeof value !== 'object' || Array.isArray(value)) {
      errors.push(`${where}: expected an object (${name})`);
      return;
    }
    for (const key of Object.keys(value)) {
      if (!fields.has(key)) errors.push(`${where}.${key}: not a field of ${name}`);
    }
    for (const [key, field] of fields) {
      if (key === '__typename') continue;
      this.check(value[key], field.type, `${where}.${key}`, errors);
    }
  }
}

// GraphQL notation of a type reference: [String!]! and so on.
function toGraphQL(ref) {
  const bang = ref.nullable ? '' : '!';
  if (ref.kind === 'list') return `[${toGraphQL(ref.of)}]${bang}`;
  if (ref.kind === 'named') return `${ref.name}${bang}`;
  if (ref.kind === 'literal') return `String${bang}`;
  return `?${bang}`;
}

let shared = null;
function sdkTypes() {
  if (!shared) shared = new SdkTypes();
  return shared;
}

module.exports = { SdkTypes, sdkTypes, toGraphQL, parseTypeExpr, parseDeclarations, sdkVersion };
