// Unified diffs as git writes them, parsed into files, hunks and lines with both line numbers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseDiff, unquote } from '../diff.js';

const GIT = `diff --git a/src/main.rs b/src/main.rs
index 1111111..2222222 100644
--- a/src/main.rs
+++ b/src/main.rs
@@ -1,4 +1,5 @@ fn main() {
 fn main() {
-    println!("hello");
+    println!("hello, world");
+    println!("-- not a header");
 }
 
@@ -10,2 +11,2 @@
 a
-b
+c
diff --git a/notes/new.md b/notes/new.md
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/notes/new.md
@@ -0,0 +1,2 @@
+# new
+--- looks like a header
\\ No newline at end of file
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
diff --git a/a.txt b/b.txt
similarity index 100%
rename from a.txt
rename to b.txt
diff --git a/logo.png b/logo.png
Binary files a/logo.png and b/logo.png differ
`;

test('files, their status and counts', () => {
  const files = parseDiff(GIT);
  assert.deepEqual(
    files.map((f) => [f.path, f.oldPath, f.status, f.additions, f.deletions, f.binary]),
    [
      ['src/main.rs', 'src/main.rs', 'modified', 3, 2, false],
      ['notes/new.md', null, 'added', 2, 0, false],
      ['old.txt', 'old.txt', 'deleted', 0, 1, false],
      ['b.txt', 'a.txt', 'renamed', 0, 0, false],
      ['logo.png', 'logo.png', 'modified', 0, 0, true],
    ],
  );
});

test('lines carry the new side numbers of the file as it is now', () => {
  const [main, added] = parseDiff(GIT);
  const [first, second] = main.hunks;
  assert.equal(first.section, 'fn main() {');
  assert.deepEqual(
    first.lines.map((l) => [l.kind, l.oldLine, l.newLine, l.text]),
    [
      ['ctx', 1, 1, 'fn main() {'],
      ['del', 2, undefined, '    println!("hello");'],
      ['add', undefined, 2, '    println!("hello, world");'],
      ['add', undefined, 3, '    println!("-- not a header");'],
      ['ctx', 3, 4, '}'],
      ['ctx', 4, 5, ''],
    ],
  );
  assert.deepEqual(second.lines.map((l) => [l.kind, l.newLine ?? null]), [['ctx', 11], ['del', null], ['add', 12]]);
  assert.deepEqual(
    added.hunks[0].lines.map((l) => [l.kind, l.newLine ?? null, l.text]),
    [['add', 1, '# new'], ['add', 2, '--- looks like a header'], ['note', null, 'No newline at end of file']],
  );
});

test('a plain diff without git headers, and an empty one', () => {
  const plain = '--- a/x.txt\t2025-01-01\n+++ b/x.txt\t2025-01-02\n@@ -1 +1 @@\n-a\n+b\n--- a/y.txt\n+++ b/y.txt\n@@ -5,0 +6 @@\n+z\n';
  const files = parseDiff(plain);
  assert.deepEqual(files.map((f) => [f.path, f.additions, f.deletions]), [['x.txt', 1, 1], ['y.txt', 1, 0]]);
  assert.equal(files[1].hunks[0].lines[0].newLine, 6);
  assert.deepEqual(parseDiff(''), []);
  assert.deepEqual(parseDiff(undefined), []);
});

test('quoted paths and paths with spaces', () => {
  assert.equal(unquote('"a/tab\\there"'), 'a/tab\there');
  assert.equal(unquote('"b/caf\\303\\251.txt"'), 'b/café.txt');
  assert.equal(unquote('plain'), 'plain');
  const spaced = parseDiff('diff --git a/my file.txt b/my file.txt\n--- a/my file.txt\n+++ b/my file.txt\n@@ -1 +1 @@\n-x\n+y\n');
  assert.equal(spaced[0].path, 'my file.txt');
  const quoted = parseDiff('diff --git "a/caf\\303\\251" "b/caf\\303\\251"\nnew file mode 100644\n--- /dev/null\n+++ "b/caf\\303\\251"\n@@ -0,0 +1 @@\n+x\n');
  assert.equal(quoted[0].path, 'café');
  assert.equal(quoted[0].status, 'added');
});

test('CRLF line ends are not part of the text', () => {
  const [f] = parseDiff('--- a/w.txt\r\n+++ b/w.txt\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n');
  assert.deepEqual(f.hunks[0].lines.map((l) => l.text), ['a', 'b']);
});
