'use strict';
// GitHub's JSON shapes, built from the stand-in's state: users, repositories, pull requests,
// check runs, statuses, reviews, review comments, issues and webhook payloads. Every object is
// complete (all required fields of the published schema, realistic URLs, node IDs, timestamps);
// the server validates each one before it leaves.

const ACTIONS_APP = {
  id: 15368,
  slug: 'github-actions',
  node_id: 'MDM6QXBwMTUzNjg=',
  name: 'GitHub Actions',
  description: 'Automate your workflow from idea to production',
  external_url: 'https://help.github.com/en/actions',
  owner: { login: 'github', id: 9919, type: 'Organization' },
  created_at: '2018-07-30T09:30:17Z',
  updated_at: '2024-04-10T20:33:16Z',
  permissions: { actions: 'write', checks: 'write', contents: 'write', metadata: 'read', pull_requests: 'write', statuses: 'write' },
  events: ['branch_protection_rule', 'check_run', 'check_suite', 'pull_request', 'push', 'status', 'workflow_dispatch'],
};

function iso(ms) {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function nodeId(prefix, id) {
  // Shaped like GitHub's newer global IDs (prefix + base64 of a packed number); opaque to clients.
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(id));
  return `${prefix}_kwDO${b.toString('base64').replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_')}`;
}

// A stable numeric ID for a login (GitHub user IDs are positive integers).
function userId(login) {
  let h = 2166136261;
  for (const c of login) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return 1000 + (h % 90000000);
}

class Render {
  // api: base URL of the REST API as clients see it ("http://127.0.0.1:P"); html: the web UI base.
  constructor({ api, html }) {
    this.api = api.replace(/\/$/, '');
    this.html = html.replace(/\/$/, '');
    this.htmlHost = new URL(this.html).host;
  }

  user(login, { type } = {}) {
    const { api, html } = this;
    const id = userId(login);
    const kind = type || (login.endsWith('[bot]') ? 'Bot' : 'User');
    const u = `${api}/users/${encodeURIComponent(login)}`;
    return {
      login,
      id,
      node_id: nodeId(kind === 'Organization' ? 'O' : kind === 'Bot' ? 'BOT' : 'U', id),
      avatar_url: `https://avatars.githubusercontent.com/u/${id}?v=4`,
      gravatar_id: '',
      url: u,
      html_url: kind === 'Bot' ? `${html}/apps/${login.replace(/\[bot\]$/, '')}` : `${html}/${login}`,
      followers_url: `${u}/followers`,
      following_url: `${u}/following{/other_user}`,
      gists_url: `${u}/gists{/gist_id}`,
      starred_url: `${u}/starred{/owner}{/repo}`,
      subscriptions_url: `${u}/subscriptions`,
      organizations_url: `${u}/orgs`,
      repos_url: `${u}/repos`,
      events_url: `${u}/events{/privacy}`,
      received_events_url: `${u}/received_events`,
      type: kind,
      user_view_type: 'public',
      site_admin: false,
    };
  }

  // The authenticated user as `GET /user` shows it to a token with the `user` scope (GitHub's
  // `private-user` shape: the public profile plus private counts and the plan).
  privateUser(login, { createdAt }) {
    const base = this.user(login);
    const created = iso(createdAt);
    return {
      ...base,
      user_view_type: 'private',
      name: null,
      company: null,
      blog: '',
      location: null,
      email: null,
      notification_email: null,
      hireable: null,
      bio: null,
      twitter_username: null,
      public_repos: 1,
      public_gists: 0,
      followers: 0,
      following: 0,
      created_at: created,
      updated_at: created,
      private_gists: 0,
      total_private_repos: 0,
      owned_private_repos: 0,
      disk_usage: 0,
      collaborators: 0,
      two_factor_authentication: true,
      plan: { name: 'free', space: 976562499, collaborators: 0, private_repos: 10000 },
    };
  }

  app(slug) {
    const a =
      slug === ACTIONS_APP.slug
        ? ACTIONS_APP
        : {
            ...ACTIONS_APP,
            id: userId(`app:${slug}`),
            slug,
            node_id: nodeId('A', userId(`app:${slug}`)),
            name: slug,
            description: `The ${slug} CI service`,
            external_url: `https://${slug}.example.com`,
            owner: { login: slug, id: userId(slug), type: 'Organization' },
            permissions: { checks: 'write', metadata: 'read', statuses: 'write' },
            events: ['check_run', 'check_suite', 'pull_request', 'push'],
          };
    return {
      id: a.id,
      slug: a.slug,
      client_id: `Iv1.${a.id.toString(16).padStart(16, '0')}`,
      node_id: a.node_id,
      owner: this.user(a.owner.login, { type: a.owner.type }),
      name: a.name,
      description: a.description,
      external_url: a.external_url,
      html_url: `${this.html}/apps/${a.slug}`,
      created_at: a.created_at,
      updated_at: a.updated_at,
      permissions: a.permissions,
      events: a.events,
    };
  }

  // The repository object (a superset of `repository`, `full-repository` and the webhook shape).
  repo(repo, { full = false } = {}) {
    const { api, html, htmlHost } = this;
    const r = `${api}/repos/${repo.fullName}`;
    const owner = this.user(repo.owner, { type: repo.ownerType });
    const openIssues = [...repo.pulls.values(), ...repo.issues.values()].filter((x) => x.state === 'open').length;
    const obj = {
      id: repo.id,
      node_id: nodeId('R', repo.id),
      name: repo.name,
      full_name: repo.fullName,
      private: repo.private,
      owner,
      html_url: `${html}/${repo.fullName}`,
      description: repo.description,
      fork: false,
      url: r,
      forks_url: `${r}/forks`,
      keys_url: `${r}/keys{/key_id}`,
      collaborators_url: `${r}/collaborators{/collaborator}`,
      teams_url: `${r}/teams`,
      hooks_url: `${r}/hooks`,
      issue_events_url: `${r}/issues/events{/number}`,
      events_url: `${r}/events`,
      assignees_url: `${r}/assignees{/user}`,
      branches_url: `${r}/branches{/branch}`,
      tags_url: `${r}/tags`,
      blobs_url: `${r}/git/blobs{/sha}`,
      git_tags_url: `${r}/git/tags{/sha}`,
      git_refs_url: `${r}/git/refs{/sha}`,
      trees_url: `${r}/git/trees{/sha}`,
      statuses_url: `${r}/statuses/{sha}`,
      languages_url: `${r}/languages`,
      stargazers_url: `${r}/stargazers`,
      contributors_url: `${r}/contributors`,
      subscribers_url: `${r}/subscribers`,
      subscription_url: `${r}/subscription`,
      commits_url: `${r}/commits{/sha}`,
      git_commits_url: `${r}/git/commits{/sha}`,
      comments_url: `${r}/comments{/number}`,
      issue_comment_url: `${r}/issues/comments{/number}`,
      contents_url: `${r}/contents/{+path}`,
      compare_url: `${r}/compare/{base}...{head}`,
      merges_url: `${r}/merges`,
      archive_url: `${r}/{archive_format}{/ref}`,
      downloads_url: `${r}/downloads`,
      issues_url: `${r}/issues{/number}`,
      pulls_url: `${r}/pulls{/number}`,
      milestones_url: `${r}/milestones{/number}`,
      notifications_url: `${r}/notifications{?since,all,participating}`,
      labels_url: `${r}/labels{/name}`,
      releases_url: `${r}/releases{/id}`,
      deployments_url: `${r}/deployments`,
      created_at: iso(repo.createdAt),
      updated_at: iso(repo.updatedAt),
      pushed_at: iso(repo.pushedAt),
      git_url: `git://${htmlHost}/${repo.fullName}.git`,
      ssh_url: `git@${htmlHost}:${repo.fullName}.git`,
      clone_url: `${html}/${repo.fullName}.git`,
      svn_url: `${html}/${repo.fullName}`,
      homepage: null,
      size: 0,
      stargazers_count: 0,
      watchers_count: 0,
      language: null,
      has_issues: true,
      has_projects: true,
      has_downloads: true,
      has_wiki: true,
      has_pages: false,
      has_discussions: false,
      forks_count: 0,
      mirror_url: null,
      archived: false,
      disabled: false,
      open_issues_count: openIssues,
      license: null,
      allow_forking: true,
      is_template: false,
      web_commit_signoff_required: false,
      topics: [],
      visibility: repo.private ? 'private' : 'public',
      forks: 0,
      open_issues: openIssues,
      watchers: 0,
      default_branch: repo.defaultBranch,
    };
    if (full) {
      Object.assign(obj, {
        permissions: { admin: true, maintain: true, push: true, triage: true, pull: true },
        allow_squash_merge: true,
        allow_merge_commit: true,
        allow_rebase_merge: true,
        allow_auto_merge: false,
        delete_branch_on_merge: false,
        allow_update_branch: false,
        use_squash_pr_title_as_default: false,
        squash_merge_commit_title: 'COMMIT_OR_PR_TITLE',
        squash_merge_commit_message: 'COMMIT_MESSAGES',
        merge_commit_title: 'MERGE_MESSAGE',
        merge_commit_message: 'PR_TITLE',
        network_count: 0,
        subscribers_count: 1,
      });
    }
    return obj;
  }

  minimalRepo(repo) {
    return { id: repo.id, url: `${this.api}/repos/${repo.fullName}`, name: repo.name };
  }

  // `view` is the pull request with computed fields (headSha, baseSha, mergeable, stats).
  pull(repo, pr, view) {
    const { api, html } = this;
    const r = `${api}/repos/${repo.fullName}`;
    const self = `${r}/pulls/${pr.number}`;
    const htmlUrl = `${html}/${repo.fullName}/pull/${pr.number}`;
    const repoObj = this.repo(repo);
    const owner = this.user(repo.owner, { type: repo.ownerType });
    const branchRef = (ref, sha) => ({ label: `${repo.owner}:${ref}`, ref, sha, user: owner, repo: repoObj });
    return {
      url: self,
      id: pr.id,
      node_id: nodeId('PR', pr.id),
      html_url: htmlUrl,
      diff_url: `${htmlUrl}.diff`,
      patch_url: `${htmlUrl}.patch`,
      issue_url: `${r}/issues/${pr.number}`,
      commits_url: `${self}/commits`,
      review_comments_url: `${self}/comments`,
      review_comment_url: `${r}/pulls/comments{/number}`,
      comments_url: `${r}/issues/${pr.number}/comments`,
      statuses_url: `${r}/statuses/${view.headSha}`,
      number: pr.number,
      state: pr.state,
      locked: false,
      title: pr.title,
      user: this.user(pr.user),
      body: pr.body,
      labels: (pr.labels || []).map((name) => this.label(repo, name)),
      milestone: null,
      active_lock_reason: null,
      created_at: iso(pr.createdAt),
      updated_at: iso(pr.updatedAt),
      closed_at: pr.closedAt ? iso(pr.closedAt) : null,
      merged_at: pr.mergedAt ? iso(pr.mergedAt) : null,
      merge_commit_sha: pr.mergeCommitSha,
      assignee: null,
      assignees: [],
      requested_reviewers: [],
      requested_teams: [],
      head: branchRef(pr.head.ref, view.headSha),
      base: branchRef(pr.base.ref, view.baseSha),
      _links: {
        self: { href: self },
        html: { href: htmlUrl },
        issue: { href: `${r}/issues/${pr.number}` },
        comments: { href: `${r}/issues/${pr.number}/comments` },
        review_comments: { href: `${self}/comments` },
        review_comment: { href: `${r}/pulls/comments{/number}` },
        commits: { href: `${self}/commits` },
        statuses: { href: `${r}/statuses/${view.headSha}` },
      },
      author_association: this.association(repo, pr.user),
      auto_merge: null,
      draft: pr.draft,
      merged: pr.merged,
      mergeable: view.mergeable,
      rebaseable: view.mergeable,
      mergeable_state: view.mergeableState,
      merged_by: pr.mergedBy ? this.user(pr.mergedBy) : null,
      comments: 0,
      review_comments: view.reviewComments,
      maintainer_can_modify: pr.maintainerCanModify,
      commits: view.stats.commits,
      additions: view.stats.additions,
      deletions: view.stats.deletions,
      changed_files: view.stats.changedFiles,
    };
  }

  // The list shape (`pull-request-simple`): no mergeability or statistics.
  pullSimple(repo, pr, view) {
    const full = this.pull(repo, pr, view);
    for (const k of ['merged', 'mergeable', 'rebaseable', 'mergeable_state', 'merged_by', 'comments', 'review_comments', 'maintainer_can_modify', 'commits', 'additions', 'deletions', 'changed_files']) {
      delete full[k];
    }
    return full;
  }

  // GitHub's `author_association` of `login` in `repo`: OWNER for the repository's owner,
  // COLLABORATOR for one invited to collaborate, CONTRIBUTOR for one who has committed to it (here:
  // authored a merged pull request), NONE otherwise. The stand-in's repositories belong to users,
  // not organizations, so there is no MEMBER.
  association(repo, login) {
    const l = String(login || '').toLowerCase();
    if (l && l === repo.owner.toLowerCase()) return 'OWNER';
    if (repo.collaborators && repo.collaborators.has(l)) return 'COLLABORATOR';
    for (const pr of repo.pulls ? repo.pulls.values() : []) {
      if (pr.merged && String(pr.user).toLowerCase() === l) return 'CONTRIBUTOR';
    }
    return 'NONE';
  }

  // The pull requests a check run is attached to (open ones whose head is its SHA).
  pullMinimal(repo, pr, view) {
    const mini = this.minimalRepo(repo);
    return {
      url: `${this.api}/repos/${repo.fullName}/pulls/${pr.number}`,
      id: pr.id,
      number: pr.number,
      head: { ref: pr.head.ref, sha: view.headSha, repo: mini },
      base: { ref: pr.base.ref, sha: view.baseSha, repo: mini },
    };
  }

  checkRun(repo, run, pulls) {
    const r = `${this.api}/repos/${repo.fullName}`;
    const htmlUrl =
      run.app === ACTIONS_APP.slug
        ? `${this.html}/${repo.fullName}/actions/runs/${run.runId}/job/${run.id}`
        : `${this.html}/${repo.fullName}/runs/${run.id}`;
    return {
      id: run.id,
      name: run.name,
      node_id: nodeId('CR', run.id),
      head_sha: run.headSha,
      external_id: run.externalId,
      url: `${r}/check-runs/${run.id}`,
      html_url: htmlUrl,
      details_url: run.detailsUrl || htmlUrl,
      status: run.status,
      conclusion: run.status === 'completed' ? run.conclusion : null,
      started_at: iso(run.startedAt),
      completed_at: run.completedAt ? iso(run.completedAt) : null,
      output: {
        title: run.output.title,
        summary: run.output.summary,
        text: run.output.text,
        annotations_count: 0,
        annotations_url: `${r}/check-runs/${run.id}/annotations`,
      },
      check_suite: { id: run.checkSuiteId },
      app: this.app(run.app),
      pull_requests: pulls,
    };
  }

  status(repo, s) {
    return {
      url: `${this.api}/repos/${repo.fullName}/statuses/${s.sha}`,
      avatar_url: `https://avatars.githubusercontent.com/u/${userId(s.creator)}?v=4`,
      id: s.id,
      node_id: nodeId('SC', s.id),
      state: s.state,
      description: s.description,
      target_url: s.targetUrl,
      context: s.context,
      created_at: iso(s.createdAt),
      updated_at: iso(s.updatedAt),
    };
  }

  statusFull(repo, s) {
    return { ...this.status(repo, s), creator: this.user(s.creator) };
  }

  combinedStatus(repo, sha, statuses, totalCount) {
    const r = `${this.api}/repos/${repo.fullName}`;
    const repoObj = this.repo(repo);
    return {
      state: combinedState(statuses),
      statuses: statuses.map((s) => this.status(repo, s)),
      sha,
      total_count: totalCount,
      repository: repoObj,
      commit_url: `${r}/commits/${sha}`,
      url: `${r}/commits/${sha}/status`,
    };
  }

  review(repo, rv) {
    const r = `${this.api}/repos/${repo.fullName}`;
    const htmlUrl = `${this.html}/${repo.fullName}/pull/${rv.number}#pullrequestreview-${rv.id}`;
    return {
      id: rv.id,
      node_id: nodeId('PRR', rv.id),
      user: this.user(rv.user),
      body: rv.body,
      state: rv.state,
      html_url: htmlUrl,
      pull_request_url: `${r}/pulls/${rv.number}`,
      author_association: this.association(repo, rv.user),
      _links: { html: { href: htmlUrl }, pull_request: { href: `${r}/pulls/${rv.number}` } },
      submitted_at: iso(rv.submittedAt),
      commit_id: rv.commitId,
    };
  }

  reviewComment(repo, c) {
    const r = `${this.api}/repos/${repo.fullName}`;
    const self = `${r}/pulls/comments/${c.id}`;
    const htmlUrl = `${this.html}/${repo.fullName}/pull/${c.number}#discussion_r${c.id}`;
    const obj = {
      url: self,
      pull_request_review_id: c.reviewId,
      id: c.id,
      node_id: nodeId('PRRC', c.id),
      diff_hunk: c.diffHunk,
      path: c.path,
      position: c.line,
      original_position: c.line,
      commit_id: c.commitId,
      original_commit_id: c.commitId,
      user: this.user(c.user),
      body: c.body,
      created_at: iso(c.createdAt),
      updated_at: iso(c.updatedAt),
      html_url: htmlUrl,
      pull_request_url: `${r}/pulls/${c.number}`,
      author_association: this.association(repo, c.user),
      _links: { self: { href: self }, html: { href: htmlUrl }, pull_request: { href: `${r}/pulls/${c.number}` } },
      start_line: c.startLine,
      original_start_line: c.startLine,
      start_side: c.startLine === null ? null : c.side,
      line: c.line,
      original_line: c.line,
      side: c.side,
      subject_type: 'line',
      reactions: this.reactions(`${self}/reactions`),
    };
    if (c.inReplyTo) obj.in_reply_to_id = c.inReplyTo;
    return obj;
  }

  reactions(url) {
    return { url, total_count: 0, '+1': 0, '-1': 0, laugh: 0, confused: 0, heart: 0, hooray: 0, eyes: 0, rocket: 0 };
  }

  // An issue, or the issue side of a pull request (`item` is an issue or a pull request record).
  issue(repo, item, { pull } = {}) {
    const r = `${this.api}/repos/${repo.fullName}`;
    const self = `${r}/issues/${item.number}`;
    const obj = {
      id: item.issueId,
      node_id: nodeId(pull ? 'PR' : 'I', item.issueId),
      url: self,
      repository_url: r,
      labels_url: `${self}/labels{/name}`,
      comments_url: `${self}/comments`,
      events_url: `${self}/events`,
      html_url: `${this.html}/${repo.fullName}/${pull ? 'pull' : 'issues'}/${item.number}`,
      number: item.number,
      state: item.state,
      state_reason: item.state === 'closed' ? 'completed' : null,
      title: item.title,
      body: item.body,
      user: this.user(item.user),
      labels: (item.labels || []).map((name) => this.label(repo, name)),
      assignee: null,
      assignees: [],
      milestone: null,
      locked: false,
      active_lock_reason: null,
      comments: 0,
      closed_at: item.closedAt ? iso(item.closedAt) : null,
      created_at: iso(item.createdAt),
      updated_at: iso(item.updatedAt),
      closed_by: item.closedBy ? this.user(item.closedBy) : null,
      author_association: this.association(repo, item.user),
      reactions: this.reactions(`${self}/reactions`),
      timeline_url: `${self}/timeline`,
    };
    if (pull) {
      const p = `${this.html}/${repo.fullName}/pull/${item.number}`;
      obj.draft = item.draft;
      obj.pull_request = { url: `${r}/pulls/${item.number}`, html_url: p, diff_url: `${p}.diff`, patch_url: `${p}.patch`, merged_at: item.mergedAt ? iso(item.mergedAt) : null };
    }
    return obj;
  }

  // A `labeled` or `unlabeled` event of an issue's events list.
  issueEvent(repo, e) {
    return {
      id: e.id,
      node_id: nodeId(e.event === 'labeled' ? 'LE' : 'ULE', e.id),
      url: `${this.api}/repos/${repo.fullName}/issues/events/${e.id}`,
      actor: this.user(e.actor),
      event: e.event,
      commit_id: null,
      commit_url: null,
      created_at: iso(e.createdAt),
      performed_via_github_app: null,
      label: { name: e.label, color: 'ededed' },
    };
  }

  label(repo, name) {
    const id = userId(`label:${repo.fullName}:${name}`);
    return {
      id,
      node_id: nodeId('LA', id),
      url: `${this.api}/repos/${repo.fullName}/labels/${encodeURIComponent(name)}`,
      name,
      description: null,
      color: 'ededed',
      default: false,
    };
  }

  // A commit as the `push` webhook lists it: `files` is {added, removed, modified}.
  pushCommit(repo, info, files) {
    const person = (p) => ({ name: p.name, email: safeEmail(p), username: safeEmail(p).split('@')[0] });
    return {
      id: info.sha,
      tree_id: info.tree,
      distinct: true,
      message: info.message,
      timestamp: info.author.date,
      url: `${this.html}/${repo.fullName}/commit/${info.sha}`,
      author: person(info.author),
      committer: person(info.committer),
      added: files.added,
      removed: files.removed,
      modified: files.modified,
    };
  }

  // The repository as a `push` payload carries it: GitHub sends its times as Unix seconds there.
  pushRepo(repo) {
    const obj = this.repo(repo);
    return { ...obj, created_at: Math.floor(repo.createdAt / 1000), pushed_at: Math.floor(repo.pushedAt / 1000), stargazers: 0, master_branch: repo.defaultBranch };
  }

  // A commit as the `status` webhook carries it, from `git log` data.
  commit(repo, info) {
    const r = `${this.api}/repos/${repo.fullName}`;
    const email = safeEmail;
    const person = (p) => ({ name: p.name, email: email(p), date: p.date.replace(/\+00:00$/, 'Z'), username: email(p).split('@')[0] });
    return {
      sha: info.sha,
      node_id: nodeId('C', parseInt(info.sha.slice(0, 12), 16)),
      commit: {
        author: person(info.author),
        committer: person(info.committer),
        message: info.message,
        tree: { sha: info.tree, url: `${r}/git/trees/${info.tree}` },
        url: `${r}/git/commits/${info.sha}`,
        comment_count: 0,
        verification: { verified: false, reason: 'unsigned', signature: null, payload: null, verified_at: null },
      },
      url: `${r}/commits/${info.sha}`,
      html_url: `${this.html}/${repo.fullName}/commit/${info.sha}`,
      comments_url: `${r}/commits/${info.sha}/comments`,
      author: null,
      committer: null,
      parents: info.parents.map((sha) => ({ sha, url: `${r}/commits/${sha}`, html_url: `${this.html}/${repo.fullName}/commit/${sha}` })),
    };
  }

  // `core` and `graphql` are the identity's budgets ({limit, remaining, reset}).
  rateLimit(rl, gql, nowSec) {
    const core = { limit: rl.limit, remaining: rl.remaining, reset: rl.reset, used: rl.limit - rl.remaining };
    const other = (limit) => ({ limit, remaining: limit, reset: nowSec + 60, used: 0 });
    return {
      resources: {
        core,
        search: other(30),
        graphql: { limit: gql.limit, remaining: gql.remaining, reset: gql.reset, used: gql.limit - gql.remaining },
        integration_manifest: other(5000),
        code_search: other(10),
        source_import: other(100),
        code_scanning_upload: other(1000),
        actions_runner_registration: other(10000),
        scim: other(15000),
        dependency_snapshots: other(100),
        code_scanning_autofix: other(10),
      },
      rate: core,
    };
  }
}

// Git accepts any email; the schemas want a valid one, so odd ones become a noreply address.
function safeEmail(p) {
  return /^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$/.test(p.email) ? p.email : `${p.name.replace(/[^A-Za-z0-9-]+/g, '-') || 'git'}@users.noreply.github.com`;
}

// GitHub's combined state: failure if any status failed or errored, pending if any is pending or
// there are none, success otherwise.
function combinedState(statuses) {
  if (statuses.some((s) => s.state === 'failure' || s.state === 'error')) return 'failure';
  if (statuses.length === 0 || statuses.some((s) => s.state === 'pending')) return 'pending';
  return 'success';
}

module.exports = { Render, ACTIONS_APP, iso, nodeId, userId, combinedState };
