//! `aoctl review`: ask for a review round of a session's pull request now. It sets the worker's
//! `ao.dev/review-requested` annotation (a merge patch of its metadata); the session reconciler
//! starts the round when the value is new, so the reconciler still writes status only.

use std::process::ExitCode;

use aoctl_api::review::REVIEW_REQUESTED_ANNOTATION;
use aoctl_api::{Kind, Time};
use serde_json::json;

use super::emit;
use crate::args::ReviewArgs;
use crate::client::Client;

pub(crate) async fn run(client: &Client, a: ReviewArgs) -> anyhow::Result<ExitCode> {
    let session = client.get(Kind::Session, &a.session).await?;
    if let Some(of) = session.pointer("/spec/reviewOf").and_then(|v| v.as_str()) {
        anyhow::bail!("session \"{}\" is a reviewer of \"{of}\"; review the worker instead", a.session);
    }
    let at = Time::now().to_string();
    let patch = json!({"metadata": {"annotations": {REVIEW_REQUESTED_ANNOTATION: at}}});
    client.merge_patch(Kind::Session, &a.session, &patch).await?;
    emit(&format!("review of session \"{}\" requested at {at}\n", a.session));
    Ok(ExitCode::SUCCESS)
}
