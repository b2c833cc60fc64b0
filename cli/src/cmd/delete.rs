//! `aoctl delete`: delete objects by kind and name or by manifest; with `--wait`, until their
//! finalizers are done and they are gone.

use std::process::ExitCode;

use aoctl_api::Kind;

use super::emit;
use crate::args::DeleteArgs;
use crate::client::{Client, Deleted};
use crate::manifest;
use crate::object;
use crate::wait;

pub(crate) async fn run(client: &Client, a: DeleteArgs) -> anyhow::Result<ExitCode> {
    let targets: Vec<(Kind, String)> = match a.kind {
        Some(kind) => a.names.iter().map(|n| (kind, n.clone())).collect(),
        None => {
            let mut list = manifest::load(&a.filenames, a.recursive)?;
            manifest::sort_for_delete(&mut list);
            list.iter().map(|m| (m.kind(), m.name().to_string())).collect()
        }
    };
    let mut failed = 0;
    let mut terminating: Vec<(Kind, String)> = vec![];
    for (kind, name) in &targets {
        let shown = object::quoted(*kind, name);
        match client.delete(*kind, name, false).await {
            Ok(Deleted::Gone) => emit(&format!("{shown} deleted\n")),
            Ok(Deleted::Terminating) if a.wait.is_some() => terminating.push((*kind, name.clone())),
            Ok(Deleted::Terminating) => emit(&format!("{shown} deleting\n")),
            Err(e) => {
                eprintln!("error: {e}");
                failed += 1;
            }
        }
    }
    if let Some(timeout) = a.wait {
        let deadline = std::time::Instant::now() + timeout;
        for kind in [Kind::Session, Kind::Project] {
            let names: Vec<String> = terminating.iter().filter(|(k, _)| *k == kind).map(|(_, n)| n.clone()).collect();
            if names.is_empty() {
                continue;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            for (name, _) in wait::wait_for(client, kind, &names, left, wait::gone).await? {
                emit(&format!("{} deleted\n", object::quoted(kind, &name)));
            }
        }
    }
    // Each failure was reported above.
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
