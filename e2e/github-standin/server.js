#!/usr/bin/env node
'use strict';
// GitHub REST and GraphQL API stand-in for aoctl's end-to-end tests. See README.md.
//
//   node server.js --port P --repo OWNER/NAME --git-dir /path/to/origin.git
//                  [--repo OWNER2/NAME2 --git-dir /path/to/other.git ...]
//                  [--token T] [--identity TOKEN=LOGIN ...] [--webhook-url URL --webhook-secret S]
//                  [--base-path /] [--html-url https://github.com] [--login USER] [--host 127.0.0.1]
//                  [--collaborator LOGIN ...]

const USAGE = `usage: node server.js --port P --repo OWNER/NAME --git-dir DIR [--repo ... --git-dir ...]
       [--token T] [--identity TOKEN=LOGIN ...] [--webhook-url URL] [--webhook-secret S]
       [--base-path /] [--html-url URL] [--login USER] [--host 127.0.0.1] [--collaborator LOGIN ...]`;

const { parseArgs, serve } = require('../standin-kit/cli.js');

function parse(argv) {
  const opts = { port: 0, host: '127.0.0.1', repos: [], gitDirs: [], identities: [], collaborators: [], basePath: '/', html: 'https://github.com' };
  parseArgs(argv, {
    usage: USAGE,
    strings: { '--token': 'token', '--webhook-url': 'webhookUrl', '--webhook-secret': 'webhookSecret', '--base-path': 'basePath', '--html-url': 'html', '--login': 'login' },
    lists: { '--repo': 'repos', '--git-dir': 'gitDirs', '--collaborator': 'collaborators' },
    takes: ['--identity'],
    opts,
    set(opts, arg, value) {
      // --identity TOKEN=LOGIN: a login never contains `=`, so the last one separates them.
      const i = value.lastIndexOf('=');
      if (i <= 0 || i === value.length - 1) throw new Error(`--identity needs TOKEN=LOGIN, not ${JSON.stringify(value)}`);
      opts.identities.push({ token: value.slice(0, i), login: value.slice(i + 1) });
    },
  });
  if (opts.repos.length !== opts.gitDirs.length) throw new Error('give one --git-dir per --repo, in the same order');
  if (opts.webhookSecret && !opts.webhookUrl) throw new Error('--webhook-secret needs --webhook-url');
  return opts;
}

serve({
  name: 'github-standin',
  usage: USAGE,
  parse,
  make(opts) {
    // Loaded after the arguments are checked: a usage error answers at once.
    const { StandIn } = require('./lib/standin');
    return new StandIn({
      repos: opts.repos.map((fullName, i) => ({ fullName, gitDir: opts.gitDirs[i] })),
      token: opts.token,
      identities: opts.identities,
      webhook: opts.webhookUrl ? { url: opts.webhookUrl, secret: opts.webhookSecret } : null,
      basePath: opts.basePath,
      html: opts.html,
      login: opts.login,
      collaborators: opts.collaborators,
    });
  },
});
