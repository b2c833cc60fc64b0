//! Who may write to a project: the access level GitLab gives a user there (`GET
//! /projects/:id/members/all/:user_id`, inherited memberships included), read once per user and
//! kept for a while, so reading a merge request's notes or an issue source's issues costs a request
//! only for an author not seen lately (`levels.rs`). Notes and issues do not carry it. Also who
//! applied an issue's labels (`GET /projects/:id/issues/:issue_iid/resource_label_events`).

use std::time::Instant;

use aoctl_forge_core::{Error, ErrorKind};
use aoctl_forge_types::LabelEvent;
use serde::Deserialize;

use crate::client::{project_id, Client};

const GET_MEMBER: &str = "GET /projects/:id/members/all/:user_id";
const LIST_LABEL_EVENTS: &str = "GET /projects/:id/issues/:issue_iid/resource_label_events";

#[derive(Deserialize)]
struct WireMember {
    access_level: u64,
}

#[derive(Deserialize)]
struct WireUser {
    id: u64,
    username: String,
}

#[derive(Deserialize)]
struct WireLabel {
    name: String,
}

/// One resource label event; its user or label is null when deleted since.
#[derive(Deserialize)]
struct WireLabelEvent {
    user: Option<WireUser>,
    label: Option<WireLabel>,
    action: String,
}

impl Client {
    /// The access level user `user_id` has in `project` (direct, inherited or shared); `None`
    /// when the user is no member. Remembered for ten minutes.
    pub async fn access_level(&self, project: &str, user_id: u64) -> Result<Option<u64>, Error> {
        let id = project_id(project)?;
        let key = (id.clone(), user_id);
        if let Some(level) = self.levels.get(&key, Instant::now()) {
            return Ok(level);
        }
        let path = format!("/projects/{id}/members/all/{user_id}");
        let level = match self.get_json::<WireMember>(GET_MEMBER, &path, || format!("member {user_id}")).await {
            Ok(m) => Some(m.access_level),
            Err(Error { kind: ErrorKind::NotFound { .. }, .. }) => None,
            Err(e) => return Err(e),
        };
        self.levels.put(key, level, Instant::now());
        Ok(level)
    }

    /// Who added and removed which label of issue `iid`, oldest first. Events whose label or
    /// user was deleted since are left out.
    pub async fn label_events(&self, project: &str, iid: u64) -> Result<Vec<LabelEvent>, Error> {
        let id = project_id(project)?;
        let path = format!("/projects/{id}/issues/{iid}/resource_label_events?per_page=100");
        let (events, _) =
            self.get_pages::<WireLabelEvent>(LIST_LABEL_EVENTS, &path, || format!("issue {project}#{iid}")).await?;
        Ok(events
            .into_iter()
            .filter_map(|e| {
                let (user, label) = (e.user?, e.label?);
                Some(LabelEvent {
                    label: label.name,
                    actor: user.username,
                    actor_id: Some(user.id),
                    added: e.action == "add",
                })
            })
            .collect())
    }
}
