//! This replica's node: the machine and data folder its tmux and process sessions live on, which
//! their `status.runtime.node` names. `--node` names it; without it, the data folder's `node-id`
//! file does, made at the folder's first start as `<host name>-<random suffix>`, so two replicas
//! with data folders of their own are two nodes, on one machine too, and replicas sharing a
//! folder are one. A folder that an earlier version already ran in (it holds sessions,
//! workspaces, a store or a tmux socket) keeps the host name, which that version recorded.
//!
//! On etcd a replica registers its node (`aoctl_store_etcd::NodeClaim`: node, host, data folder,
//! process) for as long as it runs, and refuses to start when a live replica of another data
//! folder holds the node.

use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) use aoctl_runtimes::node_id::{folder_node, host_name, NodeIdError, NODE_ID_FILE};

use aoctl_store_etcd::{EtcdStore, NodeClaim, RegisterError, Registration};

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Id(#[from] NodeIdError),
    #[error(
        "{source}; replicas of one node share its data folder: give this replica a --node of its own, or leave \
         --node unset to use its data folder's ({path})"
    )]
    Taken { source: RegisterError, path: PathBuf },
    #[error("cannot register this replica's node in etcd: {0}")]
    Register(RegisterError),
}

/// The node `explicit` names, else the one the data folder's node id file names (made now at the
/// folder's first start). The folder must exist.
pub(crate) fn resolve(explicit: Option<&str>, data_dir: &Path) -> Result<String, NodeError> {
    // Made even when --node is given, so the folder keeps one name whatever later starts pass.
    let from_folder = folder_node(data_dir)?;
    Ok(explicit.map_or(from_folder, str::to_string))
}

/// Registers this replica as `node` in `etcd` for as long as the registration is kept, with
/// leases of `ttl`; refuses when a live replica of another data folder holds the node.
pub(crate) async fn register(
    etcd: &EtcdStore,
    node: &str,
    data_dir: &Path,
    ttl: Duration,
) -> Result<Registration, NodeError> {
    let folder = aoctl_runtimes::node_id::canonical_folder(data_dir);
    let claim = NodeClaim {
        node: node.to_string(),
        host: host_name(),
        data_dir: folder.display().to_string(),
        pid: std::process::id(),
    };
    etcd.register_node(&claim, ttl).await.map_err(|e| match e {
        e @ RegisterError::Taken { .. } => NodeError::Taken { source: e, path: data_dir.join(NODE_ID_FILE) },
        e => NodeError::Register(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_node_wins_and_the_folder_keeps_its_own() {
        let a = tempfile::tempdir().unwrap();
        let id = folder_node(a.path()).unwrap();
        assert_eq!(resolve(Some("build-1"), a.path()).unwrap(), "build-1", "--node wins");
        assert_eq!(resolve(None, a.path()).unwrap(), id);
    }
}
