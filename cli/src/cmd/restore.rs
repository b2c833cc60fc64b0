//! `aoctl restore FILE`: loads a backup into an empty store with the server stopped (the one verb
//! besides `serve` that opens the store itself), through `aoctl_controller::restore`.

use std::process::ExitCode;

use aoctl_controller::StoreBackend;
use aoctl_controller::{restore, RestoreOptions};

use crate::args::{Global, RestoreArgs, StoreKind};

pub(crate) async fn run(g: &Global, a: RestoreArgs) -> anyhow::Result<ExitCode> {
    let data_dir = g.data_dir()?;
    let (store, place) = match a.store.kind {
        StoreKind::Sled => (StoreBackend::Sled, data_dir.join("store").display().to_string()),
        StoreKind::Etcd => {
            let endpoints: Vec<String> =
                a.store.etcd_endpoints.iter().map(|e| e.trim().to_string()).filter(|e| !e.is_empty()).collect();
            let place = format!("etcd at {} under {}", endpoints.join(","), a.store.etcd_prefix);
            (StoreBackend::Etcd { endpoints, prefix: a.store.etcd_prefix }, place)
        }
    };
    let opts = RestoreOptions { file: a.file, data_dir, store };
    let (header, restored) = restore(&opts).await?;
    let versions = if restored.versions_kept {
        "every object keeps its resourceVersion".to_string()
    } else {
        format!("resourceVersions were numbered anew, up to {}", restored.resource_version)
    };
    crate::cmd::emit(&format!(
        "restored {} objects of the backup taken at {} (resourceVersion {}, {}) into {place}; {versions}\n",
        restored.objects, header.time, header.resource_version, header.backend
    ));
    Ok(ExitCode::SUCCESS)
}
