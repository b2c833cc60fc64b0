//! The node id file of a data folder: `node-id`, made at the folder's first start as
//! `<host name>-<random suffix>` (or the host name alone in a folder an earlier version ran in),
//! and read at every later start. The controller decides which node a replica is
//! (the controller's `node.rs`); the file and the host name are read here.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The file in the data folder that names its node.
pub const NODE_ID_FILE: &str = "node-id";

/// What an earlier version left in a data folder it ran in.
const EARLIER_RUNS: [&str; 4] = ["sessions", "workspaces", "store", "tmux.sock"];

/// A node id file that could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum NodeIdError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0}: the node id file is empty; remove it to make a new one")]
    Empty(PathBuf),
}

/// The node id the data folder's `node-id` file holds, made when it has none.
pub fn folder_node(data_dir: &Path) -> Result<String, NodeIdError> {
    let path = data_dir.join(NODE_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => return named(&path, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(NodeIdError::Io { path, source: e }),
    }
    let earlier = EARLIER_RUNS.iter().any(|f| data_dir.join(f).exists());
    let id = if earlier { host_name() } else { format!("{}-{}", host_name(), suffix(&path)?) };
    // Written aside and linked into place, which fails when it exists: replicas starting at the
    // same moment in a new folder agree on the first one's id.
    static ASIDE: AtomicU64 = AtomicU64::new(0);
    let aside = ASIDE.fetch_add(1, Ordering::Relaxed);
    let tmp = data_dir.join(format!("{NODE_ID_FILE}.{}.{aside}.tmp", std::process::id()));
    let io = |source| NodeIdError::Io { path: path.clone(), source };
    let written = (|| {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(format!("{id}\n").as_bytes())?;
        f.sync_all()?;
        std::fs::hard_link(&tmp, &path)
    })();
    let _ = std::fs::remove_file(&tmp);
    match written {
        Ok(()) => {
            tracing::info!(node = %id, path = %path.display(), "this data folder's node id was made");
            Ok(id)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            named(&path, &std::fs::read_to_string(&path).map_err(io)?)
        }
        Err(e) => Err(io(e)),
    }
}

fn named(path: &Path, text: &str) -> Result<String, NodeIdError> {
    let id = text.trim();
    if id.is_empty() {
        return Err(NodeIdError::Empty(path.to_path_buf()));
    }
    Ok(id.to_string())
}

/// Eight random hex digits.
fn suffix(path: &Path) -> Result<String, NodeIdError> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(|e| NodeIdError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(format!("no random source: {e}")),
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The data folder as its canonical path, for what a replica registers; as given when it has none.
pub fn canonical_folder(data_dir: &Path) -> PathBuf {
    std::fs::canonicalize(data_dir).unwrap_or_else(|_| data_dir.to_path_buf())
}

/// The machine's host name; `localhost` when it cannot be read.
pub fn host_name() -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_folder_gets_a_node_id_of_its_own_and_keeps_it() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let id = folder_node(a.path()).unwrap();
        let host = host_name();
        let rest = id.strip_prefix(&format!("{host}-")).unwrap_or_else(|| panic!("{id} starts with the host name"));
        assert!(rest.len() == 8 && rest.bytes().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_eq!(folder_node(a.path()).unwrap(), id, "kept across starts");
        assert_eq!(std::fs::read_to_string(a.path().join(NODE_ID_FILE)).unwrap().trim(), id);
        assert_ne!(folder_node(b.path()).unwrap(), id, "another folder is another node");
        let leftovers: Vec<_> = std::fs::read_dir(a.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from(NODE_ID_FILE)], "no temporary file is left");
    }

    #[test]
    fn a_folder_an_earlier_version_ran_in_keeps_the_host_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sessions")).unwrap();
        assert_eq!(folder_node(dir.path()).unwrap(), host_name());
        assert_eq!(folder_node(dir.path()).unwrap(), host_name());
    }

    #[test]
    fn replicas_starting_together_in_a_new_folder_agree() {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<String> = std::thread::scope(|s| {
            let all: Vec<_> = (0..8).map(|_| s.spawn(|| folder_node(dir.path()).unwrap())).collect();
            all.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
    }

    #[test]
    fn an_empty_node_id_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(NODE_ID_FILE), "\n").unwrap();
        assert!(matches!(folder_node(dir.path()), Err(NodeIdError::Empty(_))));
    }
}
