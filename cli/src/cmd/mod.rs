//! One module per verb; `run` hands the parsed command line to it.

pub mod apply;
pub mod completion;
pub mod delete;
pub mod describe;
pub mod diff;
pub mod down;
pub mod get;
pub mod serve;
pub mod up;
pub mod version;

use std::io::Write;
use std::process::ExitCode;

use crate::args::{Cli, Command, Global};
use crate::client::{Client, ClientError};

/// Runs one verb. `Ok` carries the exit status for verbs whose success has several outcomes
/// (`diff`: 1 when there are differences).
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
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
        Command::Version => version::run(&client(&global)?).await,
        Command::Completion(a) => completion::run(a),
    }
}

fn client(g: &Global) -> Result<Client, ClientError> {
    Client::new(&g.server, g.token.clone())
}

/// Writes to stdout and flushes, so that watches show up at once. When the reader has gone away
/// (`aoctl get -w | head`), there is nothing left to do: exit quietly.
pub fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}
