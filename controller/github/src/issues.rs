//! Tracker issues: read one issue, and list the issues of a repository that match labels and a
//! state, page by page and conditionally (an unchanged page costs a 304 and no rate limit); who
//! applied an issue's labels, and what a user may do in the repository.

use std::time::Instant;

use aoctl_forge_core::{Error, ErrorKind, Service};
use serde::Deserialize;

use aoctl_forge_types::{Issue, IssueAuthor, IssueList, IssueStateFilter, LabelEvent, Standing};

use crate::client::{segment, Client};

const GET_ISSUE: &str = "GET /repos/{owner}/{repo}/issues/{issue_number}";
const LIST_ISSUES: &str = "GET /repos/{owner}/{repo}/issues";
const LIST_ISSUE_EVENTS: &str = "GET /repos/{owner}/{repo}/issues/{issue_number}/events";
const GET_PERMISSION: &str = "GET /repos/{owner}/{repo}/collaborators/{username}/permission";

/// A label is an object, or (in older payloads) its bare name.
#[derive(Deserialize)]
#[serde(untagged)]
enum WireLabel {
    Name(String),
    Object { name: Option<String> },
}

/// The fields of `issue` that are read.
#[derive(Deserialize)]
struct WireIssue {
    number: u64,
    title: String,
    body: Option<String>,
    html_url: String,
    state: String,
    #[serde(default)]
    labels: Vec<WireLabel>,
    /// Present when the item is a pull request (lists have both kinds).
    #[serde(default)]
    pull_request: Option<serde_json::Value>,
    /// Null for a deleted account.
    #[serde(default)]
    user: Option<WireUser>,
    #[serde(default)]
    author_association: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
}

#[derive(Deserialize)]
struct WireUser {
    login: String,
}

/// One event of an issue's events list; only `labeled` and `unlabeled` ones are read.
#[derive(Deserialize)]
struct WireEvent {
    event: String,
    #[serde(default)]
    actor: Option<WireUser>,
    #[serde(default)]
    label: Option<WireEventLabel>,
}

#[derive(Deserialize)]
struct WireEventLabel {
    name: String,
}

impl From<WireIssue> for Issue {
    fn from(w: WireIssue) -> Issue {
        let labels = w
            .labels
            .into_iter()
            .filter_map(|l| match l {
                WireLabel::Name(n) => Some(n),
                WireLabel::Object { name } => name,
            })
            .collect();
        Issue {
            number: w.number,
            reference: format!("#{}", w.number),
            title: w.title,
            body: w.body.unwrap_or_default(),
            url: w.html_url,
            labels,
            open: w.state == "open",
            author: w.user.map(|u| IssueAuthor {
                login: u.login,
                id: None,
                standing: Some(Standing::github(w.author_association.as_deref())),
            }),
            updated_at: w.updated_at.unwrap_or_default(),
        }
    }
}

/// Percent-encodes a label name for the `labels` query value (`,` separates labels there).
fn escape_label(label: &str) -> Result<String, Error> {
    if label.trim().is_empty() || label.contains(',') {
        let message = format!("`{label}` cannot be queried as a label: it is empty or has a comma");
        return Err(Error::new(Service::GitHub, ErrorKind::Invalid { message }));
    }
    Ok(aoctl_forge_core::escape(label.trim(), b""))
}

impl Client {
    /// A tracker issue's title, body, labels and state. The read is conditional: an issue that
    /// did not change since the last read costs a `304 Not Modified`.
    pub async fn issue(&self, owner: &str, repo: &str, number: u64) -> Result<Issue, Error> {
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let path = format!("/repos/{o}/{r}/issues/{number}");
        let w: WireIssue = self.get_json(GET_ISSUE, &path, || format!("issue {o}/{r}#{number}")).await?;
        Ok(w.into())
    }

    /// The issues (not pull requests) of a repository that have every one of `labels` and are in
    /// `state`, newest first, up to ten pages of 100. Every page is read conditionally, so a list
    /// that did not change costs only 304s; [`IssueList::changed`] tells whether it did.
    pub async fn list_issues(
        &self,
        owner: &str,
        repo: &str,
        labels: &[String],
        state: IssueStateFilter,
    ) -> Result<IssueList, Error> {
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let mut path = format!("/repos/{o}/{r}/issues?state={}", state_name(state));
        if !labels.is_empty() {
            let labels = labels.iter().map(|l| escape_label(l)).collect::<Result<Vec<_>, _>>()?;
            path.push_str("&labels=");
            path.push_str(&labels.join(","));
        }
        // Newest first: a new issue changes the first page, so no page is stale behind a 304.
        path.push_str("&sort=created&direction=desc&per_page=100");
        let (pages, changed) =
            self.get_pages::<Vec<WireIssue>>(LIST_ISSUES, &path, || format!("repository {o}/{r}")).await?;
        let mut seen = std::collections::HashSet::new();
        let issues = pages
            .into_iter()
            .flatten()
            .filter(|w| w.pull_request.is_none())
            .filter(|w| seen.insert(w.number))
            .map(Issue::from)
            .collect();
        Ok(IssueList { issues, changed })
    }
}

impl Client {
    /// Who applied and removed which label of issue `number`, oldest first (events of other kinds,
    /// and those whose actor was deleted, are left out). Read conditionally.
    pub async fn label_events(&self, owner: &str, repo: &str, number: u64) -> Result<Vec<LabelEvent>, Error> {
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let path = format!("/repos/{o}/{r}/issues/{number}/events?per_page=100");
        let (pages, _) =
            self.get_pages::<Vec<WireEvent>>(LIST_ISSUE_EVENTS, &path, || format!("issue {o}/{r}#{number}")).await?;
        Ok(pages
            .into_iter()
            .flatten()
            .filter(|e| e.event == "labeled" || e.event == "unlabeled")
            .filter_map(|e| {
                let (actor, label) = (e.actor?, e.label?);
                Some(LabelEvent { label: label.name, actor: actor.login, actor_id: None, added: e.event == "labeled" })
            })
            .collect())
    }

    /// What `login` may do in the repository: write access for the `admin` and `write` base
    /// roles (GitHub maps `maintain` to `write` and `triage` to `read`). Remembered for ten
    /// minutes; an unknown user, and an app's bot (`name[bot]`, which this route does not take),
    /// has none.
    pub async fn permission(&self, owner: &str, repo: &str, login: &str) -> Result<Standing, Error> {
        #[derive(Deserialize)]
        struct WirePermission {
            permission: String,
        }
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let Ok(user) = segment("user", login) else {
            return Ok(Standing { role: "none".into(), writes: false });
        };
        let key = (format!("{o}/{r}").to_ascii_lowercase(), user.to_ascii_lowercase());
        if let Some(standing) = self.permissions.get(&key, Instant::now()) {
            return Ok(standing);
        }
        let path = format!("/repos/{o}/{r}/collaborators/{user}/permission");
        let standing = match self.get_json::<WirePermission>(GET_PERMISSION, &path, || format!("user {user}")).await {
            Ok(p) => Standing { writes: matches!(p.permission.as_str(), "admin" | "write"), role: p.permission },
            Err(Error { kind: ErrorKind::NotFound { .. }, .. }) => Standing { role: "none".into(), writes: false },
            Err(e) => return Err(e),
        };
        self.permissions.put(key, standing.clone(), Instant::now());
        Ok(standing)
    }
}

/// GitHub's `state` query value.
fn state_name(s: IssueStateFilter) -> &'static str {
    match s {
        IssueStateFilter::Open => "open",
        IssueStateFilter::Closed => "closed",
        IssueStateFilter::All => "all",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_for_the_query() {
        assert_eq!(escape_label("good first issue").unwrap(), "good%20first%20issue");
        assert_eq!(escape_label("area/api:v1").unwrap(), "area%2Fapi%3Av1");
        assert_eq!(escape_label(" agent ").unwrap(), "agent");
        assert!(escape_label("a,b").is_err());
        assert!(escape_label(" ").is_err());
    }
}
