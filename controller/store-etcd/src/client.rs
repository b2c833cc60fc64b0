//! A small client of etcd's v3 API over its JSON gRPC gateway: the `/v3/...` HTTP paths every
//! member (etcd 3.4 and later) serves on its client port, the same API as etcd's gRPC one mapped
//! to JSON by etcd itself (see `crate::wire`). One HTTP client for every member: a request goes
//! to the member that answered last, and to the next one when that one does not take the
//! connection (nothing was sent, so nothing can have been applied); a member that timed out or
//! said it cannot serve now (it has no leader) is left for the next one on the following request.
//! Every request is bounded by the request timeout, a stream's opening too (the stream itself
//! lasts until it is dropped), and answers are bounded in size.

use std::error::Error as _;
use std::fmt;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::wire::{
    code, error_answer, CampaignRequest, CampaignResponse, CompactionRequest, Frame, LeaderRequest, LeaderResponse,
    LeaseGrantRequest, LeaseGrantResponse, LeaseId, LeaseKeepAliveResponse, Lines, MemberListResponse, RangeRequest,
    RangeResponse, TxnRequest, TxnResponse, WatchCreateRequest, WatchRequest, WatchResponse,
};
use crate::MAX_MESSAGE;

/// The gateway passes `Grpc-Metadata-*` headers on as gRPC metadata: this is the `hasleader`
/// that makes a member without a leader refuse a request (`etcdserver: no leader`, Unavailable)
/// rather than hold it until it times out, and end a watch when it loses its leader.
const REQUIRE_LEADER: (&str, &str) = ("Grpc-Metadata-hasleader", "true");
/// How long connecting to one member may take at most, so that another one can be tried within a
/// request's time.
const CONNECT_MAX: Duration = Duration::from_secs(2);
/// TCP keep-alive of the connections, which finds a member gone silent under a long request (a
/// campaign, a watch).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 2;

/// A failed etcd request.
#[derive(Clone, Debug)]
pub(crate) enum Error {
    /// etcd answered with an error: its gRPC status code and message.
    Status { code: i32, message: String },
    /// No member took the connection: the request was not sent.
    Connect(String),
    /// No answer within the bound: the request may or may not have been applied.
    Timeout(Duration),
    /// The connection broke or the answer could not be read: the request may or may not have
    /// been applied.
    Transport(String),
    /// The request could not be made (an endpoint is no URL).
    Invalid(String),
}

impl Error {
    /// The gRPC status code etcd answered, if it answered.
    pub(crate) fn code(&self) -> Option<i32> {
        match self {
            Error::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// etcd's message, if it answered.
    pub(crate) fn message(&self) -> Option<&str> {
        match self {
            Error::Status { message, .. } => Some(message),
            _ => None,
        }
    }

    /// Whether etcd answered that a revision the request needs has been compacted.
    pub(crate) fn is_compacted(&self) -> bool {
        self.message().is_some_and(|m| m.contains("compacted"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Status { code, message } => write!(f, "{message} ({})", code::name(*code)),
            Error::Connect(why) => write!(f, "no etcd member takes connections: {why}"),
            Error::Timeout(bound) => write!(f, "no answer within {bound:?}"),
            Error::Transport(why) | Error::Invalid(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Error {}

/// An error and its causes, as one line.
fn describe(e: &reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// The cluster's members and the one that answered last.
struct Members {
    urls: Vec<String>,
    current: AtomicUsize,
}

impl Members {
    /// Moves on from member `i`, unless another request has already.
    fn leave(&self, i: usize) {
        let next = (i + 1) % self.urls.len();
        let _ = self.current.compare_exchange(i, next, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// A request sent to one member: when it ends without an answer (it failed, or it was dropped,
/// for example by a caller's timeout), the next request goes to the next member.
struct Attempt<'a> {
    members: &'a Members,
    index: usize,
    settled: bool,
}

impl Attempt<'_> {
    fn answered(mut self) {
        self.settled = true;
        self.members.current.store(self.index, Ordering::Release);
    }

    fn failed(mut self) {
        self.settled = true;
        self.members.leave(self.index);
    }

    /// After an error etcd answered: one that says this member cannot serve now moves on.
    fn refused(self, e: &Error) {
        if e.code() == Some(code::UNAVAILABLE) {
            self.failed();
        } else {
            self.answered();
        }
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.members.leave(self.index);
        }
    }
}

/// A client of an etcd cluster; clones share the members and the connections.
#[derive(Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    members: Arc<Members>,
    timeout: Duration,
}

/// An endpoint as a base URL: `http://` when it names no scheme, without a trailing `/`.
fn base_url(endpoint: &str) -> Result<String, Error> {
    let endpoint = endpoint.trim();
    let url = if endpoint.contains("://") { endpoint.to_string() } else { format!("http://{endpoint}") };
    match reqwest::Url::parse(&url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => {
            Ok(url.trim_end_matches('/').to_string())
        }
        Ok(_) => Err(Error::Invalid(format!("{endpoint:?} is no http:// or https:// URL of an etcd member"))),
        Err(e) => Err(Error::Invalid(format!("{endpoint:?} is no URL: {e}"))),
    }
}

impl Client {
    /// A client of the members at `endpoints` (client URLs), whose requests take at most
    /// `timeout` each. Connects to nothing yet.
    pub(crate) fn new(endpoints: &[String], timeout: Duration) -> Result<Client, Error> {
        let urls = endpoints.iter().map(|e| base_url(e)).collect::<Result<Vec<_>, _>>()?;
        if urls.is_empty() {
            return Err(Error::Invalid("no etcd endpoints were given".into()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(CONNECT_MAX))
            .tcp_keepalive(KEEPALIVE_IDLE)
            .tcp_keepalive_interval(KEEPALIVE_INTERVAL)
            .tcp_keepalive_retries(KEEPALIVE_RETRIES)
            .tcp_nodelay(true)
            // The cluster is reached directly, as etcd's own clients do, whatever HTTP_PROXY says.
            .no_proxy()
            .build()
            .map_err(|e| Error::Invalid(format!("cannot make an HTTP client: {}", describe(&e))))?;
        Ok(Client { http, members: Arc::new(Members { urls, current: AtomicUsize::new(0) }), timeout })
    }

    /// `/v3/kv/range`.
    pub(crate) async fn range(&self, req: &RangeRequest) -> Result<RangeResponse, Error> {
        self.unary("/v3/kv/range", req).await
    }

    /// `/v3/kv/txn`.
    pub(crate) async fn txn(&self, req: &TxnRequest) -> Result<TxnResponse, Error> {
        self.unary("/v3/kv/txn", req).await
    }

    /// `/v3/kv/compaction`: drops the history before `revision`.
    pub(crate) async fn compact(&self, revision: i64) -> Result<(), Error> {
        let _: serde::de::IgnoredAny = self.unary("/v3/kv/compaction", &CompactionRequest { revision }).await?;
        Ok(())
    }

    /// `/v3/cluster/member/list`.
    pub(crate) async fn member_list(&self) -> Result<MemberListResponse, Error> {
        self.unary("/v3/cluster/member/list", &serde_json::json!({})).await
    }

    /// `/v3/watch`: a watch of `key` from `start_revision` (0: from now). Resolves once etcd
    /// answered the watch's creation.
    pub(crate) async fn watch(&self, key: &[u8], start_revision: i64) -> Result<WatchStream, Error> {
        let req = WatchRequest { create_request: WatchCreateRequest { key: key.to_vec(), start_revision } };
        self.bounded(self.open("/v3/watch", &req)).await
    }

    /// `/v3/lease/grant`: a lease of `ttl` seconds.
    pub(crate) async fn lease_grant(&self, ttl: i64) -> Result<LeaseGrantResponse, Error> {
        self.unary("/v3/lease/grant", &LeaseGrantRequest { ttl }).await
    }

    /// `/v3/lease/keepalive`: renews the lease once. (The gateway's keep-alive stream answers
    /// each request of the request body, and ends with it: one request, one answer.)
    pub(crate) async fn lease_keep_alive(&self, id: i64) -> Result<LeaseKeepAliveResponse, Error> {
        self.bounded(async {
            let mut stream = self.open::<LeaseKeepAliveResponse>("/v3/lease/keepalive", &LeaseId { id }).await?;
            stream.message().await?.ok_or_else(|| Error::Transport("etcd answered no keep-alive of the lease".into()))
        })
        .await
    }

    /// `/v3/lease/revoke`.
    pub(crate) async fn lease_revoke(&self, id: i64) -> Result<(), Error> {
        let _: serde::de::IgnoredAny = self.unary("/v3/lease/revoke", &LeaseId { id }).await?;
        Ok(())
    }

    /// `/v3/election/campaign`: answers once the campaign is won, however long that takes (only
    /// connecting is bounded).
    pub(crate) async fn campaign(&self, name: &[u8], value: &[u8], lease: i64) -> Result<CampaignResponse, Error> {
        let req = CampaignRequest { name: name.to_vec(), lease, value: value.to_vec() };
        self.exchange("/v3/election/campaign", &encode(&req)?).await
    }

    /// `/v3/election/leader`.
    pub(crate) async fn leader(&self, name: &[u8]) -> Result<LeaderResponse, Error> {
        self.unary("/v3/election/leader", &LeaderRequest { name: name.to_vec() }).await
    }

    async fn bounded<T>(&self, f: impl std::future::Future<Output = Result<T, Error>>) -> Result<T, Error> {
        tokio::time::timeout(self.timeout, f).await.unwrap_or(Err(Error::Timeout(self.timeout)))
    }

    /// A request with one answer, bounded by the request timeout.
    async fn unary<T: DeserializeOwned>(&self, path: &str, req: &impl Serialize) -> Result<T, Error> {
        let body = encode(req)?;
        self.bounded(self.exchange(path, &body)).await
    }

    async fn exchange<T: DeserializeOwned>(&self, path: &str, body: &[u8]) -> Result<T, Error> {
        let (attempt, resp) = self.send(path, body).await?;
        let status = resp.status();
        let text = read_body(resp).await?;
        if !status.is_success() {
            let (code, message) = error_answer(status.as_u16(), &text);
            let e = Error::Status { code, message };
            attempt.refused(&e);
            return Err(e);
        }
        attempt.answered();
        serde_json::from_slice(&text)
            .map_err(|e| Error::Transport(format!("etcd's answer to {path} cannot be read: {e}")))
    }

    /// Opens a streamed answer (not bounded in time: callers bound it).
    async fn open<T: DeserializeOwned>(&self, path: &str, req: &impl Serialize) -> Result<Stream<T>, Error> {
        let (attempt, resp) = self.send(path, &encode(req)?).await?;
        let status = resp.status();
        if !status.is_success() {
            let text = read_body(resp).await?;
            let (code, message) = error_answer(status.as_u16(), &text);
            let e = Error::Status { code, message };
            attempt.refused(&e);
            return Err(e);
        }
        attempt.answered();
        Ok(Stream { resp, lines: Lines::new(MAX_MESSAGE), ended: false, kind: PhantomData })
    }

    /// Sends a request to the member that answered last, or to the next one that takes the
    /// connection, and returns etcd's answer (its status and headers).
    async fn send(&self, path: &str, body: &[u8]) -> Result<(Attempt<'_>, reqwest::Response), Error> {
        let members = &*self.members;
        let n = members.urls.len();
        let first = members.current.load(Ordering::Acquire) % n;
        let mut refused = vec![];
        for k in 0..n {
            let index = (first + k) % n;
            let attempt = Attempt { members, index, settled: false };
            let url = format!("{}{path}", members.urls[index]);
            let sent = self
                .http
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header(REQUIRE_LEADER.0, REQUIRE_LEADER.1)
                .body(body.to_vec())
                .send()
                .await;
            match sent {
                Ok(resp) => return Ok((attempt, resp)),
                Err(e) if e.is_connect() => {
                    attempt.failed();
                    refused.push(describe(&e));
                }
                Err(e) if e.is_builder() => {
                    attempt.failed();
                    return Err(Error::Invalid(describe(&e)));
                }
                Err(e) => {
                    attempt.failed();
                    return Err(Error::Transport(describe(&e)));
                }
            }
        }
        Err(Error::Connect(refused.join("; ")))
    }
}

fn encode(req: &impl Serialize) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(req).map_err(|e| Error::Invalid(format!("cannot write an etcd request: {e}")))
}

/// The whole body of an answer, at most [`MAX_MESSAGE`] bytes.
async fn read_body(mut resp: reqwest::Response) -> Result<Vec<u8>, Error> {
    let too_large = || Error::Transport(format!("etcd's answer is larger than {MAX_MESSAGE} bytes"));
    if resp.content_length().is_some_and(|n| n > MAX_MESSAGE as u64) {
        return Err(too_large());
    }
    let mut out = Vec::with_capacity(resp.content_length().map_or(0, |n| n as usize));
    while let Some(piece) = resp.chunk().await.map_err(|e| Error::Transport(describe(&e)))? {
        if out.len() + piece.len() > MAX_MESSAGE {
            return Err(too_large());
        }
        out.extend_from_slice(&piece);
    }
    Ok(out)
}

/// A streamed answer of the gateway: one JSON message a line.
pub(crate) struct Stream<T> {
    resp: reqwest::Response,
    lines: Lines,
    ended: bool,
    kind: PhantomData<fn() -> T>,
}

/// The answers of a watch.
pub(crate) type WatchStream = Stream<WatchResponse>;

impl<T: DeserializeOwned> Stream<T> {
    /// The next message; `None` when etcd ended the stream; etcd's error when it ended it with
    /// one.
    pub(crate) async fn message(&mut self) -> Result<Option<T>, Error> {
        loop {
            match self.lines.next::<T>().map_err(|e| Error::Transport(e.to_string()))? {
                Some(Frame::Result(message)) => return Ok(Some(message)),
                Some(Frame::Error { code, message }) => return Err(Error::Status { code, message }),
                None if self.ended => return Ok(None),
                None => {}
            }
            match self.resp.chunk().await {
                Ok(Some(piece)) => self.lines.push(&piece),
                Ok(None) => {
                    self.ended = true;
                    self.lines.end();
                }
                Err(e) => return Err(Error::Transport(describe(&e))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_base_urls() {
        assert_eq!(base_url("http://127.0.0.1:2379/").unwrap(), "http://127.0.0.1:2379");
        assert_eq!(base_url(" 10.0.0.1:2379 ").unwrap(), "http://10.0.0.1:2379");
        assert_eq!(base_url("https://etcd.example:2379").unwrap(), "https://etcd.example:2379");
        assert!(matches!(base_url("unix:///run/etcd.sock"), Err(Error::Invalid(_))));
        assert!(matches!(base_url("http://"), Err(Error::Invalid(_))));
        assert!(matches!(Client::new(&[], Duration::from_secs(1)), Err(Error::Invalid(_))));
    }

    #[test]
    fn a_member_that_fails_is_left_for_the_next_and_one_that_answers_is_kept() {
        let members = Members { urls: vec!["a".into(), "b".into(), "c".into()], current: AtomicUsize::new(0) };
        Attempt { members: &members, index: 0, settled: false }.failed();
        assert_eq!(members.current.load(Ordering::Acquire), 1);
        // Dropped without an answer (a caller's timeout).
        drop(Attempt { members: &members, index: 1, settled: false });
        assert_eq!(members.current.load(Ordering::Acquire), 2);
        // A member another request already left behind is not left again.
        Attempt { members: &members, index: 0, settled: false }.failed();
        assert_eq!(members.current.load(Ordering::Acquire), 2);
        Attempt { members: &members, index: 2, settled: false }.failed();
        assert_eq!(members.current.load(Ordering::Acquire), 0);
        let unavailable = Error::Status { code: code::UNAVAILABLE, message: "etcdserver: no leader".into() };
        Attempt { members: &members, index: 0, settled: false }.refused(&unavailable);
        assert_eq!(members.current.load(Ordering::Acquire), 1);
        let refused = Error::Status { code: code::INVALID_ARGUMENT, message: "too many".into() };
        Attempt { members: &members, index: 2, settled: false }.refused(&refused);
        assert_eq!(members.current.load(Ordering::Acquire), 2, "an answer keeps the member");
        assert_eq!(unavailable.to_string(), "etcdserver: no leader (Unavailable)");
    }

    #[tokio::test]
    async fn a_member_that_refuses_connections_is_skipped_within_the_request() {
        // A port nobody listens on, then a tiny gateway that answers one range.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let refused = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let answering = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut seen = vec![];
            let mut buf = [0u8; 4096];
            while !String::from_utf8_lossy(&seen).contains("\r\n\r\n{") {
                let n = conn.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
            }
            let body = r#"{"header":{"revision":"9"},"kvs":[{"key":"YQ==","mod_revision":"9","value":"eA=="}]}"#;
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            conn.write_all(answer.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&seen).to_ascii_lowercase()
        });
        let client = Client::new(&[refused, answering], Duration::from_secs(5)).unwrap();
        let r = client.range(&RangeRequest::key(b"a")).await.unwrap();
        assert_eq!((r.header.revision, r.kvs[0].value.as_slice()), (9, &b"x"[..]));
        assert_eq!(client.members.current.load(Ordering::Acquire), 1, "the member that answered is kept");
        let request = server.await.unwrap();
        assert!(request.starts_with("post /v3/kv/range "), "{request}");
        assert!(request.contains("grpc-metadata-hasleader: true"), "{request}");
    }
}
