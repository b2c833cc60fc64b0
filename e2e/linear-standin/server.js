#!/usr/bin/env node
// Linear GraphQL API and webhook stand-in for aoctl's end-to-end tests. See README.md.
//
//   node server.js --port P --team ENG:Engineering [--team OPS:Operations] [--token T]
//                  [--webhook-url URL --webhook-secret S] [--host 127.0.0.1] [--schema FILE]
'use strict';

const { StandIn } = require('./lib/standin');

const USAGE = `usage: node server.js --port P --team KEY:Name [--team KEY:Name ...] [--token T]
       [--webhook-url URL --webhook-secret S] [--host 127.0.0.1] [--schema FILE]`;

function parseArgs(argv) {
  const opts = { port: 0, host: '127.0.0.1', teams: [] };
  const takes = new Set(['--port', '--host', '--team', '--token', '--webhook-url', '--webhook-secret', '--schema']);
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
      case '--team': {
        const m = value.match(/^([A-Za-z][A-Za-z0-9]{0,6}):(.+)$/);
        if (!m) throw new Error(`--team wants KEY:Name (KEY: a letter and up to 6 letters or digits), got ${value}`);
        const key = m[1].toUpperCase();
        if (opts.teams.some((t) => t.key === key)) throw new Error(`team ${key} given twice`);
        opts.teams.push({ key, name: m[2] });
        break;
      }
      case '--token': opts.token = value; break;
      case '--webhook-url': opts.webhookUrl = value; break;
      case '--webhook-secret': opts.webhookSecret = value; break;
      case '--schema': opts.schema = value; break;
    }
  }
  if (!opts.teams.length) throw new Error('give at least one --team KEY:Name');
  if (opts.webhookSecret && !opts.webhookUrl) throw new Error('--webhook-secret needs --webhook-url');
  return opts;
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`linear-standin: ${e.message}\n${USAGE}\n`);
    process.exit(2);
  }
  let standin;
  try {
    standin = new StandIn({
      teams: opts.teams,
      token: opts.token,
      webhook: opts.webhookUrl ? { url: opts.webhookUrl, secret: opts.webhookSecret } : null,
      schemaFile: opts.schema,
    });
  } catch (e) {
    process.stderr.write(`linear-standin: ${e.message}\n`);
    process.exit(1);
  }
  const port = await standin.listen(opts.port, opts.host);
  process.stdout.write(`listening on ${opts.host}:${port}\n`);
  const stop = () => standin.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
