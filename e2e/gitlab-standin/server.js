#!/usr/bin/env node
// GitLab REST API v4 stand-in for aoctl's end-to-end tests. See README.md.
//
//   node server.js --port P --project GROUP/NAME --git-dir /path/to/origin.git
//                  [--project GROUP2/NAME2 --git-dir /path/to/other.git ...]
//                  [--token T] [--username USER] [--identity TOKEN=USER ...] [--member USER=LEVEL ...]
//                  [--webhook-url URL --webhook-token S]
//                  [--web-url http://gitlab.example] [--host 127.0.0.1]
'use strict';

const { StandIn } = require('./lib/standin');

const USAGE = `usage: node server.js --port P --project GROUP/NAME --git-dir DIR [--project ... --git-dir ...]
       [--token T] [--username USER] [--identity TOKEN=USER ...] [--member USER=LEVEL ...]
       [--webhook-url URL] [--webhook-token S]
       [--web-url http://gitlab.example] [--host 127.0.0.1]`;

// GitLab's username rule, simplified: letters, digits, '_', '-' and '.', not starting with '-'.
const USERNAME = /^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,254}$/;

const { parseArgs, serve } = require('../standin-kit/cli.js');

function parse(argv) {
  const opts = { port: 0, host: '127.0.0.1', projects: [], gitDirs: [], webUrl: 'http://gitlab.example', username: 'octo', identities: [], members: [] };
  parseArgs(argv, {
    usage: USAGE,
    strings: { '--token': 'token', '--webhook-url': 'webhookUrl', '--webhook-token': 'webhookToken', '--username': 'username', '--web-url': 'webUrl' },
    lists: { '--project': 'projects', '--git-dir': 'gitDirs' },
    takes: ['--identity', '--member'],
    opts,
    set(opts, arg, value) {
      switch (arg) {
        case '--identity': {
          // TOKEN=USER; the user is after the last '=', so a token may contain '='.
          const at = value.lastIndexOf('=');
          const token = at > 0 ? value.slice(0, at) : '';
          const user = at > 0 ? value.slice(at + 1) : '';
          if (!token || /\s/.test(token)) throw new Error(`--identity needs TOKEN=USER, not ${JSON.stringify(value)}`);
          if (!USERNAME.test(user)) throw new Error(`--identity ${JSON.stringify(value)}: bad username ${JSON.stringify(user)}`);
          opts.identities.push({ token, username: user });
          break;
        }
        case '--member': {
          // USER=LEVEL: a member of every project at GitLab's access level LEVEL (10 … 50).
          const [user, level] = value.split('=');
          if (!USERNAME.test(user || '') || ![10, 20, 30, 40, 50].includes(Number(level))) throw new Error(`--member needs USER=LEVEL with LEVEL 10, 20, 30, 40 or 50, not ${JSON.stringify(value)}`);
          opts.members.push({ username: user, level: Number(level) });
          break;
        }
      }
    },
  });
  if (!USERNAME.test(opts.username)) throw new Error(`bad --username ${JSON.stringify(opts.username)}`);
  if (opts.token && /\s/.test(opts.token)) throw new Error('--token must not contain spaces');
  const owners = new Map(opts.token ? [[opts.token, opts.username]] : []);
  for (const { token, username } of opts.identities) {
    if (owners.has(token) && owners.get(token) !== username) throw new Error(`the token of --identity ${username} already belongs to ${owners.get(token)}`);
    owners.set(token, username);
  }
  if (!opts.projects.length) throw new Error('give at least one --project');
  if (opts.projects.length !== opts.gitDirs.length) throw new Error('give one --git-dir per --project, in the same order');
  if (opts.webhookToken && !opts.webhookUrl) throw new Error('--webhook-token needs --webhook-url');
  return opts;
}

serve({
  name: 'gitlab-standin',
  usage: USAGE,
  parse,
  make: (opts) =>
    new StandIn({
      projects: opts.projects.map((path, i) => ({ path, gitDir: opts.gitDirs[i] })),
      token: opts.token,
      identities: opts.identities,
      members: opts.members,
      webhook: opts.webhookUrl ? { url: opts.webhookUrl, token: opts.webhookToken } : null,
      username: opts.username,
      webUrl: opts.webUrl,
    }),
});
