//! Files only the user may read: the data directory (mode 0700 when it is made) and the API's
//! bearer token in it, made at first start from the operating system's random source (mode 0600).

use std::io::Write;
use std::path::Path;

/// Bytes of randomness in a token (written as 64 hex digits).
const TOKEN_BYTES: usize = 32;

/// Makes `dir` and its missing parents, each it makes readable by the user only.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// The text of the token file at `path` (made by [`ensure_token_file`], or given).
pub fn read_token_file(path: &Path) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

/// Makes the token file at `path` unless it exists. An existing one that others may read is
/// made private again (and said so in the log); one that is not a regular file is an error.
pub fn ensure_token_file(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.is_file() => {
            return Err(std::io::Error::other("the token file is not a regular file"));
        }
        Ok(meta) => {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                if meta.permissions().mode() & 0o077 != 0 {
                    tracing::warn!(path = %path.display(), "the token file was readable by others; it is private again");
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
                }
            }
            #[cfg(not(unix))]
            let _ = meta;
            return Ok(());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(format!("no random source: {e}")))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = match opts.open(path) {
        Ok(f) => f,
        // Another start made it meanwhile: that one is the token.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(e),
    };
    f.write_all(format!("{token}\n").as_bytes())?;
    f.sync_all()
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_token_is_made_once_private_and_random() {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("a/b");
        private_dir(&data).unwrap();
        assert_eq!(std::fs::metadata(&data).unwrap().permissions().mode() & 0o777, 0o700);
        let path = data.join("token");
        ensure_token_file(&path).unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        assert_eq!(first.trim().len(), 64, "{first}");
        assert!(first.trim().bytes().all(|b| b.is_ascii_hexdigit()), "{first}");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        ensure_token_file(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first, "an existing token is kept");

        let other = tmp.path().join("other");
        ensure_token_file(&other).unwrap();
        assert_ne!(std::fs::read_to_string(&other).unwrap(), first, "each token is new");

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        ensure_token_file(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);

        std::fs::create_dir(tmp.path().join("dir")).unwrap();
        assert!(ensure_token_file(&tmp.path().join("dir")).is_err());
    }
}
