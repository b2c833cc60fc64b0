//! The HTTP side of the Linear client: the API key, GraphQL requests through the shared budget,
//! rate limits, and GraphQL errors mapped to typed errors.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use aoctl_scm::{epoch, header_u64, Budget, Cached};
use bytes::Bytes;
use chrono::Utc;
use futures::StreamExt;
use http::HeaderMap;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::Error;

/// Linear's GraphQL endpoint.
pub const DEFAULT_API_URL: &str = "https://api.linear.app/graphql";

/// How long one request may take.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest answer read.
const MAX_ANSWER: usize = 8 * 1024 * 1024;

/// A Linear GraphQL client for one API URL and key.
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
            .finish()
    }
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default)]
    message: String,
    #[serde(default)]
    extensions: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Answer<T> {
    data: Option<T>,
    #[serde(default)]
    errors: Vec<WireError>,
}

/// A successful answer, and whether it differs from the last answer to the same request.
pub(crate) struct Data<T> {
    pub(crate) data: T,
    pub(crate) changed: bool,
}

impl Client {
    /// A client with a budget of its own.
    pub fn new(api_url: &str, token: Option<String>) -> Result<Client, Error> {
        Client::with_budget(api_url, token, Arc::new(Budget::new()))
    }

    /// A client that draws on a budget shared with every other client of the same key.
    pub fn with_budget(api_url: &str, token: Option<String>, budget: Arc<Budget>) -> Result<Client, Error> {
        let api_url = if api_url.trim().is_empty() { DEFAULT_API_URL } else { api_url.trim() };
        let uri: http::Uri =
            api_url.parse().map_err(|e| Error::invalid(format!("API URL `{api_url}` is not a URL: {e}")))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(Error::invalid(format!("API URL `{api_url}` must be an absolute http(s) URL")));
        }
        let http = reqwest::Client::builder()
            .user_agent(concat!("aoctl/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Error::invalid(format!("cannot build the HTTP client: {e}")))?;
        let token = token.filter(|t| !t.is_empty()).map(Arc::from);
        Ok(Client { http, api_url: api_url.to_string(), token, budget, timeout: DEFAULT_TIMEOUT })
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

    /// The GraphQL endpoint.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// Runs one GraphQL operation; `operation` names it in metrics and errors, and `what` names
    /// the object in `NotFound`.
    pub(crate) async fn query<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        query: &str,
        variables: serde_json::Value,
        what: impl FnOnce() -> String,
    ) -> Result<Data<T>, Error> {
        let endpoint = operation;
        self.budget.admit().await.map_err(|reset_at| Error::RateLimited { reset_at })?;
        let request = serde_json::json!({"query": query, "variables": variables, "operationName": operation});
        let key = format!("{operation} {variables}");
        let mut builder = self.http.post(&self.api_url).header("accept", "application/json").json(&request);
        if let Some(token) = &self.token {
            // Personal API keys go bare; OAuth tokens as `Bearer`.
            let value = if token.starts_with("lin_oauth_") { format!("Bearer {token}") } else { token.to_string() };
            builder = builder.header("authorization", value);
        }
        let exchange = async {
            let response = builder.send().await?;
            let (status, headers) = (response.status(), response.headers().clone());
            let mut stream = response.bytes_stream();
            let mut kept = Vec::new();
            while let Some(chunk) = stream.next().await {
                kept.extend_from_slice(&chunk?);
                if kept.len() > MAX_ANSWER {
                    break;
                }
            }
            Ok::<_, reqwest::Error>((status, headers, Bytes::from(kept)))
        };
        let (status, headers, body) = match tokio::time::timeout(self.timeout, exchange).await {
            Err(_) => {
                self.budget.observe(endpoint, None, None);
                return Err(Error::Transient { message: format!("{operation} timed out after {:?}", self.timeout) });
            }
            Ok(Err(e)) => {
                self.budget.observe(endpoint, None, None);
                return Err(Error::Transient { message: format!("{operation}: {e}") });
            }
            Ok(Ok(answer)) => answer,
        };
        self.budget.observe(endpoint, Some(status.as_u16()), Some(&headers));
        if status.is_server_error() {
            return Err(Error::Transient { message: format!("{operation} answered {status}") });
        }
        let de = &mut serde_json::Deserializer::from_slice(&body);
        let answer: Answer<serde_json::Value> = match serde_path_to_error::deserialize(de) {
            Ok(a) => a,
            Err(_) if status.as_u16() == 401 => {
                return Err(Error::Unauthorized { message: text(&body) });
            }
            Err(e) => {
                return Err(Error::Decode { operation, message: format!("{status}: {e}") });
            }
        };
        if let Some(e) = answer.errors.first() {
            return Err(self.graphql_error(operation, e, &headers, what));
        }
        if !status.is_success() {
            return Err(Error::Rejected { operation, message: format!("{status}: {}", text(&body)) });
        }
        let data = answer.data.ok_or_else(|| Error::Decode { operation, message: "no `data`".into() })?;
        let raw = serde_json::to_vec(&data).unwrap_or_default();
        let digest = hex::encode(Sha256::digest(&raw));
        let changed = self.budget.cached(&key).is_none_or(|c| c.etag != digest);
        if changed {
            self.budget.store(&key, Cached { etag: digest, body: Bytes::new(), link: None });
        }
        let data =
            serde_path_to_error::deserialize(data).map_err(|e| Error::Decode { operation, message: e.to_string() })?;
        Ok(Data { data, changed })
    }

    fn graphql_error(
        &self,
        operation: &'static str,
        e: &WireError,
        headers: &HeaderMap,
        what: impl FnOnce() -> String,
    ) -> Error {
        let code = e.extensions.as_ref().and_then(|x| x.get("code")).and_then(|c| c.as_str()).unwrap_or_default();
        let message: String = e.message.chars().take(300).collect();
        match code {
            "RATELIMITED" => {
                let now = Utc::now();
                let reset_at = ["x-ratelimit-requests-reset", "x-ratelimit-complexity-reset"]
                    .iter()
                    .filter_map(|h| header_u64(headers, h))
                    .map(|v| if v >= 100_000_000_000 { v / 1000 } else { v })
                    .filter_map(epoch)
                    .filter(|t| *t > now)
                    .max()
                    .unwrap_or(now + chrono::Duration::seconds(60));
                tracing::warn!(operation, %reset_at, "Linear rate limit hit; holding calls back");
                self.budget.block_until(reset_at);
                Error::RateLimited { reset_at }
            }
            "AUTHENTICATION_ERROR" => Error::Unauthorized { message },
            "FORBIDDEN" => Error::Forbidden { operation, message },
            "ENTITY_NOT_FOUND" => Error::NotFound { what: what() },
            _ if message.starts_with("Entity not found") => Error::NotFound { what: what() },
            _ => Error::Rejected {
                operation,
                message: if code.is_empty() { message } else { format!("{code}: {message}") },
            },
        }
    }
}

/// A body as short text, for an error.
fn text(body: &[u8]) -> String {
    let t: String = String::from_utf8_lossy(body).trim().chars().take(300).collect();
    if t.is_empty() {
        "no message".into()
    } else {
        t
    }
}
