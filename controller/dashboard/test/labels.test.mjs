// Label selectors parsed and matched in the page as the API reads them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseSelector, matches } from '../labels.js';

const select = (text, labels) => {
  const p = parseSelector(text);
  assert.equal(p.error, undefined, `${text}: ${p.error}`);
  return matches(p.requirements, labels);
};

test('the empty selector matches everything', () => {
  assert.ok(select('', undefined));
  assert.ok(select('   ', { a: 'b' }));
});

test('equality, inequality and existence', () => {
  const web = { team: 'web', tier: 'front' };
  assert.ok(select('team=web', web));
  assert.ok(select('team==web', web));
  assert.ok(!select('team=docs', web));
  assert.ok(select('team!=docs', web));
  assert.ok(select('team!=docs', undefined), 'an absent label is not equal');
  assert.ok(!select('team!=web', web));
  assert.ok(select('tier', web));
  assert.ok(!select('owner', web));
  assert.ok(select('!owner', web));
  assert.ok(!select('!team', web));
  assert.ok(select('team=web, tier=front', web));
  assert.ok(!select('team=web,tier=back', web));
  assert.ok(select('team=', { team: '' }));
});

test('set membership', () => {
  assert.ok(select('team in (web, docs)', { team: 'docs' }));
  assert.ok(!select('team in (web,docs)', { team: 'ops' }));
  assert.ok(!select('team in (web)', {}));
  assert.ok(select('team notin (web)', {}));
  assert.ok(select('team notin (web,docs)', { team: 'ops' }));
  assert.ok(!select('team notin (web)', { team: 'web' }));
  assert.ok(select('app.kubernetes.io/part-of=demo,team in (a,b)', { 'app.kubernetes.io/part-of': 'demo', team: 'b' }));
});

test('a malformed selector says what is wrong', () => {
  for (const bad of ['team in web', 'team in (web', '=web', 'a b', '!', 'team in ()', 'a,,b']) {
    const p = parseSelector(bad);
    assert.ok(p.error, `${bad} is refused`);
    assert.equal(p.requirements, undefined);
  }
  assert.match(parseSelector('team in (web').error, /expected/);
});
