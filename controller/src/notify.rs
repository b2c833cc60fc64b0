//! Notifiers: a reaction's notification to every target of the project — a JSON `webhook`,
//! `slack` and `discord` incoming webhooks, the `desktop`, or a `command` — retried with backoff;
//! a target that still fails becomes a Warning event on the session.

use std::time::Duration;

use aoctl_api::project::{Notifier, NotifierType};
use aoctl_api::{EventType, Resource, Time};
use aoctl_store::Store;
use serde::Serialize;

use crate::recorder::Recorder;

/// Attempts per target.
const ATTEMPTS: u32 = 3;
/// Upper bound for one HTTP notification.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// What a notification says; `webhook` and `command` targets get it as JSON.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    pub project: String,
    pub session: String,
    /// The reaction key, e.g. `approved-and-green`.
    pub reaction: String,
    pub title: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether this escalates something the agent was not able to resolve.
    pub escalated: bool,
    pub at: Time,
}

impl Notification {
    fn text(&self) -> String {
        let mut t = format!("*{}*\n{}", self.title, self.message);
        if let Some(u) = &self.url {
            t.push_str(&format!("\n{u}"));
        }
        t
    }
}

async fn deliver(http: &reqwest::Client, target: &Notifier, n: &Notification) -> Result<(), String> {
    let post = |body: serde_json::Value| async move {
        let url = target.url.as_deref().ok_or("no url")?;
        let resp = http.post(url).json(&body).timeout(HTTP_TIMEOUT).send().await.map_err(|e| e.to_string())?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(format!("{url} answered {}", resp.status()))
        }
    };
    match target.type_ {
        NotifierType::Webhook => post(serde_json::to_value(n).expect("notifications serialise")).await,
        NotifierType::Slack => post(serde_json::json!({"text": n.text()})).await,
        NotifierType::Discord => {
            let text: String = n.text().chars().take(2000).collect();
            post(serde_json::json!({"content": text})).await
        }
        NotifierType::Desktop => {
            let (title, body) = (n.title.clone(), n.message.clone());
            tokio::task::spawn_blocking(move || aoctl_runtimes::notify::desktop(&title, &body))
                .await
                .map_err(|e| e.to_string())?
        }
        NotifierType::Command => {
            let argv = target.command.clone();
            let json = serde_json::to_vec(n).expect("notifications serialise");
            tokio::task::spawn_blocking(move || aoctl_runtimes::notify::command(&argv, &json))
                .await
                .map_err(|e| e.to_string())?
        }
    }
}

/// Sends `n` to every target in the background; failures after the retries become events.
/// `about` is the object a failure event is recorded on: the session, or the project.
pub fn send<R>(store: Store, about: R, targets: Vec<Notifier>, n: Notification)
where
    R: Resource + Send + Sync + 'static,
{
    if targets.is_empty() {
        return;
    }
    tokio::spawn(async move {
        let http = reqwest::Client::new();
        for target in &targets {
            let mut last = String::new();
            for attempt in 0..ATTEMPTS {
                if attempt > 0 {
                    tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
                }
                match deliver(&http, target, &n).await {
                    Ok(()) => {
                        last.clear();
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            if !last.is_empty() {
                let kind = format!("{:?}", target.type_).to_lowercase();
                let msg = format!("{kind} notifier failed after {ATTEMPTS} attempts: {last}");
                tracing::warn!(object = %about.meta().name, "{msg}");
                Recorder::new(store.clone()).publish(&about, EventType::Warning, "NotifyFailed", &msg).await;
            }
        }
    });
}
