//! A session's work as one unified diff: everything its workspace holds — the branch's commits,
//! changes not committed yet and untracked files (not ignored ones) — against the merge base of
//! its branch with its base, in git's patch format (`diff --git`, `---`/`+++`, `@@` hunks with 3
//! lines of context, "Binary files … differ"), cut at a size limit.
//!
//! A plain checkout is read as git reads it, with its own index. A sandboxed checkout's git
//! folder is not opened (see `sandbox`): its branch is read from the one ref file, its objects
//! through the in-memory view of the main repository, and its work tree is compared with an
//! index made in memory from the branch's tree, so nothing the agent wrote into its index counts.

use std::path::Path;

use aoctl_api::session::WorkspaceKind;
use git2::{Diff, DiffDelta, DiffFile, DiffFormat, DiffOptions, Index, Oid};

use super::{check_name, checkout, sandbox, WorkspaceError, WorkspaceRecord, Workspaces};
use crate::repository;

/// The largest diff the API answers with; a longer one is cut.
pub const DIFF_LIMIT: usize = 8 << 20;

/// A workspace's changes since its branch left its base.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceDiff {
    /// The unified diff; when cut, it ends with a line saying so.
    pub patch: Vec<u8>,
    /// Whether the diff was longer than the limit and cut.
    pub truncated: bool,
    /// The merge base the diff starts from.
    pub merge_base: String,
}

impl Workspaces {
    /// The diff of the workspace of `session` in `project` against the merge base of its branch
    /// with `base_ref` (a branch: local, else on origin; or a full commit id), at most about
    /// `limit` bytes long.
    /// `NoWorkspace` when the session has no complete checkout. Blocks (git); callers run it on
    /// the blocking pool.
    pub fn diff(
        &self,
        project: &str,
        session: &str,
        base_ref: &str,
        limit: usize,
    ) -> Result<WorkspaceDiff, WorkspaceError> {
        check_name(project)?;
        check_name(session)?;
        let path = self.path_of(project, session);
        let missing = || WorkspaceError::NoWorkspace { path: path.clone() };
        let rec = self.read_record(project, session)?.filter(|r| r.is_checkout_done()).ok_or_else(missing)?;
        if rec.kind == WorkspaceKind::None {
            // An empty folder outside git: nothing to compare.
            return Ok(WorkspaceDiff { patch: vec![], truncated: false, merge_base: String::new() });
        }
        if rec.sandbox {
            sandboxed(&rec, &self.git_dir_of(project, session), base_ref, limit)
        } else {
            plain(&rec, base_ref, limit)
        }
    }
}

/// A worktree or clone: its own repository, index and work tree.
fn plain(rec: &WorkspaceRecord, base_ref: &str, limit: usize) -> Result<WorkspaceDiff, WorkspaceError> {
    let repo = checkout::open_checkout(rec, &rec.path)
        .ok_or_else(|| WorkspaceError::NoWorkspace { path: rec.path.clone() })?;
    let fail = failed(&rec.path);
    let tip = match repo.refname_to_id(&format!("refs/heads/{}", rec.branch)) {
        Ok(tip) => tip,
        // The agent renamed or deleted its branch: what it has checked out stands for it.
        Err(_) => repo.head().and_then(|h| h.peel_to_commit()).map(|c| c.id()).map_err(fail)?,
    };
    let base = base_commit(&rec.path, base_ref)?;
    let fork = repo.merge_base(tip, base).map_err(fail)?;
    let tree = repo.find_commit(fork).and_then(|c| c.tree()).map_err(fail)?;
    let diff = repo.diff_tree_to_workdir_with_index(Some(&tree), Some(&mut options(limit))).map_err(fail)?;
    render(&diff, fork, limit, &rec.path)
}

/// A sandboxed checkout: its branch and objects read as `sandbox` allows, its work tree compared
/// through the main repository with an index made in memory.
fn sandboxed(
    rec: &WorkspaceRecord,
    git_dir: &Path,
    base_ref: &str,
    limit: usize,
) -> Result<WorkspaceDiff, WorkspaceError> {
    let fail = failed(&rec.path);
    let view = sandbox::view(&rec.repo, git_dir).map_err(fail)?;
    let tip = match sandbox::read_branch(git_dir, &rec.branch)? {
        Some(tip) => tip,
        None => view.refname_to_id(&format!("refs/heads/{}", rec.branch)).map_err(fail)?,
    };
    let base = base_commit(&rec.repo, base_ref)?;
    let fork = view.merge_base(tip, base).map_err(fail)?;
    let tree = view.find_commit(fork).and_then(|c| c.tree()).map_err(fail)?;
    let mut index = Index::new().map_err(fail)?;
    let committed = view.find_commit(tip).and_then(|c| c.tree()).map_err(fail)?;
    index.read_tree(&committed).map_err(fail)?;
    view.set_index(&mut index).map_err(fail)?;
    view.set_workdir(&rec.path, false).map_err(fail)?;
    let diff = view.diff_tree_to_workdir_with_index(Some(&tree), Some(&mut options(limit))).map_err(fail)?;
    render(&diff, fork, limit, &rec.path)
}

fn failed(path: &Path) -> impl Fn(git2::Error) -> WorkspaceError + Copy + '_ {
    move |e| WorkspaceError::DiffFailed { path: path.to_path_buf(), message: e.message().to_string() }
}

/// The commit of the base branch in the repository at `root`.
fn base_commit(root: &Path, base_ref: &str) -> Result<Oid, WorkspaceError> {
    let not_found = || WorkspaceError::BaseRefNotFound { repo: root.to_path_buf(), base_ref: base_ref.to_string() };
    if let Ok(sha) = repository::resolve_branch(root, base_ref) {
        return Oid::from_str(&sha).map_err(|_| not_found());
    }
    // A full commit id names where an earlier review stopped: the diff then holds what came since.
    let oid = Oid::from_str(base_ref).ok().filter(|_| base_ref.len() == 40).ok_or_else(not_found)?;
    let repo = git2::Repository::open(root).map_err(|_| not_found())?;
    repo.find_commit(oid).map(|c| c.id()).map_err(|_| not_found())
}

/// git's defaults for `git diff`, untracked files with their content, and no file read for a text
/// diff when it is larger than the whole diff may be (it counts as binary).
fn options(limit: usize) -> DiffOptions {
    let mut o = DiffOptions::new();
    o.context_lines(3)
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true)
        .include_typechange(true)
        .ignore_submodules(true)
        .max_size(i64::try_from(limit).unwrap_or(i64::MAX));
    o
}

/// The diff in git's patch format, cut before the first line that would take it past `limit`.
fn render(diff: &Diff<'_>, merge_base: Oid, limit: usize, path: &Path) -> Result<WorkspaceDiff, WorkspaceError> {
    let mut patch = Vec::new();
    let mut truncated = false;
    let printed = diff.print(DiffFormat::Patch, |delta, _, line| {
        let mut text = Vec::new();
        match line.origin() {
            // Content lines come without their `+`, `-` or ` `; headers and markers come whole.
            c @ ('+' | '-' | ' ') => {
                text.push(c as u8);
                text.extend_from_slice(line.content());
            }
            'F' if unread(&delta) => text = unread_header(&delta),
            'B' if unread(&delta) => text = unread_binary(&delta),
            _ => text.extend_from_slice(line.content()),
        }
        if patch.len() + text.len() > limit {
            truncated = true;
            return false;
        }
        patch.extend_from_slice(&text);
        true
    });
    match printed {
        Ok(()) => {}
        Err(_) if truncated => {}
        Err(e) => return Err(failed(path)(e)),
    }
    if truncated {
        if patch.last().is_some_and(|b| *b != b'\n') {
            patch.push(b'\n');
        }
        let size = match limit % (1 << 20) {
            0 => format!("{} MiB", limit >> 20),
            _ => format!("{limit} bytes"),
        };
        patch.extend_from_slice(format!("[the diff is longer than {size} and was cut here]\n").as_bytes());
    }
    Ok(WorkspaceDiff { patch, truncated, merge_base: merge_base.to_string() })
}

/// Whether a side of the delta is a file that libgit2 did not read (larger than the size limit):
/// its id is unknown, and libgit2's header and binary line would describe it as no file.
fn unread(delta: &DiffDelta<'_>) -> bool {
    [delta.old_file(), delta.new_file()].iter().any(|f| u32::from(f.mode()) != 0 && f.id().is_zero())
}

/// The header git writes for a binary file: the paths, and the modes when they change.
fn unread_header(delta: &DiffDelta<'_>) -> Vec<u8> {
    let (old, new) = (delta.old_file(), delta.new_file());
    let (old_mode, new_mode) = (u32::from(old.mode()), u32::from(new.mode()));
    let mut text = b"diff --git ".to_vec();
    text.extend(quoted("a/", old.path_bytes().or(new.path_bytes())));
    text.push(b' ');
    text.extend(quoted("b/", new.path_bytes().or(old.path_bytes())));
    text.push(b'\n');
    let modes = match (old_mode, new_mode) {
        (0, m) => format!("new file mode {m:o}\n"),
        (m, 0) => format!("deleted file mode {m:o}\n"),
        (a, b) if a != b => format!("old mode {a:o}\nnew mode {b:o}\n"),
        _ => String::new(),
    };
    text.extend_from_slice(modes.as_bytes());
    text
}

/// git's line for a binary file whose content is not shown.
fn unread_binary(delta: &DiffDelta<'_>) -> Vec<u8> {
    let side = |f: DiffFile<'_>, prefix: &str| match u32::from(f.mode()) {
        0 => b"/dev/null".to_vec(),
        _ => quoted(prefix, f.path_bytes()),
    };
    let mut text = b"Binary files ".to_vec();
    text.extend(side(delta.old_file(), "a/"));
    text.extend_from_slice(b" and ");
    text.extend(side(delta.new_file(), "b/"));
    text.extend_from_slice(b" differ\n");
    text
}

/// `prefix` and `path` as git writes them in headers: in double quotes, with C escapes and octal
/// bytes, when the path holds control characters, quotes, backslashes or bytes past ASCII.
fn quoted(prefix: &str, path: Option<&[u8]>) -> Vec<u8> {
    let mut whole = prefix.as_bytes().to_vec();
    whole.extend_from_slice(path.unwrap_or_default());
    if !whole.iter().any(|&b| !(0x20..0x7f).contains(&b) || b == b'"' || b == b'\\') {
        return whole;
    }
    let mut out = vec![b'"'];
    for b in whole {
        match b {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0x20..0x7f => out.push(b),
            _ => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
        }
    }
    out.push(b'"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::process::Command;

    use aoctl_api::session::WorkspaceKind;

    use crate::workspace::WorkspaceRequest;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn write(dir: &Path, file: &str, text: &[u8]) {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn commit_all(dir: &Path, message: &str) {
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "-m", message]);
    }

    /// `main` with a text file of 20 numbered lines, a file to delete, an ignore rule and a binary
    /// file.
    /// A scratch folder holding a repository (`repo`, see [`repo`]) and the workspaces' root.
    fn fixture() -> (tempfile::TempDir, std::path::PathBuf, Workspaces) {
        let tmp = tempfile::tempdir().unwrap();
        let main = tmp.path().join("repo");
        std::fs::create_dir_all(&main).unwrap();
        repo(&main);
        let workspaces = Workspaces::new(tmp.path().join("workspaces"));
        (tmp, main, workspaces)
    }

    fn repo(dir: &Path) {
        git(dir, &["init", "-q", "-b", "main"]);
        let lines: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        write(dir, "src/lines.txt", lines.as_bytes());
        write(dir, "gone.txt", b"soon deleted\n");
        write(dir, ".gitignore", b"*.log\n");
        write(dir, "image.bin", &[0, 1, 2, 3, 0, 255]);
        commit_all(dir, "base");
    }

    fn request(repo: &Path, session: &str, sandbox: bool) -> WorkspaceRequest {
        WorkspaceRequest {
            project: "p".into(),
            session: session.into(),
            repo: repo.to_path_buf(),
            branch: format!("aoctl/{session}"),
            base_ref: "main".into(),
            kind: WorkspaceKind::Worktree,
            setup: None,
            sandbox,
            pool: false,
        }
    }

    /// The hunk headers of the diff of one file.
    fn hunks<'a>(patch: &'a str, file: &str) -> Vec<&'a str> {
        let start =
            patch.find(&format!("diff --git a/{file} b/{file}\n")).unwrap_or_else(|| panic!("{file}:\n{patch}"));
        let rest = &patch[start + 1..];
        let end = rest.find("\ndiff --git ").map_or(rest.len(), |i| i);
        rest[..end].lines().filter(|l| l.starts_with("@@ ")).collect()
    }

    /// What the session did: commits on its branch (a line changed, a file added, a file
    /// deleted, the binary changed), then work not committed (a line added at the end), an
    /// untracked file in a new folder and an ignored one.
    fn work(ws: &Path) {
        let mut lines: Vec<String> = (1..=20).map(|i| format!("line {i}\n")).collect();
        lines[9] = "line ten\n".into();
        write(ws, "src/lines.txt", lines.concat().as_bytes());
        write(ws, "src/new.rs", b"fn main() {}\n");
        std::fs::remove_file(ws.join("gone.txt")).unwrap();
        write(ws, "image.bin", &[0, 9, 9, 9, 0, 255]);
        commit_all(ws, "the agent's commit");
        lines.push("line 21\n".into());
        write(ws, "src/lines.txt", lines.concat().as_bytes());
        write(ws, "drafts/todo.md", b"one\ntwo\n");
        write(ws, "build.log", b"ignored\n");
    }

    fn check(patch: &str) {
        assert!(patch.starts_with("diff --git "), "{patch}");
        // The changed line and the uncommitted one, with their new-side line numbers.
        assert_eq!(hunks(patch, "src/lines.txt"), ["@@ -7,7 +7,7 @@ line 6", "@@ -18,3 +18,4 @@ line 17"], "{patch}");
        assert!(patch.contains("--- a/src/lines.txt\n+++ b/src/lines.txt\n"), "{patch}");
        assert!(patch.contains("-line 10\n+line ten\n line 11\n"), "{patch}");
        assert!(patch.contains(" line 20\n+line 21\n"), "{patch}");
        // A committed new file, an untracked one and a deleted one.
        assert!(patch.contains("new file mode 100644\n"), "{patch}");
        assert!(patch.contains("--- /dev/null\n+++ b/src/new.rs\n@@ -0,0 +1 @@\n+fn main() {}\n"), "{patch}");
        assert!(patch.contains("--- /dev/null\n+++ b/drafts/todo.md\n@@ -0,0 +1,2 @@\n+one\n+two\n"), "{patch}");
        assert!(patch.contains("deleted file mode 100644\n"), "{patch}");
        assert!(patch.contains("--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-soon deleted\n"), "{patch}");
        assert!(patch.contains("Binary files a/image.bin and b/image.bin differ\n"), "{patch}");
        assert!(!patch.contains("build.log"), "ignored files are left out: {patch}");
        assert!(!patch.contains(".gitignore"), "unchanged files are left out: {patch}");
    }

    #[test]
    fn a_worktree_shows_its_commits_its_uncommitted_work_and_its_untracked_files() {
        let (_tmp, main, workspaces) = fixture();
        let info = workspaces.ensure(&request(&main, "s1", false)).unwrap();
        let fresh = workspaces.diff("p", "s1", "main", DIFF_LIMIT).unwrap();
        assert!(fresh.patch.is_empty() && !fresh.truncated, "{}", String::from_utf8_lossy(&fresh.patch));
        work(&info.path);
        // The base moves on after the branch left it: its own changes are not the session's.
        write(&main, "main-only.txt", b"on main\n");
        commit_all(&main, "main moves");

        let d = workspaces.diff("p", "s1", "main", DIFF_LIMIT).unwrap();
        let patch = String::from_utf8(d.patch).unwrap();
        check(&patch);
        assert!(!patch.contains("main-only"), "{patch}");
        assert!(!d.truncated);
        assert_eq!(d.merge_base, git(&main, &["rev-parse", "main~1"]).trim());
        // git itself agrees on every line of the tracked files' diff.
        let fork = git(&info.path, &["merge-base", "HEAD", "main"]);
        let by_git = git(&info.path, &["diff", "--no-renames", fork.trim()]);
        for line in by_git.lines().filter(|l| !l.starts_with("index ")) {
            assert!(patch.lines().any(|p| p == line), "{line:?} is missing from\n{patch}");
        }
    }

    #[test]
    fn a_sandboxed_checkout_is_read_without_its_git_folders_index() {
        let (_tmp, main, workspaces) = fixture();
        let info = workspaces.ensure(&request(&main, "s2", true)).unwrap();
        let git_dir = workspaces.git_dir_of("p", "s2");
        // What the agent does in its container: git with the sandbox's git folder.
        let in_box = |args: &[&str]| {
            let mut all = vec!["--git-dir", git_dir.to_str().unwrap(), "--work-tree", info.path.to_str().unwrap()];
            all.extend(args);
            git(&info.path, &all)
        };
        let lines: String =
            (1..=20).map(|i| if i == 10 { "line ten\n".into() } else { format!("line {i}\n") }).collect();
        write(&info.path, "src/lines.txt", lines.as_bytes());
        write(&info.path, "src/new.rs", b"fn main() {}\n");
        std::fs::remove_file(info.path.join("gone.txt")).unwrap();
        write(&info.path, "image.bin", &[0, 9, 9, 9, 0, 255]);
        in_box(&["add", "-A", "--", "src", "gone.txt", "image.bin"]);
        in_box(&["commit", "-q", "-m", "the agent's commit"]);
        write(&info.path, "src/lines.txt", format!("{lines}line 21\n").as_bytes());
        write(&info.path, "drafts/todo.md", b"one\ntwo\n");
        write(&info.path, "build.log", b"ignored\n");
        // An index that stages everything away changes nothing: the work tree is what counts.
        in_box(&["rm", "-q", "-r", "--cached", "src"]);

        let d = workspaces.diff("p", "s2", "main", DIFF_LIMIT).unwrap();
        let patch = String::from_utf8(d.patch).unwrap();
        check(&patch);
        assert!(!patch.contains("b/.git\n"), "{patch}");
    }

    #[test]
    fn a_commit_id_as_base_shows_only_what_came_after_it() {
        let (_tmp, main, workspaces) = fixture();
        let info = workspaces.ensure(&request(&main, "s3", false)).unwrap();
        write(&info.path, "first.txt", b"reviewed already\n");
        commit_all(&info.path, "first");
        let reviewed = git(&info.path, &["rev-parse", "HEAD"]).trim().to_string();
        write(&info.path, "second.txt", b"new since\n");
        commit_all(&info.path, "second");
        let d = workspaces.diff("p", "s3", &reviewed, DIFF_LIMIT).unwrap();
        let patch = String::from_utf8(d.patch).unwrap();
        assert!(patch.contains("+new since"), "{patch}");
        assert!(!patch.contains("reviewed already"), "{patch}");
        assert_eq!(d.merge_base, reviewed);
        let short = &reviewed[..12];
        assert!(matches!(workspaces.diff("p", "s3", short, DIFF_LIMIT), Err(WorkspaceError::BaseRefNotFound { .. })));
    }

    #[test]
    fn a_long_diff_is_cut_at_a_line_with_a_last_line_saying_so() {
        let (_tmp, main, workspaces) = fixture();
        let info = workspaces.ensure(&request(&main, "s3", false)).unwrap();
        for n in 0..40 {
            let lines: String = (0..100).map(|i| format!("added line {n}.{i}\n")).collect();
            write(&info.path, &format!("many/{n:02}.txt"), lines.as_bytes());
        }
        let huge: String = (0..20_000).map(|i| format!("huge line {i}\n")).collect();
        write(&info.path, "z-huge.txt", huge.as_bytes());
        write(&info.path, "src/lines.txt", huge.as_bytes());
        let whole = workspaces.diff("p", "s3", "main", DIFF_LIMIT).unwrap();
        assert!(!whole.truncated);
        assert!(String::from_utf8_lossy(&whole.patch).contains("+huge line 19999\n"));

        let limit = 10_000;
        let cut = workspaces.diff("p", "s3", "main", limit).unwrap();
        assert!(cut.truncated);
        let text = String::from_utf8(cut.patch).unwrap();
        let (kept, note) = text.rsplit_once("[the diff").unwrap();
        assert_eq!(note, " is longer than 10000 bytes and was cut here]\n");
        assert!(kept.len() <= limit && kept.len() > limit - 40, "{}", kept.len());
        assert!(whole.patch.starts_with(kept.as_bytes()), "a prefix of the whole diff");
        let last = kept.lines().last().unwrap();
        assert!(last.starts_with("+added line ") && kept.ends_with('\n'), "{last:?}");

        // A file larger than the limit is not read into a text diff.
        let d = workspaces.diff("p", "s3", "main", 100_000).unwrap();
        let text = String::from_utf8(d.patch).unwrap();
        assert!(!d.truncated, "{}", text.len());
        let new = "diff --git a/z-huge.txt b/z-huge.txt\nnew file mode 100644\nBinary files /dev/null and b/z-huge.txt differ\n";
        assert!(text.contains(new), "{text}");
        let changed =
            "diff --git a/src/lines.txt b/src/lines.txt\nBinary files a/src/lines.txt and b/src/lines.txt differ\n";
        assert!(text.contains(changed), "{text}");
        assert!(text.contains("+added line 39.99\n"));
    }

    #[test]
    fn paths_are_quoted_as_git_quotes_them() {
        assert_eq!(quoted("a/", Some(b"src/main.rs")), b"a/src/main.rs");
        assert_eq!(quoted("b/", Some("caf\u{e9} \"x\"\t.txt".as_bytes())), br#""b/caf\303\251 \"x\"\t.txt""#);
    }

    #[test]
    fn no_workspace_and_no_base_are_errors() {
        let (_tmp, main, workspaces) = fixture();
        assert_eq!(workspaces.diff("p", "none", "main", DIFF_LIMIT).unwrap_err().reason(), "WorkspaceNotFound");
        workspaces.ensure(&request(&main, "s4", false)).unwrap();
        assert_eq!(workspaces.diff("p", "s4", "nope", DIFF_LIMIT).unwrap_err().reason(), "BaseRefNotFound");
        assert_eq!(workspaces.diff("p", "../x", "main", DIFF_LIMIT).unwrap_err().reason(), "InvalidName");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_in_the_work_tree_is_skipped() {
        let (_tmp, main, workspaces) = fixture();
        let info = workspaces.ensure(&request(&main, "s5", false)).unwrap();
        let fifo = std::ffi::CString::new(info.path.join("pipe").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        write(&info.path, "note.txt", b"hello\n");
        let d = workspaces.diff("p", "s5", "main", DIFF_LIMIT).unwrap();
        let text = String::from_utf8(d.patch).unwrap();
        assert!(text.contains("+++ b/note.txt") && !text.contains("pipe"), "{text}");
    }
}
