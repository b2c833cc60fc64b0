//! Reviews of a merge request: approvals, reviewers' states and discussion threads read as
//! reviews and line comments, each author's standing in the project, the review state they add
//! up to, and posting a reviewer's review.
//!
//! GitLab has no review object: a merge request asks for changes when a reviewer set
//! `requested_changes` or a resolvable thread is still unresolved (it blocks the merge on most
//! projects), and is approved when it has approvals and nothing asks for changes. Each author of
//! unresolved threads counts as one review requesting changes, and their notes are its comments.

use std::collections::BTreeMap;

use aoctl_api::session::ReviewState;
use aoctl_forge_types::{NewComment, Review, ReviewComment, ReviewEvent, Reviews, Standing};
use http::Method;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use aoctl_forge_core::Error;

use crate::client::{project_id, Client};

const GET_APPROVALS: &str = "GET /projects/:id/merge_requests/:merge_request_iid/approvals";
const LIST_REVIEWERS: &str = "GET /projects/:id/merge_requests/:merge_request_iid/reviewers";
const LIST_DISCUSSIONS: &str = "GET /projects/:id/merge_requests/:merge_request_iid/discussions";
const CREATE_DISCUSSION: &str = "POST /projects/:id/merge_requests/:merge_request_iid/discussions";
const CREATE_NOTE: &str = "POST /projects/:id/merge_requests/:merge_request_iid/notes";
const APPROVE: &str = "POST /projects/:id/merge_requests/:merge_request_iid/approve";

#[derive(Deserialize)]
struct WireUser {
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    username: String,
}

#[derive(Deserialize)]
struct WireApprovedBy {
    user: WireUser,
}

#[derive(Deserialize)]
struct WireApprovals {
    #[serde(default)]
    approved: Option<bool>,
    #[serde(default)]
    approvals_left: Option<u64>,
    #[serde(default)]
    approved_by: Vec<WireApprovedBy>,
}

#[derive(Deserialize)]
struct WireReviewer {
    user: WireUser,
    state: String,
}

#[derive(Deserialize)]
struct WirePosition {
    #[serde(default)]
    new_path: Option<String>,
    #[serde(default)]
    old_path: Option<String>,
    #[serde(default)]
    new_line: Option<u64>,
    #[serde(default)]
    old_line: Option<u64>,
}

#[derive(Deserialize)]
struct WireNote {
    id: u64,
    #[serde(default)]
    body: String,
    author: WireUser,
    #[serde(default)]
    system: bool,
    #[serde(default)]
    resolvable: bool,
    #[serde(default)]
    resolved: Option<bool>,
    #[serde(default)]
    position: Option<WirePosition>,
}

#[derive(Deserialize)]
struct WireDiscussion {
    #[serde(default)]
    notes: Vec<WireNote>,
}

/// A stable id for a review GitLab does not number: a hash of what it is.
fn review_id(parts: &[&str]) -> u64 {
    let digest = Sha256::digest(parts.join("\u{0}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    // Below 2^53, so the id survives JSON readers that hold numbers as doubles.
    u64::from_be_bytes(bytes) >> 11
}

/// One thread note as a line comment (`path:line`), or a plain comment without a path.
fn comment(n: &WireNote, first: Option<u64>, review: Option<u64>) -> ReviewComment {
    let pos = n.position.as_ref();
    ReviewComment {
        id: n.id,
        user: n.author.username.clone(),
        standing: Standing::default(),
        path: pos.and_then(|p| p.new_path.clone().or(p.old_path.clone())).unwrap_or_default(),
        line: pos.and_then(|p| p.new_line),
        original_line: pos.and_then(|p| p.old_line),
        body: n.body.clone(),
        in_reply_to: first.filter(|f| *f != n.id),
        review_id: review,
        diff_hunk: String::new(),
    }
}

impl Client {
    /// The approvals, reviewers and threads of a merge request, as reviews and line comments.
    pub async fn reviews(&self, project: &str, iid: u64) -> Result<Reviews, Error> {
        let id = project_id(project)?;
        let what = || format!("merge request {project}!{iid}");
        let approvals: WireApprovals =
            self.get_json(GET_APPROVALS, &format!("/projects/{id}/merge_requests/{iid}/approvals"), what).await?;
        let (reviewers, _) = self
            .get_pages::<WireReviewer>(LIST_REVIEWERS, &format!("/projects/{id}/merge_requests/{iid}/reviewers"), what)
            .await?;
        let path = format!("/projects/{id}/merge_requests/{iid}/discussions?per_page=100");
        let (discussions, _) = self.get_pages::<WireDiscussion>(LIST_DISCUSSIONS, &path, what).await?;
        // Each author's access level, which no note carries: from the project's members.
        let mut ids: BTreeMap<String, u64> = BTreeMap::new();
        let users = approvals.approved_by.iter().map(|a| &a.user).chain(reviewers.iter().map(|r| &r.user));
        let authors = discussions.iter().flat_map(|d| d.notes.iter().filter(|n| !n.system).map(|n| &n.author));
        for u in users.chain(authors) {
            if let Some(id) = u.id {
                ids.insert(u.username.clone(), id);
            }
        }
        let mut standing: BTreeMap<String, Standing> = BTreeMap::new();
        for (user, id) in ids {
            standing.insert(user, Standing::gitlab(self.access_level(project, id).await?));
        }
        let mut reviews = assemble(approvals, reviewers, discussions);
        let of = |user: &str| standing.get(user).cloned().unwrap_or_default();
        reviews.items.iter_mut().for_each(|r| r.standing = of(&r.user));
        reviews.comments.iter_mut().for_each(|c| c.standing = of(&c.user));
        Ok(reviews)
    }

    /// Posts a reviewer's review of commit `sha`: a thread on each line commented, the body as a
    /// note, and an approval for [`ReviewEvent::Approve`]; the id of the first note made.
    pub async fn create_review(
        &self,
        (project, iid): (&str, u64),
        sha: &str,
        event: ReviewEvent,
        body: &str,
        comments: &[NewComment],
    ) -> Result<u64, Error> {
        #[derive(Deserialize)]
        struct Note {
            id: u64,
        }
        #[derive(Deserialize)]
        struct Thread {
            notes: Vec<Note>,
        }
        let id = project_id(project)?;
        let what = || format!("merge request {project}!{iid}");
        let mut first = None;
        if !comments.is_empty() {
            let refs = self.wire_mr(project, iid).await?.diff_refs.unwrap_or_default();
            let path = format!("/projects/{id}/merge_requests/{iid}/discussions");
            for c in comments {
                let request = json!({"body": c.body, "position": {
                    "position_type": "text", "base_sha": refs.base_sha, "start_sha": refs.start_sha,
                    "head_sha": sha, "new_path": c.path, "old_path": c.path, "new_line": c.line,
                }});
                let t: Thread = self.write_json(Method::POST, CREATE_DISCUSSION, &path, &request, what).await?;
                first = first.or(t.notes.first().map(|n| n.id));
            }
        }
        if !body.trim().is_empty() {
            let path = format!("/projects/{id}/merge_requests/{iid}/notes");
            let n: Note = self.write_json(Method::POST, CREATE_NOTE, &path, &json!({"body": body}), what).await?;
            first = first.or(Some(n.id));
        }
        if event == ReviewEvent::Approve {
            let path = format!("/projects/{id}/merge_requests/{iid}/approve");
            let _: serde_json::Value =
                self.write_json(Method::POST, APPROVE, &path, &json!({"sha": sha}), what).await?;
        }
        Ok(first.unwrap_or_default())
    }
}

/// The reviews and comments of a merge request, and the state they add up to.
fn assemble(approvals: WireApprovals, reviewers: Vec<WireReviewer>, discussions: Vec<WireDiscussion>) -> Reviews {
    let mut items = vec![];
    for r in &reviewers {
        let state = match r.state.as_str() {
            "requested_changes" => "CHANGES_REQUESTED",
            "approved" => "APPROVED",
            "reviewed" => "COMMENTED",
            _ => continue,
        };
        items.push(Review {
            id: review_id(&["reviewer", &r.user.username, state]),
            user: r.user.username.clone(),
            standing: Standing::default(),
            state: state.to_string(),
            body: String::new(),
        });
    }
    // Authors of unresolved threads, each one review asking for changes.
    let mut asking: BTreeMap<String, u64> = BTreeMap::new();
    let notes = || discussions.iter().flat_map(|d| d.notes.iter().map(move |n| (d, n)));
    for (_, n) in notes() {
        if !n.system && n.resolvable && n.resolved != Some(true) {
            asking.entry(n.author.username.clone()).or_insert_with(|| review_id(&["threads", &n.author.username]));
        }
    }
    for (user, id) in &asking {
        if !items.iter().any(|r| &r.user == user && r.state == "CHANGES_REQUESTED") {
            items.push(Review {
                id: *id,
                user: user.clone(),
                standing: Standing::default(),
                state: "CHANGES_REQUESTED".into(),
                body: String::new(),
            });
        }
    }
    let mut comments = vec![];
    for d in &discussions {
        let first = d.notes.iter().find(|n| !n.system).map(|n| n.id);
        // A resolved thread was dealt with; its notes are not passed on.
        let resolved = d.notes.iter().any(|n| n.resolvable && n.resolved == Some(true))
            && d.notes.iter().all(|n| !n.resolvable || n.resolved == Some(true));
        if resolved {
            continue;
        }
        for n in d.notes.iter().filter(|n| !n.system) {
            comments.push(comment(n, first, asking.get(&n.author.username).copied()));
        }
    }
    let approved_by: Vec<&str> = approvals.approved_by.iter().map(|a| a.user.username.as_str()).collect();
    for user in &approved_by {
        if !items.iter().any(|r| r.user == *user && r.state == "APPROVED") {
            items.push(Review {
                id: review_id(&["approved", user]),
                user: user.to_string(),
                standing: Standing::default(),
                state: "APPROVED".into(),
                body: String::new(),
            });
        }
    }
    let enough = approvals.approvals_left.map_or(approvals.approved.unwrap_or(true), |left| left == 0);
    let state = if items.iter().any(|r| r.state == "CHANGES_REQUESTED") {
        ReviewState::ChangesRequested
    } else if !approved_by.is_empty() && enough {
        ReviewState::Approved
    } else if !items.is_empty() || !comments.is_empty() {
        ReviewState::Pending
    } else {
        ReviewState::None
    };
    Reviews { state, items, comments }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    fn thread(id: u64, user: &str, resolved: bool, path: Option<(&str, u64)>) -> serde_json::Value {
        let position = path.map(|(p, l)| json!({"new_path": p, "old_path": p, "new_line": l, "old_line": null}));
        json!({"id": "d", "individual_note": false, "notes": [{
            "id": id, "type": if position.is_some() { "DiffNote" } else { "DiscussionNote" }, "body": "fix this",
            "author": {"username": user}, "system": false, "resolvable": true, "resolved": resolved, "position": position
        }]})
    }

    #[test]
    fn an_unresolved_diff_note_asks_for_changes_with_its_line() {
        let r = assemble(
            parse(json!({"approved": false, "approvals_left": 1, "approved_by": []})),
            vec![],
            parse(json!([thread(11, "rev", false, Some(("src/login.rs", 42))), thread(12, "rev", true, None)])),
        );
        assert_eq!(r.state, ReviewState::ChangesRequested);
        assert_eq!(r.items.len(), 1);
        assert_eq!((r.items[0].user.as_str(), r.items[0].state.as_str()), ("rev", "CHANGES_REQUESTED"));
        assert_eq!(r.comments.len(), 1, "the resolved thread is left out: {r:?}");
        let c = &r.comments[0];
        assert_eq!((c.path.as_str(), c.line, c.review_id), ("src/login.rs", Some(42), Some(r.items[0].id)));
    }

    #[test]
    fn approvals_approve_once_threads_are_resolved() {
        let approvals =
            || parse(json!({"approved": true, "approvals_left": 0, "approved_by": [{"user": {"username": "rev"}}]}));
        let r = assemble(approvals(), vec![], parse(json!([thread(11, "rev", true, Some(("a", 1)))])));
        assert_eq!(r.state, ReviewState::Approved);
        let r =
            assemble(approvals(), parse(json!([{"user": {"username": "lead"}, "state": "requested_changes"}])), vec![]);
        assert_eq!(r.state, ReviewState::ChangesRequested);
        let none = assemble(parse(json!({"approved_by": []})), vec![], vec![]);
        assert_eq!(none.state, ReviewState::None);
        assert_eq!(review_id(&["a", "b"]), review_id(&["a", "b"]));
        assert_ne!(review_id(&["a", "b"]), review_id(&["ab", ""]));
    }
}
