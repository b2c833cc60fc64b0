'use strict';
// What every stand-in's `server.js` does the same way: read `--flag value` and `--flag=value`
// arguments, answer `--help`, and run the stand-in until SIGTERM or SIGINT.

// Reads `argv` into `opts`: each argument must have a value and be `--port` (checked to be a port
// number), `--host`, one of `strings` (a flag to the key of `opts` its value is stored at), one of
// `lists` (a flag to the key of the array in `opts` each of its values is added to; it may be
// given again) or one of `takes`, whose value `set` stores (it may throw to refuse it). `-h` and
// `--help` print `usage` and exit.
function parseArgs(argv, { usage, strings = {}, lists = {}, takes = [], opts, set }) {
  const known = ['--port', '--host', ...Object.keys(strings), ...Object.keys(lists), ...takes];
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let value;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      value = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    if (arg === '-h' || arg === '--help') {
      process.stdout.write(`${usage}\n`);
      process.exit(0);
    }
    if (!known.includes(arg)) throw new Error(`unknown argument ${arg}`);
    if (value === undefined) {
      value = argv[++i];
      if (value === undefined) throw new Error(`${arg} needs a value`);
    }
    if (arg === '--port') {
      opts.port = Number(value);
      if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) throw new Error(`bad port ${value}`);
    } else if (arg === '--host') {
      opts.host = value;
    } else if (Object.hasOwn(strings, arg)) {
      opts[strings[arg]] = value;
    } else if (Object.hasOwn(lists, arg)) {
      opts[lists[arg]].push(value);
    } else {
      set(opts, arg, value);
    }
  }
  return opts;
}

// Runs a stand-in: `parse()` reads the arguments (a usage error exits 2 with `usage`), `make(opts)`
// builds the stand-in (its `init()`, when it has one, runs before it listens; a failure exits
// 1), which then listens on `--host`:`--port` and says where on standard output.
async function serve({ name, usage, parse, make }) {
  let opts;
  try {
    opts = parse(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`${name}: ${e.message}\n${usage}\n`);
    process.exit(2);
  }
  let standin;
  try {
    standin = make(opts);
    if (standin.init) await standin.init();
  } catch (e) {
    process.stderr.write(`${name}: ${e.message}\n`);
    process.exit(1);
  }
  const port = await standin.listen(opts.port, opts.host);
  process.stdout.write(`listening on ${opts.host}:${port}\n`);
  const stop = () => standin.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

module.exports = { parseArgs, serve };
