//! Reading git repositories (root, default branch, head, origin, how far a branch is ahead) and
//! finding the files two commits conflict in or one changes, with git2; cloning, pushing and
//! fetching with the git program; and running the git program (its version, a command in a folder
//! within a time limit). [`source`] fetches and reads a GitSource's repository.

pub mod source;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use git2::{BranchType, ErrorCode, Repository};

/// What the controller needs to know about a repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoInfo {
    /// The working tree's top folder.
    pub root: PathBuf,
    /// `origin/HEAD`'s branch, else `main` or `master` when present, else the checked-out branch.
    pub default_branch: Option<String>,
    /// Commit HEAD points at; none in an empty repository.
    pub(crate) head_sha: Option<String>,
    pub(crate) origin_url: Option<String>,
    /// `owner/name` when origin is on github.com.
    pub github_repo: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{path}: no such file or directory")]
    NotFound { path: PathBuf },
    #[error("{path}: not a git repository")]
    NotAGitRepository { path: PathBuf },
    #[error("{path}: a bare repository has no working tree to start sessions from")]
    Bare { path: PathBuf },
    #[error("{path}: branch `{branch}` not found (neither local nor on origin)")]
    BranchNotFound { path: PathBuf, branch: String },
    #[error("{path}: {source}")]
    Git { path: PathBuf, source: git2::Error },
    #[error("git clone {url}: {message}")]
    Clone { url: String, message: String },
    #[error("git push of branch `{branch}`: {message}")]
    Push { branch: String, message: String },
    #[error("git fetch of `{what}`: {message}")]
    Fetch { what: String, message: String },
}

impl GitError {
    /// The CamelCase reason used in conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            GitError::NotFound { .. } => "RepositoryNotFound",
            GitError::NotAGitRepository { .. } => "NotAGitRepository",
            GitError::Bare { .. } => "BareRepository",
            GitError::BranchNotFound { .. } => "BranchNotFound",
            GitError::Git { .. } => "GitError",
            GitError::Clone { .. } => "CloneFailed",
            GitError::Push { .. } => "PushFailed",
            GitError::Fetch { .. } => "FetchFailed",
        }
    }
}

/// The absolute form of `path` with every link resolved, as `std::fs::canonicalize` gives it but,
/// on Windows, without the `\\?\` prefix of a drive path (`C:\…`), which neither people nor
/// every program (git among them) read as the path it is.
pub fn canonicalize(path: &Path) -> std::io::Result<PathBuf> {
    let full = path.canonicalize()?;
    #[cfg(windows)]
    if let Some(rest) = full.to_str().and_then(|s| s.strip_prefix(r"\\?\")) {
        let drive = rest.as_bytes();
        if drive.len() >= 3 && drive[0].is_ascii_alphabetic() && drive[1] == b':' && drive[2] == b'\\' {
            return Ok(PathBuf::from(rest));
        }
    }
    Ok(full)
}

/// Opens the repository containing `path` and reads its facts.
pub fn inspect(path: &Path) -> Result<RepoInfo, GitError> {
    if !path.exists() {
        return Err(GitError::NotFound { path: path.to_path_buf() });
    }
    let repo = Repository::discover(path).map_err(|e| match e.code() {
        ErrorCode::NotFound => GitError::NotAGitRepository { path: path.to_path_buf() },
        _ => GitError::Git { path: path.to_path_buf(), source: e },
    })?;
    let root = repo.workdir().ok_or_else(|| GitError::Bare { path: path.to_path_buf() })?;
    let root = canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let head_sha = repo.head().ok().and_then(|h| h.target()).map(|o| o.to_string());
    let origin_url = repo.find_remote("origin").ok().and_then(|r| r.url().map(str::to_string));
    let github_repo = origin_url.as_deref().and_then(github_repo_of);
    Ok(RepoInfo { default_branch: default_branch(&repo), root, head_sha, origin_url, github_repo })
}

fn default_branch(repo: &Repository) -> Option<String> {
    if let Ok(r) = repo.find_reference("refs/remotes/origin/HEAD") {
        if let Some(target) = r.symbolic_target() {
            if let Some(b) = target.strip_prefix("refs/remotes/origin/") {
                return Some(b.to_string());
            }
        }
    }
    for b in ["main", "master"] {
        if repo.find_branch(b, BranchType::Local).is_ok() {
            return Some(b.to_string());
        }
    }
    // An unborn HEAD still names its branch.
    let head = repo.find_reference("HEAD").ok()?;
    head.symbolic_target().and_then(|t| t.strip_prefix("refs/heads/")).map(str::to_string)
}

/// The commit a branch points at: the local branch, else `origin/<branch>`.
pub fn resolve_branch(root: &Path, branch: &str) -> Result<String, GitError> {
    let repo = Repository::open(root).map_err(|e| GitError::Git { path: root.to_path_buf(), source: e })?;
    for (name, kind) in [(branch.to_string(), BranchType::Local), (format!("origin/{branch}"), BranchType::Remote)] {
        if let Ok(b) = repo.find_branch(&name, kind) {
            if let Some(oid) = b.get().target() {
                return Ok(oid.to_string());
            }
        }
    }
    Err(GitError::BranchNotFound { path: root.to_path_buf(), branch: branch.to_string() })
}

/// `owner/name` of a github.com remote URL in https, ssh or scp-like form.
pub(crate) fn github_repo_of(url: &str) -> Option<String> {
    let rest =
        ["https://github.com/", "http://github.com/", "ssh://git@github.com/", "git@github.com:", "git://github.com/"]
            .iter()
            .find_map(|p| url.strip_prefix(p))?;
    let rest = rest.trim_end_matches('/');
    let rest = rest.strip_suffix(".git").unwrap_or(rest);
    let (owner, name) = rest.split_once('/')?;
    (!owner.is_empty() && !name.is_empty() && !name.contains('/')).then(|| format!("{owner}/{name}"))
}

/// How many commits `branch` has that `base` does not (both resolved like `resolve_branch`).
pub fn ahead(root: &Path, branch: &str, base: &str) -> Result<usize, GitError> {
    let repo = Repository::open(root).map_err(|e| GitError::Git { path: root.to_path_buf(), source: e })?;
    let oid = |b: &str| -> Result<git2::Oid, GitError> {
        resolve_branch(root, b)
            .and_then(|s| git2::Oid::from_str(&s).map_err(|e| GitError::Git { path: root.to_path_buf(), source: e }))
    };
    let (ours, theirs) = (oid(branch)?, oid(base)?);
    let (ahead, _) =
        repo.graph_ahead_behind(ours, theirs).map_err(|e| GitError::Git { path: root.to_path_buf(), source: e })?;
    Ok(ahead)
}

/// Pushes `branch` from `workdir` to `remote` with the `git` command (its transports and
/// credential helpers); never forces. The `git` command runs `workdir`'s config and hooks, so
/// `workdir` must be a repository the controller trusts: for a sandboxed checkout, the main
/// repository (the controller moved the branch there), never the sandbox.
pub fn push(workdir: &Path, remote: &str, branch: &str) -> Result<(), GitError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(workdir)
        .args(["push", "--quiet", "--porcelain", "--", remote])
        .arg(format!("refs/heads/{branch}:refs/heads/{branch}"))
        .stdin(Stdio::null())
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| GitError::Push { branch: branch.to_string(), message: e.to_string() })?;
    if !out.status.success() {
        let message = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(GitError::Push { branch: branch.to_string(), message });
    }
    Ok(())
}

/// Fetches `branch` of `remote` into `refs/remotes/<remote>/<branch>` with the `git` command (its
/// transports and credential helpers; the same trust in `workdir` as [`push`]); the fetched commit.
pub fn fetch_branch(workdir: &Path, remote: &str, branch: &str) -> Result<String, GitError> {
    let what = format!("{remote}/{branch}");
    let out = Command::new("git")
        .arg("-C")
        .arg(workdir)
        .args(["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", remote])
        .arg(format!("+refs/heads/{branch}:refs/remotes/{remote}/{branch}"))
        .stdin(Stdio::null())
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| GitError::Fetch { what: what.clone(), message: e.to_string() })?;
    if !out.status.success() {
        let message = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(GitError::Fetch { what, message });
    }
    let repo = Repository::open(workdir).map_err(|e| GitError::Git { path: workdir.to_path_buf(), source: e })?;
    let r = repo
        .find_reference(&format!("refs/remotes/{remote}/{branch}"))
        .and_then(|r| r.peel_to_commit())
        .map_err(|e| GitError::Git { path: workdir.to_path_buf(), source: e })?;
    Ok(r.id().to_string())
}

/// The files that conflict when commit `theirs` is merged into commit `ours` (both SHAs present
/// in the repository at `root`), computed in memory with libgit2's merge of the two trees at
/// their merge base; sorted, each once. Empty when they merge cleanly.
pub fn conflicting_files(root: &Path, ours: &str, theirs: &str) -> Result<Vec<String>, GitError> {
    let err = |e: git2::Error| GitError::Git { path: root.to_path_buf(), source: e };
    let repo = Repository::open(root).map_err(err)?;
    let commit = |sha: &str| git2::Oid::from_str(sha).and_then(|oid| repo.find_commit(oid)).map_err(err);
    let (ours, theirs) = (commit(ours)?, commit(theirs)?);
    let index = repo.merge_commits(&ours, &theirs, None).map_err(err)?;
    let mut files = vec![];
    for conflict in index.conflicts().map_err(err)? {
        let conflict = conflict.map_err(err)?;
        let entry = conflict.our.or(conflict.their).or(conflict.ancestor);
        if let Some(e) = entry {
            let path = String::from_utf8_lossy(&e.path).into_owned();
            if !files.contains(&path) {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The paths commit `head` changes since it left `base` (both SHAs present in the repository at
/// `root`): the diff of the tree of their merge base against `head`'s tree, computed in memory with
/// libgit2. A deleted or renamed file counts under its old path and a renamed one under its new
/// path too; sorted, each once. Empty when `head` is `base` or behind it.
pub fn changed_files(root: &Path, head: &str, base: &str) -> Result<Vec<String>, GitError> {
    let err = |e: git2::Error| GitError::Git { path: root.to_path_buf(), source: e };
    let repo = Repository::open(root).map_err(err)?;
    let oid = |sha: &str| git2::Oid::from_str(sha).map_err(err);
    let (head, base) = (oid(head)?, oid(base)?);
    let fork = repo.merge_base(head, base).map_err(err)?;
    let tree = |oid: git2::Oid| repo.find_commit(oid).and_then(|c| c.tree()).map_err(err);
    let (old, new) = (tree(fork)?, tree(head)?);
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None).map_err(err)?;
    let mut files = std::collections::BTreeSet::new();
    for delta in diff.deltas() {
        for file in [delta.old_file(), delta.new_file()] {
            if let Some(path) = file.path().filter(|_| !file.id().is_zero()) {
                files.insert(path.to_string_lossy().into_owned());
            }
        }
    }
    Ok(files.into_iter().collect())
}

/// Clones `url` into `dest` with the `git` command (which has every transport and credential helper).
pub fn clone(url: &str, dest: &Path) -> Result<(), GitError> {
    let failed = |message: String| GitError::Clone { url: url.to_string(), message };
    // Cloned beside the destination and renamed into place once whole, so an interrupted clone
    // never sits where a finished one is looked for; one left by a killed run is removed first.
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let partial = dest.with_file_name(format!(".{name}.partial"));
    if partial.exists() {
        std::fs::remove_dir_all(&partial).map_err(|e| failed(format!("cannot remove {}: {e}", partial.display())))?;
    }
    let out = Command::new("git")
        .args(["clone", "--quiet", "--"])
        .arg(url)
        .arg(&partial)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(failed(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    std::fs::rename(&partial, dest).map_err(|e| failed(format!("cannot move the clone to {}: {e}", dest.display())))
}

/// The URL of the `origin` remote of the repository at `path`; `None` when it has none.
pub fn origin_url(path: &Path) -> Result<Option<String>, GitError> {
    let repo = Repository::open(path).map_err(|e| match e.code() {
        ErrorCode::NotFound => GitError::NotAGitRepository { path: path.to_path_buf() },
        _ => GitError::Git { path: path.to_path_buf(), source: e },
    })?;
    let origin = match repo.find_remote("origin") {
        Ok(r) => r,
        Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(GitError::Git { path: path.to_path_buf(), source: e }),
    };
    Ok(origin.url().map(str::to_string))
}

/// Whether two remote URLs name the same repository: equal once a trailing `/` and `.git` are
/// dropped (`https://host/o/r.git` and `https://host/o/r/` are one).
pub fn same_remote(a: &str, b: &str) -> bool {
    let norm = |u: &str| {
        let u = u.trim().trim_end_matches('/');
        u.strip_suffix(".git").unwrap_or(u).to_string()
    };
    norm(a) == norm(b)
}

/// The environment variables that would make a `git` command work on another repository, index
/// or object store than the folder it is run in.
const REPO_ENV: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
];

/// The `(major, minor)` version of the git program `program`, as `git --version` prints it
/// (`git version 2.47.3`, `git version 2.39.5.windows.1`, `git version 2.39.3 (Apple Git-145)`);
/// none when it cannot be run or answers otherwise within 10 s.
pub(crate) fn version(program: &Path) -> Option<(u32, u32)> {
    let mut cmd = Command::new(program);
    cmd.arg("--version");
    let out = run_bounded(cmd, std::time::Duration::from_secs(10)).ok()?;
    if !out.status.success() {
        return None;
    }
    parse_version(&String::from_utf8_lossy(&out.stdout))
}

fn parse_version(text: &str) -> Option<(u32, u32)> {
    let number = text.trim().strip_prefix("git version ")?.split_whitespace().next()?;
    let mut parts = number.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Why a run of the git program (`run_in`) did not succeed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// It could not be started or waited for, or was killed at its time limit.
    #[error("{}: {source}", .program.display())]
    Run { program: PathBuf, source: std::io::Error },
    /// It ran and failed; its standard error says why (its exit status when that is empty).
    #[error("{}", failure_text(.program, .status, .stderr))]
    Failed { program: PathBuf, status: ExitStatus, stderr: String },
}

/// What a failed run of git says: its standard error, else the program and its exit status.
fn failure_text(program: &Path, status: &ExitStatus, stderr: &str) -> String {
    if stderr.is_empty() {
        format!("{} {status}", program.display())
    } else {
        stderr.to_string()
    }
}

/// Runs the git program `program` in `dir` with `args`, with no input, no prompt and none of the
/// variables that point git elsewhere; killed after `timeout`. On Linux it also dies with the
/// thread that waits for it, so a killed controller leaves no git writing into a folder that
/// the next attempt clears and makes again.
pub(crate) fn run_in(program: &Path, dir: &Path, args: &[&str], timeout: std::time::Duration) -> Result<(), RunError> {
    let mut cmd = Command::new(program);
    cmd.arg("-C").arg(dir).args(args).env("GIT_TERMINAL_PROMPT", "0");
    for var in REPO_ENV {
        cmd.env_remove(var);
    }
    let out = run_bounded(cmd, timeout).map_err(|source| RunError::Run { program: program.to_path_buf(), source })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(RunError::Failed { program: program.to_path_buf(), status: out.status, stderr })
}

/// Runs `cmd` with no input and its output captured, killing it after `timeout`.
fn run_bounded(mut cmd: Command, timeout: std::time::Duration) -> std::io::Result<std::process::Output> {
    use std::io::Read;
    use std::time::{Duration, Instant};

    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(2) is async-signal-safe and touches only the child being started.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    // Read both pipes while waiting, so a chatty child never blocks on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("killed after {} s", timeout.as_secs()),
            ));
        }
        std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(Duration::from_millis(20));
    };
    Ok(std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
        assert!(ok.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&ok.stderr));
    }

    #[test]
    fn names_the_files_that_conflict() {
        let tmp = tempfile::tempdir().unwrap();
        let (origin, dir) = (tmp.path().join("origin.git"), tmp.path().join("work"));
        std::fs::create_dir_all(&origin).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        git(&origin, &["init", "-q", "--bare", "-b", "main"]);
        git(&dir, &["init", "-q", "-b", "main"]);
        let commit = |file: &str, text: &str| {
            std::fs::write(dir.join(file), text).unwrap();
            git(&dir, &["add", file]);
            git(&dir, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", file]);
        };
        commit("a.txt", "one\n");
        commit("b.txt", "base\n");
        git(&dir, &["remote", "add", "origin", origin.to_str().unwrap()]);
        git(&dir, &["push", "-q", "origin", "main"]);
        git(&dir, &["checkout", "-q", "-b", "topic"]);
        commit("a.txt", "topic\n");
        commit("c.txt", "only on the topic\n");
        let topic = inspect(&dir).unwrap().head_sha.unwrap();
        git(&dir, &["checkout", "-q", "main"]);
        commit("a.txt", "main\n");
        commit("b.txt", "main too\n");
        git(&dir, &["push", "-q", "origin", "main"]);
        git(&dir, &["reset", "-q", "--hard", "HEAD~2"]);

        let base = fetch_branch(&dir, "origin", "main").unwrap();
        assert_ne!(Some(base.clone()), inspect(&dir).unwrap().head_sha, "the fetched base is the moved one");
        assert_eq!(conflicting_files(&dir, &topic, &base).unwrap(), vec!["a.txt".to_string()]);
        let old = inspect(&dir).unwrap().head_sha.unwrap();
        assert!(conflicting_files(&dir, &topic, &old).unwrap().is_empty(), "merges cleanly with the old base");
        assert_eq!(fetch_branch(&dir, "origin", "gone").unwrap_err().reason(), "FetchFailed");
    }

    #[test]
    fn names_the_files_a_branch_changes_since_its_merge_base() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        let commit = |file: &str, text: Option<&str>| {
            match text {
                Some(t) => {
                    std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
                    std::fs::write(dir.join(file), t).unwrap();
                    git(dir, &["add", file]);
                }
                None => git(dir, &["rm", "-q", file]),
            }
            git(dir, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", file]);
            inspect(dir).unwrap().head_sha.unwrap()
        };
        commit("a.txt", Some("one\n"));
        let base = commit("gone.txt", Some("soon removed\n"));
        git(dir, &["checkout", "-q", "-b", "topic"]);
        assert!(changed_files(dir, &base, &base).unwrap().is_empty(), "nothing changed yet");
        commit("src/new.rs", Some("fn main() {}\n"));
        commit("a.txt", Some("two\n"));
        let topic = commit("gone.txt", None);
        let want = ["a.txt", "gone.txt", "src/new.rs"].map(String::from).to_vec();
        assert_eq!(changed_files(dir, &topic, &base).unwrap(), want);

        // The base moves on, touching a file of its own: only the branch's changes count.
        git(dir, &["checkout", "-q", "main"]);
        let moved = commit("main-only.txt", Some("on main\n"));
        assert_eq!(changed_files(dir, &topic, &moved).unwrap(), want);

        // A change undone by a later commit is no change.
        git(dir, &["checkout", "-q", "topic"]);
        let undone = commit("a.txt", Some("one\n"));
        assert_eq!(changed_files(dir, &undone, &moved).unwrap(), ["gone.txt", "src/new.rs"]);
        assert!(changed_files(dir, &moved, &undone).unwrap().contains(&"main-only.txt".to_string()));
        assert_eq!(changed_files(dir, "0123", &base).unwrap_err().reason(), "GitError");
    }

    #[test]
    fn inspects_a_real_repository() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "trunk"]);
        let info = inspect(dir).unwrap();
        assert_eq!(info.default_branch.as_deref(), Some("trunk"));
        assert_eq!(info.head_sha, None);
        git(dir, &["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "x"]);
        git(dir, &["remote", "add", "origin", "git@github.com:acme/widgets.git"]);
        std::fs::create_dir(dir.join("sub")).unwrap();
        let info = inspect(&dir.join("sub")).unwrap();
        assert_eq!(info.root, dir.canonicalize().unwrap());
        assert_eq!(info.github_repo.as_deref(), Some("acme/widgets"));
        assert_eq!(resolve_branch(dir, "trunk").unwrap(), info.head_sha.unwrap());
        assert!(matches!(resolve_branch(dir, "nope"), Err(GitError::BranchNotFound { .. })));
    }

    #[test]
    fn errors_name_the_reason() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(inspect(&tmp.path().join("missing")).unwrap_err().reason(), "RepositoryNotFound");
        assert_eq!(inspect(tmp.path()).unwrap_err().reason(), "NotAGitRepository");
    }

    #[test]
    fn reads_git_versions_and_runs_git_in_a_folder() {
        assert_eq!(parse_version("git version 2.47.3\n"), Some((2, 47)));
        assert_eq!(parse_version("git version 2.39.5.windows.1"), Some((2, 39)));
        assert_eq!(parse_version("git version 2.39.3 (Apple Git-145)"), Some((2, 39)));
        assert_eq!(parse_version("hub version 2.14.2"), None);
        assert_eq!(parse_version("git version x.y"), None);
        let found = version(Path::new("git")).expect("git on PATH answers --version");
        assert!(found >= (2, 0), "{found:?}");
        assert_eq!(version(Path::new("/nonexistent/git")), None);

        let tmp = tempfile::tempdir().unwrap();
        let secs = std::time::Duration::from_secs(30);
        run_in(Path::new("git"), tmp.path(), &["init", "-q", "-b", "trunk"], secs).unwrap();
        assert!(tmp.path().join(".git/HEAD").is_file());
        let err = run_in(Path::new("git"), tmp.path(), &["rev-parse", "--verify", "nope"], secs).unwrap_err();
        assert!(matches!(err, RunError::Failed { ref status, .. } if !status.success()), "{err:?}");
        let text = err.to_string();
        assert!(text.contains("nope") || text.contains("fatal"), "{text}");
        let err = run_in(Path::new("/nonexistent/git"), tmp.path(), &["status"], secs).unwrap_err();
        assert!(matches!(err, RunError::Run { .. }), "{err:?}");
        assert!(err.to_string().starts_with("/nonexistent/git: "), "{err}");
    }

    #[test]
    fn github_urls() {
        assert_eq!(github_repo_of("https://github.com/a/b.git").as_deref(), Some("a/b"));
        assert_eq!(github_repo_of("ssh://git@github.com/a/b").as_deref(), Some("a/b"));
        assert_eq!(github_repo_of("https://gitlab.com/a/b"), None);
    }
}
