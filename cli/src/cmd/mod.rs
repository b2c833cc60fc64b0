//! One module per verb; `run` hands the parsed command line to it.

pub(crate) mod apply;
pub(crate) mod attach;
pub(crate) mod backup;
pub(crate) mod completion;
pub(crate) mod dashboard;
pub(crate) mod delete;
pub(crate) mod describe;
pub(crate) mod diff;
pub(crate) mod doctor;
pub(crate) mod down;
pub(crate) mod get;
pub(crate) mod logs;
mod mcp;
pub(crate) mod reconcile;
pub(crate) mod restore;
pub(crate) mod review;
pub(crate) mod send;
pub(crate) mod serve;
pub(crate) mod spawn;
pub(crate) mod up;
pub(crate) mod version;

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context;

use crate::args::{Cli, Command, Global};
use crate::client::{Client, ClientError};

/// Runs one verb. `Ok` carries the exit status for verbs whose success has several outcomes
/// (`diff`: 1 when there are differences).
pub(crate) async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let Cli { global, command } = cli;
    match command {
        Command::Serve(a) => serve::run(&global, a).await,
        Command::Up(a) => up::run(&global, a).await,
        Command::Down => down::run(&global),
        Command::Apply(a) => apply::run(&client(&global)?, a).await,
        Command::Get(a) => get::run(&client(&global)?, a).await,
        Command::Describe(a) => describe::run(&client(&global)?, a).await,
        Command::Delete(a) => delete::run(&client(&global)?, a).await,
        Command::Diff(a) => diff::run(&client(&global)?, a).await,
        Command::Logs(a) => logs::run(&client(&global)?, a).await,
        Command::Send(a) => send::run(&client(&global)?, a).await,
        Command::Answer(a) => send::answer(&client(&global)?, a).await,
        Command::Mcp => mcp::run().await,
        Command::Reconcile(a) => reconcile::run(&client(&global)?, a).await,
        Command::Review(a) => review::run(&client(&global)?, a).await,
        Command::Attach(a) => attach::run(&client(&global)?, a).await,
        Command::Spawn(a) => spawn::run(&client(&global)?, a).await,
        Command::Dashboard(a) => dashboard::run(&client(&global)?, a).await,
        Command::Version => version::run(&client(&global)?).await,
        Command::Doctor(a) => doctor::run(&global, a).await,
        Command::Backup(a) => backup::run(&client(&global)?, a).await,
        Command::Restore(a) => restore::run(&global, a).await,
        Command::Completion(a) => completion::run(a),
    }
}

/// A client of `--server` with the bearer token: `--token` / `AOCTL_TOKEN`, else, for a server on
/// this machine, the one it keeps in the data directory. A remote server is never sent the local
/// token.
pub(crate) fn client(g: &Global) -> Result<Client, ClientError> {
    let local = g.token.clone().filter(|t| !t.is_empty()).or_else(|| {
        let url = reqwest::Url::parse(&g.server).ok()?;
        let host = url.host_str()?.trim_start_matches('[').trim_end_matches(']');
        let loopback =
            host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        let file = g.data_dir().ok()?.join(aoctl_controller::TOKEN_FILE);
        loopback.then(|| std::fs::read_to_string(file).ok()).flatten().map(|t| t.trim().to_string())
    });
    Client::new(&g.server, local)
}

/// Writes to stdout and flushes, so that watches show up at once. When the reader has gone away
/// (`aoctl get -w | head`), there is nothing left to do: exit quietly.
pub(crate) fn emit(text: &str) {
    emit_bytes(text.as_bytes());
}

/// `emit` for bytes that need not be whole UTF-8 characters, such as pieces of a streamed log.
pub(crate) fn emit_bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// A TEXT or PROMPT argument: itself, or for `-` all of stdin, less one trailing newline (the
/// one `echo` and editors add); the lines before it are kept as they are.
pub(crate) fn text_arg(arg: &str) -> anyhow::Result<String> {
    if arg != "-" {
        return Ok(arg.to_string());
    }
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).context("cannot read standard input")?;
    Ok(strip_one_newline(&text).to_string())
}

/// `text` without one trailing `\n` or `\r\n`.
pub(crate) fn strip_one_newline(text: &str) -> &str {
    text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trailing_newline_is_stripped() {
        assert_eq!(strip_one_newline("fix it\n"), "fix it");
        assert_eq!(strip_one_newline("fix it\r\n"), "fix it");
        assert_eq!(strip_one_newline("line 1\nline 2\n\n"), "line 1\nline 2\n");
        assert_eq!(strip_one_newline("  indented\n  kept"), "  indented\n  kept");
        assert_eq!(strip_one_newline("\n"), "");
        assert_eq!(strip_one_newline(""), "");
        assert_eq!(text_arg("not stdin").unwrap(), "not stdin");
    }
}
