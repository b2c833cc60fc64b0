//! Validation of where a project's changes and issues live: the GitHub repository, the GitLab
//! project, Linear, and the tracker query of an IssueSource.

use super::{env_name, http_url, Errors};
use crate::issuesource::IssueSourceSpec;
use crate::project::ProjectSpec;

/// The longest label name GitHub, GitLab and Linear all take.
const MAX_LABEL: usize = 50;

/// Checks `spec.repo`, `spec.github`, `spec.gitlab` and `spec.linear` of a project.
pub(super) fn check_project(s: &ProjectSpec, e: &mut Errors) {
    if let Some(r) = &s.repo {
        let ok = r.split_once('/').is_some_and(|(o, n)| {
            !o.is_empty()
                && !n.is_empty()
                && !n.contains('/')
                && r.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_./".contains(&c))
        });
        if !ok {
            e.check("spec.repo", Err(format!("`{r}` is not a GitHub repository of the form owner/name")));
        }
    }
    if let Some(g) = &s.github {
        api_url(e, "spec.github.apiUrl", g.api_url.as_deref());
        env_var(e, "spec.github.tokenEnv", g.token_env.as_deref());
        env_var(e, "spec.github.webhookSecretEnv", g.webhook_secret_env.as_deref());
        poll(e, "spec.github.pollInterval", g.poll_interval);
    }
    if let Some(g) = &s.gitlab {
        if s.repo.is_some() {
            e.check(
                "spec.gitlab",
                Err("cannot be set with spec.repo: a project's changes live on GitHub or on GitLab".into()),
            );
        }
        if s.github.is_some() {
            e.check("spec.gitlab", Err("cannot be set with spec.github: the project is on one forge".into()));
        }
        e.check("spec.gitlab.projectPath", project_path(&g.project_path));
        api_url(e, "spec.gitlab.apiUrl", g.api_url.as_deref());
        env_var(e, "spec.gitlab.tokenEnv", g.token_env.as_deref());
        env_var(e, "spec.gitlab.webhookTokenEnv", g.webhook_token_env.as_deref());
        poll(e, "spec.gitlab.pollInterval", g.poll_interval);
    }
    if let Some(l) = &s.linear {
        api_url(e, "spec.linear.apiUrl", l.api_url.as_deref());
        env_var(e, "spec.linear.tokenEnv", l.token_env.as_deref());
        env_var(e, "spec.linear.webhookSecretEnv", l.webhook_secret_env.as_deref());
    }
}

/// Checks the one tracker query of an IssueSource.
pub(super) fn check_issue_query(s: &IssueSourceSpec, e: &mut Errors) {
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
                    Err(format!("`{}` is not a workflow state name", st.escape_debug())),
                );
            }
        }
    }
}

fn api_url(e: &mut Errors, field: &str, url: Option<&str>) {
    if let Some(u) = url {
        e.check(field, http_url(u));
    }
}

fn env_var(e: &mut Errors, field: &str, name: Option<&str>) {
    if let Some(n) = name {
        e.check(field, env_name(n));
    }
}

fn poll(e: &mut Errors, field: &str, d: Option<crate::Duration>) {
    if d.is_some_and(|d| d.0 < std::time::Duration::from_secs(1)) {
        e.check(field, Err("must be at least 1s".into()));
    }
}

fn labels(e: &mut Errors, field: &str, labels: &[String], tracker: &str) {
    for (i, l) in labels.iter().enumerate() {
        let ok = !l.trim().is_empty()
            && !l.contains(',')
            && l.chars().count() <= MAX_LABEL
            && !l.chars().any(char::is_control);
        if !ok {
            e.check(
                format!("{field}[{i}]"),
                Err(format!("`{}` is not a {tracker} label name (1 to 50 characters, no comma)", l.escape_debug())),
            );
        }
    }
}

/// A GitLab project path: `group/name` or deeper, each part of `[A-Za-z0-9_.-]`, not starting with
/// `-` or `.` and not ending in `.git` or `.atom`.
pub(crate) fn project_path(path: &str) -> Result<(), String> {
    let parts: Vec<&str> = path.split('/').collect();
    let part_ok = |p: &&str| {
        !p.is_empty()
            && p.len() <= 255
            && !p.starts_with(['-', '.'])
            && !p.ends_with(".git")
            && !p.ends_with(".atom")
            && p.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c))
    };
    if parts.len() >= 2 && parts.iter().all(part_ok) {
        Ok(())
    } else {
        Err(format!("`{path}` is not a GitLab project path such as `group/name` or `group/subgroup/name`"))
    }
}

/// A Linear team key: 1 to 7 upper-case letters or digits, starting with a letter.
pub(crate) fn team_key(key: &str) -> Result<(), String> {
    let b = key.as_bytes();
    let ok = (1..=7).contains(&b.len())
        && b[0].is_ascii_uppercase()
        && b.iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(format!("`{key}` is not a Linear team key such as `ENG` (upper-case letters and digits)"))
    }
}

/// A Linear issue identifier: a team key, `-`, a number (`ENG-42`).
pub(crate) fn linear_identifier(reference: &str) -> bool {
    reference.split_once('-').is_some_and(|(k, n)| {
        team_key(k).is_ok() && !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) && !n.starts_with('0')
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::issuesource::{GitlabIssueQuery, LinearIssueQuery};
    use crate::project::{GitlabSpec, LinearSpec};

    fn errors(check: impl FnOnce(&mut Errors)) -> Vec<String> {
        let mut e = Errors(vec![]);
        check(&mut e);
        e.0.into_iter().map(|f| f.to_string()).collect()
    }

    #[test]
    fn a_project_is_on_one_forge_and_names_it_well() {
        let gitlab = GitlabSpec { project_path: "acme/widgets".into(), ..Default::default() };
        let ok =
            ProjectSpec { gitlab: Some(gitlab.clone()), linear: Some(LinearSpec::default()), ..Default::default() };
        assert_eq!(errors(|e| check_project(&ok, e)), Vec::<String>::new());
        let both = ProjectSpec { repo: Some("acme/widgets".into()), gitlab: Some(gitlab), ..Default::default() };
        assert_eq!(
            errors(|e| check_project(&both, e)),
            ["spec.gitlab: cannot be set with spec.repo: a project's changes live on GitHub or on GitLab"]
        );
        let bad = ProjectSpec {
            gitlab: Some(GitlabSpec {
                project_path: "widgets".into(),
                api_url: Some("gitlab.example".into()),
                webhook_token_env: Some("1X".into()),
                poll_interval: Some(crate::Duration(std::time::Duration::from_millis(10))),
                ..Default::default()
            }),
            linear: Some(LinearSpec { token_env: Some("A-B".into()), ..Default::default() }),
            ..Default::default()
        };
        let found = errors(|e| check_project(&bad, e));
        let fields: Vec<&str> = found.iter().map(|m| m.split(':').next().unwrap_or_default()).collect();
        assert_eq!(
            fields,
            [
                "spec.gitlab.projectPath",
                "spec.gitlab.apiUrl",
                "spec.gitlab.webhookTokenEnv",
                "spec.gitlab.pollInterval",
                "spec.linear.tokenEnv"
            ],
            "{found:#?}"
        );
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

    #[test]
    fn project_paths() {
        for ok in ["acme/widgets", "g/sub/x.y_z-1"] {
            assert!(project_path(ok).is_ok(), "{ok}");
        }
        for bad in ["", "widgets", "acme/", "/acme/w", "acme/../w", "acme/w.git", "acme/-w", "a b/c", "acme//w"] {
            assert!(project_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn team_keys_and_identifiers() {
        assert!(team_key("ENG").is_ok() && team_key("A1").is_ok());
        for bad in ["", "eng", "1A", "TOOLONGKEY", "E-G"] {
            assert!(team_key(bad).is_err(), "{bad}");
        }
        assert!(linear_identifier("ENG-42"));
        for bad in ["ENG-", "ENG-04", "eng-4", "42", "#42", "ENG-4a"] {
            assert!(!linear_identifier(bad), "{bad}");
        }
    }
}
