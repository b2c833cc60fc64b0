//! Pull requests: find the pull request of a branch, open one, merge one.

use aoctl_api::session::PullRequestState;
use aoctl_forge_core::{service_message, Call, Error, ErrorKind};
use aoctl_forge_types::{MergeMethod, PullRequest};
use http::{Method, StatusCode};
use serde::Deserialize;
use serde_json::json;

use crate::client::{escape, segment, Client};

const LIST_PULLS: &str = "GET /repos/{owner}/{repo}/pulls";
const GET_PULL: &str = "GET /repos/{owner}/{repo}/pulls/{pull_number}";
const CREATE_PULL: &str = "POST /repos/{owner}/{repo}/pulls";
const MERGE_PULL: &str = "PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge";

#[derive(Deserialize)]
struct WireUser {
    login: String,
}

#[derive(Deserialize)]
struct WireRef {
    #[serde(rename = "ref")]
    name: String,
    sha: String,
}

/// The fields of `pull-request` and `pull-request-simple` that are read.
#[derive(Deserialize)]
struct WirePull {
    number: u64,
    html_url: String,
    state: String,
    head: WireRef,
    base: WireRef,
    #[serde(default)]
    draft: Option<bool>,
    #[serde(default)]
    mergeable: Option<bool>,
    #[serde(default)]
    mergeable_state: Option<String>,
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    merged_at: Option<String>,
    #[serde(default)]
    title: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<WireUser>,
}

impl From<WirePull> for PullRequest {
    fn from(w: WirePull) -> PullRequest {
        let merged = w.merged.unwrap_or(w.merged_at.is_some());
        let state = match (merged, w.state.as_str()) {
            (true, _) => PullRequestState::Merged,
            (false, "open") => PullRequestState::Open,
            (false, _) => PullRequestState::Closed,
        };
        PullRequest {
            number: w.number,
            url: w.html_url,
            state,
            head_sha: w.head.sha,
            head_ref: w.head.name,
            base_ref: w.base.name,
            base_sha: w.base.sha,
            draft: w.draft.unwrap_or(false),
            mergeable: w.mergeable,
            mergeable_state: w.mergeable_state,
            merged,
            title: w.title,
            body: w.body.unwrap_or_default(),
            author: w.user.map(|u| u.login).unwrap_or_default(),
        }
    }
}

impl Client {
    /// The pull request whose head is `owner:branch` (an open one first, else the newest), with
    /// `mergeable` read from the pull request itself; `None` when the branch never had one.
    pub async fn find_pull_for_branch(
        &self,
        owner: &str,
        repo: &str,
        branch: &str,
    ) -> Result<Option<PullRequest>, Error> {
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        if branch.is_empty() {
            return Err(self.invalid("the branch name is empty"));
        }
        let path = format!(
            "/repos/{o}/{r}/pulls?head={o}:{}&state=all&sort=created&direction=desc&per_page=30",
            escape(branch)
        );
        let list: Vec<WirePull> = self.get_json(LIST_PULLS, &path, || format!("repository {o}/{r}")).await?;
        let Some(found) = list.iter().position(|p| p.state == "open").or((!list.is_empty()).then_some(0)) else {
            return Ok(None);
        };
        let number = list[found].number;
        self.pull(o, r, number).await.map(Some)
    }

    /// One pull request by number.
    pub async fn pull(&self, owner: &str, repo: &str, number: u64) -> Result<PullRequest, Error> {
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let path = format!("/repos/{o}/{r}/pulls/{number}");
        let pull: WirePull = self.get_json(GET_PULL, &path, || format!("pull request {o}/{r}#{number}")).await?;
        Ok(pull.into())
    }

    /// Opens a pull request in `(owner, repository)` from `head` (a branch of it) into `base`.
    pub async fn create_pull(
        &self,
        (owner, repo): (&str, &str),
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        draft: bool,
    ) -> Result<PullRequest, Error> {
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let request = json!({"title": title, "head": head, "base": base, "body": body, "draft": draft});
        let path = format!("/repos/{o}/{r}/pulls");
        let pull: WirePull =
            self.rest.write_json(Method::POST, CREATE_PULL, &path, &request, || format!("repository {o}/{r}")).await?;
        Ok(pull.into())
    }

    /// Merges a pull request if its head is still `sha`; returns the merge commit's SHA.
    pub async fn merge(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
        method: MergeMethod,
        sha: &str,
    ) -> Result<String, Error> {
        #[derive(Deserialize)]
        struct Merged {
            sha: String,
            merged: bool,
            message: String,
        }
        let (o, r) = (segment("owner", owner)?, segment("repository", repo)?);
        let request = json!({"merge_method": method_name(method), "sha": sha});
        let url = self.rest.url(&format!("/repos/{o}/{r}/pulls/{number}/merge"));
        let reply = self.rest.send(Call::new(Method::PUT, MERGE_PULL, &url).body(&request)).await?;
        let (message, detail) = service_message(&reply.body);
        match reply.status {
            StatusCode::METHOD_NOT_ALLOWED => {
                return Err(self.rest.error(ErrorKind::NotMergeable { number, message }).with_detail(detail));
            }
            StatusCode::CONFLICT => {
                let sha = sha.to_string();
                return Err(self.rest.error(ErrorKind::HeadChanged { number, sha, message }).with_detail(detail));
            }
            _ => {}
        }
        let reply = self.rest.success(MERGE_PULL, reply, || format!("pull request {o}/{r}#{number}"))?;
        let merged: Merged = self.rest.decode(MERGE_PULL, &reply.body)?;
        if !merged.merged {
            return Err(self.rest.error(ErrorKind::NotMergeable { number, message: merged.message }));
        }
        Ok(merged.sha)
    }
}

/// GitHub's `merge_method` for a merge method.
fn method_name(m: MergeMethod) -> &'static str {
    match m {
        MergeMethod::Merge => "merge",
        MergeMethod::Squash => "squash",
        MergeMethod::Rebase => "rebase",
    }
}
