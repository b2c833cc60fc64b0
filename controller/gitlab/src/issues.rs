//! Project issues: read one, and list those that have labels and a state, page by page and
//! conditionally (an unchanged page costs a 304).

use aoctl_forge_types::{Issue, IssueAuthor, IssueList, IssueStateFilter};
use serde::Deserialize;

use aoctl_forge_core::Error;

use crate::client::{escape, invalid, project_id, Client};

const GET_ISSUE: &str = "GET /projects/:id/issues/:issue_iid";
const LIST_ISSUES: &str = "GET /projects/:id/issues";

/// The fields of an issue that are read.
#[derive(Deserialize)]
struct WireIssue {
    iid: u64,
    title: String,
    #[serde(default)]
    description: Option<String>,
    web_url: String,
    state: String,
    #[serde(default)]
    labels: Vec<String>,
    /// Set when the issue was moved to another project (it is closed here then).
    #[serde(default)]
    moved_to_id: Option<u64>,
    #[serde(default)]
    author: Option<WireAuthor>,
    #[serde(default)]
    updated_at: Option<String>,
}

#[derive(Deserialize)]
struct WireAuthor {
    id: u64,
    username: String,
}

impl From<WireIssue> for Issue {
    fn from(w: WireIssue) -> Issue {
        Issue {
            number: w.iid,
            reference: format!("#{}", w.iid),
            title: w.title,
            body: w.description.unwrap_or_default(),
            url: w.web_url,
            labels: w.labels,
            open: w.state == "opened" && w.moved_to_id.is_none(),
            // GitLab's issues do not say what their author may do: the member API is asked.
            author: w.author.map(|a| IssueAuthor { login: a.username, id: Some(a.id), standing: None }),
            updated_at: w.updated_at.unwrap_or_default(),
        }
    }
}

/// GitLab's `state` query value.
fn state_name(s: IssueStateFilter) -> &'static str {
    match s {
        IssueStateFilter::Open => "opened",
        IssueStateFilter::Closed => "closed",
        IssueStateFilter::All => "all",
    }
}

impl Client {
    /// An issue's title, description, labels and state (a moved issue is closed).
    pub async fn issue(&self, project: &str, iid: u64) -> Result<Issue, Error> {
        let id = project_id(project)?;
        let path = format!("/projects/{id}/issues/{iid}");
        let w: WireIssue = self.get_json(GET_ISSUE, &path, || format!("issue {project}#{iid}")).await?;
        Ok(w.into())
    }

    /// The issues of a project that have every one of `labels` and are in `state`, newest first,
    /// up to ten pages of 100; [`IssueList::changed`] tells whether any page was new.
    pub async fn list_issues(
        &self,
        project: &str,
        labels: &[String],
        state: IssueStateFilter,
    ) -> Result<IssueList, Error> {
        let id = project_id(project)?;
        let mut path = format!("/projects/{id}/issues?state={}", state_name(state));
        if !labels.is_empty() {
            if let Some(bad) = labels.iter().find(|l| l.trim().is_empty() || l.contains(',')) {
                return Err(invalid(format!("`{bad}` cannot be queried as a label: it is empty or has a comma")));
            }
            let joined: Vec<String> = labels.iter().map(|l| escape(l.trim())).collect();
            path.push_str("&labels=");
            path.push_str(&joined.join(","));
        }
        path.push_str("&order_by=created_at&sort=desc&per_page=100");
        let (wire, changed) = self.get_pages::<WireIssue>(LIST_ISSUES, &path, || format!("project {project}")).await?;
        let mut seen = std::collections::HashSet::new();
        let issues = wire.into_iter().filter(|w| seen.insert(w.iid)).map(Issue::from).collect();
        Ok(IssueList { issues, changed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_issue_is_closed() {
        let w: WireIssue = serde_json::from_value(serde_json::json!({
            "iid": 4, "title": "t", "description": null, "web_url": "u", "state": "opened", "labels": ["agent"],
            "moved_to_id": 99
        }))
        .unwrap();
        let i = Issue::from(w);
        assert_eq!((i.number, i.reference.as_str(), i.open, i.body.as_str()), (4, "#4", false, ""));
    }
}
