//! The Linear client: one core of the shared HTTP core on reqwest, authenticated with the API
//! key, its GraphQL requests, and GraphQL errors mapped to the core's error.

use std::sync::Arc;
use std::time::Duration;

use aoctl_forge_core::{Budget, Cached, Call, Core, Error, ErrorKind, Reqwest, Service, Settings};
use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::Method;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Linear's GraphQL endpoint.
pub const DEFAULT_API_URL: &str = "https://api.linear.app/graphql";

/// A Linear GraphQL client for one API URL and key.
#[derive(Clone, Debug)]
pub struct Client {
    core: Core,
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
        let api_url = aoctl_forge_core::api_url(Service::Linear, api_url, DEFAULT_API_URL)?;
        let transport = Reqwest::new().map_err(|e| invalid(format!("cannot build the HTTP client: {e}")))?;
        let token = token.filter(|t| !t.is_empty());
        // Personal API keys go bare; OAuth tokens as `Bearer`.
        let auth = token.as_ref().map(|t| {
            let value = if t.starts_with("lin_oauth_") { format!("Bearer {t}") } else { t.clone() };
            (AUTHORIZATION, value)
        });
        let core = Core::new(Settings {
            service: Service::Linear,
            api_url,
            transport: Box::new(transport),
            budget,
            has_token: token.is_some(),
            auth,
        })?;
        Ok(Client { core })
    }

    /// Sets how long one request may take before it fails as transient.
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.core = self.core.with_timeout(timeout);
        self
    }

    /// The same client, its requests counted under `label` (a project's name).
    pub fn labelled(&self, label: &str) -> Client {
        Client { core: self.core.labelled(label) }
    }

    /// The budget this client draws on.
    pub fn budget(&self) -> &Arc<Budget> {
        self.core.budget()
    }

    /// The GraphQL endpoint.
    pub fn api_url(&self) -> &str {
        self.core.api_url()
    }

    /// Runs one GraphQL operation; `operation` names it in metrics and errors, and `what` names
    /// the object in `NotFound`. GraphQL answers carry no ETag, so whether the answer changed is
    /// told by comparing it with the last answer to the same operation and variables.
    pub(crate) async fn query<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        query: &str,
        variables: serde_json::Value,
        what: impl FnOnce() -> String,
    ) -> Result<Data<T>, Error> {
        let request = serde_json::json!({"query": query, "variables": variables, "operationName": operation});
        let key = format!("{operation} {variables}");
        let url = self.core.api_url().to_string();
        let reply = self.core.send(Call::new(Method::POST, operation, &url).body(&request)).await?;
        let status = reply.status;
        let answer: Answer<serde_json::Value> = match self.core.decode(operation, &reply.body) {
            Ok(a) => a,
            Err(_) if status.as_u16() == 401 => {
                let (message, _) = aoctl_forge_core::service_message(&reply.body);
                return Err(self.core.error(ErrorKind::Unauthorized { message }));
            }
            Err(e) => return Err(self.core.decode_error(operation, format!("{status}: {e}"))),
        };
        if let Some(e) = answer.errors.first() {
            let detail = answer.errors.iter().skip(1).map(|e| e.message.clone()).collect();
            return Err(graphql_error(&self.core, operation, e, what).with_detail(detail));
        }
        if !status.is_success() {
            let (message, detail) = aoctl_forge_core::service_message(&reply.body);
            let kind = ErrorKind::Rejected { endpoint: operation, status: status.as_u16(), message };
            return Err(self.core.error(kind).with_detail(detail));
        }
        let data = answer.data.ok_or_else(|| self.core.decode_error(operation, "no `data`"))?;
        let raw = serde_json::to_vec(&data).unwrap_or_default();
        let digest = hex::encode(Sha256::digest(&raw));
        let budget = self.core.budget();
        let changed = budget.cached(&key).is_none_or(|c| c.etag != digest);
        if changed {
            budget.store(&key, Cached { etag: digest, body: Bytes::new(), link: None });
        }
        let data = serde_path_to_error::deserialize(data).map_err(|e| self.core.decode_error(operation, e))?;
        Ok(Data { data, changed })
    }
}

/// A GraphQL error as the core's error (a `RATELIMITED` one never gets here: the core turned it
/// into a block of the budget).
fn graphql_error(core: &Core, operation: &'static str, e: &WireError, what: impl FnOnce() -> String) -> Error {
    let code = e.extensions.as_ref().and_then(|x| x.get("code")).and_then(|c| c.as_str()).unwrap_or_default();
    let message: String = e.message.chars().take(300).collect();
    let kind = match code {
        "AUTHENTICATION_ERROR" => ErrorKind::Unauthorized { message },
        "FORBIDDEN" => ErrorKind::Forbidden { endpoint: operation, message },
        "ENTITY_NOT_FOUND" => ErrorKind::NotFound { what: what() },
        _ if message.starts_with("Entity not found") => ErrorKind::NotFound { what: what() },
        _ => ErrorKind::Rejected {
            endpoint: operation,
            status: 200,
            message: if code.is_empty() { message } else { format!("{code}: {message}") },
        },
    };
    core.error(kind)
}

/// An invalid-request error of Linear.
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::new(Service::Linear, ErrorKind::Invalid { message: message.into() })
}
