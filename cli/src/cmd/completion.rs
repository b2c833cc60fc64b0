//! `aoctl completion`: print the completion script of a shell.

use std::process::ExitCode;

use clap::CommandFactory;

use crate::args::{Cli, CompletionArgs, Shell};

pub(crate) fn run(a: CompletionArgs) -> anyhow::Result<ExitCode> {
    let shell = match a.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "aoctl", &mut script);
    super::emit(&String::from_utf8_lossy(&script));
    Ok(ExitCode::SUCCESS)
}
