//! Typed HTTP client of the aoctl server: objects as JSON values, the API's envelopes (lists,
//! tables, `Status`, watch lines, `/version`) as the api crate's wire types, and
//! newline-delimited watch streams.

use std::time::Duration;

use aoctl_api::table::{self, Table};
use aoctl_api::wire::{Bookmark, InputRequest, List, LoginCode, Version, WatchEventType, WatchLine};
use aoctl_api::Kind;
use reqwest::{Method, RequestBuilder, Response, StatusCode, Url};
use serde_json::Value;

/// Requests other than watches give up after this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// The server answered with an error `Status`.
    #[error("{0}")]
    Api(Box<Status>),
    #[error("cannot reach the server at {url}: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("{method} {url}: {detail}")]
    Http { method: Method, url: String, detail: String },
    #[error("{url}: unexpected response from the server: {detail}")]
    Invalid { url: String, detail: String },
    #[error("invalid server URL `{url}`: {detail}")]
    BadUrl { url: String, detail: String },
}

impl ClientError {
    /// The HTTP status code of a server-side error.
    pub(crate) fn code(&self) -> Option<u16> {
        match self {
            ClientError::Api(s) => Some(s.code),
            _ => None,
        }
    }

    pub(crate) fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }
}

pub(crate) use aoctl_api::wire::Status;

/// A list response: its items and the resource version to watch from.
#[derive(Clone, Debug, Default)]
pub(crate) struct ObjectList {
    pub resource_version: String,
    pub items: Vec<Value>,
}

/// Filters of a list or watch.
#[derive(Clone, Debug, Default)]
pub(crate) struct ListParams {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
}

/// The result of a delete.
#[derive(Clone, Debug)]
pub(crate) enum Deleted {
    /// The object is gone (200).
    Gone,
    /// Finalizers remain; the object now carries `deletionTimestamp` (202).
    Terminating,
}

/// One line of a watch stream.
#[derive(Clone, Debug)]
pub(crate) enum WatchEvent {
    Added(Value),
    Modified(Value),
    Deleted(Value),
    /// Progress marker: the stream has seen everything up to this resource version.
    Bookmark(String),
    /// The server ended the watch; code 410 means the resource version is too old.
    Error(Status),
}

/// An open watch; yields events until the server closes it.
pub(crate) struct Watch {
    response: Response,
    url: String,
    buf: Vec<u8>,
}

impl Watch {
    /// The next event; `None` when the server closed the stream.
    pub(crate) async fn next(&mut self) -> Result<Option<WatchEvent>, ClientError> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return parse_watch_line(&line).map(Some).map_err(|e| self.invalid(e.to_string()));
            }
            let chunk = self.response.chunk().await.map_err(|e| self.invalid(error_detail(&e)))?;
            match chunk {
                Some(c) => self.buf.extend_from_slice(&c),
                None if self.buf.iter().all(u8::is_ascii_whitespace) => return Ok(None),
                None => {
                    let line = std::mem::take(&mut self.buf);
                    return parse_watch_line(&line).map(Some).map_err(|e| self.invalid(e.to_string()));
                }
            }
        }
    }

    fn invalid(&self, detail: String) -> ClientError {
        ClientError::Invalid { url: self.url.clone(), detail }
    }
}

/// A text response read as it arrives: a session's log, which `follow` keeps open.
pub(crate) struct TextStream {
    response: Response,
    url: String,
}

impl TextStream {
    /// The next piece of text, as the server sent it (it may end inside a UTF-8 character);
    /// `None` when the server closed the stream.
    pub(crate) async fn next(&mut self) -> Result<Option<Vec<u8>>, ClientError> {
        match self.response.chunk().await {
            Ok(c) => Ok(c.map(|c| c.to_vec())),
            Err(e) => Err(ClientError::Invalid { url: self.url.clone(), detail: error_detail(&e) }),
        }
    }
}

/// What is wrong with a list or a watch event the server sent.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    #[error("not a list: {0}")]
    NotAList(serde_json::Error),
    #[error("bad watch event: {0}")]
    WatchEvent(serde_json::Error),
    #[error("bad bookmark: {0}")]
    Bookmark(serde_json::Error),
}

/// The items and resourceVersion of a list response.
fn object_list(bytes: &[u8]) -> Result<ObjectList, BodyError> {
    let list: List = serde_json::from_slice(bytes).map_err(BodyError::NotAList)?;
    Ok(ObjectList { resource_version: list.metadata.resource_version, items: list.items })
}

/// Parses `{"type": …, "object": …}`.
pub(crate) fn parse_watch_line(line: &[u8]) -> Result<WatchEvent, BodyError> {
    let l: WatchLine = serde_json::from_slice(line).map_err(BodyError::WatchEvent)?;
    Ok(match l.type_ {
        WatchEventType::Added => WatchEvent::Added(l.object),
        WatchEventType::Modified => WatchEvent::Modified(l.object),
        WatchEventType::Deleted => WatchEvent::Deleted(l.object),
        WatchEventType::Bookmark => {
            let b: Bookmark = serde_json::from_value(l.object).map_err(BodyError::Bookmark)?;
            WatchEvent::Bookmark(b.metadata.resource_version)
        }
        WatchEventType::Error => WatchEvent::Error(serde_json::from_value(l.object).unwrap_or_default()),
    })
}

/// Client of one server.
#[derive(Clone, Debug)]
pub(crate) struct Client {
    http: reqwest::Client,
    base: Url,
    token: Option<String>,
}

impl Client {
    pub(crate) fn new(server: &str, token: Option<String>) -> Result<Client, ClientError> {
        let bad = |detail: String| ClientError::BadUrl { url: server.to_string(), detail };
        let base = Url::parse(server).map_err(|e| bad(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(bad("expected http://HOST:PORT".into()));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("aoctl/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| bad(error_detail(&e)))?;
        Ok(Client { http, base, token: token.filter(|t| !t.is_empty()) })
    }

    /// The server's base URL.
    pub(crate) fn server(&self) -> &Url {
        &self.base
    }

    /// `{base}/{segments…}`, each segment percent-encoded so a name can never change the path.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut().expect("checked in new").pop_if_empty().extend(segments);
        url
    }

    fn resource_url(&self, kind: Kind, name: Option<&str>, sub: Option<&str>) -> Url {
        let mut segs = vec!["apis", aoctl_api::GROUP, aoctl_api::VERSION, kind.plural()];
        segs.extend(name);
        segs.extend(sub);
        self.url(&segs)
    }

    async fn send(
        &self,
        method: Method,
        url: Url,
        build: impl FnOnce(RequestBuilder) -> RequestBuilder,
    ) -> Result<Response, ClientError> {
        let mut req = build(self.http.request(method.clone(), url.clone()));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(|e| {
            if e.is_connect() {
                ClientError::Unreachable { url: self.base.to_string(), detail: error_detail(&e) }
            } else {
                ClientError::Http { method: method.clone(), url: url.to_string(), detail: error_detail(&e) }
            }
        })?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let code = resp.status();
        let body = resp.text().await.unwrap_or_default();
        Err(ClientError::Api(Box::new(status_from_body(code, &body))))
    }

    async fn json(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
        query: &[(&str, &str)],
    ) -> Result<Value, ClientError> {
        let (_, v) = self.json_with_code(method, url, body, query).await?;
        Ok(v)
    }

    async fn json_with_code(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
        query: &[(&str, &str)],
    ) -> Result<(StatusCode, Value), ClientError> {
        let shown = url.to_string();
        let resp = self
            .send(method, url, |r| {
                let r = r.timeout(REQUEST_TIMEOUT).query(query);
                match body {
                    Some(b) => r.json(b),
                    None => r,
                }
            })
            .await?;
        let code = resp.status();
        let bytes =
            resp.bytes().await.map_err(|e| ClientError::Invalid { url: shown.clone(), detail: error_detail(&e) })?;
        let v =
            serde_json::from_slice(&bytes).map_err(|e| ClientError::Invalid { url: shown, detail: e.to_string() })?;
        Ok((code, v))
    }

    pub(crate) async fn get(&self, kind: Kind, name: &str) -> Result<Value, ClientError> {
        self.json(Method::GET, self.resource_url(kind, Some(name), None), None, &[]).await
    }

    pub(crate) async fn list(&self, kind: Kind, params: &ListParams) -> Result<ObjectList, ClientError> {
        let url = self.resource_url(kind, None, None);
        let shown = url.to_string();
        let v = self.json(Method::GET, url, None, &params.query()).await?;
        let list: List =
            serde_json::from_value(v).map_err(|e| ClientError::Invalid { url: shown, detail: e.to_string() })?;
        Ok(ObjectList { resource_version: list.metadata.resource_version, items: list.items })
    }

    /// The objects of `kind` as a table with every column (`-o wide` ones too) and no objects,
    /// built by the server (Kubernetes' `Table`): 1,000 sessions are about 95 kB of cells instead
    /// of 1.5 MB of objects to read. For a server that answers with a plain list, the same table
    /// is built here.
    pub(crate) async fn table(&self, kind: Kind, params: &ListParams) -> Result<Table, ClientError> {
        let url = self.resource_url(kind, None, None);
        let shown = url.to_string();
        let mut query = params.query();
        query.push(("includeObject", "None"));
        let accept = format!("{},application/json", table::TABLE_MEDIA_TYPE);
        let resp = self
            .send(Method::GET, url, |r| {
                r.timeout(REQUEST_TIMEOUT).query(&query).header(reqwest::header::ACCEPT, accept)
            })
            .await?;
        let content_type = resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let is_table = content_type.is_some_and(table::accepts_table);
        let invalid = |detail: String| ClientError::Invalid { url: shown.clone(), detail };
        let bytes = resp.bytes().await.map_err(|e| invalid(error_detail(&e)))?;
        if is_table {
            return serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()));
        }
        let list = object_list(&bytes).map_err(|e| invalid(e.to_string()))?;
        let mut items = list.items;
        items.sort_by(|a, b| crate::object::name(a).cmp(crate::object::name(b)));
        let now = chrono::Utc::now();
        Ok(table::table(kind, &items, &list.resource_version, now, table::IncludeObject::None))
    }

    pub(crate) async fn create(&self, kind: Kind, obj: &Value, dry_run: bool) -> Result<Value, ClientError> {
        self.json(Method::POST, self.resource_url(kind, None, None), Some(obj), dry_run_query(dry_run)).await
    }

    /// Replaces spec and metadata; `metadata.resourceVersion` of `obj` is a precondition.
    pub(crate) async fn replace(
        &self,
        kind: Kind,
        name: &str,
        obj: &Value,
        dry_run: bool,
    ) -> Result<Value, ClientError> {
        self.json(Method::PUT, self.resource_url(kind, Some(name), None), Some(obj), dry_run_query(dry_run)).await
    }

    /// Applies a JSON merge patch (RFC 7386).
    pub(crate) async fn merge_patch(&self, kind: Kind, name: &str, patch: &Value) -> Result<Value, ClientError> {
        let url = self.resource_url(kind, Some(name), None);
        let shown = url.to_string();
        let resp = self
            .send(Method::PATCH, url, |r| {
                r.timeout(REQUEST_TIMEOUT)
                    .header(reqwest::header::CONTENT_TYPE, "application/merge-patch+json")
                    .body(patch.to_string())
            })
            .await?;
        let bytes =
            resp.bytes().await.map_err(|e| ClientError::Invalid { url: shown.clone(), detail: error_detail(&e) })?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Invalid { url: shown, detail: e.to_string() })
    }

    pub(crate) async fn delete(&self, kind: Kind, name: &str, dry_run: bool) -> Result<Deleted, ClientError> {
        let url = self.resource_url(kind, Some(name), None);
        let (code, _) = self.json_with_code(Method::DELETE, url, None, dry_run_query(dry_run)).await?;
        Ok(if code == StatusCode::ACCEPTED { Deleted::Terminating } else { Deleted::Gone })
    }

    /// Opens a watch of `kind` from `resource_version` (exclusive).
    pub(crate) async fn watch(
        &self,
        kind: Kind,
        params: &ListParams,
        resource_version: &str,
    ) -> Result<Watch, ClientError> {
        let url = self.resource_url(kind, None, None);
        let shown = url.to_string();
        let mut query = params.query();
        query.push(("watch", "true"));
        if !resource_version.is_empty() {
            query.push(("resourceVersion", resource_version));
        }
        let response = self.send(Method::GET, url, |r| r.query(&query)).await?;
        Ok(Watch { response, url: shown, buf: vec![] })
    }

    /// A session's transcript as text, the last `tail_lines` lines when given; with `follow`, the
    /// stream stays open and brings new output until the session is deleted.
    pub(crate) async fn log(
        &self,
        session: &str,
        tail_lines: Option<usize>,
        follow: bool,
    ) -> Result<TextStream, ClientError> {
        let url = self.resource_url(Kind::Session, Some(session), Some("log"));
        let shown = url.to_string();
        let tail = tail_lines.map(|n| n.to_string());
        let mut query: Vec<(&str, &str)> = vec![];
        if let Some(t) = &tail {
            query.push(("tailLines", t));
        }
        if follow {
            query.push(("follow", "true"));
        }
        let response = self
            .send(Method::GET, url, |r| {
                let r = r.query(&query);
                if follow {
                    r
                } else {
                    r.timeout(REQUEST_TIMEOUT)
                }
            })
            .await?;
        Ok(TextStream { response, url: shown })
    }

    /// The server's backup (`GET /apis/ao.dev/v1alpha1/backup`), read as it arrives: a large one
    /// takes as long as it takes, so no overall timeout applies.
    pub(crate) async fn backup(&self) -> Result<TextStream, ClientError> {
        let url = self.url(&["apis", aoctl_api::GROUP, aoctl_api::VERSION, "backup"]);
        let shown = url.to_string();
        let response = self.send(Method::GET, url, |r| r).await?;
        Ok(TextStream { response, url: shown })
    }

    /// Types `text` into a session's agent; the server answers once delivery was verified (or
    /// the message was queued), with a `Status` whose message says what was done.
    pub(crate) async fn send_input(&self, session: &str, text: &str) -> Result<Status, ClientError> {
        let url = self.resource_url(Kind::Session, Some(session), Some("input"));
        let body = serde_json::to_value(InputRequest { text: text.to_string() }).expect("an input body serialises");
        self.typed(Method::POST, url, Some(&body)).await
    }

    /// Answers the question a session's agent asked (`POST …/sessions/{name}/answer`).
    pub(crate) async fn answer(&self, session: &str, text: &str) -> Result<Status, ClientError> {
        let url = self.resource_url(Kind::Session, Some(session), Some("answer"));
        let body = serde_json::json!({ "text": text });
        self.typed(Method::POST, url, Some(&body)).await
    }

    /// Succeeds when `path` (`healthz` or `readyz`) answers 200 within `timeout`.
    pub(crate) async fn probe(&self, path: &str, timeout: Duration) -> Result<(), ClientError> {
        self.send(Method::GET, self.url(&[path]), |r| r.timeout(timeout)).await.map(drop)
    }

    /// A one-time code that signs a browser in to the dashboard (`POST /dashboard/login`).
    pub(crate) async fn login_code(&self) -> Result<LoginCode, ClientError> {
        self.typed(Method::POST, self.url(&["dashboard", "login"]), Some(&serde_json::json!({}))).await
    }

    /// The address of `path` (which may carry a query) on this client's server.
    pub(crate) fn link(&self, path: &str) -> String {
        let base = self.base.as_str().trim_end_matches('/');
        format!("{base}{path}")
    }

    /// The server's `/version` document.
    pub(crate) async fn version(&self) -> Result<Version, ClientError> {
        self.typed(Method::GET, self.url(&["version"]), None).await
    }

    /// A JSON answer read as one of the API's envelopes.
    async fn typed<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<T, ClientError> {
        let shown = url.to_string();
        let v = self.json(method, url, body, &[]).await?;
        serde_json::from_value(v).map_err(|e| ClientError::Invalid { url: shown, detail: e.to_string() })
    }
}

impl ListParams {
    fn query(&self) -> Vec<(&'static str, &str)> {
        let mut q = vec![];
        if let Some(l) = self.label_selector.as_deref().filter(|s| !s.is_empty()) {
            q.push(("labelSelector", l));
        }
        if let Some(f) = self.field_selector.as_deref().filter(|s| !s.is_empty()) {
            q.push(("fieldSelector", f));
        }
        q
    }
}

fn dry_run_query(dry_run: bool) -> &'static [(&'static str, &'static str)] {
    if dry_run {
        &[("dryRun", "All")]
    } else {
        &[]
    }
}

/// The server's `Status`, or one made from the HTTP status and body text.
fn status_from_body(code: StatusCode, body: &str) -> Status {
    if let Ok(mut s) = serde_json::from_str::<Status>(body) {
        if !s.message.is_empty() || !s.reason.is_empty() {
            if s.code == 0 {
                s.code = code.as_u16();
            }
            return s;
        }
    }
    let reason = code.canonical_reason().unwrap_or("").to_string();
    let text = body.trim();
    let message = if text.is_empty() || text.len() > 500 {
        format!("the server answered {}", code)
    } else {
        format!("the server answered {}: {text}", code.as_u16())
    };
    Status::failure(code.as_u16(), &reason, message)
}

/// The innermost message of an error chain: reqwest's own message says little.
fn error_detail(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        msg = s.to_string();
        cur = s.source();
    }
    if msg.contains("operation timed out") || msg.contains("timed out") {
        return "timed out".into();
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_message_and_causes() {
        let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","code":422,"reason":"Invalid",
            "message":"Session \"x\" is invalid","details":{"name":"x","kind":"Session",
            "causes":[{"field":"spec.branch","message":"bad name"}]}}"#;
        let s = status_from_body(StatusCode::UNPROCESSABLE_ENTITY, body);
        assert_eq!(s.to_string(), "Session \"x\" is invalid: spec.branch: bad name");
        let s = Status { message: "spec.branch: bad name".into(), ..s };
        assert_eq!(s.to_string(), "spec.branch: bad name");
        let plain = status_from_body(StatusCode::NOT_FOUND, "no route\n");
        assert_eq!(plain.code, 404);
        assert_eq!(plain.to_string(), "the server answered 404: no route");
    }

    #[test]
    fn watch_lines() {
        let e = parse_watch_line(br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}"#).unwrap();
        assert!(matches!(e, WatchEvent::Bookmark(rv) if rv == "7"));
        let e = parse_watch_line(br#"{"type":"ERROR","object":{"kind":"Status","code":410,"message":"gone"}}"#);
        assert!(matches!(e.unwrap(), WatchEvent::Error(s) if s.code == 410));
        assert!(parse_watch_line(b"{\"type\":\"NOPE\"}").is_err());
        assert!(parse_watch_line(br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":7}}}"#).is_err());
        let l = object_list(br#"{"kind":"SessionList","metadata":{"resourceVersion":"3"},"items":null}"#).unwrap();
        assert_eq!((l.resource_version.as_str(), l.items.len()), ("3", 0));
        assert!(object_list(br#"{"items":{}}"#).is_err());
    }

    #[test]
    fn names_are_escaped_in_urls() {
        let c = Client::new("http://127.0.0.1:7420/", None).unwrap();
        let u = c.resource_url(Kind::Session, Some("../x"), Some("status"));
        assert_eq!(u.as_str(), "http://127.0.0.1:7420/apis/ao.dev/v1alpha1/sessions/..%2Fx/status");
        let c = Client::new("http://h:1/prefix", None).unwrap();
        assert_eq!(c.url(&["healthz"]).as_str(), "http://h:1/prefix/healthz");
        assert!(Client::new("ftp://h", None).is_err());
    }
}
