//! Merge requests: find the merge request of a branch, read one, open one, merge one guarded by
//! the head sha.

use aoctl_api::session::PullRequestState;
use aoctl_forge_types::{MergeMethod, PullRequest};
use http::{Method, StatusCode};
use serde::Deserialize;
use serde_json::json;

use aoctl_forge_core::{service_message, Call, Error, ErrorKind};

use crate::client::{escape, invalid, project_id, Client};

const LIST_MRS: &str = "GET /projects/:id/merge_requests";
const GET_MR: &str = "GET /projects/:id/merge_requests/:merge_request_iid";
const CREATE_MR: &str = "POST /projects/:id/merge_requests";
const MERGE_MR: &str = "PUT /projects/:id/merge_requests/:merge_request_iid/merge";

/// The commits a merge request's diff is taken between.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub(crate) struct DiffRefs {
    pub(crate) base_sha: Option<String>,
    pub(crate) head_sha: Option<String>,
    pub(crate) start_sha: Option<String>,
}

/// The fields of a merge request that are read.
#[derive(Deserialize)]
pub(crate) struct WireMr {
    pub(crate) iid: u64,
    web_url: String,
    state: String,
    #[serde(default)]
    sha: Option<String>,
    source_branch: String,
    target_branch: String,
    #[serde(default)]
    draft: Option<bool>,
    #[serde(default)]
    work_in_progress: Option<bool>,
    #[serde(default)]
    has_conflicts: Option<bool>,
    #[serde(default)]
    detailed_merge_status: Option<String>,
    #[serde(default)]
    merge_status: Option<String>,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    pub(crate) diff_refs: Option<DiffRefs>,
    #[serde(default)]
    author: Option<WireAuthor>,
}

#[derive(Deserialize)]
struct WireAuthor {
    username: String,
}

/// `detailed_merge_status` values while GitLab is still working the answer out.
const CHECKING: &[&str] = &["unchecked", "checking", "preparing", "approvals_syncing"];

impl From<WireMr> for PullRequest {
    fn from(w: WireMr) -> PullRequest {
        let state = match w.state.as_str() {
            "merged" => PullRequestState::Merged,
            "opened" => PullRequestState::Open,
            _ => PullRequestState::Closed,
        };
        let detailed = w.detailed_merge_status.clone().unwrap_or_default();
        let checking = CHECKING.contains(&detailed.as_str())
            || (w.detailed_merge_status.is_none()
                && matches!(w.merge_status.as_deref(), Some("unchecked" | "checking" | "cannot_be_merged_recheck")));
        let conflicts = w.has_conflicts == Some(true) || detailed == "conflict";
        let mergeable = if checking { None } else { Some(!conflicts) };
        // The forge-neutral spelling of why a merge would be refused (GitHub's mergeable_state).
        let mergeable_state = (!checking).then(|| {
            match detailed.as_str() {
                _ if conflicts => "dirty",
                "mergeable" => "clean",
                "need_rebase" => "behind",
                "ci_still_running" => "unstable",
                "" if w.merge_status.as_deref() == Some("can_be_merged") => "clean",
                _ => "blocked",
            }
            .to_string()
        });
        let base_sha =
            w.diff_refs.as_ref().and_then(|d| d.start_sha.clone().or(d.base_sha.clone())).unwrap_or_default();
        let head_sha = w.sha.or(w.diff_refs.and_then(|d| d.head_sha)).unwrap_or_default();
        PullRequest {
            number: w.iid,
            url: w.web_url,
            merged: state == PullRequestState::Merged,
            state,
            head_sha,
            head_ref: w.source_branch,
            base_ref: w.target_branch,
            base_sha,
            draft: w.draft.or(w.work_in_progress).unwrap_or(false),
            mergeable,
            mergeable_state,
            title: w.title,
            body: w.description.unwrap_or_default(),
            author: w.author.map(|a| a.username).unwrap_or_default(),
        }
    }
}

impl Client {
    /// The merge request whose source is `branch` (an open one first, else the newest), read in
    /// full; `None` when the branch never had one.
    pub async fn find_mr_for_branch(&self, project: &str, branch: &str) -> Result<Option<PullRequest>, Error> {
        let id = project_id(project)?;
        if branch.is_empty() {
            return Err(invalid("the branch name is empty"));
        }
        let path = format!(
            "/projects/{id}/merge_requests?source_branch={}&state=all&order_by=created_at&sort=desc&per_page=30",
            escape(branch)
        );
        let list: Vec<WireMr> = self.get_json(LIST_MRS, &path, || format!("project {project}")).await?;
        // GitLab filters by branch name only: a fork's branch of the same name is not ours.
        let Some(found) = list.iter().position(|m| m.state == "opened").or((!list.is_empty()).then_some(0)) else {
            return Ok(None);
        };
        let iid = list[found].iid;
        self.merge_request(project, iid).await.map(Some)
    }

    /// One merge request by iid.
    pub async fn merge_request(&self, project: &str, iid: u64) -> Result<PullRequest, Error> {
        Ok(self.wire_mr(project, iid).await?.into())
    }

    pub(crate) async fn wire_mr(&self, project: &str, iid: u64) -> Result<WireMr, Error> {
        let id = project_id(project)?;
        let path = format!("/projects/{id}/merge_requests/{iid}");
        self.get_json(GET_MR, &path, || format!("merge request {project}!{iid}")).await
    }

    /// Opens a merge request from `source` into `target`; a draft when `draft`.
    pub async fn create_mr(
        &self,
        project: &str,
        source: &str,
        target: &str,
        title: &str,
        description: &str,
        draft: bool,
    ) -> Result<PullRequest, Error> {
        let id = project_id(project)?;
        let title = if draft && !title.starts_with("Draft:") { format!("Draft: {title}") } else { title.to_string() };
        let request = json!({
            "source_branch": source, "target_branch": target, "title": title, "description": description,
            "remove_source_branch": false,
        });
        let path = format!("/projects/{id}/merge_requests");
        let mr: WireMr =
            self.write_json(Method::POST, CREATE_MR, &path, &request, || format!("project {project}")).await?;
        Ok(mr.into())
    }

    /// Merges a merge request if its source head is still `sha`; the merge (or squash) commit's
    /// sha. `Rebase` is not a GitLab merge method: the project's own method applies.
    pub async fn merge(&self, project: &str, iid: u64, method: MergeMethod, sha: &str) -> Result<String, Error> {
        #[derive(Deserialize)]
        struct Merged {
            state: String,
            #[serde(default)]
            merge_commit_sha: Option<String>,
            #[serde(default)]
            squash_commit_sha: Option<String>,
            #[serde(default)]
            sha: Option<String>,
        }
        let id = project_id(project)?;
        let request = json!({"sha": sha, "squash": method == MergeMethod::Squash});
        let url = self.core.url(&format!("/projects/{id}/merge_requests/{iid}/merge"));
        let reply = self.core.send(Call::new(Method::PUT, MERGE_MR, &url).body(&request)).await?;
        let (message, detail) = service_message(&reply.body);
        match reply.status {
            StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_ACCEPTABLE | StatusCode::UNPROCESSABLE_ENTITY => {
                return Err(self.core.error(ErrorKind::NotMergeable { number: iid, message }).with_detail(detail));
            }
            StatusCode::CONFLICT => {
                let sha = sha.to_string();
                return Err(self.core.error(ErrorKind::HeadChanged { number: iid, sha, message }).with_detail(detail));
            }
            _ => {}
        }
        let reply = self.core.success(MERGE_MR, reply, || format!("merge request {project}!{iid}"))?;
        let merged: Merged = self.core.decode(MERGE_MR, &reply.body)?;
        if merged.state != "merged" {
            // Accepted but not merged yet (auto-merge when the pipeline succeeds): not done.
            let message = format!("the merge request is `{}`", merged.state);
            return Err(self.core.error(ErrorKind::NotMergeable { number: iid, message }));
        }
        Ok(merged.squash_commit_sha.or(merged.merge_commit_sha).or(merged.sha).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mr(detailed: &str, conflicts: bool) -> PullRequest {
        let w: WireMr = serde_json::from_value(json!({
            "iid": 7, "web_url": "https://gitlab.example/acme/w/-/merge_requests/7", "state": "opened",
            "sha": "abc", "source_branch": "w/fix", "target_branch": "main", "draft": false,
            "has_conflicts": conflicts, "detailed_merge_status": detailed, "title": "Fix", "description": null,
            "diff_refs": {"base_sha": "b0", "head_sha": "abc", "start_sha": "s0"}
        }))
        .unwrap();
        w.into()
    }

    #[test]
    fn merge_statuses_map_to_mergeable() {
        let m = mr("mergeable", false);
        assert_eq!((m.mergeable, m.mergeable_state.as_deref()), (Some(true), Some("clean")));
        assert_eq!((m.number, m.head_sha.as_str(), m.base_sha.as_str(), m.body.as_str()), (7, "abc", "s0", ""));
        let c = mr("conflict", true);
        assert!(c.has_conflicts());
        assert_eq!(mr("checking", false).mergeable, None);
        let b = mr("not_approved", false);
        assert_eq!((b.mergeable, b.mergeable_state.as_deref()), (Some(true), Some("blocked")));
    }
}
