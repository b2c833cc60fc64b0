//! `aoctl dashboard`: asks the server for a one-time sign-in code and prints the link that uses it,
//! alone on the last line of stdout, then exits; `--open` also hands the link to a browser.

use std::process::ExitCode;

use anyhow::Context;
use aoctl_runtimes::daemon;

use crate::args::DashboardArgs;
use crate::client::Client;

pub(crate) async fn run(client: &Client, a: DashboardArgs) -> anyhow::Result<ExitCode> {
    let code = client.login_code().await?;
    let link = client.link(&code.path);
    println!("Open the dashboard with this link (it works once, within {} seconds):", code.expires_in_seconds);
    println!("{link}");
    if a.open {
        daemon::open_url(&link).context("cannot open a browser; open the link above yourself")?;
    }
    Ok(ExitCode::SUCCESS)
}
