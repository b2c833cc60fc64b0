// Linear's GraphQL API over the store: the resolvers of lib/schema.graphql, IssueFilter
// evaluation, cursor pagination (Relay connections) and a query complexity estimate.
'use strict';

const graphql = require('graphql');
const { GraphQLError } = graphql;

const DEFAULT_PAGE = 50;
const MAX_PAGE = 250;

function invalidInput(message, userPresentableMessage = message) {
  return new GraphQLError(message, {
    extensions: { type: 'invalid input', code: 'INVALID_INPUT', statusCode: 400, userError: true, userPresentableMessage },
  });
}

function notFound(entity) {
  return invalidInput(`Entity not found: ${entity}`, `Could not find referenced ${entity}.`);
}

// ---- comparators ----

function lower(v) {
  return v === null || v === undefined ? v : String(v).toLowerCase();
}

// A StringComparator: an IDComparator's eq, neq, in and nin, and the case-blind ones.
function matchString(value, c) {
  if (!matchId(value, c)) return false;
  if (!c) return true;
  if (c.eqIgnoreCase !== undefined && c.eqIgnoreCase !== null && lower(value) !== lower(c.eqIgnoreCase)) return false;
  if (c.containsIgnoreCase !== undefined && c.containsIgnoreCase !== null && !(lower(value) ?? '').includes(lower(c.containsIgnoreCase))) return false;
  return true;
}

function matchId(value, c) {
  if (!c) return true;
  if (c.eq !== undefined && c.eq !== null && value !== c.eq) return false;
  if (c.neq !== undefined && c.neq !== null && value === c.neq) return false;
  if (c.in && !c.in.includes(value)) return false;
  if (c.nin && c.nin.includes(value)) return false;
  return true;
}

function matchNumber(value, c) {
  if (!c) return true;
  if (c.eq !== undefined && c.eq !== null && value !== c.eq) return false;
  if (c.in && !c.in.includes(value)) return false;
  if (c.gt !== undefined && c.gt !== null && !(value > c.gt)) return false;
  if (c.lt !== undefined && c.lt !== null && !(value < c.lt)) return false;
  return true;
}

function matchLabel(label, f) {
  if (!f) return true;
  return matchId(label.id, f.id) && matchString(label.name, f.name);
}

function matchIssue(store, issue, f) {
  if (!f) return true;
  if (f.and && !f.and.every((g) => matchIssue(store, issue, g))) return false;
  if (f.or && !f.or.some((g) => matchIssue(store, issue, g))) return false;
  if (!matchId(issue.id, f.id)) return false;
  if (!matchNumber(issue.number, f.number)) return false;
  if (!matchString(issue.title, f.title)) return false;
  if (f.team) {
    const t = store.issueTeam(issue);
    if (!matchId(t.id, f.team.id) || !matchString(t.key, f.team.key)) return false;
  }
  if (f.state) {
    const s = store.stateById(issue.stateId);
    if (!matchString(s.type, f.state.type) || !matchString(s.name, f.state.name)) return false;
  }
  if (f.labels) {
    const labels = issue.labelIds.map((id) => store.label(id));
    // On a collection, a field comparator holds when some member matches (as Linear's does).
    if (f.labels.name && !labels.some((l) => matchString(l.name, f.labels.name))) return false;
    if (f.labels.some && !labels.some((l) => matchLabel(l, f.labels.some))) return false;
    if (f.labels.every && !labels.every((l) => matchLabel(l, f.labels.every))) return false;
  }
  return true;
}

// ---- pagination ----

function encodeCursor(key) {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

function decodeCursor(cursor) {
  try {
    const key = JSON.parse(Buffer.from(String(cursor), 'base64url').toString('utf8'));
    if (Array.isArray(key) && key.length === 2 && typeof key[0] === 'string' && typeof key[1] === 'number') return key;
  } catch {
    // fall through
  }
  throw invalidInput(`Invalid cursor: ${cursor}`);
}

function compareKeys(a, b) {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1;
  return a[1] - b[1];
}

function pageSize(n, name) {
  if (n === undefined || n === null) return null;
  if (n < 0) throw invalidInput(`Argument Validation Error: ${name} must not be negative`);
  if (n > MAX_PAGE) throw invalidInput(`Argument Validation Error: ${name} must be at most ${MAX_PAGE}`);
  return n;
}

// items: already ordered; keyOf(item) → [string, number], strictly increasing along `items`
// when `ascending`, strictly decreasing otherwise.
function connection(items, keyOf, args = {}, ascending = true, view = (x) => x) {
  const first = pageSize(args.first, 'first');
  const last = pageSize(args.last, 'last');
  const cmp = (a, b) => (ascending ? compareKeys(a, b) : compareKeys(b, a));
  let lo = 0;
  let hi = items.length;
  if (args.after) {
    const k = decodeCursor(args.after);
    while (lo < hi && cmp(keyOf(items[lo]), k) <= 0) lo++;
  }
  if (args.before) {
    const k = decodeCursor(args.before);
    while (hi > lo && cmp(keyOf(items[hi - 1]), k) >= 0) hi--;
  }
  let start = lo;
  let end = hi;
  if (first !== null) end = Math.min(end, start + first);
  else if (last === null) end = Math.min(end, start + DEFAULT_PAGE);
  if (last !== null) start = Math.max(start, end - last);
  const slice = items.slice(start, end);
  const edges = slice.map((item) => ({ node: view(item), cursor: encodeCursor(keyOf(item)) }));
  return {
    nodes: edges.map((e) => e.node),
    edges,
    pageInfo: {
      hasNextPage: end < items.length,
      hasPreviousPage: start > 0,
      startCursor: edges.length ? edges[0].cursor : null,
      endCursor: edges.length ? edges[edges.length - 1].cursor : null,
    },
  };
}

// ---- views: objects graphql-js resolves fields on ----

class Api {
  constructor(store, { corrupt } = {}) {
    this.store = store;
    this.corruptions = corrupt || [];
  }

  user(u) {
    return u ? { ...u } : null;
  }

  state(s) {
    return { id: s.id, name: s.name, type: s.type, color: s.color, position: s.position };
  }

  team(t) {
    return {
      id: t.id,
      key: t.key,
      name: t.name,
      states: () => connection(t.states, (s) => ['', s.position], {}, true, (s) => this.state(s)),
    };
  }

  label(l) {
    return { id: l.id, name: l.name, color: l.color };
  }

  issue(i) {
    const store = this.store;
    const view = {
      id: i.id,
      identifier: i.identifier,
      number: i.number,
      title: i.title,
      description: i.description,
      url: store.url(i),
      priority: i.priority,
      createdAt: i.createdAt,
      updatedAt: i.updatedAt,
      archivedAt: i.archivedAt,
      canceledAt: i.canceledAt,
      completedAt: i.completedAt,
      startedAt: i.startedAt,
      branchName: store.branchName(i),
      state: () => this.state(store.stateById(i.stateId)),
      team: () => this.team(store.issueTeam(i)),
      labels: (args) => {
        const labels = i.labelIds.map((id) => store.label(id)).filter((l) => matchLabel(l, args.filter));
        labels.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        return connection(labels, (l) => [l.name, 0], args, true, (l) => this.label(l));
      },
      creator: () => this.user(store.user(i.creatorId)),
      assignee: () => this.user(store.user(i.assigneeId)),
    };
    // A deliberate corruption (POST /_standin/corrupt {target: "graphql"}) to prove that a
    // wrong answer is caught.
    const c = this.corruptions[0];
    if (c) {
      for (const k of c.delete || []) delete view[k];
      for (const [k, v] of Object.entries(c.set || {})) view[k] = v;
      if (--c.count <= 0) this.corruptions.shift();
    }
    return view;
  }

  root() {
    const store = this.store;
    return {
      viewer: () => this.user(store.viewer),
      issue: ({ id }) => {
        const i = store.issue(id);
        if (!i) throw notFound('Issue');
        return this.issue(i);
      },
      issues: (args) => {
        const by = args.orderBy || 'createdAt';
        const list = store.issues.filter((i) => (args.includeArchived || !i.archivedAt) && matchIssue(store, i, args.filter));
        const keyOf = (i) => [i[by], i.seq];
        // Newest first, as Linear lists them.
        list.sort((a, b) => compareKeys(keyOf(b), keyOf(a)));
        return connection(list, keyOf, args, false, (i) => this.issue(i));
      },
      team: ({ id }) => {
        const t = store.team(id);
        if (!t) throw notFound('Team');
        return this.team(t);
      },
      teams: (args) => connection(store.teams, (t) => [t.key, 0], args, true, (t) => this.team(t)),
    };
  }
}

// ---- complexity: a rough estimate, 1 point per field, multiplied inside connections ----

const CONNECTION_FIELDS = new Set(['issues', 'teams', 'labels', 'states']);

function argValue(node, name, variables) {
  const arg = (node.arguments || []).find((a) => a.name.value === name);
  if (!arg) return undefined;
  if (arg.value.kind === 'IntValue') return Number(arg.value.value);
  if (arg.value.kind === 'Variable') return variables?.[arg.value.name.value];
  return undefined;
}

function complexity(document, operationName, variables) {
  const fragments = {};
  let op = null;
  for (const d of document.definitions) {
    if (d.kind === 'FragmentDefinition') fragments[d.name.value] = d;
    if (d.kind === 'OperationDefinition' && (!operationName || d.name?.value === operationName) && !op) op = d;
  }
  if (!op) return 0;
  const seen = new Set();
  const walk = (set, mult) => {
    let total = 0;
    for (const sel of set?.selections || []) {
      if (sel.kind === 'Field') {
        if (sel.name.value.startsWith('__')) continue;
        total += mult;
        if (sel.selectionSet) {
          let m = mult;
          if (CONNECTION_FIELDS.has(sel.name.value)) {
            const n = argValue(sel, 'first', variables) ?? argValue(sel, 'last', variables) ?? DEFAULT_PAGE;
            m = mult * Math.max(1, Number(n) || DEFAULT_PAGE);
          }
          total += walk(sel.selectionSet, m);
        }
      } else if (sel.kind === 'InlineFragment') {
        total += walk(sel.selectionSet, mult);
      } else if (sel.kind === 'FragmentSpread' && fragments[sel.name.value] && !seen.has(sel.name.value)) {
        seen.add(sel.name.value);
        total += walk(fragments[sel.name.value].selectionSet, mult);
        seen.delete(sel.name.value);
      }
    }
    return total;
  };
  return Math.max(1, Math.round(walk(op.selectionSet, 1) / 10) || 1);
}

// The operation's name, else its first root field (for request counts and faults).
function operationKey(document, operationName) {
  if (operationName) return operationName;
  const op = document?.definitions.find((d) => d.kind === 'OperationDefinition');
  if (!op) return '(none)';
  if (op.name) return op.name.value;
  const f = op.selectionSet.selections.find((s) => s.kind === 'Field');
  return f ? f.name.value : '(none)';
}

module.exports = { Api, complexity, operationKey, matchIssue, connection, encodeCursor, decodeCursor, invalidInput, DEFAULT_PAGE, MAX_PAGE };
