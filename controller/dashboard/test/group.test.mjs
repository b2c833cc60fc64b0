// The overview's groups and the document title, from session statuses as the API writes them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GROUPS, groupOf, overviewGroupOf, countGroups, titleFor, escalations } from '../group.js';

const session = (status = {}, spec = {}, metadata = {}) => ({
  metadata: { name: 's', ...metadata },
  spec: { project: 'p', ...spec },
  status,
});
const pr = (over = {}) => ({ number: 7, url: 'https://github.com/o/r/pull/7', state: 'open', checks: 'pending', review: 'none', ...over });
const activity = (state) => ({ state, since: '2025-01-01T00:00:00Z', evidence: '' });

test('the groups come in the contract order, the five attention groups first', () => {
  assert.deepEqual(
    GROUPS.map((g) => g.key),
    ['needs-input', 'stuck', 'ci-failed', 'changes-requested', 'ready-to-merge', 'working', 'idle', 'done'],
  );
  assert.deepEqual(GROUPS.filter((g) => g.attention).map((g) => g.key), GROUPS.slice(0, 5).map((g) => g.key));
});

test('each phase lands in its group', () => {
  const cases = [
    ['NeedsInput', 'needs-input'],
    ['Stuck', 'stuck'],
    ['Failed', 'stuck'],
    ['CIFailed', 'ci-failed'],
    ['ChangesRequested', 'changes-requested'],
    ['Mergeable', 'ready-to-merge'],
    ['Working', 'working'],
    ['Provisioning', 'working'],
    ['Pending', 'working'],
    ['PROpen', 'working'],
    ['Idle', 'idle'],
    ['Stopped', 'idle'],
    ['Queued', 'idle'],
    ['RateLimited', 'idle'],
    ['Merged', 'done'],
    ['Closed', 'done'],
    ['Terminating', 'done'],
  ];
  for (const [phase, group] of cases) assert.equal(groupOf(session({ phase })), group, phase);
  assert.equal(groupOf(session()), 'working', 'a session not yet looked at is on its way');
});

test('the agent asking a person wins over what its pull request says', () => {
  const s = session({ phase: 'CIFailed', activity: activity('needs-input'), pullRequest: pr({ checks: 'failing' }) });
  assert.equal(groupOf(s), 'needs-input');
  assert.equal(groupOf(session({ phase: 'Failed', activity: activity('exited') })), 'stuck');
});

test('pull request checks and reviews group a session whatever its phase says', () => {
  assert.equal(groupOf(session({ phase: 'PROpen', pullRequest: pr({ checks: 'failing' }) })), 'ci-failed');
  assert.equal(groupOf(session({ phase: 'PROpen', pullRequest: pr({ review: 'changes-requested' }) })), 'changes-requested');
  assert.equal(
    groupOf(session({ phase: 'Approved', pullRequest: pr({ checks: 'passing', review: 'approved', mergeable: true }) })),
    'ready-to-merge',
  );
  assert.equal(
    groupOf(session({ phase: 'Approved', pullRequest: pr({ checks: 'pending', review: 'approved' }) })),
    'working',
    'approved, its checks still running',
  );
  assert.equal(
    groupOf(session({ phase: 'Approved', pullRequest: pr({ checks: 'passing', review: 'approved', mergeable: false }) })),
    'working',
    'approved with conflicts: the agent merges the base first',
  );
  assert.equal(groupOf(session({ phase: 'PROpen', pullRequest: pr(), activity: activity('idle') })), 'idle');
  assert.equal(groupOf(session({ phase: 'Merged', pullRequest: pr({ state: 'merged' }) })), 'done');
  assert.equal(groupOf(session({ phase: 'PROpen', pullRequest: pr({ state: 'closed' }) })), 'done');
});

test('an escalated reaction asks for a person', () => {
  const escalated = (key) => ({ [key]: { attempts: 3, escalated: true } });
  const working = { phase: 'Working', activity: activity('working') };
  assert.equal(groupOf(session({ ...working, reactions: escalated('ci-failed') })), 'ci-failed');
  assert.equal(groupOf(session({ ...working, reactions: escalated('merge-conflicts') })), 'ci-failed');
  assert.equal(groupOf(session({ ...working, reactions: escalated('agent-stuck') })), 'stuck');
  assert.equal(groupOf(session({ ...working, reactions: escalated('agent-needs-input') })), 'needs-input');
  assert.equal(groupOf(session({ ...working, reactions: escalated('changes-requested') })), 'changes-requested');
  assert.equal(groupOf(session({ ...working, reactions: { 'ci-failed': { attempts: 1, escalated: false } } })), 'working');
  assert.deepEqual(escalations(session({ reactions: { b: { escalated: true }, a: { escalated: true }, c: {} } })), ['a', 'b']);
});

test('stopped, deleted and finished sessions need nobody', () => {
  const failing = { phase: 'CIFailed', pullRequest: pr({ checks: 'failing' }) };
  assert.equal(groupOf(session(failing, { stopped: true })), 'idle');
  assert.equal(groupOf(session(failing, {}, { deletionTimestamp: '2025-01-01T00:00:00Z' })), 'done');
});

test('the title counts the attention groups and names every non-empty group', () => {
  assert.equal(titleFor(countGroups([])), 'aoctl');
  const counts = { 'needs-input': 1, 'ci-failed': 1, working: 3 };
  assert.equal(titleFor(counts), '(2) aoctl — 1 needs input, 1 CI failed, 3 working');
  assert.equal(titleFor({ working: 2, idle: 1 }), 'aoctl — 2 working, 1 idle', 'no (0)');
  assert.equal(
    titleFor({ 'needs-input': 1, stuck: 2, 'ci-failed': 3, 'changes-requested': 4, 'ready-to-merge': 5, working: 6, idle: 7, done: 8 }),
    '(15) aoctl — 1 needs input, 2 stuck, 3 CI failed, 4 changes requested, 5 ready to merge, 6 working, 7 idle, 8 done',
  );
  assert.equal(titleFor({ done: 1 }), 'aoctl — 1 done');
});

test('counts hold every group, empty ones as 0', () => {
  const counts = countGroups([session({ phase: 'NeedsInput' }), session({ phase: 'Working' }), session({ phase: 'Working' })]);
  assert.deepEqual(counts, { 'needs-input': 1, stuck: 0, 'ci-failed': 0, 'changes-requested': 0, 'ready-to-merge': 0, working: 2, idle: 0, done: 0 });
});

test("a project's orchestrator has no row, nor a count, unless it needs input", () => {
  const orch = (status, spec = {}) => session(status, { role: 'orchestrator', workspace: { kind: 'readonly' }, ...spec }, { name: 'p-orchestrator' });
  const working = orch({ phase: 'Working', activity: activity('working') });
  const asking = orch({ phase: 'NeedsInput', activity: activity('needs-input') });
  assert.equal(groupOf(working), 'working', 'its own group, as its page shows it');
  assert.equal(overviewGroupOf(working), null, 'the strip of orchestrators shows it');
  for (const status of [{ phase: 'Idle' }, { phase: 'Stuck', activity: activity('stuck') }, { phase: 'Stopped' }]) {
    assert.equal(overviewGroupOf(orch(status)), null, status.phase);
  }
  assert.equal(overviewGroupOf(orch({ phase: 'Working' }, { stopped: true })), null);
  assert.equal(overviewGroupOf(asking), 'needs-input', 'a person answers it like any agent');
  const worker = session({ phase: 'Working' }, {}, { name: 'w', labels: { 'ao.dev/orchestrator': 'p-orchestrator' } });
  assert.equal(overviewGroupOf(worker), 'working', 'its workers are rows like any session');
  const counts = countGroups([working, asking, worker]);
  assert.equal(counts['needs-input'], 1);
  assert.equal(counts.working, 1, 'the working orchestrator is not counted');
  assert.equal(titleFor(countGroups([working])), 'aoctl', 'an orchestrator at work asks no one');
  assert.equal(titleFor(countGroups([asking])), '(1) aoctl — 1 needs input');
});
