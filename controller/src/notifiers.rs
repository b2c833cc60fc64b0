//! Notifiers: the outbox of notifications recorded in an object's status (`status.notifications`),
//! delivered to every target of the project — a JSON `webhook`, `slack` and `discord` incoming
//! webhooks, the `desktop`, or a `command` — by the notification worker ([`crate::outbox`]), one
//! pass at a time with backoff between passes, so a delivery survives a restart. Every HTTP
//! request carries the record's key as `Idempotency-Key` (and the webhook and command JSON as
//! `idempotencyKey`): a resend after a crash between sending and recording the result is
//! recognisably the same notification.

use std::sync::OnceLock;
use std::time::Duration;

use aoctl_api::notification::NotificationRecord;
use aoctl_api::project::{Notifier, NotifierType};
use aoctl_api::Time;
use serde::Serialize;

/// Delivery passes before a target is given up.
pub(crate) const MAX_ATTEMPTS: u32 = 10;
/// Upper bound for one HTTP notification.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait between two passes.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How long settled records are kept in status, and how many at most.
const KEEP_SETTLED: Duration = Duration::from_secs(3600);
const KEEP_AT_MOST: usize = 20;
/// Slack: a section block's text and a header's plain text.
const SLACK_SECTION_MAX: usize = 3000;
const SLACK_HEADER_MAX: usize = 150;
/// Discord: a message's content, an embed's title and description, all embed text together.
const DISCORD_CONTENT_MAX: usize = 2000;
const DISCORD_TITLE_MAX: usize = 256;
const DISCORD_DESCRIPTION_MAX: usize = 4096;
const DISCORD_EMBED_TOTAL_MAX: usize = 6000;

/// What a notification says; `webhook` and `command` targets get it as JSON.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Notification {
    /// The same for every delivery of one event, resends included.
    pub idempotency_key: String,
    pub project: String,
    #[serde(skip_serializing_if = "String::is_empty")]
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
    pub(crate) fn of(r: &NotificationRecord, project: &str, session: &str) -> Notification {
        Notification {
            idempotency_key: r.key.clone(),
            project: project.to_string(),
            session: session.to_string(),
            reaction: r.reaction.clone(),
            title: r.title.clone(),
            message: r.message.clone(),
            url: r.url.clone(),
            escalated: r.escalated,
            at: r.at,
        }
    }

    fn text(&self) -> String {
        let mut t = format!("*{}*", self.title);
        if !self.message.trim().is_empty() {
            t.push_str(&format!("\n{}", self.message.trim_end()));
        }
        if let Some(u) = &self.url {
            t.push_str(&format!("\n{u}"));
        }
        t
    }
}

/// The first `max` characters of `s`, with `…` as the last one when cut.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Slack's incoming-webhook message: `text` (the fallback for clients without blocks) and a
/// header and a section block within their documented lengths.
pub(crate) fn slack_body(n: &Notification) -> serde_json::Value {
    let mut detail = n.message.trim_end().to_string();
    if let Some(u) = &n.url {
        detail.push_str(&format!("\n<{u}>"));
    }
    let mut blocks = vec![
        serde_json::json!({"type": "header", "text": {"type": "plain_text", "text": cut(&n.title, SLACK_HEADER_MAX)}}),
    ];
    if !detail.trim().is_empty() {
        let text = cut(&detail, SLACK_SECTION_MAX);
        blocks.push(serde_json::json!({"type": "section", "text": {"type": "mrkdwn", "text": text}}));
    }
    serde_json::json!({"text": cut(&n.text(), SLACK_SECTION_MAX), "blocks": blocks})
}

/// Discord's execute-webhook body: `content` and one embed, within the documented limits.
pub(crate) fn discord_body(n: &Notification) -> serde_json::Value {
    let title = cut(&n.title, DISCORD_TITLE_MAX);
    let room = DISCORD_EMBED_TOTAL_MAX - title.chars().count();
    let description = cut(n.message.trim_end(), DISCORD_DESCRIPTION_MAX.min(room));
    let mut embed = serde_json::json!({"title": title, "timestamp": n.at.to_string()});
    if !description.is_empty() {
        embed["description"] = description.into();
    }
    if let Some(u) = &n.url {
        embed["url"] = u.clone().into();
    }
    let content = match &n.url {
        Some(u) => format!("{}\n{u}", n.title),
        None => n.title.clone(),
    };
    serde_json::json!({"content": cut(&content, DISCORD_CONTENT_MAX), "embeds": [embed]})
}

fn http() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| reqwest::Client::builder().timeout(HTTP_TIMEOUT).build().unwrap_or_default())
}

/// The name of a target in `pending`: its type and its place in `spec.notifiers`.
pub(crate) fn target_id(i: usize, t: &Notifier) -> String {
    format!("{}#{i}", type_name(t.type_))
}

fn type_name(t: NotifierType) -> &'static str {
    match t {
        NotifierType::Webhook => "webhook",
        NotifierType::Slack => "slack",
        NotifierType::Discord => "discord",
        NotifierType::Desktop => "desktop",
        NotifierType::Command => "command",
    }
}

/// Why one delivery to one target failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeliveryError {
    #[error("no url")]
    NoUrl,
    #[error("{url}: {source}")]
    Request { url: String, source: reqwest::Error },
    #[error("{url} answered {status}")]
    Refused { url: String, status: reqwest::StatusCode },
    #[error(transparent)]
    Program(#[from] aoctl_runtimes::notification_programs::NotifyError),
    #[error("the notifier task ended: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Sends `n` to one target once.
pub(crate) async fn deliver(target: &Notifier, n: &Notification) -> Result<(), DeliveryError> {
    let post = |body: serde_json::Value| async move {
        let url = target.url.as_deref().ok_or(DeliveryError::NoUrl)?;
        let resp = http()
            .post(url)
            .header("Idempotency-Key", &n.idempotency_key)
            .json(&body)
            .send()
            .await
            .map_err(|source| DeliveryError::Request { url: url.to_string(), source })?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(DeliveryError::Refused { url: url.to_string(), status: resp.status() })
        }
    };
    match target.type_ {
        NotifierType::Webhook => post(serde_json::to_value(n).expect("notifications serialise")).await,
        NotifierType::Slack => post(slack_body(n)).await,
        NotifierType::Discord => post(discord_body(n)).await,
        NotifierType::Desktop => {
            let (title, body, key) = (n.title.clone(), n.message.clone(), n.idempotency_key.clone());
            Ok(tokio::task::spawn_blocking(move || aoctl_runtimes::notification_programs::desktop(&title, &body, &key))
                .await??)
        }
        NotifierType::Command => {
            let argv = target.command.clone();
            let json = serde_json::to_vec(n).expect("notifications serialise");
            Ok(tokio::task::spawn_blocking(move || aoctl_runtimes::notification_programs::command(&argv, &json))
                .await??)
        }
    }
}

/// A new record for every target of `targets`; `None` when there are no targets.
pub(crate) fn record(
    key: String,
    reaction: &str,
    title: String,
    message: String,
    url: Option<String>,
    escalated: bool,
    targets: &[Notifier],
) -> Option<NotificationRecord> {
    if targets.is_empty() {
        return None;
    }
    Some(NotificationRecord {
        key,
        reaction: reaction.to_string(),
        title,
        message,
        url,
        escalated,
        at: Time::now(),
        pending: targets.iter().enumerate().map(|(i, t)| target_id(i, t)).collect(),
        attempts: 0,
        next_attempt_at: None,
        delivered_at: None,
        failed_at: None,
        last_error: None,
    })
}

/// Adds `r` to the outbox unless a record of the same event is there; whether it was added.
pub(crate) fn enqueue(outbox: &mut Vec<NotificationRecord>, r: NotificationRecord) -> bool {
    if outbox.iter().any(|o| o.key == r.key) {
        return false;
    }
    outbox.push(r);
    true
}

/// Drops settled records older than an hour, and the oldest settled ones past twenty.
pub(crate) fn prune(outbox: &mut Vec<NotificationRecord>, now: Time) {
    let old = |r: &NotificationRecord| {
        let at = r.delivered_at.or(r.failed_at).unwrap_or(r.at);
        (now.0 - at.0).to_std().unwrap_or_default() > KEEP_SETTLED
    };
    outbox.retain(|r| !(r.settled() && old(r)));
    while outbox.len() > KEEP_AT_MOST {
        let Some(i) = outbox.iter().position(NotificationRecord::settled) else { break };
        outbox.remove(i);
    }
}

/// The wait after `attempts` failed passes: 2 s, doubling, at most five minutes.
pub(crate) fn backoff(attempts: u32) -> Duration {
    Duration::from_secs(1u64 << attempts.clamp(1, 16)).min(MAX_BACKOFF)
}

/// How long until the next pending record is due; `None` when none is pending.
pub(crate) fn next_due(outbox: &[NotificationRecord], now: Time) -> Option<Duration> {
    outbox
        .iter()
        .filter(|r| !r.settled())
        .map(|r| r.next_attempt_at.map_or(Duration::ZERO, |t| (t.0 - now.0).to_std().unwrap_or_default()))
        .min()
}

/// What one delivery pass did.
#[derive(Default)]
pub(crate) struct Pass {
    /// Records whose delivery state changed, by key.
    pub changed: Vec<String>,
    /// Messages about targets given up, for Warning events.
    pub given_up: Vec<String>,
    /// Keys of escalations that reached their first target in this pass.
    pub first_sent: Vec<String>,
}

/// Makes one delivery attempt at every due record's pending targets and records the results.
pub(crate) async fn deliver_due(
    outbox: &mut [NotificationRecord],
    targets: &[Notifier],
    project: &str,
    session: &str,
    now: Time,
) -> Pass {
    let mut pass = Pass::default();
    for r in outbox.iter_mut().filter(|r| !r.settled()) {
        if r.next_attempt_at.is_some_and(|t| t > now) {
            continue;
        }
        let n = Notification::of(r, project, session);
        let before = r.pending.len();
        let mut errors = vec![];
        let mut left = vec![];
        for id in std::mem::take(&mut r.pending) {
            // A target removed from the project since is no longer told.
            let Some(target) = targets.iter().enumerate().find(|(i, t)| target_id(*i, t) == id).map(|(_, t)| t) else {
                continue;
            };
            match deliver(target, &n).await {
                Ok(()) => tracing::debug!(key = %r.key, target = %id, "notification delivered"),
                Err(e) => {
                    errors.push(format!("{id}: {e}"));
                    left.push(id);
                }
            }
        }
        if left.len() < before && r.attempts == 0 {
            pass.first_sent.push(r.key.clone());
        }
        r.attempts += 1;
        r.pending = left;
        let stamp = Time::now();
        if r.pending.is_empty() {
            r.delivered_at = Some(stamp);
            r.next_attempt_at = None;
            r.last_error = None;
        } else {
            r.last_error = Some(errors.join("; "));
            if r.attempts >= MAX_ATTEMPTS {
                r.failed_at = Some(stamp);
                r.next_attempt_at = None;
                let msg = format!("notification {} failed after {} attempts: {}", r.key, r.attempts, errors.join("; "));
                tracing::warn!("{msg}");
                pass.given_up.push(msg);
            } else {
                let wait = chrono::Duration::from_std(backoff(r.attempts)).unwrap_or_default();
                r.next_attempt_at = Some(Time(stamp.0 + wait));
            }
        }
        pass.changed.push(r.key.clone());
    }
    pass
}

/// Copies the delivery state of the records of `from` named in `keys` onto the same records of
/// `onto` (a fresher status the results are written into).
pub(crate) fn carry(from: &[NotificationRecord], onto: &mut [NotificationRecord], keys: &[String]) {
    for r in onto.iter_mut().filter(|r| keys.contains(&r.key)) {
        if let Some(f) = from.iter().find(|f| f.key == r.key) {
            r.pending = f.pending.clone();
            r.attempts = f.attempts;
            r.next_attempt_at = f.next_attempt_at;
            r.delivered_at = f.delivered_at;
            r.failed_at = f.failed_at;
            r.last_error = f.last_error.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(title: &str, message: &str) -> Notification {
        Notification {
            idempotency_key: "k".into(),
            project: "p".into(),
            session: "s".into(),
            reaction: "ci-failed".into(),
            title: title.into(),
            message: message.into(),
            url: Some("https://github.com/o/r/pull/1".into()),
            escalated: true,
            at: Time::from_unix(0),
        }
    }

    #[test]
    fn slack_and_discord_bodies_stay_within_their_limits() {
        let n = note(&"t".repeat(400), &"é".repeat(9000));
        let s = slack_body(&n);
        assert!(s["text"].as_str().unwrap().chars().count() <= SLACK_SECTION_MAX);
        assert_eq!(s["blocks"][0]["text"]["text"].as_str().unwrap().chars().count(), SLACK_HEADER_MAX);
        assert_eq!(s["blocks"][1]["text"]["text"].as_str().unwrap().chars().count(), SLACK_SECTION_MAX);
        let d = discord_body(&n);
        assert!(d["content"].as_str().unwrap().chars().count() <= DISCORD_CONTENT_MAX);
        let e = &d["embeds"][0];
        let (t, desc) =
            (e["title"].as_str().unwrap().chars().count(), e["description"].as_str().unwrap().chars().count());
        assert_eq!(t, DISCORD_TITLE_MAX);
        assert!(desc <= DISCORD_DESCRIPTION_MAX && t + desc <= DISCORD_EMBED_TOTAL_MAX);
        assert_eq!(e["url"], "https://github.com/o/r/pull/1");
    }

    #[test]
    fn outbox_keeps_one_record_per_event_and_prunes_settled_ones() {
        let t = [Notifier { type_: NotifierType::Webhook, url: Some("http://x".into()), command: vec![] }];
        let r = |k: &str| record(k.into(), "ci-failed", "t".into(), String::new(), None, false, &t).unwrap();
        let mut outbox = vec![];
        assert!(enqueue(&mut outbox, r("a")));
        assert!(!enqueue(&mut outbox, r("a")), "the same event is recorded once");
        assert_eq!(outbox[0].pending, vec!["webhook#0".to_string()]);
        assert_eq!(next_due(&outbox, Time::now()), Some(Duration::ZERO));
        for i in 0..30 {
            let mut x = r(&format!("d{i}"));
            x.delivered_at = Some(Time::now());
            x.pending.clear();
            outbox.push(x);
        }
        prune(&mut outbox, Time::now());
        assert_eq!(outbox.len(), KEEP_AT_MOST);
        assert!(outbox.iter().any(|o| o.key == "a"), "a pending record is never pruned");
        prune(&mut outbox, Time(Time::now().0 + chrono::Duration::hours(2)));
        assert_eq!(outbox.len(), 1);
        assert_eq!(
            (backoff(1), backoff(3), backoff(12)),
            (Duration::from_secs(2), Duration::from_secs(8), MAX_BACKOFF)
        );
    }
}
