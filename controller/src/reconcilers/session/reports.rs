//! An orchestrator's part of hearing from its workers: what they keep for it (`status.upstream`,
//! see `upstream`) reaches it as one typed message per batch, in order, once each, across
//! restarts too.
//!
//! A batch is formed when records wait and the newest is [`QUIET`] old, or the oldest [`CAP`] old
//! (many arriving together make one message), and written into the orchestrator's own status
//! (`status.orchestrator.inFlight`) before anything is typed. The next reconcile types it through
//! the one typing path with a marker (`[aoctl:reports:<uid>-<id>]`), after the messages a person
//! queued, never into a screen waiting for a person; once it was typed (or its marker shows it
//! was, by a controller killed before it recorded so), the per-worker cursors
//! (`status.orchestrator.delivered`) move past its records and it is cleared, in one status write.
//! Killed between, the batch is typed on the next pass (not at all when its marker shows).

use std::time::Duration;

use aoctl_api::orchestrator::{Batch, BatchItem, Delivered, OrchestratorStatus, UpstreamRecord};
use aoctl_api::session::ActivityState;
use aoctl_api::{condition, EventType, Session, Time};
use aoctl_runtimes::Handle;
use aoctl_store::StoreError;

use super::launch::engine;
use super::{typed_agent, Error, Reconcile};
use crate::typing::{How, Keyboard, Typed, What};

/// A batch is formed once the newest waiting record is this old...
const QUIET: Duration = Duration::from_secs(3);
/// ...or the oldest this old, whichever comes first.
const CAP: Duration = Duration::from_secs(30);
/// The most records one message carries; the rest wait for the next.
const MAX_ITEMS: usize = 20;
/// The longest message, in bytes; the records past it wait for the next.
const MAX_TEXT: usize = 16 * 1024;
/// How soon an agent not ready for a batch is looked at again.
const NOT_YET: Duration = Duration::from_secs(3);

impl Reconcile<'_> {
    /// Types the batch in flight, or forms the next one; how soon to look again.
    pub(super) async fn deliver_reports(&mut self) -> Result<Option<Duration>, Error> {
        if self.st.orchestrator.as_ref().is_some_and(|o| o.in_flight.is_some()) {
            return self.type_batch().await;
        }
        self.form_batch().await
    }

    /// Forms a batch of what its workers keep for it, when the window says so.
    async fn form_batch(&mut self) -> Result<Option<Duration>, Error> {
        let (s, ctx) = (self.s, self.ctx);
        let name = s.metadata.name.clone();
        let workers = ctx.index.read(&ctx.store, |i| i.workers(&name)).await?;
        let status = self.st.orchestrator.get_or_insert_with(OrchestratorStatus::default);
        // A worker that is gone has nothing more for it.
        status.delivered.retain(|w, _| workers.iter().any(|k| k.name == *w));
        let mut waiting: Vec<(String, String, UpstreamRecord)> = vec![];
        for w in workers {
            let uid = w.uid.clone().unwrap_or_default();
            let had = status.delivered.get(&w.name).filter(|d| d.uid == uid).map_or(0, |d| d.seq);
            if w.top <= had {
                continue;
            }
            let worker: Session = match ctx.store.get_typed(&w.name).await {
                Ok(w) => w,
                Err(StoreError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            let Some(up) = worker.status.upstream.filter(|u| u.orchestrator == name) else { continue };
            for r in up.pending.into_iter().filter(|r| r.seq > had) {
                waiting.push((w.name.clone(), uid.clone(), r));
            }
        }
        if waiting.is_empty() {
            return Ok(None);
        }
        waiting.sort_by(|a, b| (a.2.at, &a.0, a.2.seq).cmp(&(b.2.at, &b.0, b.2.seq)));
        let now = chrono::Utc::now();
        let age = |t: &Time| (now - t.0).to_std().unwrap_or_default();
        let (oldest, newest) = (age(&waiting[0].2.at), age(&waiting[waiting.len() - 1].2.at));
        if newest < QUIET && oldest < CAP {
            return Ok(Some((QUIET - newest).min(CAP - oldest)));
        }
        let id = status.batches + 1;
        let uid: String = s.metadata.uid.as_deref().unwrap_or_default().chars().take(8).collect();
        let marker = format!("[aoctl:reports:{uid}-{id}]");
        let mut lines = vec![];
        let mut items = vec![];
        let mut size = 0;
        for (worker, worker_uid, r) in waiting.iter().take(MAX_ITEMS) {
            let line = format!("{}. {worker} — {}: {}", items.len() + 1, r.kind.as_str(), one_line(&r.text));
            if !items.is_empty() && size + line.len() > MAX_TEXT {
                break;
            }
            size += line.len();
            lines.push(line);
            items.push(BatchItem {
                session: worker.clone(),
                uid: worker_uid.clone(),
                seq: r.seq,
                kind: r.kind.as_str().to_string(),
                at: r.at,
            });
        }
        let n = items.len();
        let heading =
            if n == 1 { "1 message from your workers".to_string() } else { format!("{n} messages from your workers") };
        let text = format!(
            "{marker} {heading}:\n{}\nAct on them with your aoctl tools (list_sessions, read_transcript, read_diff, send, \
             stop, resume, delete, request_review, merge).",
            lines.join("\n")
        );
        status.in_flight = Some(Batch { id, items, text, formed_at: Time::now() });
        // Written with this reconcile's status before anything is typed; the next pass types it.
        Ok(Some(Duration::ZERO))
    }

    /// Types the batch in flight; once typed (or found typed), moves the cursors and clears it.
    async fn type_batch(&mut self) -> Result<Option<Duration>, Error> {
        let (s, ctx) = (self.s, self.ctx);
        let st = &*self.st;
        let Some(batch) = st.orchestrator.as_ref().and_then(|o| o.in_flight.clone()) else { return Ok(None) };
        let running = condition::is_true(&st.conditions, aoctl_api::condition::types::RUNTIME_READY);
        let Some(rt_status) = st.runtime.clone().filter(|_| running && !s.spec.stopped) else {
            return Ok(Some(NOT_YET));
        };
        if st.activity.as_ref().is_some_and(|a| a.state == ActivityState::RateLimited) {
            return Ok(Some(NOT_YET));
        }
        let held = st.activity.as_ref().is_some_and(|a| a.state == ActivityState::NeedsInput);
        let marker = batch.text.split_whitespace().next().unwrap_or_default().to_string();
        let n = batch.items.len();
        let event = Some(format!("typed {n} message(s) from its workers (batch {})", batch.id));
        let how = How { marker: Some(&marker), in_turn: true, held, event, ..How::of(What::Marked) };
        let rt = engine(ctx, &self.host, rt_status.kind).await?;
        let h = Handle(rt_status.handle.clone());
        let typed = {
            let agent = typed_agent(s, ctx, &self.project, &*rt, &h, rt_status.kind);
            Keyboard::lock(ctx.machine.typing(), agent).await.type_in(&batch.text, &how).await
        };
        match typed {
            Ok(Typed::Delivered | Typed::Before) => {}
            Ok(Typed::NotYet | Typed::Held) => return Ok(Some(NOT_YET)),
            Err(e) => {
                let msg = format!("batch {} is typed again later: {e}", batch.id);
                ctx.recorder.publish(s, EventType::Warning, "ReportsNotDelivered", &msg).await;
                return Ok(Some(Duration::from_secs(10)));
            }
        }
        let status = self.st.orchestrator.get_or_insert_with(OrchestratorStatus::default);
        for item in &batch.items {
            let d = status.delivered.entry(item.session.clone()).or_default();
            if d.uid != item.uid {
                *d = Delivered { uid: item.uid.clone(), seq: 0 };
            }
            d.seq = d.seq.max(item.seq);
        }
        status.in_flight = None;
        status.batches = status.batches.max(batch.id);
        let workers: Vec<&str> = batch.items.iter().map(|i| i.session.as_str()).collect();
        let msg = format!("batch {}: {n} message(s) from {}", batch.id, workers.join(", "));
        ctx.recorder.publish(s, EventType::Normal, "ReportsDelivered", &msg).await;
        // The next batch may be waiting already; the workers trim what it had when they next pass.
        Ok(Some(Duration::from_secs(1)))
    }
}

/// A record's text on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
