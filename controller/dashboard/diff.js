// Parses a unified diff (what `git diff` writes, and what a session's `/diff` answers) into files,
// hunks and lines with their line numbers on both sides, so the session page renders it and a
// click on a line names `path:line` of the file as the agent has it. Pure, checked by
// test/diff.test.mjs.

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$/;
const ESCAPES = { n: '\n', t: '\t', r: '\r', '"': '"', '\\': '\\', a: '\x07', b: '\b', f: '\f', v: '\v' };

/** A path as git writes it: bare, or in double quotes with C escapes (octal bytes are UTF-8). */
export function unquote(path) {
  if (!path.startsWith('"') || !path.endsWith('"') || path.length < 2) return path;
  const bytes = [];
  const body = path.slice(1, -1);
  const encoder = new TextEncoder();
  for (let i = 0; i < body.length; i += 1) {
    const c = body[i];
    if (c !== '\\') {
      bytes.push(...encoder.encode(c));
      continue;
    }
    const n = body[i + 1];
    if (/[0-7]/.test(n ?? '')) {
      const oct = body.slice(i + 1, i + 4).match(/^[0-7]{1,3}/)[0];
      bytes.push(parseInt(oct, 8));
      i += oct.length;
    } else {
      bytes.push(...encoder.encode(ESCAPES[n] ?? n ?? ''));
      i += 1;
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/** The path of a `---`/`+++` line's name: null for /dev/null, else without its `a/` or `b/`. */
function sidePath(name) {
  let p = name;
  // Plain diff(1) adds a tab and a timestamp after the name.
  if (!p.startsWith('"') && p.includes('\t')) p = p.slice(0, p.indexOf('\t'));
  if (p === '/dev/null') return null;
  p = unquote(p);
  return p.startsWith('a/') || p.startsWith('b/') ? p.slice(2) : p;
}

/** The path of a `diff --git a/X b/Y` header, when the two sides can be told apart. */
function headerPaths(rest) {
  if (rest.startsWith('"')) {
    const m = rest.match(/^("(?:[^"\\]|\\.)*") (.*)$/);
    if (m) return [sidePath(m[1]), sidePath(m[2])];
  }
  const n = (rest.length - 5) / 2;
  if (Number.isInteger(n) && rest.startsWith('a/') && rest.slice(2, 2 + n) === rest.slice(5 + n)) {
    return [rest.slice(2, 2 + n), rest.slice(5 + n)];
  }
  const at = rest.lastIndexOf(' b/');
  if (at > 0) return [sidePath(rest.slice(0, at)), sidePath(rest.slice(at + 1))];
  return [rest, rest];
}

function newFile(oldPath, path) {
  return { path, oldPath, status: 'modified', binary: false, additions: 0, deletions: 0, hunks: [] };
}

/**
 * The files of a unified diff, in order: `{ path, oldPath, status, binary, additions, deletions,
 * hunks }`; `status` is `added`, `deleted`, `renamed` or `modified`. Each hunk is `{ header,
 * oldStart, oldCount, newStart, newCount, section, lines }` and each line `{ kind, text, oldLine,
 * newLine }` with kind `add`, `del`, `ctx` or `note` (`\ No newline at end of file`); `newLine`
 * is set on `add` and `ctx` lines, `oldLine` on `del` and `ctx` lines.
 */
export function parseDiff(text) {
  const files = [];
  let file = null;
  let hunk = null;
  let oldLeft = 0;
  let newLeft = 0;
  let oldLine = 0;
  let newLine = 0;
  const lines = (text ?? '').split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  for (const raw of lines) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (hunk && (oldLeft > 0 || newLeft > 0)) {
      const mark = line[0];
      const body = line.slice(1);
      if (mark === '+' && newLeft > 0) {
        hunk.lines.push({ kind: 'add', text: body, newLine });
        newLine += 1;
        newLeft -= 1;
        file.additions += 1;
        continue;
      }
      if (mark === '-' && oldLeft > 0) {
        hunk.lines.push({ kind: 'del', text: body, oldLine });
        oldLine += 1;
        oldLeft -= 1;
        file.deletions += 1;
        continue;
      }
      if ((mark === ' ' || line === '') && oldLeft > 0 && newLeft > 0) {
        hunk.lines.push({ kind: 'ctx', text: body, oldLine, newLine });
        oldLine += 1;
        newLine += 1;
        oldLeft -= 1;
        newLeft -= 1;
        continue;
      }
      if (mark === '\\') {
        hunk.lines.push({ kind: 'note', text: line.slice(2) });
        continue;
      }
      // A line that does not fit the hunk's counts ends it.
      hunk = null;
    }
    if (line.startsWith('\\') && hunk) {
      hunk.lines.push({ kind: 'note', text: line.slice(2) });
      continue;
    }
    if (line.startsWith('diff --git ')) {
      const [a, b] = headerPaths(line.slice('diff --git '.length));
      file = newFile(a, b);
      files.push(file);
      hunk = null;
      continue;
    }
    if (line.startsWith('--- ') && (!file || file.hunks.length > 0 || !file.sawOld)) {
      // A plain diff without `diff --git` lines starts each file here.
      if (!file || file.hunks.length > 0) {
        file = newFile(null, null);
        files.push(file);
      }
      file.sawOld = true;
      file.oldPath = sidePath(line.slice(4));
      if (file.oldPath === null) file.status = 'added';
      continue;
    }
    if (line.startsWith('+++ ') && file && file.hunks.length === 0) {
      const p = sidePath(line.slice(4));
      if (p === null) {
        file.status = 'deleted';
        file.path = file.oldPath;
      } else {
        file.path = p;
      }
      continue;
    }
    const m = line.match(HUNK);
    if (m && file) {
      hunk = {
        header: line,
        oldStart: Number(m[1]),
        oldCount: m[2] === undefined ? 1 : Number(m[2]),
        newStart: Number(m[3]),
        newCount: m[4] === undefined ? 1 : Number(m[4]),
        section: m[5] ?? '',
        lines: [],
      };
      file.hunks.push(hunk);
      oldLeft = hunk.oldCount;
      newLeft = hunk.newCount;
      oldLine = hunk.oldStart;
      newLine = hunk.newStart;
      continue;
    }
    if (!file) continue;
    if (line.startsWith('new file mode')) file.status = 'added';
    else if (line.startsWith('deleted file mode')) file.status = 'deleted';
    else if (line.startsWith('rename from ')) {
      file.oldPath = unquote(line.slice('rename from '.length));
      file.status = 'renamed';
    } else if (line.startsWith('rename to ')) {
      file.path = unquote(line.slice('rename to '.length));
      file.status = 'renamed';
    } else if (line.startsWith('Binary files ') || line === 'GIT binary patch') file.binary = true;
  }
  for (const f of files) {
    delete f.sawOld;
    if (f.path === null) f.path = f.oldPath;
    if (f.oldPath === null && f.status !== 'added') f.oldPath = f.path;
  }
  return files;
}
