//! `POST /webhooks/github`: verifies `X-Hub-Signature-256` against the secret of the project whose
//! repository sent it (for a `push`, also against the secret of each GitSource of that
//! repository), then acts at once: an event about pull requests or CI reconciles the sessions it
//! concerns (by branch or PR number), an `issues` event polls the project's IssueSources, and a
//! `push` syncs the GitSources of the repository. A bad or missing signature is 401, an event that
//! concerns nothing is 202; neither changes anything. A delivery whose `X-GitHub-Delivery` id was
//! already taken (a replay) is acknowledged and ignored.
//!
//! Delivery ids are kept twice ([`take_delivery`]): in memory, the newest 10,000 of this process;
//! and in the store, as an Event named after the delivery about the project (or GitSource) it
//! was verified for, reason `WebhookReceived`, source `webhook-receiver`. Creating that event
//! fails when it exists, so a replay after a restart, or to another replica, is ignored for as
//! long as the event lives: the `--event-ttl`, and at most the newest 100 deliveries per object.

use std::collections::{HashSet, VecDeque};

use aoctl_api::wire::WebhookAnswer;
use aoctl_api::{
    Event, EventType, GitSource, InvolvedObject, IssueSource, ObjectMeta, Project, Resource, Session, Time,
};
use aoctl_github::webhook::{self, WebhookEvent};
use aoctl_store::Selector;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use parking_lot::Mutex;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{AppError, AppState};
use crate::forges::webhook_secret;

mod gitlab;
mod linear;

pub(super) use gitlab::gitlab;
pub(super) use linear::linear;

/// How many delivery ids are remembered; older ones are forgotten first. A webhook only wakes
/// sessions (the controller then reads GitHub itself), so a replay older than this costs a look.
const REMEMBERED_DELIVERIES: usize = 10_000;

/// The ids of the deliveries taken, newest last, bounded.
#[derive(Debug, Default)]
pub(crate) struct Deliveries {
    seen: Mutex<(HashSet<String>, VecDeque<String>)>,
}

impl Deliveries {
    /// Records `id`; `false` when it was already recorded.
    fn take(&self, id: &str) -> bool {
        let mut guard = self.seen.lock();
        let (set, order) = &mut *guard;
        if !set.insert(id.to_string()) {
            return false;
        }
        order.push_back(id.to_string());
        while order.len() > REMEMBERED_DELIVERIES {
            if let Some(old) = order.pop_front() {
                set.remove(&old);
            }
        }
        true
    }
}

/// The reason of the events that record webhook deliveries.
pub(super) const DELIVERY_REASON: &str = "WebhookReceived";
/// The source of those events: they count apart from the controllers' events of the same object.
const DELIVERY_SOURCE: &str = "webhook-receiver";
/// The longest delivery id quoted in a delivery's event.
const QUOTED_ID: usize = 80;

/// Takes the delivery `id` of `service` (`GitHub`, `GitLab`, `Linear`) about `about`, a
/// `what` delivery; `false` when it was taken before: by this process, or by any server of this
/// store since its record (an Event named after the delivery) was made. A record the store
/// refuses (a full disk, say) is logged and the delivery taken: a delivery only wakes objects,
/// which then read the forge themselves.
async fn take_delivery<T: Resource>(state: &AppState, service: &str, id: &str, about: &T, what: &str) -> bool {
    if !state.deliveries.take(&format!("{}:{id}", service.to_ascii_lowercase())) {
        return false;
    }
    let involved = InvolvedObject {
        kind: T::KIND.as_str().to_string(),
        name: about.meta().name.clone(),
        uid: about.meta().uid.clone(),
    };
    let quoted: String = id.chars().take(QUOTED_ID).collect();
    let message = format!("{service} `{what}` delivery {quoted}");
    let mut record = Event::new(involved, EventType::Normal, DELIVERY_REASON, message, DELIVERY_SOURCE, Time::now());
    record.metadata = ObjectMeta { name: delivery_event_name(service, id), ..Default::default() };
    match state.recorder.record_once(&record).await {
        Ok(taken) => taken,
        Err(e) => {
            tracing::warn!(error = %e, delivery = id, "cannot record the webhook delivery in the store; it is acted on");
            true
        }
    }
}

/// The name of the Event that records a delivery: the service and id hashed, so any id makes a
/// valid name of a fixed length.
fn delivery_event_name(service: &str, id: &str) -> String {
    let digest =
        Sha256::new().chain_update(service.to_ascii_lowercase()).chain_update(b"\0").chain_update(id).finalize();
    format!("delivery-{}", &hex::encode(digest)[..32])
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

pub(super) async fn github(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<WebhookAnswer>), AppError> {
    let event = header(&headers, "x-github-event")
        .ok_or_else(|| AppError::BadRequest("the X-GitHub-Event header is missing".into()))?
        .to_string();
    let Some(signature) = header(&headers, "x-hub-signature-256") else {
        return Err(AppError::BadSignature);
    };
    // The secret is the one of the project the delivery is about.
    let payload = serde_json::from_slice::<Value>(&body).ok();
    let repository = payload
        .as_ref()
        .and_then(|v| v.pointer("/repository/full_name").and_then(Value::as_str).map(str::to_ascii_lowercase));
    let (projects, _) = state.store.list_typed::<Project>(&Selector::everything()).await?;
    let verified: Vec<&Project> = projects
        .iter()
        .filter(|p| {
            let repo = p.spec.repo.as_deref().map(str::to_ascii_lowercase);
            repo.is_some() && (repository.is_none() || repo == repository)
        })
        .filter(|p| {
            webhook_secret(p).is_some_and(|secret| webhook::verify_signature(secret.as_bytes(), &body, signature))
        })
        .collect();
    // A push may be about the repository of a GitSource, signed with that source's secret.
    let gitsources = if event == "push" { naming_gitsources(&state, payload.as_ref()).await? } else { vec![] };
    let by_gitsource = gitsources.iter().find(|g| {
        gitsource_secret(g).is_some_and(|secret| webhook::verify_signature(secret.as_bytes(), &body, signature))
    });
    if verified.is_empty() && by_gitsource.is_none() {
        return Err(AppError::BadSignature);
    }
    // Only a signed delivery is remembered, so nobody without the secret can fill the memory.
    let delivery = header(&headers, "x-github-delivery")
        .filter(|d| !d.trim().is_empty())
        .ok_or_else(|| AppError::BadRequest("the X-GitHub-Delivery header is missing".into()))?;
    for p in &verified {
        state.forges.webhook_heard(&p.metadata.name);
    }
    let taken = match (verified.first(), by_gitsource) {
        (Some(project), _) => take_delivery(&state, "GitHub", delivery, *project, &event).await,
        (None, Some(source)) => take_delivery(&state, "GitHub", delivery, source, &event).await,
        (None, None) => unreachable!("an unverified delivery was refused above"),
    };
    if !taken {
        tracing::info!(delivery, event = %event, "replayed webhook delivery ignored");
        let message = format!("delivery `{delivery}` was already received; ignored");
        return Ok((StatusCode::OK, Json(answer(message))));
    }
    let parsed = webhook::parse(&event, &body).map_err(|e| AppError::BadRequest(e.to_string()))?;
    let ev = match parsed {
        WebhookEvent::Ping { .. } => return Ok((StatusCode::OK, Json(answer("pong")))),
        WebhookEvent::Unknown(e) => {
            return Ok((StatusCode::ACCEPTED, Json(answer(format!("event `{e}` is not used; ignored")))))
        }
        WebhookEvent::Issues(ev) => {
            // The project's IssueSources read the tracker again now.
            let triggered = poll_issue_sources(&state, &verified).await?;
            tracing::debug!(action = %ev.action, issue = ev.number, sources = ?triggered, "issues webhook");
            let message =
                format!("`issues` ({} #{}) concerns {} issue source(s)", ev.action, ev.number, triggered.len());
            let answer = WebhookAnswer { message, issue_sources: Some(triggered), ..Default::default() };
            return Ok((StatusCode::ACCEPTED, Json(answer)));
        }
        WebhookEvent::Push(ev) => {
            let urls = ev.urls();
            let mut triggered = vec![];
            for source in gitsources.iter().filter(|g| g.spec.names_repository(&urls)) {
                state.gitsources.trigger(&source.metadata.name);
                triggered.push(source.metadata.name.clone());
            }
            tracing::debug!(git_ref = %ev.git_ref, sources = ?triggered, "push webhook");
            let message = format!("`push` of {} concerns {} git source(s)", ev.git_ref, triggered.len());
            let answer = WebhookAnswer { message, git_sources: Some(triggered), ..Default::default() };
            return Ok((StatusCode::ACCEPTED, Json(answer)));
        }
        WebhookEvent::Repository(ev) => ev,
    };
    let triggered = wake_sessions(&state, &verified, |branch, number| ev.concerns(branch, number)).await?;
    tracing::debug!(event = %event, sessions = ?triggered, "webhook");
    let message = format!("`{event}` concerns {} session(s)", triggered.len());
    Ok((StatusCode::ACCEPTED, Json(WebhookAnswer { message, sessions: Some(triggered), ..Default::default() })))
}

/// Makes the IssueSources of `projects` read their tracker now; their names.
async fn poll_issue_sources(state: &AppState, projects: &[&Project]) -> Result<Vec<String>, AppError> {
    let (sources, _) = state.store.list_typed::<IssueSource>(&Selector::everything()).await?;
    let mut triggered = vec![];
    for source in sources.iter().filter(|i| projects.iter().any(|p| p.metadata.name == i.spec.project)) {
        state.wakeups.source_heard(&source.metadata.name);
        state.issuesources.trigger(&source.metadata.name);
        triggered.push(source.metadata.name.clone());
    }
    Ok(triggered)
}

/// Reconciles at once the sessions of `projects` whose branch and change number a delivery
/// `concerns`; their names.
async fn wake_sessions(
    state: &AppState,
    projects: &[&Project],
    concerns: impl Fn(&str, Option<u64>) -> bool,
) -> Result<Vec<String>, AppError> {
    let (sessions, _) = state.store.list_typed::<Session>(&Selector::everything()).await?;
    let mut triggered = vec![];
    for s in sessions.iter().filter(|s| projects.iter().any(|p| p.metadata.name == s.spec.project)) {
        let branch = s.status.workspace.as_ref().map(|w| w.branch.as_str()).unwrap_or_default();
        let number = s.status.pull_request.as_ref().map(|p| p.number);
        if concerns(branch, number) {
            state.wakeups.session_heard(&s.metadata.name);
            state.sessions.trigger(&s.metadata.name);
            triggered.push(s.metadata.name.clone());
        }
    }
    Ok(triggered)
}

/// An answer that names nothing it woke.
fn answer(message: impl Into<String>) -> WebhookAnswer {
    WebhookAnswer { message: message.into(), ..Default::default() }
}

/// The GitSources whose `spec.url` is one of the addresses of the payload's repository.
async fn naming_gitsources(state: &AppState, payload: Option<&Value>) -> Result<Vec<GitSource>, AppError> {
    let urls: Vec<&str> = ["clone_url", "html_url", "ssh_url", "git_url"]
        .iter()
        .filter_map(|k| payload?.pointer(&format!("/repository/{k}"))?.as_str())
        .collect();
    if urls.is_empty() {
        return Ok(vec![]);
    }
    let (sources, _) = state.store.list_typed::<GitSource>(&Selector::everything()).await?;
    Ok(sources.into_iter().filter(|g| g.spec.names_repository(&urls)).collect())
}

/// The push webhook secret of a GitSource, from the variable its `webhookSecretEnv` names.
fn gitsource_secret(source: &GitSource) -> Option<String> {
    let var = source.spec.webhook_secret_env.as_deref()?;
    std::env::var(var).ok().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_delivery_is_taken_once_and_the_memory_is_bounded() {
        let d = super::Deliveries::default();
        assert!(d.take("a"));
        assert!(!d.take("a"));
        for i in 0..super::REMEMBERED_DELIVERIES {
            assert!(d.take(&i.to_string()));
        }
        assert!(d.take("a"), "the oldest id is forgotten first");
        assert_eq!(d.seen.lock().0.len(), super::REMEMBERED_DELIVERIES);
    }
}
