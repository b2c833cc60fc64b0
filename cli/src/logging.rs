//! Logging to stderr with tracing: `RUST_LOG` filters; `serve` logs at info and may log JSON,
//! the other verbs log only warnings.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::args::{Cli, Command, LogFormat};

pub(crate) fn init(cli: &Cli) {
    let (default, format) = match &cli.command {
        Command::Serve(s) => ("info", s.log_format),
        _ => ("warn", LogFormat::Pretty),
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}
