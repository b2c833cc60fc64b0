//! The GitSource reconciler run in-process on the real store in a temporary folder, against real
//! git repositories: planning a revision's writes, and whole syncs.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use aoctl_api::gitsource::{conditions as c, GitSourceSpec, InventoryEntry};
use aoctl_api::reactions::{Reaction, ReactionAction, Reactions};
use aoctl_api::source::{LAST_APPLIED_FIELDS, MANAGED_BY, RECONCILE, REQUESTED_AT};
use aoctl_api::{GitSource, ObjectMeta, Project, Session};
use aoctl_git::repository::source::ManifestFile;

use super::manifests::decode;
use super::plan::{plan, Plan, Refusal};
use super::*;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store")).unwrap();
    (dir, store)
}

fn source(name: &str, url: &str, prune: bool) -> GitSource {
    GitSource {
        api_version: aoctl_api::API_VERSION.into(),
        kind: Kind::GitSource.as_str().into(),
        metadata: ObjectMeta { name: name.into(), ..Default::default() },
        spec: GitSourceSpec {
            url: url.into(),
            prune,
            policy: Some(projects_under("/nonexistent")),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A policy that lets a repository declare Projects under `root`, and Sessions.
fn projects_under(root: &str) -> aoctl_api::gitsource::SourcePolicy {
    aoctl_api::gitsource::SourcePolicy {
        kinds: vec!["Project".into(), "Session".into()],
        project_roots: vec![root.into()],
        ..Default::default()
    }
}

const PROJECT: &str =
    "apiVersion: ao.dev/v1alpha1\nkind: Project\nmetadata: {name: web}\nspec: {path: /nonexistent/web}\n";

fn session(name: &str, prompt: &str) -> String {
    format!(
        "apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {{name: {name}}}\nspec: {{project: web, prompt: {prompt}, stopped: true}}\n"
    )
}

fn files(docs: &[(&str, String)]) -> Vec<ManifestFile> {
    docs.iter().map(|(p, t)| ManifestFile { path: p.to_string(), text: t.clone() }).collect()
}

/// Plans `docs` for `src` and applies the plan (without the source's status).
async fn apply(store: &Store, src: &GitSource, docs: &[(&str, String)]) -> Plan {
    let desired = decode(&files(docs), &src.metadata.name).unwrap();
    let p = plan(store, src, &desired).await.unwrap().unwrap();
    if !p.writes.is_empty() {
        store.apply_all(p.writes.clone(), WriteOptions::default()).await.unwrap();
    }
    p
}

#[tokio::test]
async fn a_project_and_its_sessions_come_in_one_batch_marked_and_owned() {
    let (_dir, store) = store();
    let src = store.create_typed(&source("fleet", "/srv/fleet.git", true)).await.unwrap();
    let docs =
        [("project.yaml", PROJECT.to_string()), ("s/a.yaml", session("a", "one")), ("s/b.yaml", session("b", "two"))];
    let p = apply(&store, &src, &docs).await;
    assert_eq!(p.created, ["project/web", "session/a", "session/b"]);
    assert_eq!(
        p.inventory,
        [("Project", "web"), ("Session", "a"), ("Session", "b")]
            .map(|(k, n)| InventoryEntry { kind: k.into(), name: n.into() })
    );
    let a: Session = store.get_typed("a").await.unwrap();
    assert_eq!(a.metadata.annotations[MANAGED_BY], "gitsource/fleet");
    let owners: Vec<_> = a.metadata.owner_references.iter().map(|r| (r.kind.as_str(), r.controller)).collect();
    assert_eq!(
        owners,
        [("GitSource", Some(false)), ("Project", Some(true))],
        "the source owns it, the project controls it"
    );
    assert_eq!(a.metadata.owner_references[0].uid, src.metadata.uid.clone().unwrap());
    assert_eq!(a.metadata.finalizers, [aoctl_api::finalizers::SESSION_CLEANUP], "admitted as the API admits");

    let again = apply(&store, &src, &docs).await;
    assert!(again.writes.is_empty(), "an unchanged revision plans no write: {:?}", again.writes);
}

#[tokio::test]
async fn drift_is_undone_requests_are_kept_and_disabled_objects_are_left_alone() {
    let (_dir, store) = store();
    let src = store.create_typed(&source("fleet", "/srv/fleet.git", false)).await.unwrap();
    let docs =
        [("project.yaml", PROJECT.to_string()), ("a.yaml", session("a", "one")), ("b.yaml", session("b", "two"))];
    apply(&store, &src, &docs).await;
    let owners = |s: &Session| s.metadata.owner_references.iter().map(|r| r.kind.clone()).collect::<Vec<_>>();
    let a: Session = store.get_typed("a").await.unwrap();
    assert_eq!(owners(&a), ["Project"], "without prune the source owns nothing");

    let mut a: Session = store.get_typed("a").await.unwrap();
    a.spec.prompt = Some("changed by hand".into());
    a.metadata.labels.insert("extra".into(), "x".into());
    a.metadata.annotations.insert(REQUESTED_AT.into(), "2026-01-01T00:00:00Z".into());
    store.update_typed(&a).await.unwrap();
    let mut b: Session = store.get_typed("b").await.unwrap();
    b.spec.prompt = Some("mine now".into());
    b.metadata.annotations.insert(RECONCILE.into(), "disabled".into());
    store.update_typed(&b).await.unwrap();

    let p = apply(&store, &src, &docs).await;
    assert_eq!(
        (p.updated.as_slice(), p.skipped.as_slice()),
        (&["session/a".to_string()][..], &["session/b".to_string()][..])
    );
    let a: Session = store.get_typed("a").await.unwrap();
    assert_eq!(a.spec.prompt.as_deref(), Some("one"));
    assert!(a.metadata.labels.is_empty());
    assert_eq!(a.metadata.annotations[REQUESTED_AT], "2026-01-01T00:00:00Z", "a request is no drift");
    let b: Session = store.get_typed("b").await.unwrap();
    assert_eq!(b.spec.prompt.as_deref(), Some("mine now"));
    assert_eq!(p.inventory.len(), 3, "a disabled object is still the revision's");
}

#[tokio::test]
async fn prune_deletes_only_what_this_source_made() {
    let (_dir, store) = store();
    let src = store.create_typed(&source("fleet", "/srv/fleet.git", true)).await.unwrap();
    let docs = [
        ("project.yaml", PROJECT.to_string()),
        ("a.yaml", session("a", "one")),
        ("b.yaml", session("b", "two")),
        ("c.yaml", session("c", "three")),
    ];
    apply(&store, &src, &docs).await;
    store.create_typed(&Session::new("by-hand", "web", "mine")).await.unwrap();
    let mut c: Session = store.get_typed("c").await.unwrap();
    c.metadata.annotations.insert(RECONCILE.into(), "disabled".into());
    store.update_typed(&c).await.unwrap();

    let p = apply(&store, &src, &docs[..2]).await;
    assert_eq!(p.pruned, ["session/b"], "not the disabled one, not the one made by hand");
    let b: Session = store.get_typed("b").await.unwrap();
    assert!(b.metadata.deletion_timestamp.is_some(), "b is being deleted (its cleanup finalizer runs)");
    store.get_typed::<Session>("by-hand").await.unwrap();

    let keep = store.create_typed(&source("keep", "/srv/keep.git", false)).await.unwrap();
    let docs = [
        ("project.yaml", PROJECT.replace("name: web", "name: other")),
        ("x.yaml", session("x", "x").replace("web", "other")),
    ];
    apply(&store, &keep, &docs).await;
    let p = apply(&store, &keep, &docs[..1]).await;
    assert!(p.pruned.is_empty() && p.writes.is_empty(), "without prune nothing is deleted: {:?}", p.writes);
}

#[tokio::test]
async fn refusals_name_the_file_and_line() {
    let (_dir, store) = store();
    let src = store.create_typed(&source("fleet", "/srv/fleet.git", true)).await.unwrap();
    let desired = decode(&files(&[("s/a.yaml", format!("# the first\n{}", session("a", "one")))]), "fleet").unwrap();
    let refused = plan(&store, &src, &desired).await.unwrap().unwrap_err();
    assert_eq!(refused, Refusal::Invalid("s/a.yaml:1: spec.project: project \"web\" not found".into()));

    let other = store.create_typed(&source("other", "/srv/other.git", false)).await.unwrap();
    let docs = [("project.yaml", PROJECT.to_string())];
    apply(&store, &other, &docs).await;
    let desired = decode(&files(&docs), "fleet").unwrap();
    let refused = plan(&store, &src, &desired).await.unwrap().unwrap_err();
    assert_eq!(
        refused,
        Refusal::ManagedElsewhere("project.yaml:1: project/web exists and is managed by gitsource/other".into())
    );

    // An object made without a source is adopted.
    store.create_typed(&Project::new("solo", "/nonexistent/solo")).await.unwrap();
    let docs = [("p.yaml", PROJECT.replace("name: web", "name: solo"))];
    let p = apply(&store, &src, &docs).await;
    assert_eq!(p.updated, ["project/solo"]);
    let solo: Project = store.get_typed("solo").await.unwrap();
    assert_eq!(solo.metadata.annotations[MANAGED_BY], "gitsource/fleet");
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A repository to commit manifests to, pushed to a bare one the source fetches.
struct Repo {
    work: std::path::PathBuf,
    bare: std::path::PathBuf,
}

impl Repo {
    fn new(root: &Path) -> Repo {
        let (work, bare) = (root.join("work"), root.join("fleet.git"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&bare).unwrap();
        git(&bare, &["init", "-q", "--bare", "-b", "main"]);
        git(&work, &["init", "-q", "-b", "main"]);
        Repo { work, bare }
    }

    fn commit(&self, files: &[(&str, &str)]) {
        for (path, text) in files {
            std::fs::create_dir_all(self.work.join(path).parent().unwrap()).unwrap();
            std::fs::write(self.work.join(path), text).unwrap();
        }
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "-m", "change"]);
        git(&self.work, &["push", "-q", "-f", self.bare.to_str().unwrap(), "HEAD:main"]);
    }
}

#[tokio::test]
async fn a_sync_applies_a_revision_stalls_on_a_bad_one_and_writes_nothing_when_unchanged() {
    let (dir, store) = store();
    let repo = Repo::new(dir.path());
    repo.commit(&[("fleet/project.yaml", PROJECT), ("fleet/sessions/a.yaml", &session("a", "one"))]);
    let ctx = Arc::new(Context {
        store: store.clone(),
        recorder: Recorder::new(store.clone()),
        cache: dir.path().join("sources"),
    });
    let mut src = source("fleet", repo.bare.to_str().unwrap(), true);
    src.spec.path = Some("fleet".into());
    store.create_typed(&src).await.unwrap();
    let sync = || async {
        let now: GitSource = store.get_typed("fleet").await.unwrap();
        reconcile(Arc::new(now), ctx.clone()).await.unwrap();
        store.get_typed::<GitSource>("fleet").await.unwrap()
    };

    let applied = sync().await;
    let revision = applied.status.last_applied_revision.clone().unwrap();
    assert!(revision.starts_with("main@sha1:"), "{revision}");
    assert!(condition::is_true(&applied.status.conditions, c::READY), "{:?}", applied.status);
    assert_eq!(applied.status.inventory.len(), 2);
    store.get_typed::<Session>("a").await.unwrap();

    let unchanged = sync().await;
    assert_eq!(unchanged.metadata.resource_version, applied.metadata.resource_version, "no write");
    let rv = store.resource_version();
    sync().await;
    assert_eq!(store.resource_version(), rv, "a no-change sync writes nothing at all");

    let bad = "apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {name: b}\nspec:\n  project: web\n  agnt: x\n";
    repo.commit(&[("fleet/sessions/b.yaml", bad), ("fleet/sessions/a.yaml", &session("a", "changed"))]);
    let stalled = sync().await;
    let st = &stalled.status;
    let cond = condition::find(&st.conditions, c::STALLED).unwrap();
    assert!(cond.message.starts_with("fleet/sessions/b.yaml:6:") && cond.message.contains("spec.agnt"), "{cond:?}");
    assert_eq!(condition::find(&st.conditions, c::READY).unwrap().reason, c::INVALID_MANIFEST);
    assert_eq!(st.last_applied_revision.as_deref(), Some(revision.as_str()), "the last good revision stays");
    assert_ne!(st.last_attempted_revision.as_deref(), Some(revision.as_str()));
    let a: Session = store.get_typed("a").await.unwrap();
    assert_eq!(a.spec.prompt.as_deref(), Some("one"), "nothing of the bad revision is applied");

    repo.commit(&[("fleet/sessions/b.yaml", &session("b", "two"))]);
    let mut asked: GitSource = store.get_typed("fleet").await.unwrap();
    asked.metadata.annotations.insert(REQUESTED_AT.into(), "2026-12-01T10:00:00Z".into());
    store.update_typed(&asked).await.unwrap();
    let good = sync().await;
    assert!(condition::find(&good.status.conditions, c::STALLED).is_none(), "a good revision clears Stalled");
    assert_eq!(good.status.last_handled_reconcile_at.as_deref(), Some("2026-12-01T10:00:00Z"));
    assert_eq!(good.status.last_applied_revision, good.status.last_attempted_revision);
    assert_eq!(store.get_typed::<Session>("a").await.unwrap().spec.prompt.as_deref(), Some("changed"));

    std::fs::remove_dir_all(&repo.bare).unwrap();
    let gone = sync().await;
    let ready = condition::find(&gone.status.conditions, c::READY).unwrap();
    assert_eq!((ready.status, ready.reason.as_str()), (ConditionStatus::False, c::FETCH_FAILED));
    assert_eq!(gone.status.last_applied_revision, good.status.last_applied_revision);
    store.get_typed::<Session>("b").await.unwrap();

    let mut suspended: GitSource = store.get_typed("fleet").await.unwrap();
    suspended.spec.suspend = true;
    store.update_typed(&suspended).await.unwrap();
    let s = sync().await;
    let reconciling = condition::find(&s.status.conditions, c::RECONCILING).unwrap();
    assert_eq!((reconciling.status, reconciling.reason.as_str()), (ConditionStatus::False, c::SUSPENDED));
    assert_eq!(condition::find(&s.status.conditions, c::READY).unwrap().reason, c::FETCH_FAILED, "Ready unchanged");
}

/// A Session of project `web` whose manifest is not stopped, with `extra` lines of its spec.
fn running(name: &str, prompt: &str, extra: &str) -> String {
    format!(
        "apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {{name: {name}}}\nspec:\n  project: web\n  prompt: {prompt}\n{extra}"
    )
}

#[tokio::test]
async fn a_persons_stop_and_merge_when_green_outlast_syncs_until_the_repository_changes_them() {
    let (dir, store) = store();
    let repo = Repo::new(dir.path());
    repo.commit(&[("fleet/project.yaml", PROJECT), ("fleet/a.yaml", &running("a", "one", ""))]);
    let ctx = Arc::new(Context {
        store: store.clone(),
        recorder: Recorder::new(store.clone()),
        cache: dir.path().join("sources"),
    });
    let mut src = source("fleet", repo.bare.to_str().unwrap(), false);
    src.spec.path = Some("fleet".into());
    store.create_typed(&src).await.unwrap();
    let sync = || async {
        let now: GitSource = store.get_typed("fleet").await.unwrap();
        reconcile(Arc::new(now), ctx.clone()).await.unwrap();
        store.get_typed::<Session>("a").await.unwrap()
    };
    let merge_when_green = || Reactions {
        approved_and_green: Some(Reaction {
            auto: Some(true),
            action: Some(ReactionAction::Merge),
            ..Reaction::default()
        }),
        ..Reactions::default()
    };

    let a = sync().await;
    assert!(!a.spec.stopped);
    assert!(a.metadata.annotations.contains_key(LAST_APPLIED_FIELDS), "made with the record: {:?}", a.metadata);

    // A person presses Stop and Merge when green, and edits the prompt.
    let mut by_hand = a.clone();
    by_hand.spec.stopped = true;
    by_hand.spec.reactions = Some(merge_when_green());
    by_hand.spec.prompt = Some("by hand".into());
    store.update_typed(&by_hand).await.unwrap();
    let a = sync().await;
    assert!(a.spec.stopped, "the person's stop stays");
    assert_eq!(a.spec.reactions, Some(merge_when_green()), "so does Merge when green");
    assert_eq!(a.spec.prompt.as_deref(), Some("one"), "other drift is undone");
    let rv = store.resource_version();
    sync().await;
    assert_eq!(store.resource_version(), rv, "a kept value is no change: the next sync writes nothing");

    // A commit that leaves those fields as they were leaves the person's values too.
    repo.commit(&[("fleet/a.yaml", &running("a", "two", ""))]);
    let a = sync().await;
    assert_eq!((a.spec.prompt.as_deref(), a.spec.stopped), (Some("two"), true));
    assert_eq!(a.spec.reactions, Some(merge_when_green()));

    // A commit that changes the reaction wins over the person's.
    let notify = "  reactions:\n    approved-and-green: {auto: false, action: notify}\n";
    repo.commit(&[("fleet/a.yaml", &running("a", "two", notify))]);
    let a = sync().await;
    let entry = a.spec.reactions.as_ref().and_then(|r| r.approved_and_green.clone()).unwrap();
    assert_eq!((entry.auto, entry.action), (Some(false), Some(ReactionAction::Notify)), "the repository's value wins");
    assert!(a.spec.stopped, "the stop is still the person's");

    // The repository takes the stop up, then lifts it: its new value wins over the person's stop.
    repo.commit(&[("fleet/a.yaml", &running("a", "two", &format!("  stopped: true\n{notify}")))]);
    assert!(sync().await.spec.stopped);
    repo.commit(&[("fleet/a.yaml", &running("a", "two", notify))]);
    assert!(!sync().await.spec.stopped, "a commit that changes `stopped` wins");

    // A stop made after that is kept again.
    let mut by_hand: Session = store.get_typed("a").await.unwrap();
    by_hand.spec.stopped = true;
    store.update_typed(&by_hand).await.unwrap();
    assert!(sync().await.spec.stopped);
}

#[test]
fn the_spec_ref_names_what_is_fetched_and_long_lists_are_cut() {
    let r = |branch: Option<&str>, tag: Option<&str>, commit: Option<&str>| {
        source_ref(&GitRef { branch: branch.map(Into::into), tag: tag.map(Into::into), commit: commit.map(Into::into) })
    };
    assert_eq!(r(Some("main"), None, None), SourceRef::Branch("main".into()));
    assert_eq!(r(None, Some("v1"), None), SourceRef::Tag("v1".into()));
    assert_eq!(r(None, None, Some("ab12")), SourceRef::Commit("ab12".into()));
    assert_eq!(source_ref(&GitSourceSpec::default().reference()), SourceRef::Branch("main".into()));
    let names: Vec<String> = (0..12).map(|i| format!("session/s{i}")).collect();
    assert_eq!(listed(&names[..2]), "session/s0, session/s1");
    assert!(listed(&names).ends_with("session/s9 and 2 more"), "{}", listed(&names));
}
