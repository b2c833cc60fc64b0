//! A repository's open pull requests in one GraphQL query per hundred: for each, its branch, its
//! head and a digest of what the controller watches (head, base, draft, mergeability, the time of
//! its last update — reviews, comments, edits — and every check and status of its head). A
//! session whose pull request's digest did not change since its last full read needs no other
//! request; only those that changed are read through REST.

use aoctl_forge_core::{Call, Cost, Error, ErrorKind};
use http::Method;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::client::{segment, Client, MAX_PAGES};

const GRAPHQL: &str = "POST /graphql";

/// The query; its cost is 2 points a page of 100 under GitHub's formula (one request for the
/// pull requests, one per pull request for its last commit, one per commit for its checks,
/// divided by 100).
const QUERY: &str = "query OpenPulls($owner: String!, $name: String!, $first: Int!, $after: String) {
  rateLimit { cost limit remaining resetAt }
  repository(owner: $owner, name: $name) {
    pullRequests(states: OPEN, first: $first, after: $after, orderBy: {field: CREATED_AT, direction: ASC}) {
      pageInfo { hasNextPage endCursor }
      nodes {
        number
        headRefName
        headRefOid
        baseRefOid
        isDraft
        mergeable
        updatedAt
        author { login }
        commits(last: 1) {
          nodes {
            commit {
              oid
              statusCheckRollup {
                state
                contexts(first: 100) {
                  nodes {
                    __typename
                    ... on CheckRun { databaseId name status conclusion }
                    ... on StatusContext { context state }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}";

/// Pull requests a page holds.
const PAGE: u64 = 100;

/// One open pull request as the batch sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenPull {
    pub number: u64,
    /// The branch it is opened from.
    pub head_ref: String,
    pub head_sha: String,
    /// Changes whenever anything the controller reads of it changes.
    pub digest: String,
}

#[derive(Deserialize)]
struct Answer {
    data: Option<Data>,
    #[serde(default)]
    errors: Vec<GraphQlError>,
}

#[derive(Deserialize)]
struct GraphQlError {
    #[serde(default)]
    message: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    repository: Option<Repository>,
}

#[derive(Deserialize)]
struct Repository {
    #[serde(rename = "pullRequests")]
    pull_requests: Connection,
}

#[derive(Deserialize)]
struct Connection {
    #[serde(rename = "pageInfo")]
    page_info: PageInfo,
    nodes: Vec<Value>,
}

#[derive(Deserialize)]
struct PageInfo {
    #[serde(rename = "hasNextPage")]
    has_next_page: bool,
    #[serde(rename = "endCursor")]
    end_cursor: Option<String>,
}

impl Client {
    /// The open pull requests of `owner/repo`, oldest first, up to ten pages of 100.
    pub async fn open_pulls(&self, owner: &str, repo: &str) -> Result<Vec<OpenPull>, Error> {
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let url = self.graphql.url("/graphql");
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let request = json!({
                "query": QUERY,
                "operationName": "OpenPulls",
                "variables": {"owner": o, "name": r, "first": PAGE, "after": after},
            });
            let call = Call::new(Method::POST, GRAPHQL, &url).body(&request).resource("graphql", Cost::GraphQl);
            let reply = self.graphql.send(call).await?;
            let reply = self.graphql.success(GRAPHQL, reply, || format!("repository {o}/{r}"))?;
            let answer: Answer = self.graphql.decode(GRAPHQL, &reply.body)?;
            if let Some(e) = answer.errors.first() {
                let detail = answer.errors.iter().map(|e| e.message.clone()).collect();
                let kind = match e.kind.as_deref() {
                    // GitHub answers a spent GraphQL budget with 200 and this error; the window
                    // its headers name (`graphql`, remaining 0) holds the next queries back.
                    Some("RATE_LIMIT" | "RATE_LIMITED") => {
                        let reset_at = aoctl_forge_core::header_u64(&reply.headers, "x-ratelimit-reset")
                            .and_then(aoctl_forge_core::epoch)
                            .filter(|t| *t > chrono::Utc::now())
                            .unwrap_or_else(|| chrono::Utc::now() + chrono::Duration::seconds(60));
                        ErrorKind::RateLimited { reset_at, secondary: false }
                    }
                    Some("NOT_FOUND") => ErrorKind::NotFound { what: format!("repository {o}/{r}") },
                    Some("FORBIDDEN") => ErrorKind::Forbidden { endpoint: GRAPHQL, message: e.message.clone() },
                    _ => ErrorKind::Rejected { endpoint: GRAPHQL, status: 200, message: "GraphQL errors".into() },
                };
                return Err(self.graphql.error(kind).with_detail(detail));
            }
            let Some(repository) = answer.data.and_then(|d| d.repository) else {
                return Err(self.graphql.error(ErrorKind::NotFound { what: format!("repository {o}/{r}") }));
            };
            let page = repository.pull_requests;
            for node in page.nodes {
                out.push(open_pull(&node).ok_or_else(|| {
                    self.graphql.decode_error(GRAPHQL, "a pull request without number, headRefName or headRefOid")
                })?);
            }
            if !page.page_info.has_next_page {
                break;
            }
            after = page.page_info.end_cursor;
            if after.is_none() {
                break;
            }
        }
        Ok(out)
    }
}

/// A node of the answer as an [`OpenPull`]; its digest covers the whole node.
fn open_pull(node: &Value) -> Option<OpenPull> {
    let number = node.get("number")?.as_u64()?;
    let head_ref = node.get("headRefName")?.as_str()?.to_string();
    let head_sha = node.get("headRefOid")?.as_str()?.to_string();
    let digest = hex::encode(&Sha256::digest(node.to_string().as_bytes())[..16]);
    Some(OpenPull { number, head_ref, head_sha, digest })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_moves_with_any_watched_field() {
        let node =
            json!({"number": 4, "headRefName": "demo/a", "headRefOid": "abc", "updatedAt": "2026-01-01T00:00:00Z"});
        let a = open_pull(&node).unwrap();
        assert_eq!((a.number, a.head_ref.as_str(), a.head_sha.as_str()), (4, "demo/a", "abc"));
        let mut later = node.clone();
        later["updatedAt"] = json!("2026-01-01T00:00:01Z");
        assert_ne!(open_pull(&later).unwrap().digest, a.digest);
        assert_eq!(open_pull(&node).unwrap().digest, a.digest);
        assert!(open_pull(&json!({"number": 4})).is_none());
    }
}
