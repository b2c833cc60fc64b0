//! The GitHub client: two cores of the shared HTTP core (REST at the API URL, GraphQL at its
//! `/graphql`), each on an octocrab transport that authenticates, both drawing on one budget;
//! and the identity the token speaks as.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::BodyExt;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use aoctl_forge_core::{Body, Budget, Core, Error, Service, Settings, Transport, TransportError};

/// The REST base URL of github.com.
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// At most this many pages are read from a paginated list.
pub(crate) const MAX_PAGES: usize = 10;

/// The REST API version this client is written against.
const API_VERSION: &str = "2022-11-28";

const GET_USER: &str = "GET /user";

/// A GitHub client for one API URL and token. Cloning is cheap and shares everything.
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) rest: Core,
    pub(crate) graphql: Core,
    /// The login the token speaks as, once asked.
    login: Arc<tokio::sync::OnceCell<String>>,
    /// Users' permissions in repositories, as lately read.
    pub(crate) permissions: Arc<crate::permissions::Permissions>,
}

/// The octocrab transport of one base URL: the path (and query) of an absolute URL is sent
/// relative to it, so octocrab adds the token — and drops it when following a redirect elsewhere.
struct Octocrab {
    octo: octocrab::Octocrab,
    /// `scheme://host[:port]` of the base URL, stripped from request URLs.
    origin: String,
}

impl Transport for Octocrab {
    fn execute(&self, request: http::Request<Bytes>) -> BoxFuture<'_, Result<http::Response<Body>, TransportError>> {
        Box::pin(async move {
            let (mut parts, body) = request.into_parts();
            let full = parts.uri.to_string();
            let relative = full.strip_prefix(&self.origin).unwrap_or(&full);
            parts.uri = relative.parse()?;
            parts.headers.insert("x-github-api-version", http::HeaderValue::from_static(API_VERSION));
            let response = self.octo.execute(http::Request::from_parts(parts, body)).await?;
            Ok(response.map(|b| b.map_err(|e| Box::new(e) as TransportError).boxed_unsync()))
        })
    }
}

/// An octocrab instance whose requests go under `base`.
fn octocrab(base: &str, token: Option<&str>) -> Result<Octocrab, Error> {
    let invalid = |message: String| Error::new(Service::GitHub, aoctl_forge_core::ErrorKind::Invalid { message });
    let uri: http::Uri = base.parse().map_err(|e| invalid(format!("API URL `{base}` is not a URL: {e}")))?;
    let origin = format!("{}://{}", uri.scheme_str().unwrap_or("https"), uri.authority().map_or("", |a| a.as_str()));
    let builder = octocrab::Octocrab::builder().base_uri(uri).map_err(|e| invalid(format!("API URL `{base}`: {e}")))?;
    let builder = match token {
        Some(t) => builder.personal_token(t.to_string()),
        None => builder,
    };
    let octo = builder.build().map_err(|e| invalid(format!("cannot build the HTTP client: {e}")))?;
    Ok(Octocrab { octo, origin })
}

/// GitHub's GraphQL endpoint for a REST base URL: `https://api.github.com/graphql`, and on
/// GitHub Enterprise Server `https://HOST/api/graphql` beside `https://HOST/api/v3`.
pub fn graphql_url(api_url: &str) -> String {
    match api_url.strip_suffix("/v3") {
        Some(api) if api.ends_with("/api") => format!("{api}/graphql"),
        _ => format!("{api_url}/graphql"),
    }
}

impl Client {
    /// A client with a budget of its own; `api_url` is the project's `spec.github.apiUrl`
    /// ([`DEFAULT_API_URL`] for github.com, `https://HOST/api/v3` for GitHub Enterprise).
    pub fn new(api_url: &str, token: Option<String>) -> Result<Client, Error> {
        Client::with_budget(api_url, token, Arc::new(Budget::new()))
    }

    /// A client that draws on a budget shared with every other client of the same token.
    pub fn with_budget(api_url: &str, token: Option<String>, budget: Arc<Budget>) -> Result<Client, Error> {
        let api_url = aoctl_forge_core::api_url(Service::GitHub, api_url, DEFAULT_API_URL)?;
        let token = token.filter(|t| !t.is_empty());
        let graphql_url = graphql_url(&api_url);
        let graphql_base = graphql_url.strip_suffix("/graphql").unwrap_or(&graphql_url).to_string();
        let core = |base: &str, url: String| -> Result<Core, Error> {
            Core::new(Settings {
                service: Service::GitHub,
                api_url: url,
                transport: Box::new(octocrab(base, token.as_deref())?),
                budget: budget.clone(),
                auth: None,
                has_token: token.is_some(),
            })
        };
        let rest = core(&api_url, api_url.clone())?;
        let graphql = core(&graphql_base, graphql_base.clone())?;
        Ok(Client { rest, graphql, login: Arc::default(), permissions: Arc::new(crate::permissions::permissions()) })
    }

    /// Sets how long one request may take before it fails as transient.
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.rest = self.rest.with_timeout(timeout);
        self.graphql = self.graphql.with_timeout(timeout);
        self
    }

    /// The same client, its requests counted under `label` (a project's name).
    pub fn labelled(&self, label: &str) -> Client {
        Client {
            rest: self.rest.labelled(label),
            graphql: self.graphql.labelled(label),
            login: self.login.clone(),
            permissions: self.permissions.clone(),
        }
    }

    /// The budget this client draws on.
    pub fn budget(&self) -> &Arc<Budget> {
        self.rest.budget()
    }

    /// The REST base URL, without a trailing slash.
    pub fn api_url(&self) -> &str {
        self.rest.api_url()
    }

    /// The login the token speaks as (`GET /user`, asked once per client).
    pub async fn login(&self) -> Result<String, Error> {
        #[derive(Deserialize)]
        struct User {
            login: String,
        }
        let login = self
            .login
            .get_or_try_init(|| async {
                let user: User = self.rest.get_json(GET_USER, "/user", || "authenticated user".to_string()).await?;
                Ok::<_, Error>(user.login)
            })
            .await?;
        Ok(login.clone())
    }

    /// GETs `path` conditionally and decodes a successful answer.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        path: &str,
        what: impl FnOnce() -> String,
    ) -> Result<T, Error> {
        self.rest.get_json(endpoint, path, what).await
    }

    /// GETs every page of a list (up to a bound) conditionally, and whether any page was new.
    pub(crate) async fn get_pages<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        path: &str,
        what: impl Fn() -> String,
    ) -> Result<(Vec<T>, bool), Error> {
        self.rest.get_pages(endpoint, path, MAX_PAGES, what).await
    }

    pub(crate) fn invalid(&self, message: impl Into<String>) -> Error {
        self.rest.invalid(message)
    }
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
        let message = format!("`{value}` is not a valid GitHub {kind} name");
        Err(Error::new(Service::GitHub, aoctl_forge_core::ErrorKind::Invalid { message }))
    }
}

/// Percent-encodes a branch or ref for a path segment or query value.
pub(crate) fn escape(value: &str) -> String {
    aoctl_forge_core::escape(value, b"/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(escape("demo/fix login#1"), "demo/fix%20login%231");
        assert!(segment("owner", "octo-cat.io_x").is_ok());
        assert!(segment("owner", "../x").is_err());
        assert!(segment("repo", "").is_err());
    }

    #[test]
    fn graphql_beside_rest() {
        assert_eq!(graphql_url("https://api.github.com"), "https://api.github.com/graphql");
        assert_eq!(graphql_url("https://ghe.example/api/v3"), "https://ghe.example/api/graphql");
        assert_eq!(graphql_url("http://127.0.0.1:7990"), "http://127.0.0.1:7990/graphql");
    }
}
