//! How a request reaches a service: the [`Transport`] a client hands the core (octocrab for
//! GitHub's REST and GraphQL APIs, reqwest for the others), taking an `http::Request` and giving back the
//! answer's head and a body to read frame by frame.

use std::error::Error as StdError;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;

/// A failure below HTTP: no answer came.
pub type TransportError = Box<dyn StdError + Send + Sync>;

/// An answer's body, read by the core.
pub type Body = UnsyncBoxBody<Bytes, TransportError>;

/// Sends one request and answers with its response; authentication is the transport's part
/// (or the headers the client adds), so the core never sees a token.
pub trait Transport: Send + Sync {
    fn execute(&self, request: http::Request<Bytes>) -> BoxFuture<'_, Result<http::Response<Body>, TransportError>>;
}

/// A transport on reqwest that follows no redirect (a redirect could carry the token elsewhere;
/// where one is expected, the client follows it itself without the token).
pub struct Reqwest {
    client: reqwest::Client,
}

impl Reqwest {
    /// A client with aoctl's user agent.
    pub fn new() -> Result<Reqwest, TransportError> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("aoctl/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Reqwest { client })
    }
}

impl Transport for Reqwest {
    fn execute(&self, request: http::Request<Bytes>) -> BoxFuture<'_, Result<http::Response<Body>, TransportError>> {
        Box::pin(async move {
            let request = reqwest::Request::try_from(request)?;
            let response = self.client.execute(request).await?;
            let response: http::Response<reqwest::Body> = response.into();
            Ok(response.map(|b| b.map_err(|e| Box::new(e) as TransportError).boxed_unsync()))
        })
    }
}
