//! The `IssueSource` kind: the open issues of a project's tracker that match a query, one Session
//! each, made from a template.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agent::{AgentRef, DockerSpec, Permissions, RestartPolicy, RuntimeKind, WorkspaceSpec};
use crate::condition::Condition;
use crate::duration::Duration;
use crate::meta::{check_kind, de_api_version, default_api_version, resource_impl, Kind, ObjectMeta};
use crate::reactions::Reactions;
use crate::review::ReviewSpec;
use crate::session::{PullRequestSpec, Session, SessionSpec};
use crate::validate::forges::{labels, team_key, MAX_LABEL};
use crate::validate::{at_least_a_second, check_labels, dns1123_label, validate_meta, Errors, FieldError, Validate};

/// A backlog as sessions: every matching open issue gets a Session named `<source>-<number>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssueSource {
    #[serde(default = "default_api_version", deserialize_with = "de_api_version")]
    pub api_version: String,
    #[serde(default = "issuesource_kind", deserialize_with = "de_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub spec: IssueSourceSpec,
    #[serde(default, skip_serializing_if = "IssueSourceStatus::is_empty")]
    pub status: IssueSourceStatus,
}

fn issuesource_kind() -> String {
    Kind::IssueSource.as_str().to_string()
}

fn de_kind<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    check_kind(d, Kind::IssueSource)
}

resource_impl!(IssueSource, Kind::IssueSource);

/// Which issues, and the sessions made of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssueSourceSpec {
    /// The Project whose repository's tracker is read, and whose sessions these are.
    pub project: String,
    /// The query on the project's GitHub repository.
    #[serde(default)]
    pub github: GithubIssueQuery,
    /// The query on the project's GitLab issues, for a project with `spec.gitlab`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitlab: Option<GitlabIssueQuery>,
    /// The query on Linear, for a project with `spec.linear`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear: Option<LinearIssueQuery>,
    /// At most this many of the source's sessions are live at once; the other issues wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<u32>,
    /// How often the tracker is read (a read that finds nothing new costs no rate limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// What each Session's spec is made of.
    #[serde(default)]
    pub template: SessionTemplate,
    /// What happens to a session when its issue closes or stops matching: `stop` (default),
    /// `delete` or `keep`. A session whose pull request merged is finished and left as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_close: Option<OnClose>,
}

impl IssueSourceSpec {
    /// The poll interval.
    pub fn interval(&self) -> std::time::Duration {
        self.interval.map_or(crate::gitsource::DEFAULT_INTERVAL, Duration::as_std)
    }

    pub fn on_close(&self) -> OnClose {
        self.on_close.unwrap_or(OnClose::Stop)
    }
}

/// GitHub issues by labels (all of them) and state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GithubIssueQuery {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Only open issues get sessions; `open` is the only state the query takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<IssueState>,
}

/// GitLab issues by labels (all of them) and state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitlabIssueQuery {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Only open issues get sessions; `open` is the only state the query takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<IssueState>,
}

/// Linear issues of one team, by labels (all of them) and workflow states.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinearIssueQuery {
    /// The team's key, the prefix of its issue identifiers (`ENG` of `ENG-42`).
    pub team: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Names of the workflow states that get sessions (`Todo`, `In Progress`); when empty, every
    /// state that is neither completed nor canceled. An issue that leaves them is closed for the
    /// source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<String>,
}

/// The issue states a query selects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IssueState {
    #[default]
    Open,
}

/// What becomes of a session whose issue closed or stopped matching.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnClose {
    /// `spec.stopped: true`: the agent stops and the workspace stays; a reopened issue resumes it.
    Stop,
    /// The Session is deleted (its branch stays).
    Delete,
    /// Nothing changes.
    Keep,
}

impl OnClose {
    pub fn as_str(self) -> &'static str {
        match self {
            OnClose::Stop => "stop",
            OnClose::Delete => "delete",
            OnClose::Keep => "keep",
        }
    }
}

impl fmt::Display for OnClose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The fields of a Session's spec a source fills in for each issue (the project, the issue and
/// the branch come from the source and the issue).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionTemplate {
    /// Labels of every Session made.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Permissions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceSpec>,
    /// The first message, with `{{number}}`, `{{reference}}` (`#42`, `ENG-42`), `{{title}}`,
    /// `{{body}}`, `{{labels}}` and `{{url}}` replaced by the issue's. The issue's title and body join the first prompt anyway (as for
    /// any session with `spec.issue`), fenced as text from the tracker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_ref: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequestSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reactions: Option<Reactions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewSpec>,
}

impl SessionTemplate {
    /// The spec of the session for `issue` of `project`, its prompt rendered.
    pub fn to_spec(&self, project: &str, issue: &IssueFields) -> SessionSpec {
        SessionSpec {
            project: project.to_string(),
            agent: self.agent.clone(),
            agent_args: self.agent_args.clone(),
            permissions: self.permissions,
            runtime: self.runtime,
            workspace: self.workspace,
            prompt: self.prompt.as_deref().map(|p| render(p, issue)),
            issue: Some(issue.reference.clone()),
            base_ref: self.base_ref.clone(),
            env: self.env.clone(),
            restart_policy: self.restart_policy,
            pull_request: self.pull_request.clone(),
            docker: self.docker.clone(),
            reactions: self.reactions.clone(),
            review: self.review.clone(),
            ..Default::default()
        }
    }
}

/// What a template may use of an issue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IssueFields {
    pub number: u64,
    /// How the session's `spec.issue` names it: `42`, or Linear's `ENG-42`.
    pub reference: String,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    pub url: String,
}

/// The placeholders a template may use.
pub const PLACEHOLDERS: [&str; 6] = ["number", "reference", "title", "body", "labels", "url"];

/// The placeholders of `template` (`{{ name }}`, spaces allowed inside the braces), in order.
pub fn placeholders(template: &str) -> Vec<&str> {
    let mut out = vec![];
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else { break };
        out.push(rest[start + 2..start + 2 + len].trim());
        rest = &rest[start + 2 + len + 2..];
    }
    out
}

/// `template` with each known placeholder replaced by the issue's value; `{{labels}}` is the
/// labels joined with `, `. Unknown placeholders are left as written (validation refuses them).
/// An issue reference as people write it: `#42` for a number, Linear's `ENG-42` as it is.
pub fn display_reference(reference: &str) -> String {
    let r = reference.trim().trim_start_matches('#');
    if r.bytes().all(|b| b.is_ascii_digit()) {
        format!("#{r}")
    } else {
        r.to_string()
    }
}

pub fn render(template: &str, issue: &IssueFields) -> String {
    let mut out = String::with_capacity(template.len() + issue.body.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else { break };
        out.push_str(&rest[..start]);
        let whole = &rest[start..start + 2 + len + 2];
        match rest[start + 2..start + 2 + len].trim() {
            "number" => out.push_str(&issue.number.to_string()),
            "reference" => out.push_str(&display_reference(&issue.reference)),
            "title" => out.push_str(&issue.title),
            "body" => out.push_str(&issue.body),
            "labels" => out.push_str(&issue.labels.join(", ")),
            "url" => out.push_str(&issue.url),
            _ => out.push_str(whole),
        }
        rest = &rest[start + whole.len()..];
    }
    out.push_str(rest);
    out
}

/// The name of the session `source` makes for issue `number`.
pub fn session_name(source: &str, number: u64) -> String {
    format!("{source}-{number}")
}

/// What the source did last.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssueSourceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: the tracker was read and the sessions match it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The source's sessions, by issue.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<IssueSession>,
    /// Matching open issues without a session yet, because of `maxSessions`, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<String>,
    /// Matching open issues held back, oldest first: their author may not write to the
    /// repository, and no one who may has applied one of the source's labels. Such a person
    /// applying one lets the issue in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldIssue>,
    /// When the tracker was last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_poll_time: Option<crate::meta::Time>,
    /// The last `ao.dev/reconcile-requested-at` value acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

impl IssueSourceStatus {
    pub fn is_empty(&self) -> bool {
        *self == IssueSourceStatus::default()
    }
}

/// One issue's session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssueSession {
    /// The issue number.
    pub issue: String,
    pub session: String,
    /// `open` (the session works on it), `closed` (ended per `onClose`), `finished` (its pull
    /// request merged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// An issue an IssueSource does not take yet, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeldIssue {
    /// The issue number.
    pub issue: String,
    /// Who opened it; empty for a deleted account.
    pub author: String,
    /// What the tracker says of them, and what would let the issue in.
    pub reason: String,
}

/// Condition types and reasons of an IssueSource.
pub mod conditions {
    pub const READY: &str = "Ready";
    /// `Ready=True`: the sessions match the tracker.
    pub const SYNCED: &str = "Synced";
    pub const PROJECT_NOT_FOUND: &str = "ProjectNotFound";
    /// The project has no tracker to read issues from (spec.repo, spec.gitlab or spec.linear).
    pub const NO_TRACKER: &str = "NoTracker";
    /// The tracker could not be read.
    pub const TRACKER_FAILED: &str = "TrackerFailed";
    /// A session made from the template does not validate.
    pub const INVALID_TEMPLATE: &str = "InvalidTemplate";
    /// Event: a matching issue is held back until a trusted person labels it.
    pub const ISSUE_HELD: &str = "IssueHeld";
    /// Event: a held issue was let in by a trusted person's label.
    pub const ISSUE_VOUCHED: &str = "IssueVouched";
}

/// The longest IssueSource name: `<name>-<number>` must still be a DNS label for issue numbers of
/// up to ten digits.
pub const MAX_ISSUESOURCE_NAME: usize = 52;

impl Validate for IssueSource {
    fn validate(&self) -> Vec<FieldError> {
        let mut errs = vec![];
        validate_meta(&self.metadata, &mut errs);
        let mut e = Errors(errs);
        if self.metadata.name.len() > MAX_ISSUESOURCE_NAME {
            e.check(
                "metadata.name",
                Err(format!(
                    "is {} characters long; at most {MAX_ISSUESOURCE_NAME} are allowed, so that `<name>-<issue number>` names a session",
                    self.metadata.name.len()
                ).into()),
            );
        }
        let s = &self.spec;
        if s.project.is_empty() {
            e.check("spec.project", Err("is required: the name of the Project whose issues become sessions".into()));
        } else {
            e.check("spec.project", dns1123_label(&s.project));
        }
        check_issue_query(s, &mut e);
        if s.max_sessions == Some(0) {
            e.check("spec.maxSessions", Err("must be at least 1 (delete the source to have no sessions)".into()));
        }
        if let Some(i) = s.interval {
            e.check("spec.interval", at_least_a_second(i));
        }
        let t = &s.template;
        if let Some(p) = &t.prompt {
            for name in placeholders(p) {
                if !PLACEHOLDERS.contains(&name) {
                    e.check(
                        "spec.template.prompt",
                        Err(format!(
                            "`{{{{{name}}}}}` is not a placeholder; use {}",
                            PLACEHOLDERS.map(|p| format!("{{{{{p}}}}}")).join(", ")
                        )
                        .into()),
                    );
                }
            }
        }
        check_labels("spec.template.labels", &t.labels, &mut e, true);
        // The rest of the template is checked as the spec of a session made from it.
        let spec = t.to_spec(if s.project.is_empty() { "p" } else { &s.project }, &Default::default());
        let session =
            Session { metadata: ObjectMeta { name: "s-1".into(), ..Default::default() }, spec, ..Default::default() };
        for fe in session.validate() {
            if let Some(rest) = fe.field.strip_prefix("spec.") {
                if !rest.starts_with("project") && !rest.starts_with("issue") {
                    e.0.push(FieldError::new(format!("spec.template.{rest}"), fe.message));
                }
            }
        }
        e.0
    }
}

/// Checks the one tracker query of an IssueSource.
fn check_issue_query(s: &IssueSourceSpec, e: &mut Errors) {
    let github_set = !s.github.labels.is_empty() || s.github.state.is_some();
    let set = [github_set, s.gitlab.is_some(), s.linear.is_some()].iter().filter(|b| **b).count();
    if set > 1 {
        e.check("spec", Err("sets more than one of github, gitlab and linear: a source reads one tracker".into()));
    }
    labels(e, "spec.github.labels", &s.github.labels, "GitHub");
    if let Some(g) = &s.gitlab {
        labels(e, "spec.gitlab.labels", &g.labels, "GitLab");
    }
    if let Some(l) = &s.linear {
        e.check("spec.linear.team", team_key(&l.team));
        labels(e, "spec.linear.labels", &l.labels, "Linear");
        for (i, st) in l.states.iter().enumerate() {
            if st.trim().is_empty() || st.chars().count() > MAX_LABEL || st.chars().any(char::is_control) {
                e.check(
                    format!("spec.linear.states[{i}]"),
                    Err(format!("`{}` is not a workflow state name", st.escape_debug()).into()),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(check: impl FnOnce(&mut Errors)) -> Vec<String> {
        let mut e = Errors(vec![]);
        check(&mut e);
        e.0.into_iter().map(|f| f.to_string()).collect()
    }

    #[test]
    fn issuesources() {
        let with = |name: &str, spec: IssueSourceSpec| {
            let i = IssueSource {
                metadata: ObjectMeta { name: name.into(), ..Default::default() },
                spec,
                ..Default::default()
            };
            i.validate().into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>()
        };
        let spec = IssueSourceSpec { project: "demo".into(), ..Default::default() };
        assert_eq!(with("bugs", spec.clone()), Vec::<String>::new());
        assert_eq!(with(&"b".repeat(53), spec.clone()).len(), 1, "no room left for the issue number");
        assert_eq!(with("bugs", IssueSourceSpec { project: String::new(), ..spec.clone() }).len(), 1);
        assert_eq!(with("bugs", IssueSourceSpec { max_sessions: Some(0), ..spec.clone() }).len(), 1);
        let mut labels = spec.clone();
        labels.github.labels = vec!["agent".into(), "a,b".into()];
        assert_eq!(
            with("bugs", labels),
            ["spec.github.labels[1]: `a,b` is not a GitHub label name (1 to 50 characters, no comma)"]
        );
        let template = |t: SessionTemplate| with("bugs", IssueSourceSpec { template: t, ..spec.clone() });
        let prompt = |p: &str| template(SessionTemplate { prompt: Some(p.into()), ..Default::default() });
        assert_eq!(prompt("Fix #{{number}}: {{ title }}\n{{body}} {{labels}} {{url}}"), Vec::<String>::new());
        assert_eq!(
            prompt("Fix {{nubmer}}"),
            ["spec.template.prompt: `{{nubmer}}` is not a placeholder; use {{number}}, {{reference}}, {{title}}, {{body}}, {{labels}}, {{url}}"]
        );
        let env = SessionTemplate { env: [("1BAD".to_string(), "x".to_string())].into(), ..Default::default() };
        assert_eq!(template(env).len(), 1);
        let bad_ref = SessionTemplate { base_ref: Some("a..b".into()), ..Default::default() };
        assert!(template(bad_ref)[0].starts_with("spec.template.baseRef: "));
    }

    #[test]
    fn a_source_queries_one_tracker() {
        let mut s = IssueSourceSpec {
            linear: Some(LinearIssueQuery { team: "ENG".into(), labels: vec!["agent".into()], states: vec![] }),
            ..Default::default()
        };
        assert_eq!(errors(|e| check_issue_query(&s, e)), Vec::<String>::new());
        s.gitlab = Some(GitlabIssueQuery { labels: vec!["a,b".into()], state: None });
        s.linear.as_mut().unwrap().team = "eng".into();
        s.linear.as_mut().unwrap().states = vec![" ".into()];
        let found = errors(|e| check_issue_query(&s, e));
        let fields: Vec<&str> = found.iter().map(|m| m.split(':').next().unwrap_or_default()).collect();
        assert_eq!(
            fields,
            ["spec", "spec.gitlab.labels[0]", "spec.linear.team", "spec.linear.states[0]"],
            "{found:#?}"
        );
    }

    fn issue() -> IssueFields {
        IssueFields {
            number: 42,
            reference: "42".into(),
            title: "Login fails".into(),
            body: "Steps: {{title}}".into(),
            labels: vec!["agent".into(), "bug".into()],
            url: "https://github.com/o/r/issues/42".into(),
        }
    }

    #[test]
    fn a_template_is_rendered_once_with_the_issue() {
        let t = "Fix #{{number}}: {{ title }}\n{{body}}\n[{{labels}}] {{url}} {{unknown}} {{";
        assert_eq!(
            render(t, &issue()),
            "Fix #42: Login fails\nSteps: {{title}}\n[agent, bug] https://github.com/o/r/issues/42 {{unknown}} {{",
            "the issue's own text is not rendered again"
        );
        assert_eq!(placeholders(t), ["number", "title", "body", "labels", "url", "unknown"]);
        assert_eq!(render("no placeholders", &issue()), "no placeholders");
    }

    #[test]
    fn the_spec_takes_the_project_the_issue_and_the_rendered_prompt() {
        let t = SessionTemplate { prompt: Some("Fix #{{number}}".into()), ..Default::default() };
        let s = t.to_spec("demo", &issue());
        assert_eq!(
            (s.project.as_str(), s.issue.as_deref(), s.prompt.as_deref()),
            ("demo", Some("42"), Some("Fix #42"))
        );
        assert_eq!(session_name("bugs", 42), "bugs-42");
        assert_eq!(IssueSourceSpec::default().on_close(), OnClose::Stop);
    }
}
