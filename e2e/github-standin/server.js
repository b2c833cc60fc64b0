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

function parseArgs(argv) {
  const opts = { port: 0, host: '127.0.0.1', repos: [], gitDirs: [], identities: [], collaborators: [], basePath: '/', html: 'https://github.com' };
  const takes = new Set(['--port', '--host', '--repo', '--git-dir', '--token', '--identity', '--webhook-url', '--webhook-secret', '--base-path', '--html-url', '--login', '--collaborator']);
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
      case '--repo': opts.repos.push(value); break;
      case '--git-dir': opts.gitDirs.push(value); break;
      case '--token': opts.token = value; break;
      case '--identity': {
        // TOKEN=LOGIN: a login never contains `=`, so the last one separates them.
        const i = value.lastIndexOf('=');
        if (i <= 0 || i === value.length - 1) throw new Error(`--identity needs TOKEN=LOGIN, not ${JSON.stringify(value)}`);
        opts.identities.push({ token: value.slice(0, i), login: value.slice(i + 1) });
        break;
      }
      case '--webhook-url': opts.webhookUrl = value; break;
      case '--webhook-secret': opts.webhookSecret = value; break;
      case '--base-path': opts.basePath = value; break;
      case '--html-url': opts.html = value; break;
      case '--login': opts.login = value; break;
      case '--collaborator': opts.collaborators.push(value); break;
    }
  }
  if (opts.repos.length !== opts.gitDirs.length) throw new Error('give one --git-dir per --repo, in the same order');
  if (opts.webhookSecret && !opts.webhookUrl) throw new Error('--webhook-secret needs --webhook-url');
  return opts;
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`github-standin: ${e.message}\n${USAGE}\n`);
    process.exit(2);
  }
  // Loaded after the arguments are checked: a usage error answers at once.
  const { StandIn } = require('./lib/standin');
  const standin = new StandIn({
    repos: opts.repos.map((fullName, i) => ({ fullName, gitDir: opts.gitDirs[i] })),
    token: opts.token,
    identities: opts.identities,
    webhook: opts.webhookUrl ? { url: opts.webhookUrl, secret: opts.webhookSecret } : null,
    basePath: opts.basePath,
    html: opts.html,
    login: opts.login,
    collaborators: opts.collaborators,
  });
  try {
    await standin.init();
  } catch (e) {
    process.stderr.write(`github-standin: ${e.message}\n`);
    process.exit(1);
  }
  const port = await standin.listen(opts.port, opts.host);
  process.stdout.write(`listening on ${opts.host}:${port}\n`);
  const stop = () => standin.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
