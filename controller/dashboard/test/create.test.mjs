// The Session the new-session form posts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sessionFrom, AGENTS, RUNTIMES } from '../create.js';

const form = (over) => ({ project: 'demo', agent: '', command: '', runtime: '', name: '', prompt: 'Fix it', ...over });

test('the fields the person left empty are left to the project', () => {
  assert.deepEqual(sessionFrom(form()), {
    apiVersion: 'ao.dev/v1alpha1',
    kind: 'Session',
    metadata: { generateName: 'demo-' },
    spec: { project: 'demo', prompt: 'Fix it' },
  });
});

test('a name, a built-in agent and a runtime', () => {
  const s = sessionFrom(form({ name: ' fix-login ', agent: 'aider', runtime: 'process' }));
  assert.deepEqual(s.metadata, { name: 'fix-login' });
  assert.deepEqual(s.spec, { project: 'demo', agent: 'aider', runtime: 'process', prompt: 'Fix it' });
});

test('a command line becomes the argument vector of a custom agent', () => {
  const s = sessionFrom(form({ agent: 'command', command: './scripts/agent.sh {promptFile}', prompt: '  ' }));
  assert.deepEqual(s.spec, { project: 'demo', agent: { command: ['./scripts/agent.sh', '{promptFile}'] } });
});

test('the choices', () => {
  assert.equal(AGENTS.length, new Set(AGENTS).size);
  assert.ok(AGENTS.includes('claude-code') && AGENTS.includes('codex'));
  assert.deepEqual(RUNTIMES, ['tmux', 'process', 'docker']);
});
