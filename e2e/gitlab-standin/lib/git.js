// The bare repository that plays a GitLab project's remote: the plumbing wrapper of the GitHub
// stand-in, with GitLab as the committer of the merge and squash commits it writes.
'use strict';

const { Git: BaseGit } = require('../../github-standin/lib/git.js');

const GITLAB_IDENTITY = { name: 'GitLab', email: 'noreply@gitlab.example' };

class Git extends BaseGit {
  static COMMITTER = GITLAB_IDENTITY;
  static MERGE_MESSAGE = 'gitlab-standin: merge';

  async deleteBranch(branch, oldSha) {
    const r = await this.run(['update-ref', '-d', `refs/heads/${branch}`, oldSha], { allowCodes: [0, 1, 128] });
    return r.code === 0;
  }

  async mergeBase(a, b) {
    const r = await this.run(['merge-base', a, b], { allowCodes: [0, 1] });
    return r.code === 0 ? r.stdout.trim() : null;
  }

  // Paths changed between the merge base of `base` and `head`, and `head`.
  async diffPaths(base, head) {
    const r = await this.run(['diff', '--name-only', `${base}...${head}`], { allowCodes: [0, 128] });
    return r.stdout.split('\n').filter(Boolean);
  }

  // Commits reachable from `after` and not from `before` (newest first), at most `limit`.
  async commitsBetween(before, after, limit = 20) {
    const range = before ? [`${before}..${after}`] : [after];
    const r = await this.run(['rev-list', `--max-count=${limit}`, ...range], { allowCodes: [0, 128] });
    return r.stdout.split('\n').filter(Boolean);
  }
}

module.exports = { Git, GITLAB_IDENTITY };
