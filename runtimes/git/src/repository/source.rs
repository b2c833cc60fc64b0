//! A GitSource's repository: fetching one ref into a bare cache repository (local paths,
//! `file://`, `http(s)://` with an optional token) and reading the manifest files of a folder of
//! the fetched commit straight from its git tree, without a checkout.

use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::{Duration, Instant};

use git2::{AutotagOption, Cred, CredentialType, ErrorCode, FetchOptions, FetchPrune, Oid, Repository};

/// The user name a token is sent with: what GitHub, Gitea and GitLab take for a token as password.
pub const TOKEN_USER: &str = "x-access-token";

/// Which ref of the repository to follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceRef {
    /// A branch (`refs/heads/<name>`), followed through force-pushes.
    Branch(String),
    /// A tag (`refs/tags/<name>`), lightweight or annotated; a moved tag is followed too.
    Tag(String),
    /// A commit id, full or abbreviated (at least 4 hex digits).
    Commit(String),
}

impl SourceRef {
    /// The revision string of `commit` fetched for this ref: `main@sha1:<sha>` for a branch,
    /// `v1@sha1:<sha>` for a tag, `sha1:<sha>` for a commit.
    pub fn revision(&self, commit: &str) -> String {
        match self {
            SourceRef::Branch(name) | SourceRef::Tag(name) => format!("{name}@sha1:{commit}"),
            SourceRef::Commit(_) => format!("sha1:{commit}"),
        }
    }

    fn describe(&self) -> String {
        match self {
            SourceRef::Branch(b) => format!("branch `{b}`"),
            SourceRef::Tag(t) => format!("tag `{t}`"),
            SourceRef::Commit(c) => format!("commit `{c}`"),
        }
    }
}

/// How long a fetch may take and how much it may receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchLimits {
    /// The whole fetch, connection included; past it the fetch is aborted.
    pub timeout: Duration,
    /// The bytes received from the server (the pack); past it the fetch is aborted.
    pub max_bytes: u64,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits { timeout: Duration::from_secs(120), max_bytes: 512 * 1024 * 1024 }
    }
}

/// What to fetch.
#[derive(Clone, Copy, Debug)]
pub struct FetchRequest<'a> {
    /// An absolute local path, a `file://` URL or an `http(s)://` URL without credentials in it.
    pub url: &'a str,
    pub reference: &'a SourceRef,
    /// Sent as the password of user [`TOKEN_USER`] when the server asks; never logged or shown.
    pub token: Option<&'a str>,
    pub limits: FetchLimits,
}

/// A fetched ref.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// The full id of the commit the ref resolved to.
    pub commit: String,
    /// [`SourceRef::revision`] of that commit.
    pub revision: String,
}

/// How much of a commit's tree [`read_manifests`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadLimits {
    /// The size of one manifest file.
    pub max_file_bytes: u64,
    /// The sizes of all the manifest files together.
    pub max_total_bytes: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits { max_file_bytes: 1024 * 1024, max_total_bytes: 64 * 1024 * 1024 }
    }
}

/// A manifest file read from a commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestFile {
    /// The path from the repository's root, with `/` separators (`sessions/fix.yaml`).
    pub path: String,
    pub text: String,
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("`{url}`: scheme `{scheme}` is not supported (use a local path, file://, http:// or https://)")]
    UnsupportedScheme { url: String, scheme: String },
    #[error("`{url}`: a local path must be absolute")]
    RelativePath { url: String },
    #[error("`{url}`: the URL holds credentials; give the token in tokenEnv instead")]
    CredentialsInUrl { url: String },
    #[error("fetch {url}: {message}")]
    Fetch { url: String, message: String },
    #[error("fetch {url}: the server asks for credentials and no token is set")]
    AuthRequired { url: String },
    #[error("fetch {url}: the server refused the token")]
    AuthRefused { url: String },
    #[error("fetch {url}: took longer than {}s", .limit.as_secs())]
    Timeout { url: String, limit: Duration },
    #[error("fetch {url}: received more than {limit} bytes")]
    TooLarge { url: String, limit: u64 },
    #[error("{what}: not a valid ref name")]
    BadRef { what: String },
    #[error("{url}: {what} not found")]
    RefNotFound { url: String, what: String },
    #[error("cache {path}: {source}")]
    Cache { path: PathBuf, source: git2::Error },
    #[error("`{path}`: not a valid folder of the repository (relative, without `..`)")]
    BadPath { path: String },
    #[error("`{path}`: no such folder in {commit}")]
    PathNotFound { path: String, commit: String },
    #[error("{path}: not UTF-8 text")]
    NotUtf8 { path: String },
    #[error("{path}: a symbolic link; manifests must be regular files")]
    Symlink { path: String },
    #[error("{path}: {size} bytes, more than the {limit} a manifest file may have")]
    FileTooLarge { path: String, size: u64, limit: u64 },
    #[error("the manifests add up to more than {limit} bytes")]
    TotalTooLarge { limit: u64 },
}

impl SourceError {
    /// The CamelCase reason used in conditions and events.
    pub fn reason(&self) -> &'static str {
        match self {
            SourceError::UnsupportedScheme { .. } => "UnsupportedScheme",
            SourceError::RelativePath { .. } => "RelativePath",
            SourceError::CredentialsInUrl { .. } => "CredentialsInUrl",
            SourceError::Fetch { .. } => "FetchFailed",
            SourceError::AuthRequired { .. } => "AuthRequired",
            SourceError::AuthRefused { .. } => "AuthRefused",
            SourceError::Timeout { .. } => "FetchTimeout",
            SourceError::TooLarge { .. } => "FetchTooLarge",
            SourceError::BadRef { .. } => "BadRef",
            SourceError::RefNotFound { .. } => "RefNotFound",
            SourceError::Cache { .. } => "CacheError",
            SourceError::BadPath { .. } => "BadPath",
            SourceError::PathNotFound { .. } => "PathNotFound",
            SourceError::NotUtf8 { .. } => "NotUtf8",
            SourceError::Symlink { .. } => "Symlink",
            SourceError::FileTooLarge { .. } => "FileTooLarge",
            SourceError::TotalTooLarge { .. } => "ManifestsTooLarge",
        }
    }

    /// Whether the error is of the fetch (the repository, the network, the ref) rather than of
    /// what the fetched commit holds.
    pub fn is_fetch(&self) -> bool {
        !matches!(
            self,
            SourceError::BadPath { .. }
                | SourceError::PathNotFound { .. }
                | SourceError::NotUtf8 { .. }
                | SourceError::Symlink { .. }
                | SourceError::FileTooLarge { .. }
                | SourceError::TotalTooLarge { .. }
        )
    }
}

/// Checks that `url` is one [`fetch`] takes: an absolute local path, `file://`, `http://` or
/// `https://` without a user or password in it.
pub fn check_url(url: &str) -> Result<(), SourceError> {
    let bad = |scheme: &str| SourceError::UnsupportedScheme { url: url.to_string(), scheme: scheme.to_string() };
    if let Some((scheme, rest)) = url.split_once("://") {
        return match scheme.to_ascii_lowercase().as_str() {
            "file" => Ok(()),
            "http" | "https" => {
                let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
                match authority.contains('@') {
                    true => Err(SourceError::CredentialsInUrl { url: url.to_string() }),
                    false => Ok(()),
                }
            }
            other => Err(bad(other)),
        };
    }
    if Path::new(url).is_absolute() {
        return Ok(());
    }
    // `git@host:org/repo` is ssh in scp form.
    if url.split_once(':').is_some_and(|(host, _)| !host.contains('/')) {
        return Err(bad("ssh"));
    }
    Err(SourceError::RelativePath { url: url.to_string() })
}

/// Fetches `request.reference` of `request.url` into the bare repository `cache` (made when
/// missing) with a forcing refspec, so a rewritten history is followed, and resolves it to a commit.
/// A branch or tag that the server no longer advertises is [`SourceError::RefNotFound`] even when
/// the cache still holds it from an earlier fetch; for a commit id every branch and tag is fetched
/// and the commit looked up among them.
pub fn fetch(cache: &Path, request: &FetchRequest<'_>) -> Result<Fetched, SourceError> {
    let url = request.url;
    check_url(url)?;
    set_network_timeouts();
    if let SourceRef::Branch(name) | SourceRef::Tag(name) = request.reference {
        let full = match request.reference {
            SourceRef::Branch(_) => format!("refs/heads/{name}"),
            _ => format!("refs/tags/{name}"),
        };
        if !git2::Reference::is_valid_name(&full) || full.contains('*') {
            return Err(SourceError::BadRef { what: request.reference.describe() });
        }
    }
    let repo = open_cache(cache)?;
    let refspecs: Vec<String> = match request.reference {
        SourceRef::Branch(b) => vec![format!("+refs/heads/{b}:refs/heads/{b}")],
        SourceRef::Tag(t) => vec![format!("+refs/tags/{t}:refs/tags/{t}")],
        SourceRef::Commit(_) => vec!["+refs/heads/*:refs/heads/*".into(), "+refs/tags/*:refs/tags/*".into()],
    };
    let fetch_err = |message: String| SourceError::Fetch { url: url.to_string(), message };
    let mut remote = repo.remote_anonymous(url).map_err(|e| fetch_err(e.message().to_string()))?;

    let limits = request.limits;
    let deadline = Instant::now() + limits.timeout;
    let mut abort: Option<SourceError> = None;
    let mut asked = 0u32;
    let result = {
        let mut callbacks = git2::RemoteCallbacks::new();
        let token = request.token;
        let abort_ref = &mut abort;
        let asked_ref = &mut asked;
        callbacks.credentials(move |_url, _user, allowed| {
            *asked_ref += 1;
            match token {
                Some(t) if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) && *asked_ref == 1 => {
                    Cred::userpass_plaintext(TOKEN_USER, t)
                }
                _ => Err(git2::Error::from_str("no usable credentials")),
            }
        });
        callbacks.transfer_progress(move |p| {
            if Instant::now() > deadline {
                *abort_ref = Some(SourceError::Timeout { url: url.to_string(), limit: limits.timeout });
                return false;
            }
            if p.received_bytes() as u64 > limits.max_bytes {
                *abort_ref = Some(SourceError::TooLarge { url: url.to_string(), limit: limits.max_bytes });
                return false;
            }
            true
        });
        let mut options = FetchOptions::new();
        options.remote_callbacks(callbacks);
        match request.reference {
            SourceRef::Commit(_) => options.download_tags(AutotagOption::All).prune(FetchPrune::On),
            _ => options.download_tags(AutotagOption::None).prune(FetchPrune::Off),
        };
        remote.fetch(&refspecs, Some(&mut options), None)
    };
    if let Err(e) = result {
        if let Some(err) = abort {
            return Err(err);
        }
        // The callback gives the token the first time it is asked; asked again, the server
        // refused it.
        let auth = match request.token {
            None => asked > 0,
            Some(_) => asked > 1,
        };
        if auth || e.code() == ErrorCode::Auth {
            return Err(match request.token {
                None => SourceError::AuthRequired { url: url.to_string() },
                Some(_) => SourceError::AuthRefused { url: url.to_string() },
            });
        }
        if Instant::now() > deadline {
            return Err(SourceError::Timeout { url: url.to_string(), limit: limits.timeout });
        }
        return Err(fetch_err(e.message().to_string()));
    }

    let not_found = || SourceError::RefNotFound { url: url.to_string(), what: request.reference.describe() };
    let cache_err = |source: git2::Error| SourceError::Cache { path: cache.to_path_buf(), source };
    let oid = match request.reference {
        SourceRef::Branch(b) => advertised(&remote, &format!("refs/heads/{b}")).ok_or_else(not_found)?,
        SourceRef::Tag(t) => advertised(&remote, &format!("refs/tags/{t}")).ok_or_else(not_found)?,
        SourceRef::Commit(c) => {
            if c.len() < 4 || c.len() > 40 || !c.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(not_found());
            }
            match c.len() {
                40 => Oid::from_str(c).map_err(|_| not_found())?,
                _ => repo.find_object_by_prefix(c, None).map_err(|_| not_found())?.id(),
            }
        }
    };
    let object = repo.find_object(oid, None).map_err(|e| match e.code() {
        ErrorCode::NotFound => not_found(),
        _ => cache_err(e),
    })?;
    let commit = object.peel_to_commit().map_err(|_| not_found())?.id().to_string();
    Ok(Fetched { revision: request.reference.revision(&commit), commit })
}

/// The id the server advertised for `name`.
fn advertised(remote: &git2::Remote<'_>, name: &str) -> Option<Oid> {
    remote.list().ok()?.iter().find(|h| h.name() == name).map(|h| h.oid())
}

/// Opens the bare cache repository, making it when missing. Lock files left by a process that
/// was killed in the middle of a fetch are removed first: the cache belongs to one source of one
/// controller, which fetches into it one sync at a time, so a lock found here is stale.
fn open_cache(cache: &Path) -> Result<Repository, SourceError> {
    let cache_err = |source: git2::Error| SourceError::Cache { path: cache.to_path_buf(), source };
    if !cache.join("HEAD").exists() {
        std::fs::create_dir_all(cache)
            .map_err(|e| cache_err(git2::Error::from_str(&format!("cannot make the folder: {e}"))))?;
        return Repository::init_bare(cache).map_err(cache_err);
    }
    remove_stale_locks(cache);
    Repository::open_bare(cache).map_err(cache_err)
}

fn remove_stale_locks(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() && entry.file_name() != "objects" {
            remove_stale_locks(&path);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "lock") {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// libgit2's connect and read timeouts for its http transport (a server that stops answering).
/// They are process-wide settings of libgit2, written once here before this process's first fetch
/// through it.
fn set_network_timeouts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the two options are plain integers libgit2 reads only in its network
        // transports; every libgit2 network operation of this process goes through `fetch`,
        // which runs after this `call_once` returns, so no read races this write.
        unsafe {
            let _ = git2::opts::set_server_connect_timeout_in_milliseconds(30_000);
            let _ = git2::opts::set_server_timeout_in_milliseconds(60_000);
        }
    });
}

/// Whether a file name is a manifest's: `.yaml`, `.yml` or `.json`, and not hidden (`.`).
pub fn is_manifest_name(name: &str) -> bool {
    !name.starts_with('.') && [".yaml", ".yml", ".json"].iter().any(|ext| name.ends_with(ext))
}

/// Reads the manifest files (`.yaml`, `.yml`, `.json`) under `folder` (relative to the
/// repository's root; empty or `.` for the root) of `commit` in the cache repository, recursively,
/// from the commit's tree; sorted by path, each named by its path from the repository's root.
/// Hidden files and folders (their names start with `.`, such as `.github/`) are skipped, and so
/// are other files and submodules. A symbolic link with a manifest's name is refused
/// ([`SourceError::Symlink`]); other symbolic links are skipped. Every file must be UTF-8 and
/// within `limits`.
pub fn read_manifests(
    cache: &Path,
    commit: &str,
    folder: &str,
    limits: &ReadLimits,
) -> Result<Vec<ManifestFile>, SourceError> {
    let cache_err = |source: git2::Error| SourceError::Cache { path: cache.to_path_buf(), source };
    let folder = normal_folder(folder)?;
    let repo = Repository::open_bare(cache).map_err(cache_err)?;
    let oid = Oid::from_str(commit).map_err(cache_err)?;
    let root = repo.find_commit(oid).and_then(|c| c.tree()).map_err(cache_err)?;
    let not_found = || SourceError::PathNotFound { path: folder.clone(), commit: commit.to_string() };
    let tree = match folder.is_empty() {
        true => root,
        false => {
            let entry = root.get_path(Path::new(&folder)).map_err(|e| match e.code() {
                ErrorCode::NotFound => not_found(),
                _ => cache_err(e),
            })?;
            match entry.kind() {
                Some(git2::ObjectType::Tree) => repo.find_tree(entry.id()).map_err(cache_err)?,
                _ => return Err(not_found()),
            }
        }
    };
    let odb = repo.odb().map_err(cache_err)?;
    let mut files = vec![];
    let mut total = 0u64;
    let mut stack = vec![(folder.clone(), tree)];
    while let Some((prefix, tree)) = stack.pop() {
        for entry in tree.iter() {
            let Some(name) = entry.name() else {
                return Err(SourceError::NotUtf8 {
                    path: format!("{prefix}/{}", String::from_utf8_lossy(entry.name_bytes())),
                });
            };
            let path = match prefix.is_empty() {
                true => name.to_string(),
                false => format!("{prefix}/{name}"),
            };
            match entry.kind() {
                Some(git2::ObjectType::Tree) if !name.starts_with('.') => {
                    stack.push((path, repo.find_tree(entry.id()).map_err(cache_err)?))
                }
                Some(git2::ObjectType::Blob) if is_manifest_name(name) => {
                    if entry.filemode() == 0o120000 {
                        return Err(SourceError::Symlink { path });
                    }
                    let (size, _) = odb.read_header(entry.id()).map_err(cache_err)?;
                    let size = size as u64;
                    if size > limits.max_file_bytes {
                        return Err(SourceError::FileTooLarge { path, size, limit: limits.max_file_bytes });
                    }
                    total += size;
                    if total > limits.max_total_bytes {
                        return Err(SourceError::TotalTooLarge { limit: limits.max_total_bytes });
                    }
                    let blob = repo.find_blob(entry.id()).map_err(cache_err)?;
                    let text =
                        std::str::from_utf8(blob.content()).map_err(|_| SourceError::NotUtf8 { path: path.clone() })?;
                    files.push(ManifestFile { path, text: text.to_string() });
                }
                _ => {}
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// `folder` without `./`, leading or trailing `/`; refused when it climbs with `..`.
fn normal_folder(folder: &str) -> Result<String, SourceError> {
    let parts: Vec<&str> = folder.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.contains(&"..") || folder.contains('\\') || folder.contains('\0') {
        return Err(SourceError::BadPath { path: folder.to_string() });
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
