//! `aoctl serve`: run the controller and its HTTP API in the foreground until SIGINT or SIGTERM.

use std::process::ExitCode;

use aoctl_controller::StoreBackend;

use crate::args::{Global, ServeArgs, StoreKind};

pub(crate) async fn run(g: &Global, a: ServeArgs) -> anyhow::Result<ExitCode> {
    let data_dir = g.data_dir()?;
    let store = match a.store {
        StoreKind::Sled => StoreBackend::Sled,
        StoreKind::Etcd => StoreBackend::Etcd {
            endpoints: a.etcd_endpoints.iter().map(|e| e.trim().to_string()).filter(|e| !e.is_empty()).collect(),
            prefix: a.etcd_prefix,
        },
    };
    let opts = aoctl_controller::ServeOptions {
        listen: a.listen,
        data_dir,
        token_file: a.token_file,
        allowed_hosts: a.allowed_hosts,
        store,
        node: a.node,
        lease_ttl: a.lease_ttl,
        event_ttl: a.event_ttl,
    };
    aoctl_controller::serve(opts).await?;
    Ok(ExitCode::SUCCESS)
}
