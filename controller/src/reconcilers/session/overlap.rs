//! Overlap: the files a session's branch changes (`status.changedFiles`, diffed with libgit2 only
//! when its head or its base moved) and the other live sessions of its project that change some
//! of the same files (`status.overlaps` and the `Overlapping` condition). Each session diffs only
//! its own branch and finds its siblings' published lists in the index of the sessions (by file),
//! so no reconciler writes another object's status; `serve::Router` wakes the siblings that share
//! a file when a session's list changes.

#[cfg(test)]
use std::collections::BTreeSet;

use aoctl_api::condition::types;
use aoctl_api::session::{reasons, ChangedFiles, Overlap, Phase};
use aoctl_api::ConditionStatus;
use aoctl_git::repository::GitError;
use aoctl_git::workspace::WorkspaceInfo;
use serde_json::Value;

use super::{cond, pr, Error, Reconcile};

/// How many files and sessions the condition's message names before it counts the rest.
const NAMED: usize = 3;

/// The changed files a stored Session publishes for its siblings: `None` unless it is live (not
/// being deleted, not merged or closed) and has computed them.
pub(crate) fn published(o: &Value) -> Option<&Value> {
    let deleting = o.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null());
    let phase = o.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default();
    let finished = [Phase::Merged, Phase::Closed].iter().any(|p| p.as_str() == phase);
    o.pointer("/status/changedFiles/files").filter(|_| !deleting && !finished)
}

impl Reconcile<'_> {
    /// The files the session's branch changes, and which of them its live siblings change too.
    pub(super) async fn overlap(&mut self, ws: &WorkspaceInfo) -> Result<(), Error> {
        let Some(changed) = self.changed_files(ws).await? else { return Ok(()) };
        let (project, name, files) = (&self.project.metadata.name, &self.s.metadata.name, &changed.files);
        let overlaps = self.ctx.index.read(&self.ctx.store, |i| i.overlaps(project, name, files)).await?;
        self.record_overlaps(changed, overlaps);
        Ok(())
    }

    /// The files the branch changes against its base; `None` when there is no head yet, or when
    /// they cannot be read (the `Overlapping` condition then says why).
    async fn changed_files(&mut self, ws: &WorkspaceInfo) -> Result<Option<ChangedFiles>, Error> {
        let Some(head) = ws.head_sha.clone() else { return Ok(None) };
        let (root, base_name) = (pr::branch_repo(ws), self.base_ref());
        let (s, st) = (self.s, &mut *self.st);
        let known = st.changed_files.clone();
        let machine = self.ctx.machine.clone();
        let changed = tokio::task::spawn_blocking(move || -> Result<ChangedFiles, GitError> {
            let git = machine.branches();
            let base = git.resolve_branch(&root, &base_name)?;
            if let Some(known) = known.filter(|k| k.head_sha == head && k.base_sha == base) {
                // Neither the branch nor its base moved: nothing to diff.
                return Ok(known);
            }
            let files = git.changed_files(&root, &head, &base)?;
            let count = u32::try_from(files.len()).unwrap_or(u32::MAX);
            let files = files.into_iter().take(ChangedFiles::MAX_FILES).collect();
            Ok(ChangedFiles { head_sha: head, base_sha: base, files, count })
        })
        .await?;
        match changed {
            Ok(c) => Ok(Some(c)),
            Err(e) => {
                st.changed_files = None;
                st.overlaps.clear();
                cond(st, s, types::OVERLAPPING, ConditionStatus::Unknown, e.reason(), e.to_string());
                Ok(None)
            }
        }
    }

    /// Records the files the branch changes and the sessions that change some of them too.
    fn record_overlaps(&mut self, changed: ChangedFiles, overlaps: Vec<Overlap>) {
        let (s, st) = (self.s, &mut *self.st);
        st.overlaps = overlaps;
        st.changed_files = Some(changed);
        if st.overlaps.is_empty() {
            let msg = "no other session of the project changes the files this branch changes";
            cond(st, s, types::OVERLAPPING, ConditionStatus::False, reasons::NO_OVERLAP, msg);
        } else {
            let msg = message(&st.overlaps);
            cond(st, s, types::OVERLAPPING, ConditionStatus::True, reasons::FILES_OVERLAP, msg);
        }
    }
}

/// The siblings whose files meet `own`, by session name, each with the shared files (sorted):
/// what [`super::index::Index::overlaps`] answers, by comparing every sibling.
#[cfg(test)]
pub(super) fn overlaps<'a>(
    own: &[String],
    siblings: impl Iterator<Item = (&'a String, &'a Vec<String>)>,
) -> Vec<Overlap> {
    let own: BTreeSet<&String> = own.iter().collect();
    let mut out: Vec<Overlap> = siblings
        .filter_map(|(name, files)| {
            let shared: BTreeSet<&String> = files.iter().filter(|f| own.contains(f)).collect();
            let files = shared.into_iter().cloned().collect::<Vec<_>>();
            (!files.is_empty()).then(|| Overlap { session: name.clone(), files })
        })
        .collect();
    out.sort_by(|a, b| a.session.cmp(&b.session));
    out
}

/// The `Overlapping` message: per session, the first shared files and how many more, e.g.
/// `src/a.rs, src/b.rs also changed by session other-1 (and 2 more files)`.
pub(super) fn message(overlaps: &[Overlap]) -> String {
    let mut parts: Vec<String> = overlaps
        .iter()
        .take(NAMED)
        .map(|o| {
            let named = o.files.iter().take(NAMED).map(String::as_str).collect::<Vec<_>>().join(", ");
            let mut part = format!("{named} also changed by session {}", o.session);
            match o.files.len().saturating_sub(NAMED) {
                0 => {}
                1 => part.push_str(" (and 1 more file)"),
                n => part.push_str(&format!(" (and {n} more files)")),
            }
            part
        })
        .collect();
    match overlaps.len().saturating_sub(NAMED) {
        0 => {}
        1 => parts.push("and 1 more session".into()),
        n => parts.push(format!("and {n} more sessions")),
    }
    parts.join("; ")
}

/// What identifies one overlap: the sessions and the files they share, sorted.
pub(super) fn fingerprint(overlaps: &[Overlap]) -> String {
    overlaps.iter().map(|o| format!("{}:{}", o.session, o.files.join(","))).collect::<Vec<_>>().join(";")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use serde_json::json;

    fn paths(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn overlaps_name_the_shared_files_per_session() {
        let own = paths(&["notes/a.md", "src/a.rs", "src/b.rs"]);
        let siblings: BTreeMap<String, Vec<String>> = [
            ("z-last".to_string(), paths(&["src/b.rs"])),
            ("other-1".to_string(), paths(&["src/a.rs", "src/b.rs", "src/c.rs"])),
            ("apart".to_string(), paths(&["notes/apart.md"])),
        ]
        .into();
        let found = overlaps(&own, siblings.iter());
        assert_eq!(
            found,
            [
                Overlap { session: "other-1".into(), files: paths(&["src/a.rs", "src/b.rs"]) },
                Overlap { session: "z-last".into(), files: paths(&["src/b.rs"]) },
            ]
        );
        assert_eq!(
            message(&found),
            "src/a.rs, src/b.rs also changed by session other-1; src/b.rs also changed by session z-last"
        );
        assert_eq!(fingerprint(&found), "other-1:src/a.rs,src/b.rs;z-last:src/b.rs");
        assert!(overlaps(&[], siblings.iter()).is_empty());
    }

    #[test]
    fn messages_count_what_they_do_not_name() {
        let one = |s: &str, n: usize| Overlap { session: s.into(), files: (0..n).map(|i| format!("f{i}")).collect() };
        assert_eq!(message(&[one("other-1", 5)]), "f0, f1, f2 also changed by session other-1 (and 2 more files)");
        assert_eq!(message(&[one("x", 4)]), "f0, f1, f2 also changed by session x (and 1 more file)");
        let many = [one("a", 1), one("b", 1), one("c", 1), one("d", 1), one("e", 1)];
        assert_eq!(
            message(&many),
            "f0 also changed by session a; f0 also changed by session b; f0 also changed by session c; and 2 more sessions"
        );
    }

    #[test]
    fn only_live_sessions_publish() {
        let files = json!({"status": {"phase": "Working", "changedFiles": {"headSha": "h", "baseSha": "b",
            "files": ["a"], "count": 1}}});
        assert_eq!(published(&files), Some(&json!(["a"])));
        let mut merged = files.clone();
        merged["status"]["phase"] = json!("Merged");
        assert_eq!(published(&merged), None);
        let mut deleting = files.clone();
        deleting["metadata"] = json!({"deletionTimestamp": "2024-01-01T00:00:00Z"});
        assert_eq!(published(&deleting), None);
        assert_eq!(published(&json!({"status": {"phase": "Working"}})), None);
    }
}
