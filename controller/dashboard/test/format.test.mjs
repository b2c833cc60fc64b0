// How ages, figures, agents, branches and checkouts, links and command lines read on the page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { age, tokens, dollars, agentOf, branchOf, checkoutOf, hasBranch, latestEvents, questionOf, safeUrl, splitCommand, workspaceKindOf } from '../format.js';

test('ages', () => {
  const now = Date.parse('2025-01-02T00:00:00Z');
  assert.equal(age('2025-01-01T23:59:50Z', now), '10s');
  assert.equal(age('2025-01-01T23:55:00Z', now), '5m');
  assert.equal(age('2025-01-01T21:00:00Z', now), '3h');
  assert.equal(age('2024-12-30T00:00:00Z', now), '3d');
  assert.equal(age('2025-01-02T00:00:05Z', now), '0s', 'a clock a little behind');
  assert.equal(age(undefined, now), '');
});

test('figures', () => {
  assert.equal(tokens(950), '950');
  assert.equal(tokens(1234), '1.2k');
  assert.equal(tokens(45678), '46k');
  assert.equal(tokens(4_500_000), '4.5M');
  assert.equal(dollars(1.5), '$1.50');
  assert.equal(dollars(undefined), '');
});

test('the agent and branch of a session, with its project defaults', () => {
  const project = { spec: { sessionPrefix: 'demo', defaults: { agent: 'aider' } } };
  assert.equal(agentOf({ spec: { agent: 'codex' } }, project), 'codex');
  assert.equal(agentOf({ spec: {} }, project), 'aider');
  assert.equal(agentOf({ spec: {} }, undefined), 'claude-code');
  assert.equal(agentOf({ spec: { agent: { command: ['./scripts/agent.sh', '{promptFile}'] } } }), 'custom: agent.sh');
  assert.equal(branchOf({ metadata: { name: 'x' }, spec: {}, status: { workspace: { branch: 'b/x' } } }, project), 'b/x');
  assert.equal(branchOf({ metadata: { name: 'x' }, spec: { branch: 'mine' } }, project), 'mine');
  assert.equal(branchOf({ metadata: { name: 'x' }, spec: { project: 'p' } }, project), 'demo/x');
  assert.equal(branchOf({ metadata: { name: 'x' }, spec: { project: 'p' } }, undefined), 'p/x');
});

test('the newest event of each object', () => {
  const ev = (name, reason, t) => ({ involvedObject: { kind: 'Session', name }, reason, lastTimestamp: t });
  const latest = latestEvents([ev('a', 'Old', '2025-01-01T00:00:01Z'), ev('a', 'New', '2025-01-01T00:00:02Z'), ev('b', 'Only', '2025-01-01T00:00:00Z')]);
  assert.equal(latest.get('Session/a').reason, 'New');
  assert.equal(latest.get('Session/b').reason, 'Only');
});

test('links go only to http and https', () => {
  assert.equal(safeUrl('https://github.com/o/r/pull/1'), 'https://github.com/o/r/pull/1');
  assert.equal(safeUrl('javascript:alert(1)'), null);
  assert.equal(safeUrl('data:text/html,x'), null);
  assert.equal(safeUrl('not a url'), null);
});

test('command lines split into words', () => {
  assert.deepEqual(splitCommand('./scripts/agent.sh {promptFile}'), ['./scripts/agent.sh', '{promptFile}']);
  assert.deepEqual(splitCommand(`  run "two words" 'and more'  x`), ['run', 'two words', 'and more', 'x']);
  assert.deepEqual(splitCommand('a ""'), ['a', '']);
  assert.deepEqual(splitCommand(''), []);
});

test('the question an agent asked, if one waits', () => {
  const asked = { status: { agent: { question: { text: 'Ship it?', askedAt: '2025-01-01T00:00:00Z' } } } };
  assert.deepEqual(questionOf(asked), { text: 'Ship it?', askedAt: '2025-01-01T00:00:00Z' });
  assert.equal(questionOf({ status: { agent: { progress: 'half' } } }), null);
  assert.equal(questionOf({ status: { agent: { question: { text: '  ' } } } }), null);
  assert.equal(questionOf({ status: {} }), null);
  assert.equal(questionOf(undefined), null);
});

test('the checkout of a session: a branch, or a readonly one at its head, or none', () => {
  const project = { spec: { sessionPrefix: 'shop', defaults: { workspace: { kind: 'clone' } } } };
  const orch = { metadata: { name: 'shop-orchestrator' }, spec: { project: 'shop', role: 'orchestrator' }, status: { workspace: { branch: '', headSha: 'a1b2c3d4e5f6' } } };
  assert.equal(workspaceKindOf(orch, project), 'readonly', "an orchestrator reads: the project's default is its workers'");
  assert.equal(hasBranch(orch, project), false);
  assert.equal(checkoutOf(orch, project), 'readonly checkout at a1b2c3d');
  assert.equal(checkoutOf({ ...orch, status: {} }, project), 'readonly checkout', 'no head yet');
  const none = { metadata: { name: 'n' }, spec: { project: 'shop', workspace: { kind: 'none' } } };
  assert.equal(checkoutOf(none, project), 'no checkout');
  assert.equal(hasBranch(none, project), false);
  const worker = { metadata: { name: 'w' }, spec: { project: 'shop' } };
  assert.equal(workspaceKindOf(worker, project), 'clone');
  assert.equal(workspaceKindOf(worker, undefined), 'worktree');
  assert.equal(workspaceKindOf({ spec: { workspace: 'readonly' } }), 'readonly', 'the string form of earlier versions');
  assert.equal(hasBranch(worker, project), true);
  assert.equal(checkoutOf(worker, project), 'shop/w');
});
