//! Loading a backup into an empty prefix (`aoctl restore --store etcd`). A resourceVersion is an
//! etcd revision, which no client chooses, so the objects are stored as the backup holds them but
//! for their versions: each gets the revision of the transaction that writes it. The objects go
//! in transactions of at most [`CHUNK_OBJECTS`] objects and [`CHUNK_BYTES`] bytes (within etcd's
//! default `--max-txn-ops` and `--max-request-bytes`), each with its change record, as a write of
//! the store's own would, and each on the condition that no one else wrote under the prefix
//! since the restore found it empty.

use std::sync::Arc;

use aoctl_api::Kind;
use aoctl_store::tx::Change;
use aoctl_store::{EventKind, Restored, StoreError};
use serde_json::Value;

use crate::error::{classify, unavailable, Failure};
use crate::layout::{encode_record, stored_value};
use crate::wire::{Compare, PutRequest, RangeRequest, RequestOp, TxnRequest};
use crate::EtcdStore;

/// The most objects one transaction of a restore writes (with its change record, one more put).
pub(crate) const CHUNK_OBJECTS: usize = 100;
/// The most bytes of objects one transaction of a restore writes: its change record holds them
/// again, and the JSON gateway sends values in base64, so the request stays under etcd's 1.5 MiB.
pub(crate) const CHUNK_BYTES: usize = 384 << 10;

impl EtcdStore {
    /// Loads `objects` into this store's prefix, which must hold no object. Each object is
    /// stored as given but for its resourceVersion, which becomes the revision of the transaction
    /// that wrote it. Returns once the store's copy has every object.
    pub async fn load_snapshot(&self, objects: Vec<(Kind, Value)>) -> Result<Restored, StoreError> {
        let shared = &self.inner.shared;
        let prefix = shared.config.prefix.trim_end_matches('/').to_string();
        let timeout = shared.config.request_timeout;
        let changes = shared.keys.changes().to_vec();
        let read = RangeRequest::key(&changes);
        let newest = match tokio::time::timeout(timeout, shared.client.range(&read)).await {
            Ok(Ok(resp)) => resp.kvs.first().map(|kv| kv.mod_revision),
            Ok(Err(e)) => return Err(unavailable(&e.to_string())),
            Err(_) => return Err(unavailable(&format!("no answer within {timeout:?}"))),
        };
        if let Some(rv) = newest {
            shared.wait_for(rv as u64).await;
        }
        let held: usize = {
            let state = shared.read();
            Kind::ALL.iter().map(|k| state.map(*k).len()).sum()
        };
        if held > 0 {
            return Err(StoreError::Invalid {
                message: format!(
                    "the etcd prefix {prefix} already holds {held} objects; a backup is restored into an empty \
                     prefix only (choose another --etcd-prefix, or delete this one's keys first)"
                ),
            });
        }
        let total = objects.len();
        let mut last = newest;
        let mut loaded = 0;
        for chunk in chunks(objects) {
            let id = uuid::Uuid::new_v4().to_string();
            let staged: Vec<Change> = chunk
                .into_iter()
                .map(|(kind, object)| Change {
                    rv: 0,
                    type_: EventKind::Added,
                    kind,
                    name: object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string(),
                    object: Arc::new(object),
                })
                .collect();
            let mut ops: Vec<RequestOp> = staged
                .iter()
                .map(|c| {
                    RequestOp::Put(PutRequest {
                        key: shared.keys.object(c.kind, &c.name),
                        value: stored_value(&c.object),
                        lease: 0,
                    })
                })
                .collect();
            ops.push(RequestOp::Put(PutRequest { key: changes.clone(), value: encode_record(&id, &staged), lease: 0 }));
            let unchanged = match last {
                Some(rv) => Compare::mod_revision(changes.clone(), rv),
                None => Compare::version(changes.clone(), 0),
            };
            let txn = TxnRequest { compare: vec![unchanged], success: ops, failure: vec![] };
            let partly = |why: String| {
                format!("{why}; {loaded} of {total} objects were restored before it (delete the prefix's keys, then restore again)")
            };
            match tokio::time::timeout(timeout, shared.client.txn(&txn)).await {
                Ok(Ok(resp)) if resp.succeeded => last = Some(resp.header.revision),
                Ok(Ok(_)) => {
                    return Err(StoreError::Invalid {
                        message: partly(format!(
                            "another client wrote under the etcd prefix {prefix} during the restore"
                        )),
                    })
                }
                Ok(Err(e)) => {
                    return Err(match classify(&e) {
                        Failure::Refused(e) => StoreError::Storage(partly(e.to_string())),
                        Failure::NotSent(why) | Failure::Unknown(why) => unavailable(&partly(why)),
                    })
                }
                Err(_) => return Err(unavailable(&partly(format!("no answer within {timeout:?}")))),
            }
            loaded += staged.len();
        }
        let rv = last.unwrap_or(0) as u64;
        shared.wait_for(rv).await;
        Ok(Restored { objects: total, resource_version: shared.rv().max(rv), versions_kept: total == 0 })
    }
}

/// The objects in groups of at most `CHUNK_OBJECTS` objects and `CHUNK_BYTES` bytes (an object
/// larger than that goes alone), in their order.
fn chunks(objects: Vec<(Kind, Value)>) -> Vec<Vec<(Kind, Value)>> {
    let mut out: Vec<Vec<(Kind, Value)>> = vec![];
    let mut bytes = 0;
    for (kind, object) in objects {
        let size = object.to_string().len();
        let full = out.last().is_none_or(|c| c.len() >= CHUNK_OBJECTS || bytes + size > CHUNK_BYTES);
        if full {
            out.push(vec![]);
            bytes = 0;
        }
        bytes += size;
        out.last_mut().expect("a chunk").push((kind, object));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chunks_keep_the_order_and_the_bounds() {
        let small = |i: usize| (Kind::Project, json!({"metadata": {"name": format!("p{i}")}}));
        let objects: Vec<_> = (0..250).map(small).collect();
        let sizes: Vec<usize> = chunks(objects.clone()).iter().map(Vec::len).collect();
        assert_eq!(sizes, [100, 100, 50]);
        assert_eq!(chunks(objects.clone()).concat(), objects);
        let big = (Kind::Session, json!({"metadata": {"name": "big"}, "spec": {"prompt": "x".repeat(CHUNK_BYTES)}}));
        let sizes: Vec<usize> = chunks(vec![small(0), big, small(1)]).iter().map(Vec::len).collect();
        assert_eq!(sizes, [1, 1, 1], "an object beyond the bytes of a chunk goes alone");
        assert!(chunks(vec![]).is_empty());
    }
}
