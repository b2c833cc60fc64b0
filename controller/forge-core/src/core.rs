//! The exchange every forge and tracker request goes through: admitted by the token's
//! [`Budget`], conditional on the cached ETag for reads, bounded in time and size, counted, and
//! mapped to one [`Error`] that keeps the service's own words — with each service's way of
//! saying "rate limited" (GitHub's 403/429 with `Retry-After` or an empty window, GitLab's 429,
//! Linear's `RATELIMITED`) turned into a block on the whole budget.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LINK, RETRY_AFTER};
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;

use crate::budget::{epoch, header_u64, Budget, Cached, CORE};
use crate::error::{Error, ErrorKind, Service};
use crate::transport::Transport;

/// How long one request (connection, answer and body) may take unless set otherwise.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest answer read whole.
const MAX_ANSWER: usize = 8 * 1024 * 1024;

/// Characters of a service's message kept in an error.
const MESSAGE_MAX: usize = 300;

/// How a request is sent and its answer read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// A GET that is conditional on the cached ETag, and whose answer is cached.
    Cached,
    /// Sent as is; the whole body is read.
    Whole,
    /// Sent as is; only the last this many bytes of the body are kept (for logs).
    Tail(usize),
}

/// What a request costs against the rate limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cost {
    /// One per answer, nothing for a 304 or when no answer came.
    Request,
    /// A GitHub GraphQL query: the points its answer reports in `data.rateLimit.cost`.
    GraphQl,
}

/// One request to send.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    pub method: Method,
    /// The endpoint template, for metrics and errors.
    pub endpoint: &'static str,
    /// The absolute URL (see [`Core::url`]).
    pub url: &'a str,
    /// A JSON body.
    pub body: Option<&'a serde_json::Value>,
    pub read: Read,
    /// The rate-limit window it draws on when the answer names none.
    pub resource: &'static str,
    pub cost: Cost,
}

impl<'a> Call<'a> {
    /// A REST request with no body, read whole.
    pub fn new(method: Method, endpoint: &'static str, url: &'a str) -> Call<'a> {
        Call { method, endpoint, url, body: None, read: Read::Whole, resource: CORE, cost: Cost::Request }
    }

    /// A conditional GET, cached.
    pub fn get(endpoint: &'static str, url: &'a str) -> Call<'a> {
        Call { read: Read::Cached, ..Call::new(Method::GET, endpoint, url) }
    }

    pub fn body(mut self, body: &'a serde_json::Value) -> Call<'a> {
        self.body = Some(body);
        self
    }

    pub fn read(mut self, read: Read) -> Call<'a> {
        self.read = read;
        self
    }

    pub fn resource(mut self, resource: &'static str, cost: Cost) -> Call<'a> {
        self.resource = resource;
        self.cost = cost;
        self
    }
}

/// An answer with its body read.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The answer was a 304: `body` (and a missing `Link`) came from the cache, for free.
    pub not_modified: bool,
}

struct Inner {
    service: Service,
    api_url: String,
    transport: Box<dyn Transport>,
    budget: Arc<Budget>,
    /// A header that authenticates (GitLab's `PRIVATE-TOKEN`, Linear's `Authorization`), marked
    /// sensitive; `None` when the transport authenticates or there is no token.
    auth: Option<(HeaderName, HeaderValue)>,
    has_token: bool,
}

/// The HTTP core of one client: service, API URL, transport, budget and timeout, and the label
/// (a project's name) its requests are counted under. Cloning is cheap and shares everything.
#[derive(Clone)]
pub struct Core {
    inner: Arc<Inner>,
    label: Arc<str>,
    timeout: Duration,
}

impl fmt::Debug for Core {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Core")
            .field("service", &self.inner.service)
            .field("api_url", &self.inner.api_url)
            .field("token", &self.inner.has_token.then_some("<redacted>"))
            .field("budget", &self.inner.budget)
            .field("timeout", &self.timeout)
            .field("label", &self.label)
            .finish()
    }
}

/// What a client gives the core when it is made.
pub struct Settings {
    pub service: Service,
    /// The API's base URL, without a trailing slash.
    pub api_url: String,
    pub transport: Box<dyn Transport>,
    pub budget: Arc<Budget>,
    /// A header that authenticates, when the transport does not.
    pub auth: Option<(HeaderName, String)>,
    /// Whether the client has a token at all (for `Debug`).
    pub has_token: bool,
}

impl Core {
    pub fn new(s: Settings) -> Result<Core, Error> {
        let auth = match s.auth {
            Some((name, value)) => {
                let mut value = HeaderValue::from_str(&value).map_err(|_| {
                    Error::new(
                        s.service,
                        ErrorKind::Invalid { message: "the token is not a valid header value".into() },
                    )
                })?;
                value.set_sensitive(true);
                Some((name, value))
            }
            None => None,
        };
        Ok(Core {
            inner: Arc::new(Inner {
                service: s.service,
                api_url: s.api_url,
                transport: s.transport,
                budget: s.budget,
                auth,
                has_token: s.has_token,
            }),
            label: Arc::from(""),
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// The same core with another limit on how long one request may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Core {
        self.timeout = timeout;
        self
    }

    /// The same core, its requests counted under `label` (a project's name).
    pub fn labelled(&self, label: &str) -> Core {
        Core { inner: self.inner.clone(), label: Arc::from(label), timeout: self.timeout }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn service(&self) -> Service {
        self.inner.service
    }

    /// The budget this core draws on.
    pub fn budget(&self) -> &Arc<Budget> {
        &self.inner.budget
    }

    /// The API's base URL, without a trailing slash.
    pub fn api_url(&self) -> &str {
        &self.inner.api_url
    }

    /// The absolute URL of an API path (`/repos/…`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.inner.api_url)
    }

    /// An error of this core's service.
    pub fn error(&self, kind: ErrorKind) -> Error {
        Error::new(self.inner.service, kind)
    }

    pub fn invalid(&self, message: impl Into<String>) -> Error {
        self.error(ErrorKind::Invalid { message: message.into() })
    }

    pub fn decode_error(&self, endpoint: &'static str, message: impl fmt::Display) -> Error {
        self.error(ErrorKind::Decode { endpoint, message: message.to_string() })
    }

    /// Sends one request. GETs read `Cached` are conditional when the cache has the URL; a 304
    /// comes back as a 200 with the cached body. Rate limits, 5xx answers and transport failures
    /// are errors; other statuses are returned for the caller to judge (see [`Core::success`]).
    pub async fn send(&self, call: Call<'_>) -> Result<Reply, Error> {
        let inner = &*self.inner;
        if !call.url.starts_with(&inner.api_url) {
            return Err(
                self.invalid(format!("{}: `{}` is not under the API URL {}", call.endpoint, call.url, inner.api_url))
            );
        }
        let conditional = call.read == Read::Cached && call.method == Method::GET;
        inner
            .budget
            .admit(call.resource)
            .await
            .map_err(|reset_at| self.error(ErrorKind::RateLimited { reset_at, secondary: false }))?;
        let cached = if conditional { inner.budget.cached(call.url) } else { None };
        let mut builder = http::Request::builder().method(call.method.clone()).uri(call.url);
        builder = builder.header(ACCEPT, "application/json");
        if let Some((name, value)) = &inner.auth {
            builder = builder.header(name, value.clone());
        }
        if let Some(answer) = &cached {
            builder = builder.header(IF_NONE_MATCH, answer.etag.as_str());
        }
        let body = match call.body {
            Some(b) => {
                builder = builder.header(CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(b).map_err(|e| self.invalid(format!("{}: {e}", call.endpoint)))?)
            }
            None => Bytes::new(),
        };
        let request = builder.body(body).map_err(|e| self.invalid(format!("{}: {e}", call.endpoint)))?;
        let read = call.read;
        let exchange = async {
            let response = inner.transport.execute(request).await?;
            let (parts, mut body) = response.into_parts();
            let mut kept = Vec::new();
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame?.into_data() {
                    kept.extend_from_slice(&data);
                    match read {
                        Read::Tail(limit) if kept.len() > limit => {
                            kept.drain(..kept.len() - limit);
                        }
                        Read::Cached | Read::Whole if kept.len() > MAX_ANSWER => {
                            return Err(format!("the answer is larger than {MAX_ANSWER} bytes").into());
                        }
                        _ => {}
                    }
                }
            }
            Ok::<_, crate::transport::TransportError>((parts, Bytes::from(kept)))
        };
        let (endpoint, resource, label) = (call.endpoint, call.resource, &*self.label);
        let (parts, body) = match tokio::time::timeout(self.timeout, exchange).await {
            Err(_) => {
                inner.budget.observe(endpoint, None, None, resource, label, 0);
                return Err(self.error(ErrorKind::Transient {
                    message: format!("{endpoint} timed out after {:?}", self.timeout),
                }));
            }
            Ok(Err(e)) => {
                inner.budget.observe(endpoint, None, None, resource, label, 0);
                return Err(self.error(ErrorKind::Transient { message: format!("{endpoint}: {e}") }));
            }
            Ok(Ok(answer)) => answer,
        };
        let (status, mut headers) = (parts.status, parts.headers);
        let counted = match (status, call.cost) {
            (StatusCode::NOT_MODIFIED, _) => 0,
            (_, Cost::Request) => 1,
            (_, Cost::GraphQl) => graphql_cost(&body).unwrap_or(1),
        };
        inner.budget.observe(endpoint, Some(status.as_u16()), Some(&headers), resource, label, counted);
        if status == StatusCode::NOT_MODIFIED {
            let Some(answer) = cached else {
                return Err(self.decode_error(endpoint, "304 Not Modified to a request that was not conditional"));
            };
            if let (Some(link), false) = (answer.link, headers.contains_key(LINK)) {
                headers.insert(LINK, link);
            }
            return Ok(Reply { status: StatusCode::OK, headers, body: answer.body, not_modified: true });
        }
        if let Some((reset_at, secondary)) = rate_limited(inner.service, status, &headers, &body) {
            tracing::warn!(service = inner.service.name(), endpoint, %reset_at, status = status.as_u16(), secondary,
                "rate limit hit; holding calls back");
            inner.budget.block_until(reset_at);
            let (message, detail) = service_message(&body);
            tracing::debug!(%message, ?detail, "the service's words about the limit");
            return Err(self.error(ErrorKind::RateLimited { reset_at, secondary }));
        }
        if status.is_server_error() {
            let (message, detail) = service_message(&body);
            return Err(self
                .error(ErrorKind::Transient { message: format!("{endpoint} answered {status}: {message}") })
                .with_detail(detail));
        }
        if conditional && status.is_success() {
            if let Some(etag) = headers.get(ETAG).and_then(|v| v.to_str().ok()) {
                let link = headers.get(LINK).cloned();
                inner.budget.store(call.url, Cached { etag: etag.to_string(), body: body.clone(), link });
            }
        }
        Ok(Reply { status, headers, body, not_modified: false })
    }

    /// Passes a 2xx answer through and maps the others to errors with the service's words;
    /// `what` names the object in `NotFound`.
    pub fn success(&self, endpoint: &'static str, reply: Reply, what: impl FnOnce() -> String) -> Result<Reply, Error> {
        let status = reply.status;
        if status.is_success() {
            return Ok(reply);
        }
        let (message, detail) = service_message(&reply.body);
        let kind = match status {
            StatusCode::UNAUTHORIZED => ErrorKind::Unauthorized { message },
            StatusCode::FORBIDDEN => ErrorKind::Forbidden { endpoint, message },
            StatusCode::NOT_FOUND | StatusCode::GONE => ErrorKind::NotFound { what: what() },
            _ => ErrorKind::Rejected { endpoint, status: status.as_u16(), message },
        };
        Err(self.error(kind).with_detail(detail))
    }

    /// Decodes a JSON body, naming the path of a field that does not fit.
    pub fn decode<T: DeserializeOwned>(&self, endpoint: &'static str, body: &[u8]) -> Result<T, Error> {
        let de = &mut serde_json::Deserializer::from_slice(body);
        serde_path_to_error::deserialize(de).map_err(|e| self.decode_error(endpoint, e))
    }

    /// GETs `path` conditionally and decodes a successful answer.
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        path: &str,
        what: impl FnOnce() -> String,
    ) -> Result<T, Error> {
        let url = self.url(path);
        let reply = self.send(Call::get(endpoint, &url)).await?;
        self.decode(endpoint, &self.success(endpoint, reply, what)?.body)
    }

    /// Sends a JSON body and decodes a successful answer.
    pub async fn write_json<T: DeserializeOwned>(
        &self,
        method: Method,
        endpoint: &'static str,
        path: &str,
        body: &serde_json::Value,
        what: impl FnOnce() -> String,
    ) -> Result<T, Error> {
        let url = self.url(path);
        let reply = self.send(Call::new(method, endpoint, &url).body(body)).await?;
        self.decode(endpoint, &self.success(endpoint, reply, what)?.body)
    }

    /// GETs every page of a list (at most `max_pages`), following `Link: <…>; rel="next"` under
    /// the API URL; the decoded pages, and whether any was new (false when every page answered
    /// 304).
    pub async fn get_pages<P: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        path: &str,
        max_pages: usize,
        what: impl Fn() -> String,
    ) -> Result<(Vec<P>, bool), Error> {
        let mut pages = Vec::new();
        let mut changed = false;
        let mut next = Some(self.url(path));
        while let Some(url) = next.take() {
            let reply = self.success(endpoint, self.send(Call::get(endpoint, &url)).await?, &what)?;
            changed |= !reply.not_modified;
            pages.push(self.decode(endpoint, &reply.body)?);
            if pages.len() < max_pages {
                next =
                    next_page(&reply.headers).map(|u| self.absolute(&u)).filter(|u| u.starts_with(&self.inner.api_url));
            }
        }
        Ok((pages, changed))
    }

    /// A link as an absolute URL: GitHub's and GitLab's are absolute; a bare path is taken as
    /// under the API's host.
    fn absolute(&self, link: &str) -> String {
        if link.starts_with('/') {
            match self.inner.api_url.find("://").and_then(|i| self.inner.api_url[i + 3..].find('/').map(|j| i + 3 + j))
            {
                Some(end) => format!("{}{link}", &self.inner.api_url[..end]),
                None => format!("{}{link}", self.inner.api_url),
            }
        } else {
            link.to_string()
        }
    }
}

/// The points a GitHub GraphQL answer says it cost (`data.rateLimit.cost`).
fn graphql_cost(body: &[u8]) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v.pointer("/data/rateLimit/cost")?.as_u64()
}

/// When calls may resume and whether it is a secondary limit, if this answer says the service
/// is rate limiting: GitHub's 403 or 429 with `Retry-After`, an empty window or a rate-limit
/// message; GitLab's 429; Linear's `RATELIMITED` GraphQL error.
pub fn rate_limited(
    service: Service,
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
) -> Option<(DateTime<Utc>, bool)> {
    let now = Utc::now();
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok()?.trim().parse::<i64>().ok())
        .map(|s| now + chrono::Duration::seconds(s.max(0)));
    let minute = now + chrono::Duration::seconds(60);
    match service {
        Service::GitHub => {
            if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
                return None;
            }
            let exhausted = header_u64(headers, "x-ratelimit-remaining") == Some(0);
            let reset = header_u64(headers, "x-ratelimit-reset").and_then(epoch).filter(|t| *t > now);
            let says_so = service_message(body).0.to_ascii_lowercase().contains("rate limit");
            if let Some(t) = retry_after {
                // GitHub sends Retry-After with secondary limits.
                return Some((t, !exhausted));
            }
            if exhausted {
                // GitHub's advice: wait until the reset, or a minute when it is not given.
                return Some((reset.unwrap_or(minute), false));
            }
            if status == StatusCode::TOO_MANY_REQUESTS || says_so {
                return Some((minute, true));
            }
            None
        }
        Service::GitLab => {
            if status != StatusCode::TOO_MANY_REQUESTS {
                return None;
            }
            let reset = header_u64(headers, "ratelimit-reset").and_then(epoch).filter(|t| *t > now);
            Some((retry_after.or(reset).unwrap_or(minute), false))
        }
        Service::Linear => {
            let v: serde_json::Value = serde_json::from_slice(body).ok()?;
            let limited = v
                .get("errors")?
                .as_array()?
                .iter()
                .any(|e| e.pointer("/extensions/code").and_then(|c| c.as_str()) == Some("RATELIMITED"));
            if !limited {
                return None;
            }
            let reset = ["x-ratelimit-requests-reset", "x-ratelimit-complexity-reset"]
                .iter()
                .filter_map(|h| header_u64(headers, h))
                .map(|v| if v >= 100_000_000_000 { v / 1000 } else { v })
                .filter_map(epoch)
                .filter(|t| *t > now)
                .max();
            Some((retry_after.or(reset).unwrap_or(minute), false))
        }
    }
}

/// A service's message and its further reasons from an error body: GitHub's `message` and
/// `errors` (strings, or objects with a `message`, a `code` and a `field`), GitLab's `message` (a
/// string, a list or a map of field errors) or `error`; else the body itself, cut.
pub fn service_message(body: &[u8]) -> (String, Vec<String>) {
    fn flatten(v: &serde_json::Value) -> String {
        match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(items) => items.iter().map(flatten).collect::<Vec<_>>().join("; "),
            serde_json::Value::Object(m) => {
                m.iter().map(|(k, v)| format!("{k} {}", flatten(v))).collect::<Vec<_>>().join("; ")
            }
            other => other.to_string(),
        }
    }
    fn reason(e: &serde_json::Value) -> String {
        match e {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Object(o) => match o.get("message").and_then(|m| m.as_str()) {
                Some(m) => m.to_string(),
                None => {
                    let part = |k: &str| o.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
                    let parts: Vec<String> =
                        [part("resource"), part("field"), part("code")].into_iter().filter(|p| !p.is_empty()).collect();
                    if parts.is_empty() {
                        e.to_string()
                    } else {
                        parts.join(" ")
                    }
                }
            },
            other => other.to_string(),
        }
    }
    let cut = |s: String| -> String {
        let s: String = s.trim().chars().take(MESSAGE_MAX).collect();
        if s.is_empty() {
            "no message".to_string()
        } else {
            s
        }
    };
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v @ serde_json::Value::Object(_)) => {
            let message = match v.get("message").or_else(|| v.get("error")) {
                Some(m) => flatten(m),
                None => String::from_utf8_lossy(body).to_string(),
            };
            let detail = v
                .get("errors")
                .and_then(|e| e.as_array())
                .map(|errors| errors.iter().map(reason).map(cut).take(10).collect())
                .unwrap_or_default();
            (cut(message), detail)
        }
        _ => (cut(String::from_utf8_lossy(body).to_string()), vec![]),
    }
}

/// The URL of the `rel="next"` link, if any; read between its angle brackets, so a comma inside
/// it (as in `labels=a,b`) does not split it.
pub fn next_page(headers: &HeaderMap) -> Option<String> {
    let mut rest = headers.get(LINK)?.to_str().ok()?;
    while let Some(open) = rest.find('<') {
        let close = open + rest[open..].find('>')?;
        let url = &rest[open + 1..close];
        let after = &rest[close + 1..];
        let params = &after[..after.find('<').unwrap_or(after.len())];
        if params.split([';', ',']).any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next")) {
            return Some(url.trim().to_string());
        }
        rest = after;
    }
    None
}

/// Checks that an API URL is an absolute http(s) URL without a query, and returns it without a
/// trailing slash (`default` when it is empty).
pub fn api_url(service: Service, url: &str, default: &str) -> Result<String, Error> {
    let url = if url.trim().is_empty() { default } else { url.trim() };
    let url = url.trim_end_matches('/').to_string();
    let invalid = |message: String| Error::new(service, ErrorKind::Invalid { message });
    let uri: http::Uri = url.parse().map_err(|e| invalid(format!("API URL `{url}` is not a URL: {e}")))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() || uri.query().is_some() {
        return Err(invalid(format!("API URL `{url}` must be an absolute http(s) URL")));
    }
    Ok(url)
}

/// Percent-encodes a value for a path segment or query; `keep` names bytes left as they are
/// besides letters, digits and `-_.~`.
pub fn escape(value: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') || keep.contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_links() {
        let mut h = HeaderMap::new();
        h.insert(
            LINK,
            "<https://api.github.com/r/issues?labels=a,b&page=1>; rel=\"prev\", <https://api.github.com/r/issues?labels=a,b&page=3>; rel=\"next\""
                .parse()
                .unwrap(),
        );
        assert_eq!(next_page(&h).as_deref(), Some("https://api.github.com/r/issues?labels=a,b&page=3"));
        h.insert(LINK, "<https://api.github.com/x?page=1>; rel=\"prev\"".parse().unwrap());
        assert_eq!(next_page(&h), None);
    }

    #[test]
    fn service_messages_keep_the_reasons() {
        assert_eq!(
            service_message(
                br#"{"message":"Validation Failed","errors":[{"message":"A pull request already exists"}]}"#
            ),
            ("Validation Failed".to_string(), vec!["A pull request already exists".to_string()])
        );
        assert_eq!(
            service_message(
                br#"{"message":"Unprocessable Entity","errors":["Can not approve your own pull request"]}"#
            )
            .1,
            vec!["Can not approve your own pull request".to_string()]
        );
        assert_eq!(
            service_message(br#"{"message":"Validation Failed","errors":[{"resource":"Issue","field":"title","code":"missing_field"}]}"#).1,
            vec!["Issue title missing_field".to_string()]
        );
        assert_eq!(service_message(br#"{"message":{"base":["is invalid"]}}"#).0, "base is invalid");
        assert_eq!(service_message(br#"{"error":"insufficient_scope"}"#).0, "insufficient_scope");
        assert_eq!(service_message(b"oops\n").0, "oops");
        assert_eq!(service_message(b"").0, "no message");
    }

    #[test]
    fn each_service_says_rate_limited_its_own_way() {
        let now = Utc::now();
        let mut h = HeaderMap::new();
        let body = br#"{"message":"You have exceeded a secondary rate limit"}"#;
        let (at, secondary) = rate_limited(Service::GitHub, StatusCode::FORBIDDEN, &h, body).unwrap();
        assert!(secondary && at > now + chrono::Duration::seconds(50));
        assert_eq!(
            rate_limited(Service::GitHub, StatusCode::FORBIDDEN, &h, br#"{"message":"Must have admin rights"}"#),
            None
        );
        h.insert("retry-after", "5".parse().unwrap());
        let (at, secondary) = rate_limited(Service::GitHub, StatusCode::FORBIDDEN, &h, b"{}").unwrap();
        assert!(secondary && at < now + chrono::Duration::seconds(10));
        assert!(rate_limited(Service::GitLab, StatusCode::FORBIDDEN, &h, b"{}").is_none());
        assert!(rate_limited(Service::GitLab, StatusCode::TOO_MANY_REQUESTS, &h, b"{}").is_some());
        let linear = br#"{"errors":[{"message":"Rate limit exceeded","extensions":{"code":"RATELIMITED"}}]}"#;
        assert!(rate_limited(Service::Linear, StatusCode::BAD_REQUEST, &HeaderMap::new(), linear).is_some());
        assert!(rate_limited(Service::Linear, StatusCode::OK, &HeaderMap::new(), br#"{"data":{}}"#).is_none());
    }

    #[test]
    fn api_urls_and_escapes() {
        assert_eq!(api_url(Service::GitHub, "", "https://api.github.com").unwrap(), "https://api.github.com");
        assert_eq!(api_url(Service::GitLab, "https://h/api/v4/", "x").unwrap(), "https://h/api/v4");
        assert!(api_url(Service::GitLab, "ftp://h", "x").is_err());
        assert!(api_url(Service::GitLab, "https://h/api?x=1", "x").is_err());
        assert_eq!(escape("demo/fix login#1", b"/"), "demo/fix%20login%231");
        assert_eq!(escape("acme/fix login", b""), "acme%2Ffix%20login");
    }
}
