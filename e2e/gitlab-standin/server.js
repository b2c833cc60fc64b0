#!/usr/bin/env node
// GitLab REST API v4 stand-in for aoctl's end-to-end tests. See README.md.
//
//   node server.js --port P --project GROUP/NAME --git-dir /path/to/origin.git
//                  [--project GROUP2/NAME2 --git-dir /path/to/other.git ...]
//                  [--token T] [--webhook-url URL --webhook-token S] [--username USER]
//                  [--web-url http://gitlab.example] [--host 127.0.0.1]
'use strict';

const { StandIn } = require('./lib/standin');

const USAGE = `usage: node server.js --port P --project GROUP/NAME --git-dir DIR [--project ... --git-dir ...]
       [--token T] [--webhook-url URL] [--webhook-token S] [--username USER]
       [--web-url http://gitlab.example] [--host 127.0.0.1]`;

function parseArgs(argv) {
  const opts = { port: 0, host: '127.0.0.1', projects: [], gitDirs: [], webUrl: 'http://gitlab.example', username: 'octo' };
  const takes = new Set(['--port', '--host', '--project', '--git-dir', '--token', '--webhook-url', '--webhook-token', '--username', '--web-url']);
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let value;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      value = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    if (arg === '-h' || arg === '--help') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    if (!takes.has(arg)) throw new Error(`unknown argument ${arg}`);
    if (value === undefined) {
      value = argv[++i];
      if (value === undefined) throw new Error(`${arg} needs a value`);
    }
    switch (arg) {
      case '--port':
        opts.port = Number(value);
        if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) throw new Error(`bad port ${value}`);
        break;
      case '--host': opts.host = value; break;
      case '--project': opts.projects.push(value); break;
      case '--git-dir': opts.gitDirs.push(value); break;
      case '--token': opts.token = value; break;
      case '--webhook-url': opts.webhookUrl = value; break;
      case '--webhook-token': opts.webhookToken = value; break;
      case '--username': opts.username = value; break;
      case '--web-url': opts.webUrl = value; break;
    }
  }
  if (!opts.projects.length) throw new Error('give at least one --project');
  if (opts.projects.length !== opts.gitDirs.length) throw new Error('give one --git-dir per --project, in the same order');
  if (opts.webhookToken && !opts.webhookUrl) throw new Error('--webhook-token needs --webhook-url');
  return opts;
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`gitlab-standin: ${e.message}\n${USAGE}\n`);
    process.exit(2);
  }
  const standin = new StandIn({
    projects: opts.projects.map((path, i) => ({ path, gitDir: opts.gitDirs[i] })),
    token: opts.token,
    webhook: opts.webhookUrl ? { url: opts.webhookUrl, token: opts.webhookToken } : null,
    username: opts.username,
    webUrl: opts.webUrl,
  });
  try {
    await standin.init();
  } catch (e) {
    process.stderr.write(`gitlab-standin: ${e.message}\n`);
    process.exit(1);
  }
  const port = await standin.listen(opts.port, opts.host);
  process.stdout.write(`listening on ${opts.host}:${port}\n`);
  const stop = () => standin.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
