// The browser notifications' once-only rule: what makes an episode, and which episodes are news.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AT_ONCE, decide, episodeOf } from '../notify.js';

const session = (name, status = {}, uid = `uid-${name}`) => ({ metadata: { name, uid }, spec: { project: 'p' }, status });
const asking = (name, since = '2026-12-01T10:00:00Z') =>
  session(name, { phase: 'NeedsInput', activity: { state: 'needs-input', since, evidence: 'Do you want to proceed?' } });
const green = (name, headSha = 'a1') =>
  session(name, { phase: 'PROpen', pullRequest: { number: 7, url: 'u', state: 'open', headSha, checks: 'passing', review: 'approved' } });

test('only needs-input, stuck and ready-to-merge are episodes', () => {
  assert.equal(episodeOf(session('w', { phase: 'Working', activity: { state: 'working', since: 't' } })), null);
  assert.equal(episodeOf(session('c', { phase: 'CIFailed' })), null);
  assert.equal(episodeOf(asking('a')).group, 'needs-input');
  assert.equal(episodeOf(session('s', { phase: 'Stuck', activity: { state: 'stuck', since: 't' } })).group, 'stuck');
  assert.equal(episodeOf(green('g')).group, 'ready-to-merge');
  assert.match(episodeOf(green('g')).detail, /#7 is approved and green/);
});

test('an episode keeps its key while it lasts and a new one gets a new key', () => {
  assert.equal(episodeOf(asking('a')).key, episodeOf(asking('a')).key);
  assert.notEqual(episodeOf(asking('a')).key, episodeOf(asking('a', '2026-12-01T11:00:00Z')).key);
  assert.notEqual(episodeOf(green('g', 'a1')).key, episodeOf(green('g', 'b2')).key);
  // A session deleted and made again under the same name is another session.
  assert.notEqual(episodeOf(session('a', asking('a').status, 'u1')).key, episodeOf(session('a', asking('a').status, 'u2')).key);
});

test('an episode is told once, whatever tab or reload hears it again', () => {
  const e = [episodeOf(asking('a'))];
  const first = decide(e, {}, 1000);
  assert.equal(first.show.length, 1);
  assert.equal(first.show[0].title, 'a needs input');
  assert.equal(first.show[0].body, 'Do you want to proceed?');
  assert.equal(first.show[0].session, 'a');
  const again = decide(e, first.told, 2000);
  assert.deepEqual(again.show, []);
  assert.equal(again.told[e[0].key], 1000, 'the time it was told stays');
});

test(`past ${AT_ONCE} new episodes at once, one notification sums them up`, () => {
  const many = ['a', 'b', 'c', 'd', 'e'].map((n) => episodeOf(asking(n)));
  const d = decide(many, {}, 1);
  assert.equal(d.show.length, 1);
  assert.equal(d.show[0].title, '5 sessions need you');
  assert.equal(d.show[0].body, 'a, b, c, d, e');
  assert.equal(Object.keys(d.told).length, 5);
  const few = decide(many.slice(0, AT_ONCE), {}, 1);
  assert.equal(few.show.length, AT_ONCE);
});

test('the record forgets week-old episodes and stays bounded', () => {
  const week = 7 * 24 * 3600 * 1000;
  const d = decide([episodeOf(asking('new'))], { old: 0, recent: week }, week + 1);
  assert.deepEqual(Object.keys(d.told).sort(), [episodeOf(asking('new')).key, 'recent'].sort());
  const full = Object.fromEntries(Array.from({ length: 2500 }, (_, i) => [`k${i}`, 10 + i]));
  const kept = decide([episodeOf(asking('x'))], full, 5000).told;
  assert.equal(Object.keys(kept).length, 2000);
  assert.ok('k2499' in kept && !('k0' in kept), 'the newest are kept');
});
