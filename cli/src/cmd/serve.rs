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
        node: a.node.unwrap_or_else(host_name),
        lease_ttl: a.lease_ttl,
    };
    aoctl_controller::serve(opts).await?;
    Ok(ExitCode::SUCCESS)
}

/// The machine's host name, the default node name; `localhost` when it cannot be read.
fn host_name() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: gethostname writes at most `buf.len()` bytes into the buffer it is given.
        if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0 {
            let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
            if let Ok(name) = std::str::from_utf8(&buf[..end]) {
                if !name.is_empty() {
                    return name.to_string();
                }
            }
        }
    }
    #[cfg(windows)]
    if let Ok(name) = std::env::var("COMPUTERNAME") {
        if !name.is_empty() {
            return name;
        }
    }
    "localhost".to_string()
}
