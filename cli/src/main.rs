//! The `aoctl` binary: parses the command line, sets up logging, runs the verb and maps the
//! outcome to an exit status (0 ok, 1 failure or differences found, 2 usage, or an object `diff`
//! could not compare).

mod args;
mod client;
mod cmd;
mod logging;
mod manifest;
mod object;
mod table;
mod wait;

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = args::parse();
    logging::init(&cli);
    match cmd::run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
