'use strict';
// GitHub's GraphQL API: the published schema (@octokit/graphql-schema, its introspection result),
// parsing and validation with the reference implementation (graphql), GitHub's pagination and
// node limits, the documented cost formula, and execution against the stand-in's state through a
// root object it supplies. A field the stand-in does not implement resolves to null and is
// reported through `onUnimplemented`.

const fs = require('node:fs');
const path = require('node:path');
const {
  buildClientSchema,
  parse,
  validate,
  execute,
  visit,
  getOperationAST,
  getNamedType,
  isObjectType,
  isInterfaceType,
  GraphQLError,
  Kind,
  getLocation,
} = require('graphql');
const { getArgumentValues, getVariableValues } = require('graphql/execution/values');

const SCHEMA_PACKAGE = '@octokit/graphql-schema';
const MAX_NODES = 500000;
const MAX_PAGE = 100;

// The files of a package that only exports an ES module entry point, found the way Node finds
// packages (the `node_modules` folders from here up).
function packageFile(pkg, file) {
  for (const dir of module.paths) {
    const p = path.join(dir, pkg, file);
    if (fs.existsSync(p)) return p;
  }
  throw new Error(`cannot find ${pkg}/${file}; run npm ci`);
}

function loadSchema() {
  const json = JSON.parse(fs.readFileSync(packageFile(SCHEMA_PACKAGE, 'schema.json'), 'utf8'));
  const version = JSON.parse(fs.readFileSync(packageFile(SCHEMA_PACKAGE, 'package.json'), 'utf8')).version;
  return { schema: buildClientSchema(json.data || json), version };
}

const fmt = (n) => n.toLocaleString('en-US');

// An error that GitHub reports with a `type` (NOT_FOUND, MAX_NODE_LIMIT_EXCEEDED, ...).
class TypedError extends Error {
  constructor(type, message) {
    super(message);
    this.type = type;
  }
}

// Paths as GitHub reports them for validation errors: the operation ("query" or "query Name"),
// then field names, fragments as "fragment Name" and "... on Type".
function astPaths(doc) {
  const paths = new Map();
  const stack = [];
  const push = (label) => ({ enter: (n) => { stack.push(label(n)); paths.set(n, [...stack]); }, leave: () => { stack.pop(); } });
  visit(doc, {
    OperationDefinition: push((n) => (n.name ? `${n.operation} ${n.name.value}` : n.operation)),
    FragmentDefinition: push((n) => `fragment ${n.name.value}`),
    InlineFragment: push((n) => (n.typeCondition ? `... on ${n.typeCondition.name.value}` : '...')),
    Field: push((n) => n.name.value),
  });
  return paths;
}

function locationsOf(nodes) {
  const out = [];
  for (const n of nodes || []) if (n.loc) out.push(getLocation(n.loc.source, n.loc.start));
  return out;
}

// GitHub's wording (graphql-ruby) for the common validation errors; other errors keep the
// reference implementation's message.
function githubValidationError(e, paths) {
  const node = e.nodes && e.nodes[0];
  const out = {};
  const p = node && paths.get(node);
  if (p) out.path = p;
  let m;
  const text = e.message;
  if ((m = /^Cannot query field "([^"]+)" on type "([^"]+)"\./.exec(text))) {
    out.extensions = { code: 'undefinedField', typeName: m[2], fieldName: m[1] };
    out.message = `Field '${m[1]}' doesn't exist on type '${m[2]}'`;
  } else if ((m = /^Unknown argument "([^"]+)" on field "[^".]+\.([^"]+)"\./.exec(text))) {
    out.extensions = { code: 'argumentNotAccepted', name: m[2], typeName: 'Field', argumentName: m[1] };
    out.message = `Field '${m[2]}' doesn't accept argument '${m[1]}'`;
  } else if ((m = /^Field "([^"]+)" argument "([^"]+)" of type "[^"]+" is required, but it was not provided\./.exec(text))) {
    out.extensions = { code: 'missingRequiredArguments', className: 'Field', name: m[1], arguments: m[2] };
    out.message = `Field '${m[1]}' is missing required arguments: ${m[2]}`;
  } else if ((m = /^Variable "\$([^"]+)" is never used(?: in operation "([^"]+)")?\./.exec(text))) {
    out.extensions = { code: 'variableNotUsed', variableName: m[1] };
    out.message = `Variable $${m[1]} is declared by ${m[2] || 'anonymous query'} but not used`;
  } else if ((m = /^Variable "\$([^"]+)" is not defined(?: by operation "([^"]+)")?\./.exec(text))) {
    out.extensions = { code: 'variableNotDefined', variableName: m[1] };
    out.message = `Variable $${m[1]} is used by ${m[2] || 'anonymous query'} but not declared`;
  } else {
    out.message = text;
  }
  return { message: out.message, locations: locationsOf(e.nodes), ...(out.path ? { path: out.path } : {}), ...(out.extensions ? { extensions: out.extensions } : {}) };
}

// graphql-ruby's explanation of a variable value that does not coerce, from the reference
// implementation's message.
function explanation(message) {
  if (/was not provided\.$|must not be null\.$/.test(message)) return 'Expected value to not be null';
  const i = message.indexOf('; ');
  return i >= 0 ? message.slice(i + 2) : message;
}

function isConnection(fieldDef) {
  const t = getNamedType(fieldDef.type);
  return isObjectType(t) && t.name.endsWith('Connection') && fieldDef.args.some((a) => a.name === 'first');
}

// Pagination arguments, node count and cost of an operation, as GitHub documents them ("Rate
// limits and query limits for the GraphQL API"): every connection needs `first` or `last` within
// 1..100; a call may request at most 500,000 nodes; the cost is the number of requests needed to
// fill every connection (assuming each `first`/`last` is reached), divided by 100 and rounded, and
// at least 1.
function analyse(schema, doc, operation, variables, paths) {
  const fragments = new Map(doc.definitions.filter((d) => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => [d.name.value, d]));
  const errors = [];
  let requests = 0;
  let nodes = 0;
  let levelExceeded = null;
  const walk = (selectionSet, parentType, multiplier, seen) => {
    for (const sel of selectionSet.selections) {
      if (sel.kind === Kind.FIELD) {
        if (sel.name.value.startsWith('__')) continue;
        if (!isObjectType(parentType) && !isInterfaceType(parentType)) continue;
        const def = parentType.getFields()[sel.name.value];
        if (!def) continue;
        let child = multiplier;
        if (isConnection(def)) {
          const args = getArgumentValues(def, sel, variables);
          const name = sel.name.value;
          const where = { locations: locationsOf([sel]), path: paths.get(sel) };
          const { first, last } = args;
          if ((first === undefined || first === null) && (last === undefined || last === null)) {
            errors.push({ type: 'MISSING_PAGINATION_BOUNDARIES', ...where, message: `You must provide a \`first\` or \`last\` value to properly paginate the \`${name}\` connection.` });
          } else if (first !== undefined && first !== null && last !== undefined && last !== null) {
            errors.push({ type: 'EXCESSIVE_PAGINATION', ...where, message: `Passing both \`first\` and \`last\` to paginate the \`${name}\` connection is not supported.` });
          }
          for (const key of ['first', 'last']) {
            const v = args[key];
            if (v === undefined || v === null) continue;
            if (v > MAX_PAGE) errors.push({ type: 'EXCESSIVE_PAGINATION', ...where, message: `Requesting ${v} records on the \`${name}\` connection exceeds the \`${key}\` limit of ${MAX_PAGE} records.` });
            else if (v < 1) errors.push({ type: 'EXCESSIVE_PAGINATION', ...where, message: `Requesting ${v} records on the \`${name}\` connection is below the \`${key}\` minimum of 1 record.` });
          }
          const size = Math.min(Math.max(Number(first ?? 0), Number(last ?? 0), 0), MAX_PAGE) || 0;
          requests += multiplier;
          child = multiplier * size;
          nodes += child;
          if (!levelExceeded && child > MAX_NODES) levelExceeded = { name, nodes: child, where };
        }
        if (sel.selectionSet) walk(sel.selectionSet, getNamedType(def.type), child, seen);
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        const t = sel.typeCondition ? schema.getType(sel.typeCondition.name.value) : parentType;
        walk(sel.selectionSet, t, multiplier, seen);
      } else if (sel.kind === Kind.FRAGMENT_SPREAD) {
        const f = fragments.get(sel.name.value);
        if (!f || seen.has(f.name.value)) continue;
        walk(f.selectionSet, schema.getType(f.typeCondition.name.value), multiplier, new Set([...seen, f.name.value]));
      }
    }
  };
  const root = operation.operation === 'mutation' ? schema.getMutationType() : schema.getQueryType();
  walk(operation.selectionSet, root, 1, new Set());
  if (levelExceeded) {
    errors.push({
      type: 'MAX_NODE_LIMIT_EXCEEDED',
      ...levelExceeded.where,
      message: `By the time this query traverses to the ${levelExceeded.name} connection, it is requesting up to ${fmt(levelExceeded.nodes)} possible nodes which exceeds the maximum limit of ${fmt(MAX_NODES)}.`,
    });
  } else if (nodes > MAX_NODES) {
    errors.push({ type: 'MAX_NODE_LIMIT_EXCEEDED', message: `This query requests up to ${fmt(nodes)} possible nodes which exceeds the maximum limit of ${fmt(MAX_NODES)}.` });
  }
  return { errors, requests, nodes, cost: Math.max(1, Math.round(requests / 100)) };
}

class GraphQLApi {
  constructor() {
    const { schema, version } = loadSchema();
    this.schema = schema;
    this.version = version;
  }

  // Parses and checks a request body ({query, variables?, operationName?}). Returns {errors}
  // (GitHub's error objects, answered with status 200) or the prepared call: {document,
  // operation, variables, mutation, cost, nodes}.
  prepare(body) {
    if (!body || typeof body !== 'object' || Array.isArray(body) || typeof body.query !== 'string') {
      return { errors: [{ message: 'A query attribute must be specified and must be a string.' }] };
    }
    let document;
    try {
      document = parse(body.query);
    } catch (e) {
      return { errors: [{ message: e.message.replace(/^Syntax Error: /, 'Parse error: '), locations: e.locations || [] }] };
    }
    const paths = astPaths(document);
    const invalid = validate(this.schema, document);
    if (invalid.length) return { errors: invalid.map((e) => githubValidationError(e, paths)) };
    const operation = getOperationAST(document, body.operationName || null);
    if (!operation) {
      return { errors: [{ message: body.operationName ? `No operation named "${body.operationName}"` : 'An operation name is required' }] };
    }
    const inputs = body.variables ?? {};
    if (typeof inputs !== 'object' || Array.isArray(inputs)) return { errors: [{ message: 'Variables are invalid JSON.' }] };
    const varErrors = [];
    for (const def of operation.variableDefinitions || []) {
      const r = getVariableValues(this.schema, [def], inputs);
      if (r.errors) {
        const name = def.variable.name.value;
        const type = document.loc.source.body.slice(def.type.loc.start, def.type.loc.end);
        varErrors.push({
          extensions: { value: inputs[name] ?? null, problems: r.errors.map((e) => ({ path: [], explanation: explanation(e.message) })) },
          locations: locationsOf([def]),
          message: `Variable $${name} of type ${type} was provided invalid value`,
        });
      }
    }
    if (varErrors.length) return { errors: varErrors };
    const coerced = getVariableValues(this.schema, operation.variableDefinitions || [], inputs).coerced;
    const analysis = analyse(this.schema, document, operation, coerced, paths);
    if (analysis.errors.length) return { errors: analysis.errors };
    return { document, operation, variables: inputs, mutation: operation.operation === 'mutation', cost: analysis.cost, nodes: analysis.nodes, requests: analysis.requests };
  }

  // Executes a prepared call against `root` (an object whose properties are values or functions
  // (args, context, info) of the fields). `onUnimplemented(info)` is told about every field the
  // objects do not have; such a field resolves to null. Errors thrown as TypedError keep their
  // type; any other execution error is returned in `bugs` as well.
  async run(prepared, root, { onUnimplemented }) {
    const fieldResolver = (source, args, context, info) => {
      if (source !== null && typeof source === 'object' && info.fieldName in source) {
        const v = source[info.fieldName];
        return typeof v === 'function' ? v.call(source, args, context, info) : v;
      }
      onUnimplemented(info);
      return null;
    };
    const result = await execute({
      schema: this.schema,
      document: prepared.document,
      rootValue: root,
      contextValue: {},
      variableValues: prepared.variables,
      operationName: prepared.operation.name ? prepared.operation.name.value : undefined,
      fieldResolver,
    });
    const out = { data: result.data ?? null };
    const bugs = [];
    if (result.errors && result.errors.length) {
      out.errors = result.errors.map((e) => {
        const o = e.originalError;
        const err = {};
        if (o instanceof TypedError) err.type = o.type;
        else bugs.push({ message: e.message, path: e.path });
        if (e.path) err.path = e.path;
        if (e.locations) err.locations = e.locations;
        err.message = e.message;
        return err;
      });
    }
    return { body: out, bugs };
  }
}

module.exports = { GraphQLApi, TypedError, GraphQLError, analyse, loadSchema, MAX_NODES, MAX_PAGE };
