//! A Session's own validation rules; the shared checks are in `crate::validate`.

use crate::agent::{check_agent, check_docker, WorkspaceKind};
use crate::orchestrator::orchestrator_name;
use crate::review::check_review;
use crate::validate::forges::linear_identifier;
use crate::validate::{dns1123_label, env_name, git_ref, validate_meta, Errors, FieldError, Invalid, Validate};

use super::{Session, SessionRole};

/// An orchestrator is its project's one (by name), reads the repository without a branch, and is
/// not a reviewer, nor reviewed, nor given an issue of its own.
fn check_orchestrator_session(session: &Session, e: &mut Errors) {
    let s = &session.spec;
    let name = orchestrator_name(&s.project);
    if !s.project.is_empty() && session.metadata.name != name {
        e.check(
            "metadata.name",
            Err(format!("an orchestrator of project {} is named `{name}`: one per project", s.project).into()),
        );
    }
    let not = |what: &str| -> Result<(), Invalid> { Err(format!("an orchestrator {what}").into()) };
    if s.review_of.is_some() {
        e.check("spec.reviewOf", not("reviews no one"));
    }
    if s.review.is_some() {
        e.check("spec.review", not("has no pull request to review"));
    }
    if s.issue.is_some() {
        e.check("spec.issue", not("works on a goal, not an issue; its workers take issues"));
    }
    if s.reactions.is_some() {
        e.check("spec.reactions", not("has no pull request to react to"));
    }
    if let Some(kind) = s.workspace.map(|w| w.kind).filter(|k| k.has_branch()) {
        e.check(
            "spec.workspace.kind",
            Err(format!("an orchestrator reads the repository: `readonly` or `none`, not `{kind}`").into()),
        );
    }
}

impl Validate for Session {
    fn validate(&self) -> Vec<FieldError> {
        let mut errs = vec![];
        validate_meta(&self.metadata, &mut errs);
        let mut e = Errors(errs);
        let s = &self.spec;
        if s.project.is_empty() {
            e.check("spec.project", Err("is required: the name of the Project this session works on".into()));
        } else {
            e.check("spec.project", dns1123_label(&s.project));
        }
        if let Some(a) = &s.agent {
            check_agent("spec.agent", a, &mut e);
        }
        for (i, a) in s.agent_args.iter().enumerate() {
            if a.contains('\0') {
                e.check(format!("spec.agentArgs[{i}]"), Err("must not contain NUL".into()));
            }
        }
        if let Some(b) = &s.branch {
            e.check("spec.branch", git_ref(b));
        }
        if let Some(b) = &s.base_ref {
            e.check("spec.baseRef", git_ref(b));
        }
        for k in s.env.keys() {
            e.check(format!("spec.env.{k}"), env_name(k));
        }
        if let Some(i) = &s.issue {
            let number = i.strip_prefix('#').unwrap_or(i);
            let ok = (!number.is_empty() && number.bytes().all(|c| c.is_ascii_digit())) || linear_identifier(i);
            if !ok {
                e.check(
                    "spec.issue",
                    Err(format!("`{i}` is not an issue reference such as `42`, `#42` or `ENG-42`").into()),
                );
            }
        }
        if let Some(d) = &s.docker {
            check_docker("spec.docker", d, &mut e);
        }
        if let Some(r) = &s.review {
            check_review("spec.review", r, &mut e);
        }
        if let Some(w) = &s.review_of {
            e.check("spec.reviewOf", dns1123_label(w));
            if s.review.is_some() {
                e.check("spec.review", Err("a reviewer session has no reviewers of its own".into()));
            }
            if *w == self.metadata.name {
                e.check("spec.reviewOf", Err("a session cannot review itself".into()));
            }
        }
        if s.role == SessionRole::Orchestrator {
            check_orchestrator_session(self, &mut e);
        }
        let orchestrator_default = (s.role == SessionRole::Orchestrator).then_some(WorkspaceKind::Readonly);
        if let Some(kind) = s.workspace.map(|w| w.kind).or(orchestrator_default).filter(|k| !k.has_branch()) {
            let none = |what: &str| -> Result<(), Invalid> {
                Err(format!("a `{kind}` workspace has no branch, so {what}").into())
            };
            if s.branch.is_some() {
                e.check("spec.branch", none("it names none"));
            }
            if s.pull_request.is_some() {
                e.check("spec.pullRequest", none("no pull request is opened"));
            }
            if s.review.is_some() {
                e.check("spec.review", none("there is no pull request to review"));
            }
            if s.review_of.is_some() {
                e.check("spec.reviewOf", none("it cannot hold a reviewer's checkout of a pull request"));
            }
        }
        e.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentRef;
    use crate::review::{ReviewSpec, ReviewTrigger, ReviewerSpec};
    use crate::Project;

    #[test]
    fn review_settings_are_checked_field_by_field() {
        let mut p = Project::new("p", "/repo");
        p.spec.review = Some(ReviewSpec::default());
        let fields = |errs: Vec<FieldError>| errs.into_iter().map(|e| e.to_string()).collect::<Vec<_>>();
        assert_eq!(fields(p.validate()), ["spec.review.reviewers: must name at least one reviewer agent"]);
        p.spec.review = Some(ReviewSpec {
            reviewers: vec![ReviewerSpec {
                agent: Some(AgentRef::Custom { command: vec![" ".into()] }),
                ..Default::default()
            }],
            on: vec![ReviewTrigger::Push, ReviewTrigger::Push],
            gate: true,
            token_env: Some("REVIEW TOKEN".into()),
        });
        let errors = fields(p.validate());
        assert_eq!(
            errors[..2],
            [
                "spec.review.reviewers[0].agent.command[0]: the program must not be empty",
                "spec.review.on[1]: `push` is listed twice"
            ]
        );
        assert!(errors[2].starts_with("spec.review.tokenEnv: "), "{errors:?}");
        let mut s = Session::new("w", "p", "x");
        s.spec.review_of = Some("w".into());
        assert_eq!(fields(s.validate()), ["spec.reviewOf: a session cannot review itself"]);
        s.spec.review_of = Some("Not_A_Name".into());
        assert!(fields(s.validate())[0].starts_with("spec.reviewOf: "), "{:?}", s.validate());
    }

    #[test]
    fn a_workspace_is_an_object_and_the_string_form_is_read_too() {
        use crate::agent::{WorkspaceKind, WorkspaceSpec};
        let spec = |v: serde_json::Value| serde_json::from_value::<WorkspaceSpec>(v);
        assert_eq!(spec(serde_json::json!({"kind": "readonly"})).unwrap(), WorkspaceSpec::of(WorkspaceKind::Readonly));
        assert_eq!(spec(serde_json::json!("clone")).unwrap(), WorkspaceSpec::of(WorkspaceKind::Clone));
        assert_eq!(
            serde_json::to_value(WorkspaceSpec::of(WorkspaceKind::None)).unwrap(),
            serde_json::json!({"kind": "none"})
        );
        let unknown = spec(serde_json::json!({"kind": "shallow"})).unwrap_err().to_string();
        assert!(unknown.contains("unknown variant `shallow`") && unknown.contains("readonly"), "{unknown}");
        assert!(spec(serde_json::json!({"kind": "clone", "depth": 1})).unwrap_err().to_string().contains("depth"));
        assert!(spec(serde_json::json!(7)).unwrap_err().to_string().contains("an object `{kind:"));
    }

    #[test]
    fn an_orchestrator_is_its_projects_one_and_has_no_branch_issue_or_reviews() {
        let mut s = Session::new("p-orchestrator", "p", "split the goal");
        s.spec.role = SessionRole::Orchestrator;
        assert!(s.validate().is_empty(), "{:?}", s.validate());
        s.metadata.name = "boss".into();
        s.spec.issue = Some("42".into());
        s.spec.branch = Some("boss".into());
        s.spec.workspace = Some(crate::agent::WorkspaceSpec::of(WorkspaceKind::Worktree));
        let fields: Vec<String> = s.validate().into_iter().map(|e| e.to_string()).collect();
        assert_eq!(
            fields,
            [
                "metadata.name: an orchestrator of project p is named `p-orchestrator`: one per project",
                "spec.issue: an orchestrator works on a goal, not an issue; its workers take issues",
                "spec.workspace.kind: an orchestrator reads the repository: `readonly` or `none`, not `worktree`"
            ]
        );
        s.spec.workspace = None;
        let fields: Vec<String> = s.validate().into_iter().map(|e| e.to_string()).collect();
        assert!(fields.contains(&"spec.branch: a `readonly` workspace has no branch, so it names none".to_string()));
        let role = serde_json::to_value(&s.spec).unwrap();
        assert_eq!(role["role"], "orchestrator");
        assert!(serde_json::to_value(&Session::new("w", "p", "x").spec).unwrap().get("role").is_none());
    }

    #[test]
    fn a_projects_orchestrator_limits_are_checked() {
        use crate::orchestrator::{OrchestratorLimits, OrchestratorSpec};
        let mut p = Project::new("p", "/repo");
        p.spec.orchestrator = Some(OrchestratorSpec::default());
        assert!(p.validate().is_empty(), "{:?}", p.validate());
        p.spec.orchestrator = Some(OrchestratorSpec {
            env: [("BAD NAME".to_string(), "x".to_string())].into(),
            limits: OrchestratorLimits { max_sessions: Some(51), budget_percent: Some(50), ..Default::default() },
            ..Default::default()
        });
        let fields: Vec<String> = p.validate().into_iter().map(|e| e.to_string()).collect();
        assert_eq!(fields.len(), 3, "{fields:?}");
        assert!(fields[0].starts_with("spec.orchestrator.env.BAD NAME: "), "{fields:?}");
        assert_eq!(fields[1], "spec.orchestrator.limits.maxSessions: 51 is more than 50");
        assert_eq!(fields[2], "spec.orchestrator.limits.budgetPercent: needs spec.budget, the budget it is a share of");
        p.metadata.name = "p".repeat(51);
        p.spec.orchestrator = Some(OrchestratorSpec::default());
        assert!(p.validate()[0].to_string().contains("at most 50 characters"), "{:?}", p.validate());
    }

    #[test]
    fn a_branchless_workspace_names_no_branch_pull_request_or_review() {
        use crate::agent::{WorkspaceKind, WorkspaceSpec};
        let mut s = Session::new("triage", "p", "sort the new issues");
        s.spec.workspace = Some(WorkspaceSpec::of(WorkspaceKind::Readonly));
        assert!(s.validate().is_empty(), "{:?}", s.validate());
        s.spec.branch = Some("triage".into());
        s.spec.review_of = Some("w".into());
        let fields: Vec<String> = s.validate().into_iter().map(|e| e.to_string()).collect();
        assert_eq!(
            fields,
            [
                "spec.branch: a `readonly` workspace has no branch, so it names none",
                "spec.reviewOf: a `readonly` workspace has no branch, so it cannot hold a reviewer's checkout of a pull request"
            ]
        );
        s.spec.workspace = Some(WorkspaceSpec::of(WorkspaceKind::Clone));
        assert!(s.validate().is_empty());
    }
}
