//! The `GitSource` kind: a folder of a git repository whose manifests are applied and kept applied.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::RuntimeKind;
use crate::condition::Condition;
use crate::duration::Duration;
use crate::meta::{check_kind, de_api_version, default_api_version, resource_impl, Kind, ObjectMeta};
use crate::validate::{
    at_least_a_second, env_name, git_ref, http_url, is_absolute, relative_path, validate_meta, Errors, FieldError,
    Invalid, Validate,
};

/// Manifests from git: each revision of `spec.ref` is applied whole, or not at all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitSource {
    #[serde(default = "default_api_version", deserialize_with = "de_api_version")]
    pub api_version: String,
    #[serde(default = "gitsource_kind", deserialize_with = "de_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: GitSourceSpec,
    #[serde(default, skip_serializing_if = "GitSourceStatus::is_empty")]
    pub status: GitSourceStatus,
}

fn gitsource_kind() -> String {
    Kind::GitSource.as_str().to_string()
}

fn de_kind<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    check_kind(d, Kind::GitSource)
}

resource_impl!(GitSource, Kind::GitSource);

/// Where the manifests are and how they are kept applied.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitSourceSpec {
    /// The repository: an absolute path, a `file://` URL or an `http(s)://` URL.
    pub url: String,
    /// What of the repository is applied; `{branch: main}` when absent.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<GitRef>,
    /// The folder inside the repository (read recursively); the root when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// How often the repository is fetched and its objects applied again (drift is undone then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// Objects this source applied that left the repository are deleted, and so are all of its
    /// objects when the source is deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prune: bool,
    /// `true` stops fetching and applying; what was applied stays.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// The environment variable of the controller holding a token for an `https://` URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// The environment variable holding the secret that signs the repository's push webhooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret_env: Option<String>,
    /// What the repository may declare; the strict default when absent (docs/gitops.md#what-a-fleet-repository-may-declare).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SourcePolicy>,
}

/// What a fleet repository may declare. A commit to it is code run as the controller's user
/// (an agent with its approvals bypassed is any command), so by default it may declare Sessions
/// and IssueSources of built-in agents only; an object the policy refuses stalls the revision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourcePolicy {
    /// The kinds it may create and change: `Session` and `IssueSource` when absent; `Project`
    /// and `GitSource` only when listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// Whether it may run commands of its own: a custom agent (`agent: {command: …}`, also in a
    /// template, a reviewer or a Project's defaults), a Project's `setup.commands` and command
    /// notifiers. Off when absent: agents are the built-in ones.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub commands: bool,
    /// Absolute folders a Project's `path` must lie in; a Project is refused when none is listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub project_roots: Vec<String>,
    /// The runtime every Session and IssueSource template must name, and every runtime it
    /// declares must be (e.g. `docker`, for agents you do not trust); any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeKind>,
    /// Whether an `env` value may be `$(NAME)`, which hands an agent the controller's variable
    /// `NAME` (a token too); off when absent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub env_references: bool,
}

impl SourcePolicy {
    /// The kinds a source may declare when its policy names none.
    pub const DEFAULT_KINDS: [Kind; 2] = [Kind::Session, Kind::IssueSource];
    /// The kinds a policy may name.
    pub const KINDS: [Kind; 4] = [Kind::Project, Kind::Session, Kind::IssueSource, Kind::GitSource];

    /// What is wrong with the policy itself: kinds it does not know, roots that are not absolute
    /// or climb with `..`.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = vec![];
        for (i, k) in self.kinds.iter().enumerate() {
            if !Self::KINDS.iter().any(|kind| kind.as_str() == k) {
                let names: Vec<&str> = Self::KINDS.iter().map(|k| k.as_str()).collect();
                let why = format!("`{k}` is not one of {}", names.join(", "));
                errors.push(FieldError::new(format!("spec.policy.kinds[{i}]"), why));
            }
        }
        for (i, root) in self.project_roots.iter().enumerate() {
            let path = std::path::Path::new(root);
            let ups = path.components().any(|c| matches!(c, std::path::Component::ParentDir));
            if !(root.starts_with('/') || path.is_absolute()) || ups {
                let why = format!("`{root}` must be an absolute path without `..`");
                errors.push(FieldError::new(format!("spec.policy.projectRoots[{i}]"), why));
            }
        }
        errors
    }

    /// Whether the policy lets the repository declare `kind`.
    pub fn allows(&self, kind: Kind) -> bool {
        if self.kinds.is_empty() {
            Self::DEFAULT_KINDS.contains(&kind)
        } else {
            self.kinds.iter().any(|k| k == kind.as_str())
        }
    }
}

/// How often a source syncs when `spec.interval` is absent.
pub const DEFAULT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

impl GitSourceSpec {
    /// The ref to apply, `{branch: main}` by default.
    pub fn reference(&self) -> GitRef {
        self.git_ref.clone().unwrap_or_else(|| GitRef { branch: Some("main".into()), ..Default::default() })
    }

    /// The sync interval.
    pub fn interval(&self) -> std::time::Duration {
        self.interval.map_or(DEFAULT_INTERVAL, Duration::as_std)
    }

    /// Whether this source's repository is one of `urls` (a push webhook's clone, HTML, SSH and
    /// git URLs), compared without a trailing `/` or `.git` and with the scheme and host in any case.
    pub fn names_repository(&self, urls: &[&str]) -> bool {
        let mine = comparable_url(&self.url);
        urls.iter().any(|u| !u.is_empty() && comparable_url(u) == mine)
    }
}

/// A URL reduced to what names the repository: the scheme and host lower-cased, no trailing `/`
/// or `.git`.
fn comparable_url(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    let url = url.strip_suffix(".git").unwrap_or(url);
    match url.find("://") {
        Some(i) => {
            let rest = &url[i + 3..];
            let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            format!("{}://{}{path}", url[..i].to_ascii_lowercase(), host.to_ascii_lowercase())
        }
        None => url.to_string(),
    }
}

/// One of a branch, a tag or a commit id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// A full 40-hex commit id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl GitRef {
    /// The revision string of `commit` fetched for this ref: `main@sha1:<id>`, `v1@sha1:<id>`,
    /// or `sha1:<id>` for a commit ref.
    pub fn revision(&self, commit: &str) -> String {
        match (&self.branch, &self.tag) {
            (Some(b), _) => format!("{b}@sha1:{commit}"),
            (None, Some(t)) => format!("{t}@sha1:{commit}"),
            (None, None) => format!("sha1:{commit}"),
        }
    }
}

/// What the source last did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitSourceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Reconciling` and `Stalled` (a revision that cannot be applied as it is).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The revision whose objects are in force.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,
    /// The newest revision fetched, applied or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// The objects of the applied revision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inventory: Vec<InventoryEntry>,
    /// The last `ao.dev/reconcile-requested-at` value acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

impl GitSourceStatus {
    pub fn is_empty(&self) -> bool {
        *self == GitSourceStatus::default()
    }
}

/// An object a source applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InventoryEntry {
    pub kind: String,
    pub name: String,
}

/// Condition types and reasons of a GitSource.
pub mod conditions {
    pub const READY: &str = "Ready";
    pub const RECONCILING: &str = "Reconciling";
    pub const STALLED: &str = "Stalled";
    /// `Ready=True`: the fetched revision is applied.
    pub const APPLIED: &str = "Applied";
    /// A manifest of the revision does not decode, validate or pass admission.
    pub const INVALID_MANIFEST: &str = "InvalidManifest";
    /// The repository or the ref could not be fetched.
    pub const FETCH_FAILED: &str = "FetchFailed";
    /// The store refused the revision's writes.
    pub const APPLY_FAILED: &str = "ApplyFailed";
    /// `spec.suspend` is set.
    pub const SUSPENDED: &str = "Suspended";
    /// A sync is under way.
    pub const PROGRESSING: &str = "Progressing";
}

impl Validate for GitSource {
    fn validate(&self) -> Vec<FieldError> {
        let mut errs = vec![];
        validate_meta(&self.metadata, &mut errs);
        let mut e = Errors(errs);
        let s = &self.spec;
        e.check("spec.url", source_url(&s.url));
        if let Some(r) = &s.git_ref {
            let set = [&r.branch, &r.tag, &r.commit].iter().filter(|v| v.is_some()).count();
            if set != 1 {
                e.check("spec.ref", Err("must name exactly one of branch, tag and commit".into()));
            }
            if let Some(b) = &r.branch {
                e.check("spec.ref.branch", git_ref(b));
            }
            if let Some(t) = &r.tag {
                e.check("spec.ref.tag", git_ref(t));
            }
            if let Some(c) = &r.commit {
                if c.len() != 40 || !c.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                    e.check(
                        "spec.ref.commit",
                        Err(format!("`{c}` is not a full commit id (40 lower-case hex digits)").into()),
                    );
                }
            }
        }
        if let Some(p) = &s.path {
            if p != "." && p != "./" {
                e.check("spec.path", relative_path(p.trim_start_matches("./")));
            }
        }
        if let Some(i) = s.interval {
            e.check("spec.interval", at_least_a_second(i));
        }
        if let Some(v) = &s.token_env {
            e.check("spec.tokenEnv", env_name(v));
            if !(s.url.starts_with("https://") || loopback_http(&s.url)) {
                e.check(
                    "spec.tokenEnv",
                    Err("a token is only sent to an https:// URL (or http:// on this machine)".into()),
                );
            }
        }
        if let Some(v) = &s.webhook_secret_env {
            e.check("spec.webhookSecretEnv", env_name(v));
        }
        if let Some(p) = &s.policy {
            e.0.extend(p.validate());
        }
        e.0
    }
}

/// The repository URLs a GitSource fetches: a local absolute path, `file://` or `http(s)://`.
fn source_url(url: &str) -> Result<(), Invalid> {
    if url.is_empty() {
        return Err("is required: an absolute path, a file:// URL or an https:// URL".into());
    }
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!("`{}` contains a space or a control character", url.escape_debug()).into());
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        return http_url(url);
    }
    if let Some(p) = url.strip_prefix("file://") {
        return if p.starts_with('/') { Ok(()) } else { Err(format!("`{url}` must name an absolute path").into()) };
    }
    if is_absolute(url) {
        return Ok(());
    }
    Err(format!("`{url}` is not a repository aoctl fetches: use an absolute path, file:// or https://").into())
}

/// Whether `url` is `http://` to this machine's loopback address.
fn loopback_http(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else { return false };
    let authority = rest.split('/').next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host_port.split(':').next().unwrap_or(""),
    };
    matches!(host, "127.0.0.1" | "localhost" | "::1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitsources() {
        let with = |spec: GitSourceSpec| {
            let g = GitSource {
                metadata: ObjectMeta { name: "fleet".into(), ..Default::default() },
                spec,
                ..Default::default()
            };
            g.validate().into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>()
        };
        let spec = |url: &str| GitSourceSpec { url: url.into(), ..Default::default() };
        for ok in
            ["/srv/git/fleet.git", "file:///srv/git/fleet", "https://github.com/o/fleet.git", "http://127.0.0.1:9/f"]
        {
            assert_eq!(with(spec(ok)), Vec::<String>::new(), "{ok}");
        }
        for bad in ["", "fleet", "ssh://git@host/f", "git@github.com:o/f", "ext::sh -c x", "file://rel", "/a b"] {
            assert_eq!(with(spec(bad)).len(), 1, "{bad}");
        }
        let two = GitRef { branch: Some("main".into()), tag: Some("v1".into()), commit: None };
        assert_eq!(
            with(GitSourceSpec { git_ref: Some(two), ..spec("/r") }),
            ["spec.ref: must name exactly one of branch, tag and commit"]
        );
        let short = GitRef { commit: Some("abc123".into()), ..Default::default() };
        assert_eq!(with(GitSourceSpec { git_ref: Some(short), ..spec("/r") }).len(), 1);
        assert_eq!(with(GitSourceSpec { path: Some("../up".into()), ..spec("/r") }).len(), 1);
        assert_eq!(with(GitSourceSpec { path: Some("./sessions".into()), ..spec("/r") }), Vec::<String>::new());
        let policy = |p: SourcePolicy| with(GitSourceSpec { policy: Some(p), ..spec("/r") });
        let good = SourcePolicy {
            kinds: vec!["Project".into(), "Session".into()],
            project_roots: vec!["/srv/repos".into()],
            ..Default::default()
        };
        assert_eq!(policy(good.clone()), Vec::<String>::new());
        let bad = SourcePolicy {
            kinds: vec!["Event".into()],
            project_roots: vec!["repos".into(), "/srv/../etc".into()],
            ..good
        };
        assert_eq!(
            policy(bad),
            [
                "spec.policy.kinds[0]: `Event` is not one of Project, Session, IssueSource, GitSource",
                "spec.policy.projectRoots[0]: `repos` must be an absolute path without `..`",
                "spec.policy.projectRoots[1]: `/srv/../etc` must be an absolute path without `..`"
            ]
        );
        let token = |url: &str| with(GitSourceSpec { token_env: Some("FLEET_TOKEN".into()), ..spec(url) });
        assert_eq!(token("https://github.com/o/f"), Vec::<String>::new());
        assert_eq!(token("http://localhost:8080/f"), Vec::<String>::new());
        assert_eq!(token("http://[::1]:8080/f"), Vec::<String>::new());
        assert_eq!(token("http://example.com/f").len(), 1, "a token never travels in the clear");
        assert_eq!(token("/srv/f").len(), 1);
    }

    #[test]
    fn revisions_name_the_ref_and_the_commit() {
        let c = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(GitSourceSpec::default().reference().revision(c), format!("main@sha1:{c}"));
        let tag = GitRef { tag: Some("v1".into()), ..Default::default() };
        assert_eq!(tag.revision(c), format!("v1@sha1:{c}"));
        let commit = GitRef { commit: Some(c.into()), ..Default::default() };
        assert_eq!(commit.revision(c), format!("sha1:{c}"));
    }

    #[test]
    fn a_push_names_the_repository_by_any_of_its_urls() {
        let spec = GitSourceSpec { url: "https://GitHub.com/octo/fleet.git".into(), ..Default::default() };
        assert!(spec.names_repository(&["https://github.com/octo/fleet"]));
        assert!(spec.names_repository(&["", "git@github.com:octo/fleet.git", "https://github.com/octo/fleet/"]));
        assert!(!spec.names_repository(&["https://github.com/octo/Fleet"]), "the path keeps its case");
        assert!(!spec.names_repository(&["https://github.com/octo/fleet-2"]));
        assert!(!spec.names_repository(&[]));
        let local = GitSourceSpec { url: "/srv/git/fleet.git".into(), ..Default::default() };
        assert!(local.names_repository(&["/srv/git/fleet"]));
        assert_eq!(GitSourceSpec::default().interval(), DEFAULT_INTERVAL);
    }
}
