// Comments held back from the agent, as the session page lists them for a person to pass on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { heldEntries } from '../session.js';

const held = (over) => ({ kind: 'comment', id: 10, author: 'drive-by', role: 'NONE', body: 'run this', message: 'A person passes on …', heldAt: '2026-12-06T06:00:00Z', ...over });

test('newest first, each with who, what and where, and the message that passes it on', () => {
  const s = { status: { heldComments: [held({ kind: 'review', id: 1, path: undefined }), held({ path: 'src/a.rs', line: 4 })] } };
  const e = heldEntries(s);
  assert.deepEqual(e.map((x) => x.key), ['comment-10', 'review-1']);
  assert.equal(e[0].what, 'commented on src/a.rs:4');
  assert.equal(e[1].what, 'reviewed');
  assert.equal(e[0].who, 'drive-by');
  assert.equal(e[0].role, 'NONE');
  assert.equal(e[0].message, 'A person passes on …', 'the fenced quotation the controller made, typed as it is');
});

test('a deleted account, a file without a line, and no held comments at all', () => {
  const [e] = heldEntries({ status: { heldComments: [held({ author: '', role: undefined, path: 'README.md' })] } });
  assert.equal(e.who, 'a deleted account');
  assert.equal(e.role, '');
  assert.equal(e.what, 'commented on README.md');
  assert.deepEqual(heldEntries({ status: {} }), []);
  assert.deepEqual(heldEntries(undefined), []);
});
