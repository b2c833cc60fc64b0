//! `aoctl serve`: run the controller and its HTTP API in the foreground until SIGINT or SIGTERM.

use std::process::ExitCode;

use crate::args::{Global, ServeArgs};

pub(crate) async fn run(g: &Global, a: ServeArgs) -> anyhow::Result<ExitCode> {
    let data_dir = g.data_dir()?;
    let opts = aoctl_controller::ServeOptions {
        listen: a.listen,
        data_dir,
        token_file: a.token_file,
        allowed_hosts: a.allowed_hosts,
    };
    aoctl_controller::serve(opts).await?;
    Ok(ExitCode::SUCCESS)
}
