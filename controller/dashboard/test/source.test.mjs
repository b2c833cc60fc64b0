// The line on a session a GitSource manages: which source, and what it keeps of a person's edits.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gitSourceOf, sourceNote } from '../session.js';

test('only a GitSource mark names a source', () => {
  const s = (by) => ({ metadata: { name: 'a', annotations: by === undefined ? {} : { 'ao.dev/managed-by': by } } });
  assert.equal(gitSourceOf(s('gitsource/fleet')), 'fleet');
  assert.equal(gitSourceOf(s('issuesource/bugs')), null, 'an IssueSource undoes no drift');
  assert.equal(gitSourceOf(s('gitsource/')), null);
  assert.equal(gitSourceOf(s(undefined)), null);
  assert.equal(gitSourceOf({ metadata: { name: 'a' } }), null);
});

test('the note names the repository once the source is known', () => {
  const before = sourceNote('fleet', null);
  assert.match(before, /^Managed by GitSource fleet: Stop, Resume and Merge when green are kept until the repository changes them; other edits are undone/);
  const known = sourceNote('fleet', { spec: { url: 'https://example.com/fleet.git', path: 'fleet' } });
  assert.match(known, /^Managed by GitSource fleet \(https:\/\/example\.com\/fleet\.git, fleet\): /);
  assert.match(sourceNote('fleet', { spec: { url: '/srv/fleet.git' } }), /^Managed by GitSource fleet \(\/srv\/fleet\.git\): /);
});
