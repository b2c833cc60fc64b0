'use strict';
// The bare repository that plays the GitHub remote: branch heads, mergeability, diff statistics
// and real merges (merge commit, squash, rebase) with plumbing commands only.

const { execFile } = require('node:child_process');

const GITHUB_IDENTITY = { name: 'GitHub', email: 'noreply@github.com' };

function run(gitDir, args, { env = {}, input, allowCodes = [0] } = {}) {
  return new Promise((resolve, reject) => {
    const child = execFile(
      'git',
      ['--git-dir', gitDir, ...args],
      { env: { ...process.env, GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C', ...env }, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        if (!allowCodes.includes(code)) {
          const e = new Error(`git ${args.join(' ')} failed (${code}): ${String(stderr).trim()}`);
          e.code = code;
          return reject(e);
        }
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
    if (input !== undefined) child.stdin.end(input);
  });
}

class Git {
  // Who commits the merge and squash commits (a subclass names its forge), and the reflog
  // message of a merge.
  static COMMITTER = GITHUB_IDENTITY;
  static MERGE_MESSAGE = 'github-standin: merge pull request';

  constructor(gitDir) {
    this.gitDir = gitDir;
    this.cache = new Map(); // memoised answers keyed by immutable inputs (SHAs)
  }

  run(args, opts) {
    return run(this.gitDir, args, opts);
  }

  async memo(key, fn) {
    if (this.cache.has(key)) return this.cache.get(key);
    const value = await fn();
    if (this.cache.size > 5000) this.cache.clear();
    this.cache.set(key, value);
    return value;
  }

  // The SHA of refs/heads/BRANCH, or null when the branch does not exist.
  async branchSha(branch) {
    const r = await this.run(['rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`], { allowCodes: [0, 1, 128] });
    return r.code === 0 ? r.stdout.trim() : null;
  }

  // A full commit SHA for a SHA, branch or tag name, or null.
  async resolve(ref) {
    if (/^[0-9a-f]{40}$/.test(ref)) {
      const r = await this.run(['cat-file', '-e', `${ref}^{commit}`], { allowCodes: [0, 1, 128] });
      return r.code === 0 ? ref : null;
    }
    for (const candidate of [`refs/heads/${ref}`, `refs/tags/${ref}`, ref]) {
      if (candidate.startsWith('-')) return null;
      const r = await this.run(['rev-parse', '--verify', '--quiet', `${candidate}^{commit}`], { allowCodes: [0, 1, 128] });
      if (r.code === 0) return r.stdout.trim();
    }
    return null;
  }

  async defaultBranch() {
    const r = await this.run(['symbolic-ref', '--short', 'HEAD'], { allowCodes: [0, 1, 128] });
    return r.code === 0 ? r.stdout.trim() : 'main';
  }

  async branches() {
    const r = await this.run(['for-each-ref', '--format=%(refname:short) %(objectname)', 'refs/heads/']);
    return r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const i = l.lastIndexOf(' ');
        return { name: l.slice(0, i), sha: l.slice(i + 1) };
      });
  }

  async isAncestor(a, b) {
    const r = await this.run(['merge-base', '--is-ancestor', a, b], { allowCodes: [0, 1] });
    return r.code === 0;
  }

  // {clean, tree, conflicts} of merging `head` into `base` (git merge-tree --write-tree).
  mergeTree(base, head) {
    return this.memo(`merge-tree ${base} ${head}`, async () => {
      const r = await this.run(['merge-tree', '--write-tree', '--name-only', '--no-messages', base, head], { allowCodes: [0, 1] });
      const lines = r.stdout.split('\n').filter(Boolean);
      return { clean: r.code === 0, tree: lines[0], conflicts: r.code === 0 ? [] : lines.slice(1) };
    });
  }

  // Commits, additions, deletions and changed files of `head` relative to `base` (three-dot).
  stats(base, head) {
    return this.memo(`stats ${base} ${head}`, async () => {
      const count = await this.run(['rev-list', '--count', `${base}..${head}`]);
      const diff = await this.run(['diff', '--numstat', `${base}...${head}`], { allowCodes: [0, 128] });
      let additions = 0;
      let deletions = 0;
      let changedFiles = 0;
      for (const line of diff.stdout.split('\n').filter(Boolean)) {
        const [a, d] = line.split('\t');
        additions += Number(a) || 0;
        deletions += Number(d) || 0;
        changedFiles += 1;
      }
      return { commits: Number(count.stdout.trim()) || 0, additions, deletions, changedFiles };
    });
  }

  // Author, committer and message of a commit.
  commitInfo(sha) {
    return this.memo(`info ${sha}`, async () => {
      const sep = '\x1f';
      const r = await this.run(['log', '-1', `--format=%an${sep}%ae${sep}%aI${sep}%cn${sep}%ce${sep}%cI${sep}%T${sep}%P${sep}%B`, sha]);
      const [an, ae, ad, cn, ce, cd, tree, parents, ...message] = r.stdout.split(sep);
      return {
        sha,
        tree,
        parents: parents.split(' ').filter(Boolean),
        author: { name: an, email: ae, date: ad },
        committer: { name: cn, email: ce, date: cd },
        message: message.join(sep).replace(/\n+$/, ''),
      };
    });
  }

  // The files a commit added, removed and modified against its first parent (all added for a
  // root commit), as a `push` payload lists them.
  changedFiles(sha) {
    return this.memo(`files ${sha}`, async () => {
      const r = await this.run(['diff-tree', '--no-commit-id', '-r', '--name-status', '--root', '-m', '--first-parent', sha]);
      const files = { added: [], removed: [], modified: [] };
      for (const line of r.stdout.split('\n').filter(Boolean)) {
        const [status, ...paths] = line.split('\t');
        const kind = status[0];
        if (kind === 'A' || kind === 'C') files.added.push(paths[paths.length - 1]);
        else if (kind === 'D') files.removed.push(paths[0]);
        else if (kind === 'R') {
          files.removed.push(paths[0]);
          files.added.push(paths[1]);
        } else files.modified.push(paths[paths.length - 1]);
      }
      return files;
    });
  }

  // The hunk header and lines of `git diff base...head -- path` around new-file `line`.
  async diffHunk(base, head, path, line) {
    const r = await this.run(['diff', '--unified=3', `${base}...${head}`, '--', path], { allowCodes: [0, 128] });
    const hunks = [];
    let current = null;
    for (const l of r.stdout.split('\n')) {
      const m = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@/.exec(l);
      if (m) {
        current = { start: Number(m[1]), len: m[2] === undefined ? 1 : Number(m[2]), lines: [l] };
        hunks.push(current);
      } else if (current && /^[ +\-\\]/.test(l)) {
        current.lines.push(l);
      }
    }
    const hunk = hunks.find((h) => line >= h.start && line < h.start + Math.max(h.len, 1)) || hunks[0];
    return hunk ? hunk.lines.join('\n') : null;
  }

  async commitTree(tree, parents, message, author) {
    const args = ['commit-tree', tree];
    for (const p of parents) args.push('-p', p);
    const env = {
      GIT_AUTHOR_NAME: author.name,
      GIT_AUTHOR_EMAIL: author.email,
      GIT_COMMITTER_NAME: this.constructor.COMMITTER.name,
      GIT_COMMITTER_EMAIL: this.constructor.COMMITTER.email,
    };
    if (author.date) env.GIT_AUTHOR_DATE = author.date;
    const r = await this.run(args, { env, input: message });
    return r.stdout.trim();
  }

  // Moves refs/heads/BRANCH from `oldSha` to `newSha`; false when it had moved meanwhile.
  async updateBranch(branch, newSha, oldSha) {
    const r = await this.run(['update-ref', '-m', this.constructor.MERGE_MESSAGE, `refs/heads/${branch}`, newSha, oldSha], {
      allowCodes: [0, 1, 128],
    });
    return r.code === 0;
  }

  // Merges `head` into `base` with GitHub's methods and returns the new base SHA, or
  // {conflict: [paths]} when the changes do not apply. Nothing is written to refs here.
  async merge({ base, head, method, title, message, author }) {
    if (method === 'rebase') {
      if (await this.isAncestor(base, head)) return { sha: head, fastForward: true };
      const list = await this.run(['rev-list', '--reverse', '--no-merges', `${base}..${head}`]);
      let current = base;
      for (const sha of list.stdout.split('\n').filter(Boolean)) {
        const info = await this.commitInfo(sha);
        const parent = info.parents[0];
        const r = await this.run(['merge-tree', '--write-tree', '--name-only', '--no-messages', `--merge-base=${parent}`, current, sha], {
          allowCodes: [0, 1],
        });
        const lines = r.stdout.split('\n').filter(Boolean);
        if (r.code !== 0) return { conflict: lines.slice(1) };
        current = await this.commitTree(lines[0], [current], `${info.message}\n`, info.author);
      }
      return { sha: current, fastForward: false };
    }
    const mt = await this.mergeTree(base, head);
    if (!mt.clean) return { conflict: mt.conflicts };
    const text = message ? `${title}\n\n${message}\n` : `${title}\n`;
    const parents = method === 'squash' ? [base] : [base, head];
    return { sha: await this.commitTree(mt.tree, parents, text, author), fastForward: false };
  }
}

module.exports = { Git, GITHUB_IDENTITY };
