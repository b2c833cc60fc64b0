//! `POST /webhooks/linear`: checks `Linear-Signature` (HMAC-SHA256 of the body) against the
//! webhook secret of every project whose issues are on Linear, refuses a delivery sent more than
//! a minute ago (a replay), then polls the IssueSources of the projects whose secret signed it.
//! A bad or missing signature is 401; a delivery about anything but issues is 202 and changes
//! nothing. A delivery whose `Linear-Delivery` id was already taken, by this process or recorded
//! in the store, is acknowledged and ignored.

use aoctl_api::wire::WebhookAnswer;
use aoctl_api::Project;
use aoctl_linear::webhook;
use aoctl_store::Selector;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;

use super::{answer, header, poll_issue_sources, take_delivery};
use crate::forges::linear_webhook_secret;
use crate::http::{AppError, AppState};

pub(crate) async fn linear(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<WebhookAnswer>), AppError> {
    let Some(signature) = header(&headers, "linear-signature") else { return Err(AppError::BadSignature) };
    let (projects, _) = state.store.list_typed::<Project>(&Selector::everything()).await?;
    let verified: Vec<&Project> = projects
        .iter()
        .filter(|p| linear_webhook_secret(p).is_some_and(|s| webhook::verify_signature(s.as_bytes(), &body, signature)))
        .collect();
    if verified.is_empty() {
        return Err(AppError::BadSignature);
    }
    let delivery = webhook::parse(&body).map_err(|e| AppError::BadRequest(e.to_string()))?;
    if !delivery.fresh(chrono::Utc::now().timestamp_millis()) {
        return Err(AppError::BadRequest(format!(
            "the delivery's webhookTimestamp is more than {} s from now; refused as a replay",
            webhook::MAX_SKEW_MS / 1000
        )));
    }
    let id = header(&headers, "linear-delivery")
        .filter(|d| !d.trim().is_empty())
        .ok_or_else(|| AppError::BadRequest("the Linear-Delivery header is missing".into()))?;
    if !take_delivery(&state, "Linear", id, verified[0], &delivery.kind).await {
        tracing::info!(delivery = id, "replayed Linear webhook delivery ignored");
        return Ok((StatusCode::OK, Json(answer(format!("delivery `{id}` was already received; ignored")))));
    }
    if delivery.kind != "Issue" {
        let message = format!("`{}` deliveries are not used; ignored", delivery.kind);
        return Ok((StatusCode::ACCEPTED, Json(answer(message))));
    }
    let triggered = poll_issue_sources(&state, &verified).await?;
    let issue = delivery.identifier.as_deref().unwrap_or("an issue");
    let message = format!("`Issue` {} of {issue} concerns {} issue source(s)", delivery.action, triggered.len());
    let answer = WebhookAnswer { message, issue_sources: Some(triggered), ..Default::default() };
    Ok((StatusCode::ACCEPTED, Json(answer)))
}
