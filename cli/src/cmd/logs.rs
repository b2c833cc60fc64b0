//! `aoctl logs`: print a session's transcript (what its agent wrote to the terminal), the last
//! lines only with `--tail`; with `-f`, keep printing new output until interrupted or until the
//! server ends the stream (the session was deleted, or the server stopped).

use std::process::ExitCode;

use super::emit_bytes;
use crate::args::LogsArgs;
use crate::client::Client;

pub(crate) async fn run(client: &Client, a: LogsArgs) -> anyhow::Result<ExitCode> {
    let mut stream = client.log(&a.session, a.tail, a.follow).await?;
    let copy = async {
        while let Some(chunk) = stream.next().await? {
            emit_bytes(&chunk);
        }
        anyhow::Ok(())
    };
    if !a.follow {
        copy.await?;
        return Ok(ExitCode::SUCCESS);
    }
    tokio::select! {
        r = copy => r?,
        // Interrupted: what arrived was printed; stop quietly.
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(ExitCode::SUCCESS)
}
