'use strict';
// The objects GraphQL calls are answered from, built from the stand-in's state: the same pull
// requests, head and base SHAs, check runs (`databaseId` is the REST id) and commit statuses as
// the REST routes, with the schema's upper-case enum values. A property is a value or a function
// (args) of the field; a field without a property is not implemented (null, and reported).

const { iso, nodeId, userId } = require('./render');
const { TypedError } = require('./graphql');

const PR_COMMITS_MAX = 250; // GitHub lists at most 250 commits of a pull request

function cursorOf(key) {
  return Buffer.from(`cursor:v2:${key}`, 'utf8').toString('base64');
}

// A connection over `items` (in order) with GitHub's arguments: first, last, after, before.
function connection(items, args, { typename, key, node }) {
  const find = (c) => {
    const i = items.findIndex((x) => cursorOf(key(x)) === c);
    if (i < 0) throw new TypedError('INVALID_CURSOR_ARGUMENTS', `\`${c}\` does not appear to be a valid cursor.`);
    return i;
  };
  const start = args.after !== undefined && args.after !== null ? find(args.after) + 1 : 0;
  const end = args.before !== undefined && args.before !== null ? find(args.before) : items.length;
  let slice = items.slice(start, Math.max(start, end));
  let cutFirst = false;
  let cutLast = false;
  if (args.first !== undefined && args.first !== null && slice.length > args.first) {
    slice = slice.slice(0, args.first);
    cutFirst = true;
  }
  if (args.last !== undefined && args.last !== null && slice.length > args.last) {
    slice = slice.slice(slice.length - args.last);
    cutLast = true;
  }
  const built = slice.map((x) => ({ item: x, node: node(x), cursor: cursorOf(key(x)) }));
  const edgeType = typename.replace(/Connection$/, 'Edge');
  return {
    __typename: typename,
    totalCount: items.length,
    nodes: built.map((b) => b.node),
    edges: built.map((b) => ({ __typename: edgeType, cursor: b.cursor, node: b.node })),
    pageInfo: {
      __typename: 'PageInfo',
      hasNextPage: cutFirst || end < items.length,
      hasPreviousPage: cutLast || start > 0,
      startCursor: built.length ? built[0].cursor : null,
      endCursor: built.length ? built[built.length - 1].cursor : null,
    },
  };
}

const CHECK_OK = ['success', 'neutral', 'skipped'];

function checkRunState(run) {
  if (run.status !== 'completed') return 'PENDING';
  return CHECK_OK.includes(run.conclusion) ? 'SUCCESS' : 'FAILURE';
}

// The rollup of the latest check run per name and the latest status per context: FAILURE if one
// failed, else ERROR if a status errored, else PENDING if one is unfinished, else SUCCESS.
function rollupState(states) {
  for (const s of ['FAILURE', 'ERROR', 'PENDING', 'EXPECTED']) if (states.includes(s)) return s === 'EXPECTED' ? 'PENDING' : s;
  return 'SUCCESS';
}

// The resolvers of one call: the branch heads of a repository are read once per call.
class Resolvers {
  // standin: the StandIn (state, view(), latestRuns(), latestStatuses(), render).
  constructor(standin) {
    this.s = standin;
    this.headsOf = new Map(); // repository -> Promise of Map(branch -> SHA)
  }

  heads(repo) {
    if (!this.headsOf.has(repo)) this.headsOf.set(repo, repo.git.branches().then((list) => new Map(list.map((b) => [b.name, b.sha]))));
    return this.headsOf.get(repo);
  }

  // The stand-in's view of a pull request (see StandIn.view) with this call's branch heads.
  async view(repo, pr, opts = {}) {
    return this.s.view(repo, pr, null, { ...opts, heads: await this.heads(repo) });
  }

  get html() {
    return this.s.htmlBase.replace(/\/$/, '');
  }

  // The root of a call by `login`; `rate` is {cost, nodes, bucket} for `rateLimit`.
  root(login, rate) {
    return {
      viewer: this.user(login),
      rateLimit: () => ({
        __typename: 'RateLimit',
        cost: rate.cost,
        limit: rate.bucket.limit,
        remaining: rate.bucket.remaining,
        used: rate.bucket.limit - rate.bucket.remaining,
        resetAt: iso(rate.bucket.reset * 1000),
        nodeCount: rate.nodes,
      }),
      repository: ({ owner, name }) => {
        const repo = this.s.repos.get(`${owner}/${name}`.toLowerCase());
        if (!repo) throw new TypedError('NOT_FOUND', `Could not resolve to a Repository with the name '${owner}/${name}'.`);
        return this.repository(repo);
      },
    };
  }

  user(login) {
    const id = userId(login);
    return {
      __typename: 'User',
      login,
      id: nodeId('U', id),
      databaseId: id,
      url: `${this.html}/${login}`,
      resourcePath: `/${login}`,
      avatarUrl: () => `https://avatars.githubusercontent.com/u/${id}?v=4`,
    };
  }

  // A user or, for a `[bot]` login, a bot (whose GraphQL login has no `[bot]` suffix).
  actor(login) {
    if (!login.endsWith('[bot]')) return this.user(login);
    const id = userId(login);
    const name = login.slice(0, -'[bot]'.length);
    return {
      __typename: 'Bot',
      login: name,
      id: nodeId('BOT', id),
      databaseId: id,
      url: `${this.html}/apps/${name}`,
      resourcePath: `/apps/${name}`,
      avatarUrl: () => `https://avatars.githubusercontent.com/in/${id}?v=4`,
    };
  }

  repository(repo) {
    return {
      __typename: 'Repository',
      id: nodeId('R', repo.id),
      databaseId: repo.id,
      name: repo.name,
      nameWithOwner: repo.fullName,
      url: `${this.html}/${repo.fullName}`,
      isPrivate: repo.private,
      owner: this.user(repo.owner),
      pullRequests: (args) => this.pullRequests(repo, args),
      pullRequest: async ({ number }) => {
        const pr = this.s.pull(repo, number);
        if (!pr) throw new TypedError('NOT_FOUND', `Could not resolve to a PullRequest with the number of ${number}.`);
        await this.view(repo, pr);
        return this.pull(repo, pr);
      },
    };
  }

  async pullRequests(repo, args) {
    let list = [];
    // Each pull request is looked at first, so that a pushed head is noticed (and announced) as
    // on a REST read, and `updatedAt` is current before filtering and ordering.
    for (const pr of repo.pulls.values()) {
      await this.view(repo, pr);
      list.push(pr);
    }
    const stateOf = (pr) => (pr.merged ? 'MERGED' : pr.state === 'open' ? 'OPEN' : 'CLOSED');
    if (args.states && args.states.length) list = list.filter((pr) => args.states.includes(stateOf(pr)));
    if (args.headRefName) list = list.filter((pr) => pr.head.ref === args.headRefName);
    if (args.baseRefName) list = list.filter((pr) => pr.base.ref === args.baseRefName);
    if (args.labels && args.labels.length) {
      const wanted = args.labels.map((l) => l.toLowerCase());
      list = list.filter((pr) => (pr.labels || []).some((l) => wanted.includes(l.toLowerCase())));
    }
    const order = args.orderBy || { field: 'CREATED_AT', direction: 'ASC' };
    const key = order.field === 'UPDATED_AT' ? (pr) => pr.updatedAt * 1e4 + pr.number : (pr) => pr.createdAt * 1e4 + pr.number;
    list.sort((a, b) => (order.direction === 'DESC' ? key(b) - key(a) : key(a) - key(b)));
    return connection(list, args, { typename: 'PullRequestConnection', key: (pr) => `PR:${pr.number}`, node: (pr) => this.pull(repo, pr) });
  }

  pull(repo, pr) {
    const url = `${this.html}/${repo.fullName}/pull/${pr.number}`;
    let viewing = null;
    const view = () => (viewing = viewing || this.view(repo, pr));
    return {
      __typename: 'PullRequest',
      id: nodeId('PR', pr.id),
      databaseId: pr.id,
      number: pr.number,
      title: pr.title,
      body: pr.body ?? '',
      url,
      permalink: url,
      resourcePath: `/${repo.fullName}/pull/${pr.number}`,
      state: pr.merged ? 'MERGED' : pr.state === 'open' ? 'OPEN' : 'CLOSED',
      isDraft: pr.draft,
      merged: pr.merged,
      closed: pr.state === 'closed',
      locked: false,
      headRefName: pr.head.ref,
      baseRefName: pr.base.ref,
      headRefOid: async () => (await view()).headSha,
      baseRefOid: async () => (await view()).baseSha,
      // A read, as `GET /repos/{o}/{r}/pulls/{n}` is: the first one after the pull request was
      // opened or its head or base moved starts the mergeability job and answers UNKNOWN.
      mergeable: async () => {
        const v = await this.view(repo, pr, { read: true });
        return v.mergeable === true ? 'MERGEABLE' : v.mergeable === false ? 'CONFLICTING' : 'UNKNOWN';
      },
      createdAt: iso(pr.createdAt),
      updatedAt: async () => {
        await view();
        return iso(pr.updatedAt);
      },
      closedAt: pr.closedAt ? iso(pr.closedAt) : null,
      mergedAt: pr.mergedAt ? iso(pr.mergedAt) : null,
      author: this.actor(pr.user),
      additions: async () => (await view()).stats.additions,
      deletions: async () => (await view()).stats.deletions,
      changedFiles: async () => (await view()).stats.changedFiles,
      repository: () => this.repository(repo),
      labels: (args) =>
        connection(pr.labels || [], args, {
          typename: 'LabelConnection',
          key: (name) => `L:${name}`,
          node: (name) => ({ __typename: 'Label', id: nodeId('LA', userId(`label:${repo.fullName}:${name}`)), name, color: 'ededed', description: null }),
        }),
      commits: async (args) => {
        const v = await view();
        const shas = await repo.git.memo(`pr-commits ${v.baseSha} ${v.headSha}`, async () => {
          const r = await repo.git.run(['rev-list', '--reverse', `${v.baseSha}..${v.headSha}`]);
          return r.stdout.split('\n').filter(Boolean).slice(0, PR_COMMITS_MAX);
        });
        return connection(shas, args, {
          typename: 'PullRequestCommitConnection',
          key: (sha) => `C:${sha}`,
          node: (sha) => ({ __typename: 'PullRequestCommit', id: nodeId('PURC', parseInt(sha.slice(0, 12), 16)), url: `${url}/commits/${sha}`, commit: this.commit(repo, sha) }),
        });
      },
    };
  }

  commit(repo, sha) {
    const info = () => repo.git.commitInfo(sha);
    return {
      __typename: 'Commit',
      id: nodeId('C', parseInt(sha.slice(0, 12), 16)),
      oid: sha,
      abbreviatedOid: sha.slice(0, 7),
      url: `${this.html}/${repo.fullName}/commit/${sha}`,
      message: async () => (await info()).message,
      messageHeadline: async () => (await info()).message.split('\n')[0],
      committedDate: async () => new Date((await info()).committer.date).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      authoredDate: async () => new Date((await info()).author.date).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      statusCheckRollup: () => this.rollup(repo, sha),
    };
  }

  // GitHub has no rollup for a commit without check runs or statuses (null).
  rollup(repo, sha) {
    const runs = this.s.latestRuns(repo, sha).sort((a, b) => a.id - b.id);
    const statuses = this.s.latestStatuses(repo, sha).sort((a, b) => a.id - b.id);
    if (!runs.length && !statuses.length) return null;
    const items = [...runs.map((r) => ({ kind: 'run', r })), ...statuses.map((s) => ({ kind: 'status', s }))];
    const states = [...runs.map(checkRunState), ...statuses.map((s) => s.state.toUpperCase())];
    return {
      __typename: 'StatusCheckRollup',
      id: nodeId('SCR', parseInt(sha.slice(0, 12), 16)),
      state: rollupState(states),
      commit: () => this.commit(repo, sha),
      contexts: (args) =>
        connection(items, args, {
          typename: 'StatusCheckRollupContextConnection',
          key: (x) => (x.kind === 'run' ? `CR:${x.r.id}` : `SC:${x.s.id}`),
          node: (x) => (x.kind === 'run' ? this.checkRun(repo, x.r) : this.statusContext(repo, x.s)),
        }),
    };
  }

  checkRun(repo, run) {
    const htmlUrl = this.s.render.checkRun(repo, run, []).html_url;
    return {
      __typename: 'CheckRun',
      id: nodeId('CR', run.id),
      databaseId: run.id,
      name: run.name,
      status: run.status.toUpperCase(),
      conclusion: run.status === 'completed' && run.conclusion ? run.conclusion.toUpperCase() : null,
      startedAt: iso(run.startedAt),
      completedAt: run.completedAt ? iso(run.completedAt) : null,
      detailsUrl: run.detailsUrl || htmlUrl,
      url: htmlUrl,
      permalink: htmlUrl,
      title: run.output.title,
      summary: run.output.summary,
      text: run.output.text,
      externalId: run.externalId || null,
    };
  }

  statusContext(repo, s) {
    return {
      __typename: 'StatusContext',
      id: nodeId('SC', s.id),
      context: s.context,
      state: s.state.toUpperCase(),
      description: s.description,
      targetUrl: s.targetUrl,
      createdAt: iso(s.createdAt),
      creator: this.actor(s.creator),
      avatarUrl: () => `https://avatars.githubusercontent.com/u/${userId(s.creator)}?v=4`,
    };
  }
}

module.exports = { Resolvers, connection, cursorOf, rollupState };
