//! Writes: the rules of `aoctl_store::tx` run against the in-memory copy at revision R, then one
//! etcd transaction commits what they staged on the condition that no object they read or wrote
//! changed since (each key's `mod_revision`, or its absence), together with the change record.
//!
//! When the condition fails another writer came first: the store waits until its copy has seen
//! the newest change record and runs the rules again (a bounded number of times, then
//! `Conflict`). When etcd does not answer, the transaction may or may not have been applied: the
//! store tries again until the write timeout (then `Unavailable`), and before it runs the rules
//! again it reads the change record's newest revision and lets the copy catch up to it, so that
//! a transaction of its own that was applied after all is found by its id and answered as done.

use std::time::Duration;

use aoctl_api::Kind;
use aoctl_store::tx::{apply, Change, Op, Overlay, Reply, Tx};
use aoctl_store::{Deleted, StoreError};
use serde_json::Value;
use tokio::time::Instant;

use crate::cache::{Reads, Recording};
use crate::error::{classify, unavailable, Failure};
use crate::layout::{encode_record, object_rv, set_rv, stored_value, Keys};
use crate::wire::{Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, ResponseOp, TxnRequest};
use crate::{Fence, Shared};

/// How many times a write whose condition failed runs the rules again before `Conflict`.
const MAX_CONFLICTS: usize = 16;
/// How long a write whose precondition names a revision the copy has not reached waits for it.
const PRECONDITION_WAIT: Duration = Duration::from_secs(2);
const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// The pause before a write that was not sent is sent again.
const NOT_SENT_PAUSE: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_millis(500);

/// What the rules made of a write against the copy at revision `at`.
struct Plan {
    reads: Reads,
    writes: Overlay,
    changes: Vec<Change>,
    reply: Reply,
    at: u64,
}

enum Planned {
    /// Nothing to commit: a dry run, or a write that changes nothing.
    Done(Reply),
    Commit(Plan),
}

/// Runs a write: the rules, the transaction and the retries.
pub(crate) async fn write(shared: &Shared, fence: Option<&Fence>, op: Op, dry_run: bool) -> Result<Reply, StoreError> {
    let config = &shared.config;
    // A store that already cannot reach etcd tries once rather than for the whole write timeout.
    let budget = if shared.unwritable().is_some() { config.request_timeout } else { config.write_timeout };
    let deadline = Instant::now() + budget;
    let mut unconfirmed: Vec<(String, Reply, u64)> = vec![];
    let mut waited_for_precondition = false;
    let mut conflicts = 0;
    let mut backoff = BACKOFF_MIN;
    let mut resend = NOT_SENT_PAUSE;
    let mut last_error = unavailable("no answer");
    loop {
        let plan = match plan(shared, &op, dry_run) {
            Ok(Planned::Done(reply)) => return Ok(reply),
            Ok(Planned::Commit(plan)) => plan,
            Err(e) if e.is_conflict() && !waited_for_precondition => {
                // A precondition from a newer revision than the copy's: another store's write
                // this one has not seen yet.
                waited_for_precondition = true;
                match newest_precondition(&op).filter(|rv| *rv > shared.rv()) {
                    Some(rv) => {
                        let _ = tokio::time::timeout(PRECONDITION_WAIT, shared.wait_for(rv)).await;
                        continue;
                    }
                    None => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(last_error);
        }
        let id = uuid::Uuid::new_v4().to_string();
        let txn = transaction(&shared.keys, fence, &plan, &id);
        let answer = tokio::time::timeout(config.request_timeout.min(left), shared.client.txn(&txn)).await;
        let why = match answer {
            Ok(Ok(resp)) if resp.succeeded => {
                shared.requests_ok();
                let rv = resp.header.revision as u64;
                shared.wait_for(rv).await;
                shared.compact_after(rv).await;
                return Ok(at_revision(plan.reply, rv, plan.at));
            }
            Ok(Ok(resp)) => {
                shared.requests_ok();
                if let Some(fence) = fence.filter(|f| !fence_holds(&resp.responses, f)) {
                    tracing::warn!(key = %String::from_utf8_lossy(&fence.key), "a write of an ended term was refused");
                    return Err(unavailable("this replica's term of leadership has ended; the write was not stored"));
                }
                // Someone else wrote: let the copy see it, then run the rules again.
                let left = deadline.saturating_duration_since(Instant::now());
                let _ = tokio::time::timeout(left, shared.wait_for(newest_record(&resp.responses))).await;
                if let Some(reply) = confirmed(shared, &mut unconfirmed) {
                    return Ok(reply);
                }
                let (kind, name) = target(&op);
                last_error = StoreError::conflict(kind, &name);
                conflicts += 1;
                if conflicts >= MAX_CONFLICTS {
                    return Err(last_error);
                }
                continue;
            }
            Ok(Err(e)) => match classify(&e) {
                Failure::Refused(e) => return Err(e),
                Failure::NotSent(why) => {
                    // Nothing was applied: try again at once, most likely on another member.
                    shared.requests_failed(&why);
                    last_error = unavailable(&format!("{why}; the write was not stored"));
                    tokio::time::sleep(resend.min(deadline.saturating_duration_since(Instant::now()))).await;
                    resend = (resend * 2).min(BACKOFF_MAX);
                    continue;
                }
                Failure::Unknown(why) => why,
            },
            Err(_) => format!("no answer within {:?}", config.request_timeout.min(left)),
        };
        shared.requests_failed(&why);
        last_error = unavailable(&format!("{why}; the write was not stored"));
        unconfirmed.push((id, plan.reply, plan.at));
        tokio::time::sleep(backoff.min(deadline.saturating_duration_since(Instant::now()))).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
        // Before the rules run again: was the unanswered transaction applied after all?
        let left = deadline.saturating_duration_since(Instant::now());
        if let Ok(Some(rv)) = tokio::time::timeout(left, newest_record_now(shared)).await {
            shared.requests_ok();
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = tokio::time::timeout(left, shared.wait_for(rv)).await;
            if let Some(reply) = confirmed(shared, &mut unconfirmed) {
                return Ok(reply);
            }
        }
    }
}

/// Runs the rules against the copy as it is now.
fn plan(shared: &Shared, op: &Op, dry_run: bool) -> Result<Planned, StoreError> {
    let state = shared.read();
    let view = Recording::new(&state);
    let none = Overlay::new();
    let mut tx = Tx::new(&view, &none, state.rv + 1, dry_run);
    let reply = apply(&mut tx, op.clone())?;
    if dry_run {
        return Ok(Planned::Done(reply));
    }
    let (mut writes, mut changes, next_rv) = tx.into_parts();
    if changes.is_empty() {
        return Ok(Planned::Done(reply));
    }
    // Events beyond the cap go in the same transaction, oldest first, as in the sled store.
    let stored = state.map(Kind::Event);
    let mut events = stored.len() as i64;
    for ((kind, name), obj) in &writes {
        if *kind == Kind::Event {
            events += match (stored.contains_key(name), obj.is_some()) {
                (false, true) => 1,
                (true, false) => -1,
                _ => 0,
            };
        }
    }
    let excess = events - shared.config.max_events as i64;
    if excess > 0 {
        let oldest = state.events_by_age(|name| writes.contains_key(&(Kind::Event, name.to_string())));
        let mut expiry = Tx::new(&view, &writes, next_rv, false);
        for name in oldest.iter().take(excess as usize) {
            expiry.expire(Kind::Event, name);
        }
        let (expired, staged, _) = expiry.into_parts();
        writes.extend(expired);
        changes.extend(staged);
    }
    // Every key written is checked too, as it was when the rules ran.
    for (kind, name) in writes.keys() {
        view.note(*kind, name);
    }
    Ok(Planned::Commit(Plan { reads: view.into_reads(), writes, changes, reply, at: state.rv }))
}

/// The transaction of a plan: if every object read is still at the revision read (or still
/// absent), and the fence's leader key is still the one it names, write the objects and the
/// change record; else read the change record and the leader key.
fn transaction(keys: &Keys, fence: Option<&Fence>, plan: &Plan, id: &str) -> TxnRequest {
    let mut compares: Vec<Compare> = plan
        .reads
        .iter()
        .map(|((kind, name), rv)| {
            let key = keys.object(*kind, name);
            match rv {
                Some(rv) => Compare::mod_revision(key, *rv as i64),
                None => Compare::version(key, 0),
            }
        })
        .collect();
    let mut otherwise = vec![RequestOp::Range(RangeRequest::key(keys.changes()))];
    if let Some(fence) = fence {
        compares.push(Compare::create_revision(fence.key.clone(), fence.create_revision));
        otherwise.push(RequestOp::Range(RangeRequest::key(&fence.key)));
    }
    let mut writes: Vec<_> = plan.writes.iter().collect();
    writes.sort_by(|a, b| a.0.cmp(b.0));
    let mut ops: Vec<RequestOp> = writes
        .into_iter()
        .map(|((kind, name), obj)| {
            let key = keys.object(*kind, name);
            match obj {
                Some(obj) => RequestOp::Put(PutRequest { key, value: stored_value(obj), lease: 0 }),
                None => RequestOp::Delete(DeleteRangeRequest { key }),
            }
        })
        .collect();
    // Last, so that a watch of the objects would see the record after them.
    ops.push(RequestOp::Put(PutRequest {
        key: keys.changes().to_vec(),
        value: encode_record(id, &plan.changes),
        lease: 0,
    }));
    TxnRequest { compare: compares, success: ops, failure: otherwise }
}

/// Whether a failed transaction's answer shows the fence's leader key still held (its second
/// read, after the change record's).
fn fence_holds(responses: &[ResponseOp], fence: &Fence) -> bool {
    let mut read = responses.iter().filter_map(|r| r.response_range.as_ref());
    read.nth(1).and_then(|g| g.kvs.first()).is_some_and(|kv| kv.create_revision == fence.create_revision)
}

/// The revision of the newest change record in a failed transaction's answer.
fn newest_record(responses: &[ResponseOp]) -> u64 {
    responses
        .iter()
        .find_map(|r| r.response_range.as_ref())
        .map_or(0, |g| g.kvs.first().map_or(0, |kv| kv.mod_revision as u64))
}

/// The revision of the newest change record, read from etcd now.
async fn newest_record_now(shared: &Shared) -> Option<u64> {
    let read = RangeRequest::key(shared.keys.changes());
    let resp = tokio::time::timeout(shared.config.request_timeout, shared.client.range(&read)).await.ok()?.ok()?;
    Some(resp.kvs.first().map_or(0, |kv| kv.mod_revision as u64))
}

/// The reply of an unanswered transaction the copy has seen applied, if any.
fn confirmed(shared: &Shared, unconfirmed: &mut Vec<(String, Reply, u64)>) -> Option<Reply> {
    let state = shared.read();
    let found = unconfirmed.iter().position(|(id, _, _)| state.find_txn(id).is_some())?;
    let (id, reply, at) = unconfirmed.swap_remove(found);
    let rv = state.find_txn(&id)?;
    tracing::info!(rv, "a transaction whose answer was lost had been applied");
    Some(at_revision(reply, rv, at))
}

/// The reply with the transaction's revision in place of the versions the rules staged (those
/// above `at`, the copy's revision when they ran); objects the write left alone keep theirs.
fn at_revision(reply: Reply, rv: u64, at: u64) -> Reply {
    let fix = |mut obj: Value| {
        if object_rv(&obj) > at {
            set_rv(&mut obj, rv);
        }
        obj
    };
    match reply {
        Reply::Object(obj) => Reply::Object(fix(obj)),
        Reply::Deleted(Deleted::Gone(obj)) => Reply::Deleted(Deleted::Gone(fix(obj))),
        Reply::Deleted(Deleted::Terminating(obj)) => Reply::Deleted(Deleted::Terminating(fix(obj))),
        Reply::All(replies) => Reply::All(replies.into_iter().map(|r| at_revision(r, rv, at)).collect()),
    }
}

/// The newest resourceVersion a write names as its precondition.
fn newest_precondition(op: &Op) -> Option<u64> {
    let parse = |rv: &Option<String>| rv.as_deref().and_then(|s| s.parse::<u64>().ok());
    match op {
        Op::Create { .. } => None,
        Op::Update { obj, .. } => {
            obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|s| s.parse().ok())
        }
        Op::UpdateStatus { rv, .. } | Op::UpdateFinalizers { rv, .. } | Op::Delete { rv, .. } => parse(rv),
        Op::All(ops) => ops.iter().filter_map(newest_precondition).max(),
    }
}

/// The kind and name a write is about (the first of a batch), for its `Conflict`.
fn target(op: &Op) -> (Kind, String) {
    let name_of = |obj: &Value| obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    match op {
        Op::Create { kind, obj } | Op::Update { kind, obj } => (*kind, name_of(obj)),
        Op::UpdateStatus { kind, name, .. }
        | Op::UpdateFinalizers { kind, name, .. }
        | Op::Delete { kind, name, .. } => (*kind, name.clone()),
        Op::All(ops) => ops.first().map_or((Kind::Project, String::new()), target),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_staged_versions_take_the_revision() {
        let staged = json!({"metadata": {"name": "a", "resourceVersion": "11"}});
        let untouched = json!({"metadata": {"name": "b", "resourceVersion": "7"}});
        let reply = Reply::All(vec![
            Reply::Object(staged.clone()),
            Reply::Object(untouched),
            Reply::Deleted(Deleted::Gone(staged)),
        ]);
        let Reply::All(fixed) = at_revision(reply, 42, 10) else { panic!("a batch") };
        let rvs: Vec<u64> = fixed
            .into_iter()
            .map(|r| match r {
                Reply::Object(o) => object_rv(&o),
                Reply::Deleted(d) => object_rv(d.object()),
                Reply::All(_) => 0,
            })
            .collect();
        assert_eq!(rvs, [42, 7, 42]);
    }

    #[test]
    fn preconditions_are_found_in_every_kind_of_write() {
        let update =
            Op::Update { kind: Kind::Project, obj: json!({"metadata": {"name": "a", "resourceVersion": "9"}}) };
        let delete = Op::Delete { kind: Kind::Project, name: "b".into(), rv: Some("12".into()) };
        assert_eq!(newest_precondition(&update), Some(9));
        assert_eq!(newest_precondition(&Op::All(vec![update, delete])), Some(12));
        assert_eq!(newest_precondition(&Op::Create { kind: Kind::Project, obj: json!({}) }), None);
    }
}
