//! The GitHub REST client: one octocrab instance, every request through the shared [`Budget`],
//! conditional GETs with ETags, error mapping, and pagination by the `Link` header.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::Utc;
use http::header::{ETAG, IF_NONE_MATCH, LINK, RETRY_AFTER};
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;

use aoctl_scm::{epoch, header_u64, Budget, Cached};

use crate::error::Error;

/// The REST base URL of github.com.
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// How long one request (connection, answer and body) may take.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// At most this many pages are read from a paginated list.
const MAX_PAGES: usize = 10;

/// A GitHub REST client for one API URL and token. Cloning is cheap and shares everything.
#[derive(Clone)]
pub struct Client {
    octo: octocrab::Octocrab,
    api_url: String,
    has_token: bool,
    budget: Arc<Budget>,
    timeout: Duration,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("api_url", &self.api_url)
            .field("token", &self.has_token.then_some("<redacted>"))
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
    /// The answer was a 304: `body` (and a missing `Link`) came from the cache, for free.
    pub(crate) not_modified: bool,
}

impl Client {
    /// A client with a budget of its own; `api_url` is the project's `spec.github.apiUrl`
    /// ([`DEFAULT_API_URL`] for github.com, `https://HOST/api/v3` for GitHub Enterprise).
    pub fn new(api_url: &str, token: Option<String>) -> Result<Client, Error> {
        Client::with_budget(api_url, token, Arc::new(Budget::new()))
    }

    /// A client that draws on a budget shared with every other client of the same token.
    pub fn with_budget(api_url: &str, token: Option<String>, budget: Arc<Budget>) -> Result<Client, Error> {
        let api_url = if api_url.trim().is_empty() { DEFAULT_API_URL } else { api_url.trim() };
        let api_url = api_url.trim_end_matches('/').to_string();
        let uri: http::Uri =
            api_url.parse().map_err(|e| Error::invalid(format!("API URL `{api_url}` is not a URL: {e}")))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(Error::invalid(format!("API URL `{api_url}` must be an absolute http(s) URL")));
        }
        let token = token.filter(|t| !t.is_empty());
        let has_token = token.is_some();
        let builder = octocrab::Octocrab::builder()
            .base_uri(uri)
            .map_err(|e| Error::invalid(format!("API URL `{api_url}`: {e}")))?;
        let builder = match token {
            Some(token) => builder.personal_token(token),
            None => builder,
        };
        let octo = builder.build().map_err(|e| Error::invalid(format!("cannot build the HTTP client: {e}")))?;
        Ok(Client { octo, api_url, has_token, budget, timeout: DEFAULT_TIMEOUT })
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

    /// Sends one request. GETs are conditional when the cache has the URL; a 304 comes back as
    /// a 200 with the cached body. Rate limits, 5xx answers and transport failures are errors;
    /// other statuses are returned for the caller to judge.
    pub(crate) async fn send(
        &self,
        method: Method,
        endpoint: &'static str,
        path: &str,
        body: Option<&serde_json::Value>,
        read: Read,
    ) -> Result<Reply, Error> {
        let conditional = read == Read::Cached && method == Method::GET;
        self.budget.admit().await.map_err(|reset_at| Error::RateLimited { reset_at })?;
        let cached = if conditional { self.budget.cached(path) } else { None };
        let mut builder = http::Request::builder().method(method.clone()).uri(path);
        if let Some(answer) = &cached {
            builder = builder.header(IF_NONE_MATCH, answer.etag.as_str());
        }
        let request = self.octo.build_request(builder, body).map_err(|e| Error::invalid(format!("{endpoint}: {e}")))?;
        let exchange = async {
            let response = self.octo.execute(request).await?;
            let (parts, mut body) = response.into_parts();
            let mut kept = Vec::new();
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame?.into_data() {
                    kept.extend_from_slice(&data);
                    if let Read::Tail(limit) = read {
                        if kept.len() > limit {
                            kept.drain(..kept.len() - limit);
                        }
                    }
                }
            }
            Ok::<_, octocrab::Error>((parts, Bytes::from(kept)))
        };
        let (parts, body) = match tokio::time::timeout(self.timeout, exchange).await {
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
        let (status, mut headers) = (parts.status, parts.headers);
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
        if let Some(reset_at) = rate_limited(status, &headers, &body) {
            tracing::warn!(endpoint, %reset_at, status = status.as_u16(), "GitHub rate limit hit; holding calls back");
            self.budget.block_until(reset_at);
            return Err(Error::RateLimited { reset_at });
        }
        if status.is_server_error() {
            return Err(Error::transient(format!("{endpoint} answered {status}: {}", message(&body))));
        }
        if conditional && status.is_success() {
            if let Some(etag) = headers.get(ETAG).and_then(|v| v.to_str().ok()) {
                let link = headers.get(LINK).cloned();
                self.budget.store(path, Cached { etag: etag.to_string(), body: body.clone(), link });
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
        let reply = self.send(Method::GET, endpoint, path, None, Read::Cached).await?;
        decode(endpoint, &success(endpoint, reply, what)?.body)
    }

    /// GETs every page of a list (up to a bound), following `Link: <…>; rel="next"`.
    pub(crate) async fn get_pages<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        path: &str,
        what: impl Fn() -> String,
    ) -> Result<Vec<T>, Error> {
        Ok(self.get_pages_changed(endpoint, path, what).await?.0)
    }

    /// [`Client::get_pages`], and whether any page was new (false when every page answered 304).
    pub(crate) async fn get_pages_changed<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        path: &str,
        what: impl Fn() -> String,
    ) -> Result<(Vec<T>, bool), Error> {
        let mut pages = Vec::new();
        let mut changed = false;
        let mut next = Some(path.to_string());
        while let Some(path) = next.take() {
            let reply = success(endpoint, self.send(Method::GET, endpoint, &path, None, Read::Cached).await?, &what)?;
            changed |= !reply.not_modified;
            pages.push(decode(endpoint, &reply.body)?);
            if pages.len() < MAX_PAGES {
                next = next_page(&reply.headers);
            }
        }
        Ok((pages, changed))
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

/// GitHub's `message` (with the first validation error) from an error body, or the body itself.
pub(crate) fn message(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Wire {
        message: Option<String>,
        #[serde(default)]
        errors: Vec<serde_json::Value>,
    }
    let text = match serde_json::from_slice::<Wire>(body) {
        Ok(Wire { message: Some(m), errors }) => match errors.first().and_then(|e| e.get("message")?.as_str()) {
            Some(detail) => format!("{m}: {detail}"),
            None => m,
        },
        _ => String::from_utf8_lossy(body).trim().to_string(),
    };
    let mut text: String = text.chars().take(300).collect();
    if text.is_empty() {
        text = "no message".to_string();
    }
    text
}

/// When calls may resume, if this answer is a primary or secondary rate limit.
fn rate_limited(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Option<chrono::DateTime<Utc>> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let now = Utc::now();
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok()?.trim().parse::<i64>().ok())
        .map(|s| now + chrono::Duration::seconds(s.max(0)));
    let exhausted = header_u64(headers, "x-ratelimit-remaining") == Some(0);
    let reset = header_u64(headers, "x-ratelimit-reset").and_then(epoch).filter(|t| *t > now);
    let says_so = message(body).to_ascii_lowercase().contains("rate limit");
    if let Some(t) = retry_after {
        return Some(t);
    }
    if exhausted {
        // GitHub's advice: wait until the reset, or a minute when it is not given.
        return Some(reset.unwrap_or(now + chrono::Duration::seconds(60)));
    }
    if status == StatusCode::TOO_MANY_REQUESTS || says_so {
        return Some(now + chrono::Duration::seconds(60));
    }
    None
}

/// The path and query of the `rel="next"` link, if any. A link's URL is read between its angle
/// brackets, so a comma inside it (as in `labels=a,b`) does not split it.
fn next_page(headers: &HeaderMap) -> Option<String> {
    let mut rest = headers.get(LINK)?.to_str().ok()?;
    while let Some(open) = rest.find('<') {
        let close = open + rest[open..].find('>')?;
        let url = &rest[open + 1..close];
        let after = &rest[close + 1..];
        let params = &after[..after.find('<').unwrap_or(after.len())];
        let is_next = params.split([';', ',']).any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next"));
        if is_next {
            let uri: http::Uri = url.trim().parse().ok()?;
            return uri.path_and_query().map(|pq| pq.as_str().to_string());
        }
        rest = after;
    }
    None
}

/// Checks an owner or repository name before it becomes a path segment.
pub(crate) fn segment<'a>(kind: &str, value: &'a str) -> Result<&'a str, Error> {
    let ok = !value.is_empty()
        && value != "."
        && value != ".."
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(value)
    } else {
        Err(Error::invalid(format!("`{value}` is not a valid GitHub {kind} name")))
    }
}

/// Percent-encodes a branch or ref for a path segment or query value.
pub(crate) fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
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
    fn next_link() {
        let mut h = HeaderMap::new();
        h.insert(
            LINK,
            "<https://api.github.com/repositories/1/pulls?page=2>; rel=\"next\", <https://api.github.com/repositories/1/pulls?page=5>; rel=\"last\""
                .parse()
                .unwrap(),
        );
        assert_eq!(next_page(&h).as_deref(), Some("/repositories/1/pulls?page=2"));
        h.insert(LINK, "<https://api.github.com/x?page=1>; rel=\"prev\"".parse().unwrap());
        assert_eq!(next_page(&h), None);
        h.insert(
            LINK,
            "<https://api.github.com/r/issues?labels=a,b&page=1>; rel=\"prev\", <https://api.github.com/r/issues?labels=a,b&page=3>; rel=\"next\""
                .parse()
                .unwrap(),
        );
        assert_eq!(next_page(&h).as_deref(), Some("/r/issues?labels=a,b&page=3"), "a comma inside a link");
    }

    #[test]
    fn escapes() {
        assert_eq!(escape("demo/fix login#1"), "demo/fix%20login%231");
        assert!(segment("owner", "octo-cat.io_x").is_ok());
        assert!(segment("owner", "../x").is_err());
        assert!(segment("repo", "").is_err());
    }

    #[test]
    fn messages() {
        assert_eq!(
            message(br#"{"message":"Validation Failed","errors":[{"message":"A pull request already exists"}]}"#),
            "Validation Failed: A pull request already exists"
        );
        assert_eq!(message(b"oops\n"), "oops");
        assert_eq!(message(b""), "no message");
    }

    #[test]
    fn secondary_limit_without_headers_waits_a_minute() {
        let at = rate_limited(
            StatusCode::FORBIDDEN,
            &HeaderMap::new(),
            br#"{"message":"You have exceeded a secondary rate limit"}"#,
        )
        .unwrap();
        assert!(at > Utc::now() + chrono::Duration::seconds(50));
        assert_eq!(
            rate_limited(StatusCode::FORBIDDEN, &HeaderMap::new(), br#"{"message":"Must have admin rights"}"#),
            None
        );
    }
}
