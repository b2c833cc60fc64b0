//! The store's one watch of etcd: it follows `<prefix>/changes` from the revision after the
//! listing and applies each transaction's change record to the in-memory copy, in revision
//! order. When the watch breaks (a member died, the cluster lost its leader) it watches again
//! from the next revision, on whichever member answers; when etcd compacted revisions it had
//! not seen yet, it lists the objects again and the watches that began before end with `Gone`.

use std::sync::Arc;
use std::time::Duration;

use aoctl_api::Kind;
use serde_json::Value;

use crate::cache::State;
use aoctl_store::StoreError;

use crate::client::{Client, Error, WatchStream};
use crate::layout::{decode_record, read_value, Keys};
use crate::wire::{EventType, RangeRequest};
use crate::Shared;

/// How many objects one listing request reads.
const PAGE: i64 = 500;
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Why the store's objects could not be listed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListError {
    #[error(transparent)]
    Etcd(#[from] Error),
    /// A stored object does not decode.
    #[error(transparent)]
    Stored(#[from] StoreError),
}

/// Every object of the store, read at one revision, and that revision.
pub(crate) async fn list(
    client: &Client,
    keys: &Keys,
    timeout: Duration,
) -> Result<(Vec<(Kind, String, Value)>, u64), ListError> {
    let (mut from, end) = keys.objects_range();
    let mut revision = 0;
    let mut out = vec![];
    loop {
        // The first page is read at the newest revision, the others at the first one's.
        let page = RangeRequest { key: from.clone(), range_end: end.clone(), limit: PAGE, revision };
        let resp = match tokio::time::timeout(timeout, client.range(&page)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err(Error::Timeout(timeout).into()),
        };
        if revision == 0 {
            revision = resp.header.revision;
        }
        for item in &resp.kvs {
            let Some((kind, name)) = keys.parse_object(&item.key) else {
                tracing::warn!(key = %String::from_utf8_lossy(&item.key), "a key under the store's prefix is no object; skipped");
                continue;
            };
            out.push((kind, name, read_value(&item.value, item.mod_revision as u64)?));
        }
        match resp.kvs.last() {
            Some(last) if resp.more => {
                from = last.key.clone();
                from.push(0);
            }
            _ => break,
        }
    }
    Ok((out, revision as u64))
}

/// How a watch of etcd ended.
enum Ended {
    /// etcd no longer has the revisions it needed; the next it has is this one.
    Compacted(u64),
    Failed(String),
}

/// Follows the change record until the store closes.
pub(crate) async fn follow(shared: Arc<Shared>) {
    let mut backoff = BACKOFF_MIN;
    loop {
        let from = shared.rv() + 1;
        let opened = tokio::time::timeout(
            shared.config.request_timeout,
            shared.client.watch(shared.keys.changes(), from as i64),
        )
        .await;
        let ended = match opened {
            Ok(Ok(stream)) => follow_stream(&shared, stream, &mut backoff).await,
            Ok(Err(e)) => Ended::Failed(e.to_string()),
            Err(_) => Ended::Failed("etcd did not answer a watch request".into()),
        };
        match ended {
            Ended::Compacted(next) => {
                shared.note_compacted(next);
                relist(&shared).await;
            }
            Ended::Failed(why) => {
                shared.watch_failed(&why);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

async fn follow_stream(shared: &Shared, mut stream: WatchStream, backoff: &mut Duration) -> Ended {
    loop {
        let resp = match stream.message().await {
            Ok(Some(r)) => r,
            Ok(None) => return Ended::Failed("etcd ended the watch stream".into()),
            Err(e) => return Ended::Failed(e.to_string()),
        };
        if resp.created {
            shared.watch_ok();
            *backoff = BACKOFF_MIN;
        }
        if resp.compact_revision > 0 {
            return Ended::Compacted(resp.compact_revision as u64);
        }
        if resp.canceled {
            return Ended::Failed(format!("etcd cancelled the watch: {}", resp.cancel_reason));
        }
        for ev in &resp.events {
            let Some(kv) = ev.kv.as_ref().filter(|_| ev.kind == EventType::Put) else { continue };
            let rv = kv.mod_revision as u64;
            match decode_record(&kv.value, rv) {
                Ok(batch) => shared.publish(batch),
                Err(e) => {
                    tracing::error!(error = %e, rv, "a change record of the store cannot be read; its changes are skipped");
                    shared.publish(crate::layout::Batch { rv, txn: String::new(), events: vec![] });
                }
            }
        }
    }
}

/// Lists the objects again, until etcd answers.
async fn relist(shared: &Shared) {
    let mut backoff = BACKOFF_MIN;
    loop {
        match list(&shared.client, &shared.keys, shared.config.request_timeout).await {
            Ok((objects, rv)) => {
                tracing::warn!(rv, "etcd compacted changes the store had not seen; it listed its objects again");
                shared.relisted(State::new(objects, rv, shared.config.memory_changes));
                return;
            }
            Err(e) => {
                shared.watch_failed(&e.to_string());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}
