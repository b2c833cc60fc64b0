//! `aoctl version`: the client's version and, when it answers, the server's.

use std::process::ExitCode;

use super::emit;
use crate::client::{Client, ClientError};

pub(crate) async fn run(client: &Client) -> anyhow::Result<ExitCode> {
    emit(&format!("client: {} ({})\n", env!("CARGO_PKG_VERSION"), aoctl_api::API_VERSION));
    let server = match client.version().await {
        Ok(v) => {
            let s = |f: &str| if f.is_empty() { "unknown".to_string() } else { f.to_string() };
            format!("{} ({})", s(&v.version), s(&v.api_version))
        }
        Err(e @ ClientError::Unreachable { .. }) => format!("unreachable ({e})"),
        Err(e) => format!("error ({e})"),
    };
    emit(&format!("server: {server}\n"));
    Ok(ExitCode::SUCCESS)
}
