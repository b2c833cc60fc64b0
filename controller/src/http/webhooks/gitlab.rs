//! `POST /webhooks/gitlab`: checks `X-Gitlab-Token` (in constant time) against the webhook token
//! of the project the delivery names, then acts at once: a merge request, pipeline, job or note
//! event reconciles the sessions it concerns (by branch or merge request iid), an issue event
//! polls the project's IssueSources. A wrong or missing token is 401, an event that concerns
//! nothing is 202; neither changes anything. A delivery whose `X-Gitlab-Event-UUID` was already
//! taken, by this process or recorded in the store, is acknowledged and ignored.

use aoctl_api::wire::WebhookAnswer;
use aoctl_api::Project;
use aoctl_gitlab::webhook::{self, WebhookEvent};
use aoctl_store::Selector;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::Value;

use super::{answer, header, poll_issue_sources, take_delivery, wake_sessions};
use crate::forges::gitlab_webhook_token;
use crate::http::{AppError, AppState};

pub(crate) async fn gitlab(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<WebhookAnswer>), AppError> {
    let event = header(&headers, "x-gitlab-event")
        .ok_or_else(|| AppError::BadRequest("the X-Gitlab-Event header is missing".into()))?
        .to_string();
    let Some(token) = header(&headers, "x-gitlab-token") else { return Err(AppError::BadSignature) };
    let payload = serde_json::from_slice::<Value>(&body).ok();
    let path = payload
        .as_ref()
        .and_then(|v| v.pointer("/project/path_with_namespace").and_then(Value::as_str).map(str::to_ascii_lowercase));
    let (projects, _) = state.store.list_typed::<Project>(&Selector::everything()).await?;
    let verified: Vec<&Project> = projects
        .iter()
        .filter(|p| {
            p.spec.gitlab.as_ref().is_some_and(|g| Some(g.project_path.to_ascii_lowercase()) == path)
                && gitlab_webhook_token(p).is_some_and(|t| webhook::verify_token(t.as_bytes(), token))
        })
        .collect();
    if verified.is_empty() {
        return Err(AppError::BadSignature);
    }
    // Only a delivery with the right token is remembered.
    let uuid = header(&headers, "x-gitlab-event-uuid")
        .filter(|d| !d.trim().is_empty())
        .ok_or_else(|| AppError::BadRequest("the X-Gitlab-Event-UUID header is missing".into()))?;
    for p in &verified {
        state.forges.webhook_heard(&p.metadata.name);
    }
    if !take_delivery(&state, "GitLab", uuid, verified[0], &event).await {
        tracing::info!(delivery = uuid, event = %event, "replayed GitLab webhook delivery ignored");
        return Ok((StatusCode::OK, Json(answer(format!("delivery `{uuid}` was already received; ignored")))));
    }
    match webhook::parse(&event, &body).map_err(|e| AppError::BadRequest(e.to_string()))? {
        WebhookEvent::Unknown(e) => {
            Ok((StatusCode::ACCEPTED, Json(answer(format!("event `{e}` is not used; ignored")))))
        }
        WebhookEvent::Issue(ev) => {
            let triggered = poll_issue_sources(&state, &verified).await?;
            let message = format!("`{event}` ({} #{}) concerns {} issue source(s)", ev.action, ev.iid, triggered.len());
            let answer = WebhookAnswer { message, issue_sources: Some(triggered), ..Default::default() };
            Ok((StatusCode::ACCEPTED, Json(answer)))
        }
        WebhookEvent::Change(ev) => {
            let triggered = wake_sessions(&state, &verified, |branch, iid| ev.concerns(branch, iid)).await?;
            tracing::debug!(event = %event, sessions = ?triggered, "GitLab webhook");
            let message = format!("`{event}` concerns {} session(s)", triggered.len());
            Ok((StatusCode::ACCEPTED, Json(WebhookAnswer { message, sessions: Some(triggered), ..Default::default() })))
        }
    }
}
