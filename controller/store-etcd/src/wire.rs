//! The JSON of etcd's gRPC gateway: the messages of etcd's v3 API (`etcdserverpb` of rpc.proto,
//! `v3electionpb` of v3election.proto) as the gateway writes and reads them under the proto3 JSON
//! rules: fields named as in the .proto files, `bytes` in base64, 64-bit integers as strings (a
//! number is accepted too), enums by name, and a field at its zero value left out (so every
//! field here has a default). Only the messages and fields the store uses are here; etcd's other
//! fields are ignored. Also the gateway's errors, and the lines of a streamed answer.

use std::fmt;
use std::marker::PhantomData;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// gRPC status codes (fixed by the gRPC protocol); the gateway answers them as `code`.
pub(crate) mod code {
    pub(crate) const UNKNOWN: i32 = 2;
    pub(crate) const INVALID_ARGUMENT: i32 = 3;
    pub(crate) const NOT_FOUND: i32 = 5;
    pub(crate) const ALREADY_EXISTS: i32 = 6;
    pub(crate) const PERMISSION_DENIED: i32 = 7;
    pub(crate) const RESOURCE_EXHAUSTED: i32 = 8;
    pub(crate) const FAILED_PRECONDITION: i32 = 9;
    pub(crate) const OUT_OF_RANGE: i32 = 11;
    pub(crate) const UNIMPLEMENTED: i32 = 12;
    pub(crate) const INTERNAL: i32 = 13;
    pub(crate) const UNAVAILABLE: i32 = 14;
    pub(crate) const UNAUTHENTICATED: i32 = 16;

    /// The name of a code, for messages.
    pub(crate) fn name(code: i32) -> &'static str {
        const NAMES: [&str; 17] = [
            "OK",
            "Cancelled",
            "Unknown",
            "InvalidArgument",
            "DeadlineExceeded",
            "NotFound",
            "AlreadyExists",
            "PermissionDenied",
            "ResourceExhausted",
            "FailedPrecondition",
            "Aborted",
            "OutOfRange",
            "Unimplemented",
            "Internal",
            "Unavailable",
            "DataLoss",
            "Unauthenticated",
        ];
        usize::try_from(code).ok().and_then(|i| NAMES.get(i)).copied().unwrap_or("Unknown")
    }
}

// ---- bytes and integers ----

/// Base64 as the gateway writes it (standard alphabet, padded).
const ENCODE: GeneralPurpose = base64::engine::general_purpose::STANDARD;
/// proto3 JSON readers take the standard and the URL-safe alphabet, padded or not.
const LENIENT: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const DECODE_STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
const DECODE_URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);

/// A `bytes` field: base64 text; `null` is empty.
mod b64 {
    use super::*;

    pub(super) fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&ENCODE.encode(v))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text: Option<String> = Option::deserialize(d)?;
        let text = text.unwrap_or_default();
        DECODE_STANDARD
            .decode(&text)
            .or_else(|_| DECODE_URL_SAFE.decode(&text))
            .map_err(|e| de::Error::custom(format!("a bytes field is no base64: {e}")))
    }
}

/// An integer field: written as a string (as proto3 JSON writes 64-bit ones); read from a string
/// or a number; `null` is 0.
mod int {
    use super::*;

    pub(super) fn serialize<S: Serializer, T: fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>, T: Int>(d: D) -> Result<T, D::Error> {
        d.deserialize_any(IntVisitor(PhantomData))
    }
}

/// The integer types of the messages.
trait Int: Sized + Default + TryFrom<i64> + TryFrom<u64> + std::str::FromStr {}
impl Int for i64 {}
impl Int for u64 {}

struct IntVisitor<T>(PhantomData<T>);

impl<T: Int> Visitor<'_> for IntVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer, or a string of one")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::custom(format!("{v} is out of range")))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::custom(format!("{v} is out of range")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // `1e3` is an integer too, in JSON.
        if v.fract() == 0.0 && v.abs() < 9.0e18 {
            self.visit_i64(v as i64)
        } else {
            Err(E::custom(format!("{v} is no integer")))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        v.trim().parse().map_err(|_| E::custom(format!("{v:?} is no integer")))
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

// ---- key-value messages (rpc.proto, kv.proto) ----

/// `etcdserverpb.ResponseHeader`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ResponseHeader {
    #[serde(with = "int", alias = "clusterId")]
    pub cluster_id: u64,
    #[serde(with = "int")]
    pub revision: i64,
}

/// `mvccpb.KeyValue`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct KeyValue {
    #[serde(with = "b64")]
    pub key: Vec<u8>,
    #[serde(with = "int", alias = "createRevision")]
    pub create_revision: i64,
    #[serde(with = "int", alias = "modRevision")]
    pub mod_revision: i64,
    #[serde(with = "b64")]
    pub value: Vec<u8>,
}

/// `etcdserverpb.RangeRequest`: the keys from `key` up to `range_end` (just `key` when it is
/// empty), at most `limit` (0: all) of them, at `revision` (0: the newest).
#[derive(Debug, Default, Serialize)]
pub(crate) struct RangeRequest {
    #[serde(with = "b64")]
    pub key: Vec<u8>,
    #[serde(with = "b64", skip_serializing_if = "Vec::is_empty")]
    pub range_end: Vec<u8>,
    #[serde(with = "int", skip_serializing_if = "is_zero")]
    pub limit: i64,
    #[serde(with = "int", skip_serializing_if = "is_zero")]
    pub revision: i64,
}

impl RangeRequest {
    /// A read of one key, at the newest revision.
    pub(crate) fn key(key: &[u8]) -> RangeRequest {
        RangeRequest { key: key.to_vec(), ..RangeRequest::default() }
    }
}

/// `etcdserverpb.RangeResponse`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RangeResponse {
    pub header: ResponseHeader,
    pub kvs: Vec<KeyValue>,
    pub more: bool,
}

/// `etcdserverpb.PutRequest`: the key lives as long as `lease` when that is not 0.
#[derive(Debug, Serialize)]
pub(crate) struct PutRequest {
    #[serde(with = "b64")]
    pub key: Vec<u8>,
    #[serde(with = "b64")]
    pub value: Vec<u8>,
    #[serde(with = "int", skip_serializing_if = "is_zero")]
    pub lease: i64,
}

/// `etcdserverpb.DeleteRangeRequest` of one key.
#[derive(Debug, Serialize)]
pub(crate) struct DeleteRangeRequest {
    #[serde(with = "b64")]
    pub key: Vec<u8>,
}

/// `etcdserverpb.RequestOp`: one operation of a transaction.
#[derive(Debug, Serialize)]
pub(crate) enum RequestOp {
    #[serde(rename = "request_range")]
    Range(RangeRequest),
    #[serde(rename = "request_put")]
    Put(PutRequest),
    #[serde(rename = "request_delete_range")]
    Delete(DeleteRangeRequest),
}

/// `etcdserverpb.ResponseOp`: the answer of one operation (only reads are looked at).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ResponseOp {
    #[serde(alias = "responseRange")]
    pub response_range: Option<RangeResponse>,
}

/// What a `Compare` looks at (`etcdserverpb.Compare.CompareTarget`), with the field its number
/// goes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Version,
    Create,
    Mod,
}

/// `etcdserverpb.Compare`: whether a key's version, create revision or mod revision equals a
/// number (the store compares for equality only).
#[derive(Debug)]
pub(crate) struct Compare {
    pub key: Vec<u8>,
    pub target: Target,
    pub number: i64,
}

impl Compare {
    pub(crate) fn version(key: Vec<u8>, version: i64) -> Compare {
        Compare { key, target: Target::Version, number: version }
    }

    pub(crate) fn create_revision(key: Vec<u8>, revision: i64) -> Compare {
        Compare { key, target: Target::Create, number: revision }
    }

    pub(crate) fn mod_revision(key: Vec<u8>, revision: i64) -> Compare {
        Compare { key, target: Target::Mod, number: revision }
    }
}

impl Serialize for Compare {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (target, field) = match self.target {
            Target::Version => ("VERSION", "version"),
            Target::Create => ("CREATE", "create_revision"),
            Target::Mod => ("MOD", "mod_revision"),
        };
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("key", &ENCODE.encode(&self.key))?;
        map.serialize_entry("target", target)?;
        map.serialize_entry("result", "EQUAL")?;
        map.serialize_entry(field, &self.number.to_string())?;
        map.end()
    }
}

/// `etcdserverpb.TxnRequest`: if every comparison holds, `success`, else `failure`.
#[derive(Debug, Default, Serialize)]
pub(crate) struct TxnRequest {
    pub compare: Vec<Compare>,
    pub success: Vec<RequestOp>,
    pub failure: Vec<RequestOp>,
}

/// `etcdserverpb.TxnResponse`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct TxnResponse {
    pub header: ResponseHeader,
    pub succeeded: bool,
    pub responses: Vec<ResponseOp>,
}

/// `etcdserverpb.CompactionRequest`.
#[derive(Debug, Serialize)]
pub(crate) struct CompactionRequest {
    #[serde(with = "int")]
    pub revision: i64,
}

/// `etcdserverpb.MemberListResponse` (the members themselves are not looked at).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct MemberListResponse {
    pub header: ResponseHeader,
}

// ---- watches ----

/// `etcdserverpb.WatchRequest` with a `WatchCreateRequest`: one key from a revision.
#[derive(Debug, Serialize)]
pub(crate) struct WatchRequest {
    pub create_request: WatchCreateRequest,
}

/// `etcdserverpb.WatchCreateRequest`.
#[derive(Debug, Serialize)]
pub(crate) struct WatchCreateRequest {
    #[serde(with = "b64")]
    pub key: Vec<u8>,
    #[serde(with = "int", skip_serializing_if = "is_zero")]
    pub start_revision: i64,
}

/// `etcdserverpb.WatchResponse`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct WatchResponse {
    pub created: bool,
    pub canceled: bool,
    #[serde(with = "int", alias = "compactRevision")]
    pub compact_revision: i64,
    #[serde(alias = "cancelReason")]
    pub cancel_reason: String,
    pub events: Vec<Event>,
}

/// `mvccpb.Event`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Event {
    #[serde(rename = "type")]
    pub kind: EventType,
    pub kv: Option<KeyValue>,
}

/// `mvccpb.Event.EventType`: by name, or by number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum EventType {
    #[default]
    Put,
    Delete,
}

impl<'de> Deserialize<'de> for EventType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<EventType, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(EventType::Put),
            Value::String(s) if s == "PUT" => Ok(EventType::Put),
            Value::String(s) if s == "DELETE" => Ok(EventType::Delete),
            Value::Number(n) if n.as_u64() == Some(0) => Ok(EventType::Put),
            Value::Number(n) if n.as_u64() == Some(1) => Ok(EventType::Delete),
            other => Err(de::Error::custom(format!("{other} is no event type"))),
        }
    }
}

// ---- leases ----

/// `etcdserverpb.LeaseGrantRequest` (etcd picks the id).
#[derive(Debug, Serialize)]
pub(crate) struct LeaseGrantRequest {
    #[serde(rename = "TTL", with = "int")]
    pub ttl: i64,
}

/// `etcdserverpb.LeaseGrantResponse`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LeaseGrantResponse {
    #[serde(rename = "ID", with = "int")]
    pub id: i64,
}

/// `etcdserverpb.LeaseKeepAliveRequest`, and `LeaseRevokeRequest` (the same one field).
#[derive(Debug, Serialize)]
pub(crate) struct LeaseId {
    #[serde(rename = "ID", with = "int")]
    pub id: i64,
}

/// `etcdserverpb.LeaseKeepAliveResponse`: the lease's TTL, 0 when it no longer exists.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LeaseKeepAliveResponse {
    #[serde(rename = "TTL", with = "int")]
    pub ttl: i64,
}

// ---- elections (v3election.proto) ----

/// `v3electionpb.CampaignRequest`.
#[derive(Debug, Serialize)]
pub(crate) struct CampaignRequest {
    #[serde(with = "b64")]
    pub name: Vec<u8>,
    #[serde(with = "int")]
    pub lease: i64,
    #[serde(with = "b64")]
    pub value: Vec<u8>,
}

/// `v3electionpb.CampaignResponse`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct CampaignResponse {
    pub leader: Option<LeaderKey>,
}

/// `v3electionpb.LeaderKey`: the key the winner holds, and its create revision.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LeaderKey {
    #[serde(with = "b64")]
    pub key: Vec<u8>,
    #[serde(with = "int")]
    pub rev: i64,
}

/// `v3electionpb.LeaderRequest`.
#[derive(Debug, Serialize)]
pub(crate) struct LeaderRequest {
    #[serde(with = "b64")]
    pub name: Vec<u8>,
}

/// `v3electionpb.LeaderResponse`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LeaderResponse {
    pub kv: Option<KeyValue>,
}

// ---- errors ----

/// The gRPC code and message of an error the gateway answered with HTTP status `http`. The
/// gateway writes `{"error": "...", "code": N, "message": "..."}` for a refused request, and
/// `{"error": {"grpc_code": N, "message": "...", ...}}` for a stream that failed before (or
/// after) its first message; newer gateways leave out `error`. A body that is none of these (a
/// proxy's page) gets the code gRPC gives that HTTP status.
pub(crate) fn error_answer(http: u16, body: &[u8]) -> (i32, String) {
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) else {
        let text = String::from_utf8_lossy(body);
        let text: String = text.trim().chars().take(300).collect();
        let message =
            if text.is_empty() { format!("HTTP status {http}") } else { format!("HTTP status {http}: {text}") };
        return (code_of_http(http), message);
    };
    if let Some(inner @ Value::Object(_)) = fields.get("error") {
        let (code, message) = stream_error(inner);
        return (if code == code::UNKNOWN && http != 200 { code_of_http(http) } else { code }, message);
    }
    let code = fields.get("code").and_then(number).unwrap_or_else(|| code_of_http(http));
    let message = [fields.get("message"), fields.get("error")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|m| !m.is_empty())
        .map_or_else(|| format!("HTTP status {http}"), str::to_string);
    (code, message)
}

/// The gRPC code and message of the `error` of a streamed message.
fn stream_error(inner: &Value) -> (i32, String) {
    let code = ["grpc_code", "grpcCode", "code"].iter().find_map(|k| inner.get(k).and_then(number));
    let message = inner.get("message").and_then(Value::as_str).filter(|m| !m.is_empty());
    let message = message.map_or_else(|| inner.to_string(), str::to_string);
    (code.unwrap_or(code::UNKNOWN), message)
}

fn number(v: &Value) -> Option<i32> {
    match v {
        Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The gRPC code of an HTTP status that carries none (gRPC's own mapping of HTTP to gRPC).
fn code_of_http(http: u16) -> i32 {
    match http {
        400 => code::INTERNAL,
        401 => code::UNAUTHENTICATED,
        403 => code::PERMISSION_DENIED,
        404 => code::UNIMPLEMENTED,
        429 | 502 | 503 | 504 => code::UNAVAILABLE,
        _ => code::UNKNOWN,
    }
}

// ---- streamed answers ----

/// One message of a streamed answer: `{"result": {...}}`, or `{"error": {...}}` when the stream
/// failed.
#[derive(Debug)]
pub(crate) enum Frame<T> {
    Result(T),
    Error { code: i32, message: String },
}

#[derive(Deserialize)]
#[serde(bound = "T: DeserializeOwned")]
struct Chunk<T> {
    #[serde(default)]
    result: Option<T>,
    #[serde(default)]
    error: Option<Value>,
}

/// A message of a streamed answer that cannot be taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadMessage {
    #[error("a message of etcd's stream cannot be read: {0}")]
    Unreadable(#[from] serde_json::Error),
    #[error("a message of etcd's stream has neither a result nor an error")]
    Empty,
    #[error("a message of etcd's stream is longer than {0} bytes")]
    TooLong(usize),
}

fn decode_frame<T: DeserializeOwned>(line: &[u8]) -> Result<Frame<T>, BadMessage> {
    let chunk: Chunk<T> = serde_json::from_slice(line)?;
    match (chunk.result, chunk.error) {
        (_, Some(error)) => {
            let (code, message) = stream_error(&error);
            Ok(Frame::Error { code, message })
        }
        (Some(result), None) => Ok(Frame::Result(result)),
        (None, None) => Err(BadMessage::Empty),
    }
}

/// The messages of a streamed answer as its body arrives in pieces: the gateway ends each with a
/// newline, and a piece may hold part of one or several.
#[derive(Debug)]
pub(crate) struct Lines {
    buf: Vec<u8>,
    /// Where the next message starts.
    start: usize,
    /// Up to where `buf` is known to hold no newline.
    scanned: usize,
    /// The longest message taken.
    max: usize,
    ended: bool,
}

impl Lines {
    pub(crate) fn new(max: usize) -> Lines {
        Lines { buf: vec![], start: 0, scanned: 0, max, ended: false }
    }

    /// Adds a piece of the body.
    pub(crate) fn push(&mut self, piece: &[u8]) {
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(piece);
    }

    /// The body has ended: what is left is the last message.
    pub(crate) fn end(&mut self) {
        self.ended = true;
    }

    /// The next whole message, if one has arrived; an error when one is longer than the bound
    /// or not the gateway's.
    pub(crate) fn next<T: DeserializeOwned>(&mut self) -> Result<Option<Frame<T>>, BadMessage> {
        loop {
            let end = match self.buf[self.scanned..].iter().position(|b| *b == b'\n') {
                Some(at) => self.scanned + at,
                None => {
                    self.scanned = self.buf.len();
                    if self.buf.len() - self.start > self.max {
                        return Err(BadMessage::TooLong(self.max));
                    }
                    if !self.ended || self.start == self.buf.len() {
                        return Ok(None);
                    }
                    self.buf.len()
                }
            };
            let line = &self.buf[self.start..end];
            if line.len() > self.max {
                return Err(BadMessage::TooLong(self.max));
            }
            let blank = line.iter().all(u8::is_ascii_whitespace);
            let frame = if blank { None } else { Some(decode_frame(line)) };
            self.start = (end + 1).min(self.buf.len());
            self.scanned = self.start;
            if let Some(frame) = frame {
                return frame.map(Some);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn int64s_are_read_from_strings_or_numbers_and_absent_fields_are_zero() {
        let body = br#"{"header":{"cluster_id":"15118495548433857066","member_id":"1","revision":"7","raft_term":"2"},
            "kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":5,"version":"1","value":"YmFy"},
                   {"key":"YmF6"}],"count":"2"}"#;
        let r: RangeResponse = serde_json::from_slice(body).unwrap();
        assert_eq!((r.header.cluster_id, r.header.revision, r.more), (15118495548433857066, 7, false));
        assert_eq!((r.kvs[0].key.as_slice(), r.kvs[0].value.as_slice()), (&b"foo"[..], &b"bar"[..]));
        assert_eq!((r.kvs[0].create_revision, r.kvs[0].mod_revision), (2, 5));
        assert_eq!((r.kvs[1].key.as_slice(), r.kvs[1].value.len(), r.kvs[1].mod_revision), (&b"baz"[..], 0, 0));

        // A failed transaction without `succeeded`, a header without a revision, nulls.
        let t: TxnResponse = serde_json::from_value(json!({"header": {"raft_term": "2"},
            "responses": [{"response_range": {"kvs": [{"key": "Zm9v", "mod_revision": null, "value": null}]}}]}))
        .unwrap();
        assert!(!t.succeeded);
        assert_eq!(t.header.revision, 0);
        let kv = &t.responses[0].response_range.as_ref().unwrap().kvs[0];
        assert_eq!((kv.mod_revision, kv.value.len()), (0, 0));
        let empty: RangeResponse = serde_json::from_slice(b"{}").unwrap();
        assert!(empty.kvs.is_empty());
        let err = serde_json::from_value::<LeaseGrantResponse>(json!({"ID": "x1"})).unwrap_err();
        assert!(err.to_string().contains("no integer"), "{err}");
        assert_eq!(serde_json::from_value::<LeaseGrantResponse>(json!({"ID": 1e3})).unwrap().id, 1000);
        // URL-safe and unpadded base64 are read too.
        let kv: KeyValue = serde_json::from_value(json!({"key": "-_8", "value": "YQ"})).unwrap();
        assert_eq!((kv.key, kv.value), (vec![0xfb, 0xff], b"a".to_vec()));
    }

    #[test]
    fn watch_responses_carry_events_compaction_and_cancellation() {
        let w: WatchResponse = serde_json::from_value(json!({"header": {"revision": "5"}, "events": [
            {"kv": {"key": "Zm9v", "mod_revision": "4", "value": "YmF6"}},
            {"type": "DELETE", "kv": {"key": "Zm9v", "mod_revision": "5"}},
            {"type": 1}
        ]}))
        .unwrap();
        let kinds: Vec<EventType> = w.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EventType::Put, EventType::Delete, EventType::Delete]);
        assert_eq!(w.events[0].kv.as_ref().map(|kv| kv.mod_revision), Some(4));
        assert!(w.events[2].kv.is_none());
        assert!(!w.created && !w.canceled && w.compact_revision == 0);
        let c: WatchResponse = serde_json::from_value(json!({"canceled": true, "compact_revision": "5"})).unwrap();
        assert_eq!((c.canceled, c.compact_revision, c.events.len()), (true, 5, 0));
    }

    #[test]
    fn requests_are_written_as_the_gateway_reads_them() {
        let txn = TxnRequest {
            compare: vec![Compare::mod_revision(b"a".to_vec(), 7), Compare::version(b"b".to_vec(), 0)],
            success: vec![
                RequestOp::Put(PutRequest { key: b"a".to_vec(), value: b"x".to_vec(), lease: 0 }),
                RequestOp::Delete(DeleteRangeRequest { key: b"b".to_vec() }),
            ],
            failure: vec![RequestOp::Range(RangeRequest::key(b"c"))],
        };
        assert_eq!(
            serde_json::to_value(&txn).unwrap(),
            json!({
                "compare": [
                    {"key": "YQ==", "target": "MOD", "result": "EQUAL", "mod_revision": "7"},
                    {"key": "Yg==", "target": "VERSION", "result": "EQUAL", "version": "0"}
                ],
                "success": [
                    {"request_put": {"key": "YQ==", "value": "eA=="}},
                    {"request_delete_range": {"key": "Yg=="}}
                ],
                "failure": [{"request_range": {"key": "Yw=="}}]
            })
        );
        let range = RangeRequest { key: b"a".to_vec(), range_end: b"b".to_vec(), limit: 500, revision: 0 };
        assert_eq!(serde_json::to_value(&range).unwrap(), json!({"key": "YQ==", "range_end": "Yg==", "limit": "500"}));
        assert_eq!(serde_json::to_value(LeaseGrantRequest { ttl: 2 }).unwrap(), json!({"TTL": "2"}));
    }

    #[test]
    fn error_bodies_give_the_grpc_code_and_etcds_message() {
        let refused = br#"{"error":"etcdserver: mvcc: required revision has been compacted","message":"etcdserver: mvcc: required revision has been compacted","code":11}"#;
        assert_eq!(
            error_answer(400, refused),
            (code::OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted".into())
        );
        let stream = br#"{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}}"#;
        assert_eq!(error_answer(503, stream), (code::UNAVAILABLE, "etcdserver: no leader".into()));
        // Newer gateways: no `error`.
        assert_eq!(
            error_answer(400, br#"{"code":3,"message":"etcdserver: too many operations in txn request","details":[]}"#),
            (code::INVALID_ARGUMENT, "etcdserver: too many operations in txn request".into())
        );
        // No JSON, or no code: the HTTP status says what it can.
        assert_eq!(
            error_answer(502, b"<html>bad gateway</html>"),
            (code::UNAVAILABLE, "HTTP status 502: <html>bad gateway</html>".into())
        );
        assert_eq!(error_answer(404, b""), (code::UNIMPLEMENTED, "HTTP status 404".into()));
        assert_eq!(
            error_answer(500, br#"{"error":"election: no leader"}"#),
            (code::UNKNOWN, "election: no leader".into())
        );
        assert_eq!(code::name(code::UNAVAILABLE), "Unavailable");
        assert_eq!(code::name(99), "Unknown");
    }

    fn results(lines: &mut Lines) -> Vec<i64> {
        let mut out = vec![];
        while let Some(frame) = lines.next::<WatchResponse>().unwrap() {
            match frame {
                Frame::Result(r) => out.push(r.compact_revision),
                Frame::Error { code, message } => panic!("an error {code}: {message}"),
            }
        }
        out
    }

    #[test]
    fn a_stream_message_split_across_pieces_is_read_once_whole() {
        let message = b"{\"result\":{\"header\":{\"revision\":\"3\"},\"compact_revision\":\"42\"}}\n";
        let pieces: Vec<&[u8]> = message.chunks(7).collect();
        let mut lines = Lines::new(1 << 20);
        for (i, piece) in pieces.iter().enumerate() {
            lines.push(piece);
            let got = results(&mut lines);
            if i + 1 < pieces.len() {
                assert!(got.is_empty(), "a message read before its end arrived");
            } else {
                assert_eq!(got, [42]);
            }
        }
        // Many messages in small pieces: the buffer is reused and none is lost.
        let body: String = (1..=100).map(|i| format!("{{\"result\":{{\"compact_revision\":\"{i}\"}}}}\n")).collect();
        let mut lines = Lines::new(1 << 20);
        let mut got = vec![];
        for piece in body.as_bytes().chunks(5) {
            lines.push(piece);
            got.extend(results(&mut lines));
        }
        assert_eq!(got, (1..=100).collect::<Vec<i64>>());
        assert!(lines.buf.len() < 100, "read messages are dropped from the buffer");
    }

    #[test]
    fn two_stream_messages_in_one_piece_are_both_read_and_the_last_needs_no_newline() {
        let mut lines = Lines::new(1 << 20);
        lines.push(b"{\"result\":{\"compact_revision\":\"1\"}}\n\r\n{\"result\":{\"compact_revision\":2}}\n{\"result\":{\"compact");
        assert_eq!(results(&mut lines), [1, 2]);
        lines.push(b"_revision\":\"3\"}}");
        assert_eq!(results(&mut lines), Vec::<i64>::new());
        lines.end();
        assert_eq!(results(&mut lines), [3]);
        assert_eq!(results(&mut lines), Vec::<i64>::new());
    }

    #[test]
    fn a_stream_error_is_a_frame_and_a_message_beyond_the_bound_is_refused() {
        let mut lines = Lines::new(64);
        lines.push(b"{\"error\":{\"grpc_code\":14,\"message\":\"etcdserver: no leader\"}}\n");
        match lines.next::<WatchResponse>().unwrap() {
            Some(Frame::Error { code, message }) => assert_eq!((code, message.as_str()), (14, "etcdserver: no leader")),
            other => panic!("{other:?}"),
        }
        lines.push(&[b' '; 65]);
        assert!(lines.next::<WatchResponse>().unwrap_err().to_string().contains("longer than 64"));
        let mut lines = Lines::new(64);
        lines.push(b"{}\n");
        assert!(lines.next::<WatchResponse>().unwrap_err().to_string().contains("neither"));
    }
}
