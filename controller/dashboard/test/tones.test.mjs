// The colour family of phases and conditions: bad news reads as bad news, in the terms of each.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { toneOf } from '../overview.js';
import { conditionTone } from '../session.js';

test('phases that need a person are the alarming ones', () => {
  for (const p of ['NeedsInput', 'Stuck', 'Failed', 'CIFailed']) assert.equal(toneOf(p), 'bad', p);
  for (const p of ['ChangesRequested', 'RateLimited', 'Queued']) assert.equal(toneOf(p), 'warn', p);
  for (const p of ['Mergeable', 'Approved', 'Merged']) assert.equal(toneOf(p), 'good', p);
  for (const p of ['Working', 'Provisioning', 'Pending', 'PROpen']) assert.equal(toneOf(p), 'busy', p);
  for (const p of ['Idle', 'Stopped', 'Closed', 'Terminating']) assert.equal(toneOf(p), 'quiet', p);
});

test('a condition is good or bad news by what it says', () => {
  const c = (type, status) => conditionTone({ type, status });
  assert.equal(c('Ready', 'True'), 'good');
  assert.equal(c('Ready', 'False'), 'bad');
  assert.equal(c('Stalled', 'True'), 'bad', 'a stalled session is bad news');
  assert.equal(c('Stalled', 'False'), 'good');
  assert.equal(c('Overlapping', 'True'), 'bad');
  assert.equal(c('AgentActive', 'False'), 'quiet', 'an idle agent is no fault');
  assert.equal(c('Merged', 'False'), 'quiet');
  assert.equal(c('ChecksPassed', 'False'), 'bad');
  assert.equal(c('ChecksPassed', 'Unknown'), 'quiet');
});
