#!/usr/bin/env node
// Linear GraphQL API and webhook stand-in for aoctl's end-to-end tests. See README.md.
//
//   node server.js --port P --team ENG:Engineering [--team OPS:Operations] [--token T]
//                  [--webhook-url URL --webhook-secret S] [--host 127.0.0.1] [--schema FILE]
'use strict';

const { StandIn } = require('./lib/standin');

const USAGE = `usage: node server.js --port P --team KEY:Name [--team KEY:Name ...] [--token T]
       [--webhook-url URL --webhook-secret S] [--host 127.0.0.1] [--schema FILE]`;

const { parseArgs, serve } = require('../standin-kit/cli.js');

function parse(argv) {
  const opts = { port: 0, host: '127.0.0.1', teams: [] };
  parseArgs(argv, {
    usage: USAGE,
    strings: { '--token': 'token', '--webhook-url': 'webhookUrl', '--webhook-secret': 'webhookSecret', '--schema': 'schema' },
    takes: ['--team'],
    opts,
    set(opts, arg, value) {
      // --team KEY:Name
      const m = value.match(/^([A-Za-z][A-Za-z0-9]{0,6}):(.+)$/);
      if (!m) throw new Error(`--team wants KEY:Name (KEY: a letter and up to 6 letters or digits), got ${value}`);
      const key = m[1].toUpperCase();
      if (opts.teams.some((t) => t.key === key)) throw new Error(`team ${key} given twice`);
      opts.teams.push({ key, name: m[2] });
    },
  });
  if (!opts.teams.length) throw new Error('give at least one --team KEY:Name');
  if (opts.webhookSecret && !opts.webhookUrl) throw new Error('--webhook-secret needs --webhook-url');
  return opts;
}

serve({
  name: 'linear-standin',
  usage: USAGE,
  parse,
  make: (opts) =>
    new StandIn({
      teams: opts.teams,
      token: opts.token,
      webhook: opts.webhookUrl ? { url: opts.webhookUrl, secret: opts.webhookSecret } : null,
      schemaFile: opts.schema,
    }),
});
