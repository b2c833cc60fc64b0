// A project's orchestrator as the page reads it: which session it is, whose worker a session is,
// and the figures of its card and panel, from objects as the API writes them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DEFAULT_MAX_SESSIONS,
  isAlive,
  isOrchestrator,
  orchestratorFor,
  orchestratorOf,
  orchestratorSummary,
  projectRows,
  workersLine,
} from '../orchestrator.js';

const orchestrator = (project, over = {}) => ({
  metadata: { name: `${project}-orchestrator`, creationTimestamp: '2025-01-01T00:00:00Z' },
  spec: { project, role: 'orchestrator', workspace: { kind: 'readonly' } },
  status: {
    phase: 'Working',
    activity: { state: 'working', since: '2025-01-01T00:01:00Z', evidence: 'Thinking… (esc to interrupt)' },
    workspace: { path: '/w', branch: '', headSha: '0123456789abcdef' },
    orchestrator: { workers: 2, batches: 3 },
  },
  ...over,
});
const worker = (name, by, phase = 'Working', metadata = {}) => ({
  metadata: { name, creationTimestamp: `2025-01-01T00:0${name.length % 10}:00Z`, labels: by ? { 'ao.dev/orchestrator': by } : {}, ...metadata },
  spec: { project: 'shop' },
  status: { phase },
});
const project = (orchestratorSpec) => ({ metadata: { name: 'shop' }, spec: { path: '/r', orchestrator: orchestratorSpec } });

test('an orchestrator is known by its role, a worker by its label', () => {
  assert.equal(isOrchestrator(orchestrator('shop')), true);
  assert.equal(isOrchestrator(worker('a', 'shop-orchestrator')), false);
  assert.equal(isOrchestrator({ spec: { role: 'worker' } }), false);
  assert.equal(isOrchestrator(undefined), false);
  assert.equal(orchestratorOf(worker('a', 'shop-orchestrator')), 'shop-orchestrator');
  assert.equal(orchestratorOf(worker('a', null)), null);
  assert.equal(orchestratorOf({ metadata: { name: 'a', labels: { 'ao.dev/orchestrator': '' } } }), null, 'an empty label names no one');
  assert.equal(orchestratorOf({ metadata: { name: 'a' } }), null);
  assert.equal(orchestratorOf(undefined), null);
});

test("a project's orchestrator is found among all sessions, its own name first", () => {
  const shop = orchestrator('shop');
  const web = orchestrator('web');
  const sessions = [worker('a', 'shop-orchestrator'), web, shop];
  assert.equal(orchestratorFor('shop', sessions), shop);
  assert.equal(orchestratorFor('web', new Map(sessions.map((s) => [s.metadata.name, s])).values()), web, 'any iterable');
  assert.equal(orchestratorFor('docs', sessions), null);
  assert.equal(orchestratorFor('', sessions), null);
  assert.equal(orchestratorFor('shop', []), null);
  const odd = { ...orchestrator('shop'), metadata: { name: 'other' } };
  assert.equal(orchestratorFor('shop', [odd, shop]), shop, 'the name the reconciler gives wins');
  assert.equal(orchestratorFor('shop', [odd]), odd);
});

test('a worker is alive until merged, closed, failed or being deleted; a stopped one counts', () => {
  for (const phase of ['Working', 'Stopped', 'Queued', 'NeedsInput', 'PROpen', 'Mergeable', undefined]) {
    assert.equal(isAlive(worker('a', 'o', phase)), true, String(phase));
  }
  for (const phase of ['Merged', 'Closed', 'Failed']) assert.equal(isAlive(worker('a', 'o', phase)), false, phase);
  assert.equal(isAlive(worker('a', 'o', 'Working', { deletionTimestamp: '2025-01-01T00:00:00Z' })), false);
});

test('the summary counts the alive workers of this orchestrator against its limit', () => {
  const orch = orchestrator('shop');
  const sessions = [
    orch,
    worker('w1', 'shop-orchestrator', 'Working'),
    worker('w2', 'shop-orchestrator', 'Stopped'),
    worker('w3', 'shop-orchestrator', 'Merged'),
    worker('w4', 'shop-orchestrator', 'Failed'),
    worker('w5', 'shop-orchestrator', 'Working', { deletionTimestamp: '2025-01-01T00:00:00Z' }),
    worker('w6', 'web-orchestrator', 'Working'),
    worker('w7', null, 'Working'),
  ];
  const sum = orchestratorSummary(orch, sessions, project({ limits: { maxSessions: 8 } }));
  assert.deepEqual(sum, {
    name: 'shop-orchestrator',
    project: 'shop',
    activity: { state: 'working', evidence: 'Thinking… (esc to interrupt)', since: '2025-01-01T00:01:00Z' },
    workers: 2,
    maxSessions: 8,
    batches: 3,
    stopped: false,
  });
  assert.equal(workersLine(sum), 'workers 2 / 8');
});

test('without limits, activity or a project the summary says the defaults', () => {
  const orch = orchestrator('shop', { status: {} });
  const sum = orchestratorSummary(orch, [], project({}));
  assert.equal(sum.maxSessions, DEFAULT_MAX_SESSIONS);
  assert.equal(DEFAULT_MAX_SESSIONS, 5);
  assert.equal(sum.activity, null);
  assert.equal(sum.batches, 0);
  assert.equal(sum.workers, 0);
  assert.equal(orchestratorSummary(orch, [], undefined).maxSessions, 5, 'a project not loaded yet');
  assert.equal(orchestratorSummary(orch, [], project({ limits: { maxSessions: 0 } })).maxSessions, 0, 'zero is a limit');
});

test('stopped is what the project says, which the reconciler carries over to the session', () => {
  const running = orchestrator('shop');
  const stoppedSession = { ...orchestrator('shop'), spec: { ...orchestrator('shop').spec, stopped: true } };
  assert.equal(orchestratorSummary(running, [], project({ stopped: true })).stopped, true, 'asked, not carried over yet');
  assert.equal(orchestratorSummary(stoppedSession, [], project({})).stopped, false, 'resumed, not carried over yet');
  assert.equal(orchestratorSummary(stoppedSession, [], undefined).stopped, true, 'no project loaded: the session');
});

test("a project's rows: the orchestrator's workers first, then the others, without the orchestrator", () => {
  const byName = (a, b) => (a.metadata.name < b.metadata.name ? -1 : 1);
  const sessions = [worker('c', null), orchestrator('shop'), worker('b', 'shop-orchestrator'), worker('a', null), worker('d', 'shop-orchestrator')];
  assert.deepEqual(projectRows(sessions, 'shop-orchestrator', byName).map((s) => s.metadata.name), ['b', 'd', 'a', 'c']);
  assert.deepEqual(projectRows(sessions, undefined, byName).map((s) => s.metadata.name), ['a', 'b', 'c', 'd']);
});
