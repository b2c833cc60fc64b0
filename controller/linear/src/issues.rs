//! Linear issues: one by identifier, and a team's issues by labels and workflow states, newest
//! first, page by page.

use aoctl_forge_types::{Issue, IssueList};
use serde::Deserialize;
use serde_json::{json, Value};

use aoctl_forge_core::Error;

use crate::client::{invalid, Client};

/// Workflow state types of an issue that is still to be done.
pub const OPEN_STATE_TYPES: &[&str] = &["triage", "backlog", "unstarted", "started"];

/// Issues per page, and pages read of one list at most.
const PAGE: u32 = 100;
const MAX_PAGES: usize = 10;

const ISSUE_FIELDS: &str =
    "id identifier number title description url state { name type } team { key } labels(first: 50) { nodes { name } }";

/// Which issues of a team a list takes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IssueQuery {
    /// The team's key (`ENG`).
    pub team: String,
    /// Labels an issue must all have (names, compared without case).
    pub labels: Vec<String>,
    /// Workflow state names an issue must be in; when empty, any state still to be done.
    pub states: Vec<String>,
}

impl IssueQuery {
    /// The `IssueFilter` of the query.
    fn filter(&self) -> Value {
        let state = if self.states.is_empty() {
            json!({"type": {"in": OPEN_STATE_TYPES}})
        } else {
            json!({"name": {"in": self.states}})
        };
        let mut filter = json!({"team": {"key": {"eq": self.team}}, "state": state});
        if !self.labels.is_empty() {
            let every: Vec<Value> =
                self.labels.iter().map(|l| json!({"labels": {"some": {"name": {"eqIgnoreCase": l}}}})).collect();
            filter["and"] = Value::Array(every);
        }
        filter
    }

    /// Whether `issue`, as read, is one the query selects.
    pub fn selects(&self, issue: &Issue, state_name: &str, team: &str) -> bool {
        team == self.team
            && (self.states.is_empty() || self.states.iter().any(|s| s == state_name))
            && self.labels.iter().all(|l| issue.labels.iter().any(|have| have.eq_ignore_ascii_case(l)))
    }
}

#[derive(Deserialize)]
struct WireState {
    name: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct WireTeam {
    key: String,
}

#[derive(Deserialize)]
struct WireLabel {
    name: String,
}

#[derive(Deserialize)]
struct WireLabels {
    nodes: Vec<WireLabel>,
}

#[derive(Deserialize)]
struct WireIssue {
    identifier: String,
    number: f64,
    title: String,
    #[serde(default)]
    description: Option<String>,
    url: String,
    state: WireState,
    team: WireTeam,
    labels: WireLabels,
}

impl WireIssue {
    fn into_issue(self) -> (Issue, String, String) {
        let open = OPEN_STATE_TYPES.contains(&self.state.kind.as_str());
        let issue = Issue {
            number: self.number as u64,
            reference: self.identifier,
            title: self.title,
            body: self.description.unwrap_or_default(),
            url: self.url,
            labels: self.labels.nodes.into_iter().map(|l| l.name).collect(),
            open,
            // Linear's issues are written by the members of the workspace the key reads; who
            // wrote one is not asked.
            author: None,
            updated_at: String::new(),
        };
        (issue, self.state.name, self.team.key)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageInfo {
    has_next_page: bool,
    end_cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Connection {
    nodes: Vec<WireIssue>,
    page_info: PageInfo,
}

/// Checks an identifier (`ENG-42`) before it goes into a query.
fn identifier(reference: &str) -> Result<&str, Error> {
    let r = reference.trim();
    let ok = r.split_once('-').is_some_and(|(k, n)| {
        !k.is_empty()
            && k.bytes().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            && !n.is_empty()
            && n.bytes().all(|c| c.is_ascii_digit())
    });
    if ok {
        Ok(r)
    } else {
        Err(invalid(format!("`{reference}` is not a Linear issue identifier such as ENG-42")))
    }
}

impl Client {
    /// One issue by its identifier (`ENG-42`). An issue moved to another team is found under its
    /// old identifier and comes back with its new one.
    pub async fn issue(&self, reference: &str) -> Result<Issue, Error> {
        let id = identifier(reference)?;
        #[derive(Deserialize)]
        struct Data {
            issue: WireIssue,
        }
        let query = format!("query IssueByIdentifier($id: String!) {{ issue(id: $id) {{ {ISSUE_FIELDS} }} }}");
        let answer =
            self.query::<Data>("IssueByIdentifier", &query, json!({"id": id}), || format!("issue {id}")).await?;
        Ok(answer.data.issue.into_issue().0)
    }

    /// The issues `q` selects, newest first, up to ten pages of 100; `changed` is false when the
    /// answer is the same as the last time.
    pub async fn list_issues(&self, q: &IssueQuery) -> Result<IssueList, Error> {
        #[derive(Deserialize)]
        struct Data {
            issues: Connection,
        }
        if q.team.is_empty() {
            return Err(invalid("the team key is empty"));
        }
        let query = format!(
            "query TeamIssues($filter: IssueFilter, $first: Int, $after: String) {{ issues(filter: $filter, first: $first, after: $after, orderBy: createdAt) {{ nodes {{ {ISSUE_FIELDS} }} pageInfo {{ hasNextPage endCursor }} }} }}"
        );
        let (mut issues, mut changed, mut after) = (vec![], false, None::<String>);
        for _ in 0..MAX_PAGES {
            let vars = json!({"filter": q.filter(), "first": PAGE, "after": after});
            let page = self.query::<Data>("TeamIssues", &query, vars, || format!("team {}", q.team)).await?;
            changed |= page.changed;
            let conn = page.data.issues;
            for w in conn.nodes {
                let (issue, state, team) = w.into_issue();
                // The filter is Linear's; this guards against an answer that ignored part of it.
                if q.selects(&issue, &state, &team) && (issue.open || !q.states.is_empty()) {
                    issues.push(issue);
                }
            }
            match (conn.page_info.has_next_page, conn.page_info.end_cursor) {
                (true, Some(c)) => after = Some(c),
                _ => break,
            }
        }
        let mut seen = std::collections::HashSet::new();
        issues.retain(|i| seen.insert(i.reference.clone()));
        Ok(IssueList { issues, changed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_and_identifiers() {
        let q = IssueQuery { team: "ENG".into(), labels: vec!["agent".into()], states: vec![] };
        let f = q.filter();
        assert_eq!(f["team"]["key"]["eq"], "ENG");
        assert_eq!(f["state"]["type"]["in"], json!(OPEN_STATE_TYPES));
        assert_eq!(f["and"][0]["labels"]["some"]["name"]["eqIgnoreCase"], "agent");
        let q = IssueQuery { states: vec!["Todo".into()], ..q };
        assert_eq!(q.filter()["state"], json!({"name": {"in": ["Todo"]}}));
        assert!(identifier("ENG-42").is_ok());
        for bad in ["42", "#4", "eng-4", "ENG-", "ENG-4\"}"] {
            assert!(identifier(bad).is_err(), "{bad}");
        }
    }
}
