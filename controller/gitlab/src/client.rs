//! The HTTP side of the GitLab client: authentication, conditional GETs through the shared budget,
//! `RateLimit-*` and 429 handling, pagination by `Link`, and the mapping of statuses to errors.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use aoctl_scm::{epoch, header_u64, Budget, Cached};
use bytes::Bytes;
use chrono::Utc;
use futures::StreamExt;
use http::header::{ETAG, IF_NONE_MATCH, LINK, RETRY_AFTER};
use http::{HeaderMap, Method, StatusCode};
use serde::de::DeserializeOwned;

use crate::error::Error;

/// GitLab.com's REST base URL.
pub const DEFAULT_API_URL: &str = "https://gitlab.com/api/v4";

/// How long one request may take.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Pages read of one list at most (of up to 100 items each).
const MAX_PAGES: usize = 10;

/// A GitLab REST v4 client for one API URL and token.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    api_url: String,
    token: Option<Arc<str>>,
    budget: Arc<Budget>,
    timeout: Duration,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("api_url", &self.api_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("budget", &self.budget)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// How a request is sent and its answer read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// A GET that is conditional on the cached ETag, and whose answer is cached.
    Cached,
    /// Sent as is; the whole body is read.
    Whole,
    /// Sent as is; only the last this many bytes of the body are kept (for logs).
    Tail(usize),
}

/// An answer with its body read.
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// The answer was a 304: `body` (and a missing `Link`) came from the cache.
    pub(crate) not_modified: bool,
}

impl Client {
    /// A client with a budget of its own; `api_url` is the project's `spec.gitlab.apiUrl`
    /// ([`DEFAULT_API_URL`] for gitlab.com, `https://HOST/api/v4` for a self-managed instance).
    pub fn new(api_url: &str, token: Option<String>) -> Result<Client, Error> {
        Client::with_budget(api_url, token, Arc::new(Budget::new()))
    }

    /// A client that draws on a budget shared with every other client of the same token.
    pub fn with_budget(api_url: &str, token: Option<String>, budget: Arc<Budget>) -> Result<Client, Error> {
        let api_url = if api_url.trim().is_empty() { DEFAULT_API_URL } else { api_url.trim() };
        let api_url = api_url.trim_end_matches('/').to_string();
        let uri: http::Uri =
            api_url.parse().map_err(|e| Error::invalid(format!("API URL `{api_url}` is not a URL: {e}")))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() || uri.query().is_some() {
            return Err(Error::invalid(format!("API URL `{api_url}` must be an absolute http(s) URL")));
        }
        let http = reqwest::Client::builder()
            .user_agent(concat!("aoctl/", env!("CARGO_PKG_VERSION")))
            // A redirect could carry the token elsewhere; GitLab's API does not redirect.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Error::invalid(format!("cannot build the HTTP client: {e}")))?;
        let token = token.filter(|t| !t.is_empty()).map(Arc::from);
        Ok(Client { http, api_url, token, budget, timeout: DEFAULT_TIMEOUT })
    }

    /// Sets how long one request may take before it fails as transient.
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.timeout = timeout;
        self
    }

    /// The budget this client draws on.
    pub fn budget(&self) -> &Arc<Budget> {
        &self.budget
    }

    /// The REST base URL, without a trailing slash.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// The absolute URL of an API path (`/projects/…`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api_url)
    }

    /// Sends one request to `url` (under the API URL). GETs are conditional when the cache has
    /// the URL; a 304 comes back as a 200 with the cached body. Rate limits, 5xx answers and
    /// transport failures are errors; other statuses are returned for the caller to judge.
    pub(crate) async fn send(
        &self,
        method: Method,
        endpoint: &'static str,
        url: &str,
        body: Option<&serde_json::Value>,
        read: Read,
    ) -> Result<Reply, Error> {
        if !url.starts_with(&format!("{}/", self.api_url)) {
            return Err(Error::invalid(format!("{endpoint}: `{url}` is not under the API URL {}", self.api_url)));
        }
        let conditional = read == Read::Cached && method == Method::GET;
        self.budget.admit().await.map_err(|reset_at| Error::RateLimited { reset_at })?;
        let cached = if conditional { self.budget.cached(url) } else { None };
        let mut request = self.http.request(method, url).header("accept", "application/json");
        if let Some(token) = &self.token {
            request = request.header("private-token", token.as_ref());
        }
        if let Some(answer) = &cached {
            request = request.header(IF_NONE_MATCH, answer.etag.as_str());
        }
        if let Some(b) = body {
            request = request.json(b);
        }
        let exchange = async {
            let response = request.send().await?;
            let (status, headers) = (response.status(), response.headers().clone());
            let mut stream = response.bytes_stream();
            let mut kept = Vec::new();
            while let Some(chunk) = stream.next().await {
                kept.extend_from_slice(&chunk?);
                if let Read::Tail(limit) = read {
                    if kept.len() > limit {
                        kept.drain(..kept.len() - limit);
                    }
                }
            }
            Ok::<_, reqwest::Error>((status, headers, Bytes::from(kept)))
        };
        let (status, mut headers, body) = match tokio::time::timeout(self.timeout, exchange).await {
            Err(_) => {
                self.budget.observe(endpoint, None, None);
                return Err(Error::transient(format!("{endpoint} timed out after {:?}", self.timeout)));
            }
            Ok(Err(e)) => {
                self.budget.observe(endpoint, None, None);
                return Err(Error::transient(format!("{endpoint}: {e}")));
            }
            Ok(Ok(answer)) => answer,
        };
        self.budget.observe(endpoint, Some(status.as_u16()), Some(&headers));
        if status == StatusCode::NOT_MODIFIED {
            let Some(answer) = cached else {
                return Err(Error::decode(endpoint, "304 Not Modified to a request that was not conditional"));
            };
            if let (Some(link), false) = (answer.link, headers.contains_key(LINK)) {
                headers.insert(LINK, link);
            }
            return Ok(Reply { status: StatusCode::OK, headers, body: answer.body, not_modified: true });
        }
        if status == StatusCode::TOO_MANY_REQUESTS {
            let reset_at = rate_limit_reset(&headers);
            tracing::warn!(endpoint, %reset_at, "GitLab rate limit hit; holding calls back");
            self.budget.block_until(reset_at);
            return Err(Error::RateLimited { reset_at });
        }
        if status.is_server_error() {
            return Err(Error::transient(format!("{endpoint} answered {status}: {}", message(&body))));
        }
        if conditional && status.is_success() {
            if let Some(etag) = headers.get(ETAG).and_then(|v| v.to_str().ok()) {
                let link = headers.get(LINK).cloned();
                self.budget.store(url, Cached { etag: etag.to_string(), body: body.clone(), link });
            }
        }
        Ok(Reply { status, headers, body, not_modified: false })
    }

    /// GETs `path` conditionally and decodes a successful answer; `what` names it in `NotFound`.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        path: &str,
        what: impl FnOnce() -> String,
    ) -> Result<T, Error> {
        let reply = self.send(Method::GET, endpoint, &self.url(path), None, Read::Cached).await?;
        decode(endpoint, &success(endpoint, reply, what)?.body)
    }

    /// Sends a body and decodes a successful answer.
    pub(crate) async fn write_json<T: DeserializeOwned>(
        &self,
        method: Method,
        endpoint: &'static str,
        path: &str,
        body: &serde_json::Value,
        what: impl FnOnce() -> String,
    ) -> Result<T, Error> {
        let reply = self.send(method, endpoint, &self.url(path), Some(body), Read::Whole).await?;
        decode(endpoint, &success(endpoint, reply, what)?.body)
    }

    /// GETs every page of a list (up to a bound), following `Link: <…>; rel="next"`; the items,
    /// and whether any page was new (false when every page answered 304).
    pub(crate) async fn get_pages<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        path: &str,
        what: impl Fn() -> String,
    ) -> Result<(Vec<T>, bool), Error> {
        let mut items = Vec::new();
        let mut changed = false;
        let mut next = Some(self.url(path));
        let mut pages = 0;
        while let Some(url) = next.take() {
            let reply = success(endpoint, self.send(Method::GET, endpoint, &url, None, Read::Cached).await?, &what)?;
            changed |= !reply.not_modified;
            items.extend(decode::<Vec<T>>(endpoint, &reply.body)?);
            pages += 1;
            if pages < MAX_PAGES {
                next = next_page(&reply.headers).filter(|u| u.starts_with(&format!("{}/", self.api_url)));
            }
        }
        Ok((items, changed))
    }
}

/// Decodes a JSON body.
pub(crate) fn decode<T: DeserializeOwned>(endpoint: &'static str, body: &[u8]) -> Result<T, Error> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| Error::decode(endpoint, e))
}

/// Passes a 2xx answer through and maps the others to errors.
pub(crate) fn success(endpoint: &'static str, reply: Reply, what: impl FnOnce() -> String) -> Result<Reply, Error> {
    let status = reply.status;
    if status.is_success() {
        return Ok(reply);
    }
    let message = message(&reply.body);
    Err(match status {
        StatusCode::UNAUTHORIZED => Error::Unauthorized { message },
        StatusCode::FORBIDDEN => Error::Forbidden { endpoint, message },
        StatusCode::NOT_FOUND | StatusCode::GONE => Error::NotFound { what: what() },
        _ => Error::Rejected { endpoint, status: status.as_u16(), message },
    })
}

/// GitLab's `message` (a string, a list or a map of field errors) or `error` from an error body,
/// or the body itself.
pub(crate) fn message(body: &[u8]) -> String {
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
    let text = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v) => match v.get("message").or_else(|| v.get("error")) {
            Some(m) => flatten(m),
            None => String::from_utf8_lossy(body).trim().to_string(),
        },
        Err(_) => String::from_utf8_lossy(body).trim().to_string(),
    };
    let mut text: String = text.chars().take(300).collect();
    if text.is_empty() {
        text = "no message".to_string();
    }
    text
}

/// When calls may resume after a 429: `Retry-After`, else `RateLimit-Reset`, else a minute.
fn rate_limit_reset(headers: &HeaderMap) -> chrono::DateTime<Utc> {
    let now = Utc::now();
    if let Some(s) = headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()?.trim().parse::<i64>().ok()) {
        return now + chrono::Duration::seconds(s.max(0));
    }
    header_u64(headers, "ratelimit-reset")
        .and_then(epoch)
        .filter(|t| *t > now)
        .unwrap_or(now + chrono::Duration::seconds(60))
}

/// The URL of the `rel="next"` link, if any; read between the angle brackets, so a comma inside
/// it (as in `labels=a,b`) does not split it.
fn next_page(headers: &HeaderMap) -> Option<String> {
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

/// A project path as the `:id` of a route: `group/name` percent-encoded.
pub(crate) fn project_id(path: &str) -> Result<String, Error> {
    let ok = path.split('/').count() >= 2
        && path.split('/').all(|p| !p.is_empty() && p != "." && p != "..")
        && path.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'));
    if !ok {
        return Err(Error::invalid(format!("`{path}` is not a GitLab project path such as group/name")));
    }
    Ok(path.replace('/', "%2F"))
}

/// Percent-encodes a query value (a branch, a sha, a label list).
pub(crate) fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
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
    fn next_links_and_ids() {
        let mut h = HeaderMap::new();
        h.insert(
            LINK,
            "<https://gitlab.example/api/v4/projects/1/issues?labels=a,b&page=2>; rel=\"next\", <https://gitlab.example/api/v4/projects/1/issues?page=1>; rel=\"first\""
                .parse()
                .unwrap(),
        );
        assert_eq!(next_page(&h).as_deref(), Some("https://gitlab.example/api/v4/projects/1/issues?labels=a,b&page=2"));
        assert_eq!(project_id("acme/sub/widgets").unwrap(), "acme%2Fsub%2Fwidgets");
        assert!(project_id("widgets").is_err() && project_id("acme/../x").is_err() && project_id("a b/c").is_err());
        assert_eq!(escape("acme/fix login"), "acme%2Ffix%20login");
    }

    #[test]
    fn messages_of_every_shape() {
        assert_eq!(message(br#"{"message":"405 Method Not Allowed"}"#), "405 Method Not Allowed");
        assert_eq!(
            message(br#"{"message":["Another open merge request already exists"]}"#),
            "Another open merge request already exists"
        );
        assert_eq!(message(br#"{"message":{"title":["can't be blank"]}}"#), "title can't be blank");
        assert_eq!(message(br#"{"error":"invalid_token"}"#), "invalid_token");
        assert_eq!(message(b""), "no message");
    }

    #[test]
    fn a_429_waits_for_retry_after_or_the_reset() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, "30".parse().unwrap());
        let at = rate_limit_reset(&h);
        assert!(at > Utc::now() + chrono::Duration::seconds(25) && at < Utc::now() + chrono::Duration::seconds(31));
        let reset = Utc::now().timestamp() + 90;
        let mut h = HeaderMap::new();
        h.insert("ratelimit-reset", reset.to_string().parse().unwrap());
        assert_eq!(rate_limit_reset(&h), epoch(reset as u64).unwrap());
    }

    #[test]
    fn a_client_needs_an_absolute_url() {
        assert!(Client::new("gitlab.example/api/v4", None).is_err());
        assert!(Client::new("ftp://gitlab.example", None).is_err());
        assert_eq!(Client::new("", None).unwrap().api_url(), DEFAULT_API_URL);
        assert_eq!(Client::new("http://127.0.0.1:9/api/v4/", None).unwrap().api_url(), "http://127.0.0.1:9/api/v4");
    }
}
