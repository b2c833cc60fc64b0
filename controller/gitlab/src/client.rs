//! The GitLab client: one core of the shared HTTP core on reqwest, authenticated with
//! `PRIVATE-TOKEN`, and the names GitLab's routes take.

use std::sync::Arc;
use std::time::Duration;

use aoctl_forge_core::{Budget, Core, Error, ErrorKind, Reqwest, Service, Settings};
use http::header::HeaderName;
use serde::de::DeserializeOwned;
use serde::Deserialize;

/// GitLab.com's REST base URL.
pub const DEFAULT_API_URL: &str = "https://gitlab.com/api/v4";

/// Pages read of one list at most (of up to 100 items each).
const MAX_PAGES: usize = 10;

const GET_USER: &str = "GET /user";

/// A GitLab REST v4 client for one API URL and token. Cloning is cheap and shares everything.
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) core: Core,
    /// The username the token speaks as, once asked.
    username: Arc<tokio::sync::OnceCell<String>>,
    /// Users' access levels in projects, as lately read.
    pub(crate) levels: Arc<crate::levels::Levels>,
}

impl Client {
    /// A client with a budget of its own; `api_url` is the project's `spec.gitlab.apiUrl`
    /// ([`DEFAULT_API_URL`] for gitlab.com, `https://HOST/api/v4` for a self-managed instance).
    pub fn new(api_url: &str, token: Option<String>) -> Result<Client, Error> {
        Client::with_budget(api_url, token, Arc::new(Budget::new()))
    }

    /// A client that draws on a budget shared with every other client of the same token.
    pub fn with_budget(api_url: &str, token: Option<String>, budget: Arc<Budget>) -> Result<Client, Error> {
        let api_url = aoctl_forge_core::api_url(Service::GitLab, api_url, DEFAULT_API_URL)?;
        let transport = Reqwest::new().map_err(|e| invalid(format!("cannot build the HTTP client: {e}")))?;
        let token = token.filter(|t| !t.is_empty());
        let core = Core::new(Settings {
            service: Service::GitLab,
            api_url,
            transport: Box::new(transport),
            budget,
            has_token: token.is_some(),
            auth: token.map(|t| (HeaderName::from_static("private-token"), t)),
        })?;
        Ok(Client { core, username: Arc::default(), levels: Arc::new(crate::levels::levels()) })
    }

    /// Sets how long one request may take before it fails as transient.
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.core = self.core.with_timeout(timeout);
        self
    }

    /// The same client, its requests counted under `label` (a project's name).
    pub fn labelled(&self, label: &str) -> Client {
        Client { core: self.core.labelled(label), username: self.username.clone(), levels: self.levels.clone() }
    }

    /// The budget this client draws on.
    pub fn budget(&self) -> &Arc<Budget> {
        self.core.budget()
    }

    /// The REST base URL, without a trailing slash.
    pub fn api_url(&self) -> &str {
        self.core.api_url()
    }

    /// The username the token speaks as (`GET /user`, asked once per client).
    pub async fn username(&self) -> Result<String, Error> {
        #[derive(Deserialize)]
        struct User {
            username: String,
        }
        let name = self
            .username
            .get_or_try_init(|| async {
                let user: User = self.core.get_json(GET_USER, "/user", || "authenticated user".to_string()).await?;
                Ok::<_, Error>(user.username)
            })
            .await?;
        Ok(name.clone())
    }

    /// GETs `path` conditionally and decodes a successful answer.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        path: &str,
        what: impl FnOnce() -> String,
    ) -> Result<T, Error> {
        self.core.get_json(endpoint, path, what).await
    }

    /// Sends a body and decodes a successful answer.
    pub(crate) async fn write_json<T: DeserializeOwned>(
        &self,
        method: http::Method,
        endpoint: &'static str,
        path: &str,
        body: &serde_json::Value,
        what: impl FnOnce() -> String,
    ) -> Result<T, Error> {
        self.core.write_json(method, endpoint, path, body, what).await
    }

    /// GETs every page of a list (up to a bound); the items, and whether any page was new
    /// (false when every page answered 304).
    pub(crate) async fn get_pages<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        path: &str,
        what: impl Fn() -> String,
    ) -> Result<(Vec<T>, bool), Error> {
        let (pages, changed) = self.core.get_pages::<Vec<T>>(endpoint, path, MAX_PAGES, what).await?;
        Ok((pages.into_iter().flatten().collect(), changed))
    }
}

/// An invalid-request error of GitLab.
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::new(Service::GitLab, ErrorKind::Invalid { message: message.into() })
}

/// A project path as the `:id` of a route: `group/name` percent-encoded.
pub(crate) fn project_id(path: &str) -> Result<String, Error> {
    let ok = path.split('/').count() >= 2
        && path.split('/').all(|p| !p.is_empty() && p != "." && p != "..")
        && path.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'));
    if !ok {
        return Err(invalid(format!("`{path}` is not a GitLab project path such as group/name")));
    }
    Ok(path.replace('/', "%2F"))
}

/// Percent-encodes a query value (a branch, a sha, a label list).
pub(crate) fn escape(value: &str) -> String {
    aoctl_forge_core::escape(value, b"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_escapes() {
        assert_eq!(project_id("acme/sub/widgets").unwrap(), "acme%2Fsub%2Fwidgets");
        assert!(project_id("widgets").is_err() && project_id("acme/../x").is_err() && project_id("a b/c").is_err());
        assert_eq!(escape("acme/fix login"), "acme%2Ffix%20login");
    }

    #[test]
    fn a_client_needs_an_absolute_url() {
        assert!(Client::new("gitlab.example/api/v4", None).is_err());
        assert!(Client::new("ftp://gitlab.example", None).is_err());
        assert_eq!(Client::new("", None).unwrap().api_url(), DEFAULT_API_URL);
        assert_eq!(Client::new("http://127.0.0.1:9/api/v4/", None).unwrap().api_url(), "http://127.0.0.1:9/api/v4");
    }

    #[test]
    fn the_token_stays_out_of_debug_output() {
        let c = Client::new("https://gitlab.example/api/v4", Some("glpat-VerySecret".into())).unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("VerySecret") && shown.contains("<redacted>"), "{shown}");
    }
}
