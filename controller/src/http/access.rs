//! Who may talk to the API (docs/security.md), checked before any handler runs, on every route: the
//! `Host` must be one of ours (DNS rebinding), an `Origin` or `Sec-Fetch-Site` must say the request
//! comes from our own origin (other web pages), a state-changing request must carry a JSON body
//! (no form or `text/plain` "simple" requests), and all but a few open paths need the bearer token
//! or the dashboard's cookie (`login.rs`). The agent API (`/agent/v1/…`) takes a session's own
//! token (`crate::agent_token`) and nothing else, and a session token opens nothing else.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::login::{self, constant_time_eq, CookieKey, LoginCodes};
use super::{AppError, AppState};
use crate::agent_token::{SessionCaller, SessionKeys};

/// The agent API's paths start with this; only a session token opens them.
pub(super) const AGENT_PREFIX: &str = "/agent/v1/";
/// The orchestrator's tools: only an orchestrator's token opens them.
pub(super) const ORCHESTRATOR_PREFIX: &str = "/agent/v1/orchestrator/";

/// Paths answered without the bearer token: liveness, readiness, the version, and the webhooks
/// (which prove themselves with their HMAC signature instead).
/// `/login` trades a one-time code for the dashboard's cookie.
const OPEN_PATHS: &[&str] =
    &["/healthz", "/readyz", "/version", "/webhooks/github", "/webhooks/gitlab", "/webhooks/linear", "/login"];

/// The media types a state-changing request may carry.
pub(super) const JSON_MEDIA_TYPES: &[&str] = &["application/json", "application/merge-patch+json"];

/// What the access checks compare against.
#[derive(Debug)]
pub(crate) struct Access {
    token: String,
    /// Host names (lower case, no port) besides `localhost` and loopback IPs.
    allowed_hosts: Vec<String>,
    /// The dashboard's one-time login codes.
    pub(super) logins: LoginCodes,
    /// Signs and checks the dashboard's cookie.
    pub(super) cookie_key: CookieKey,
    /// Makes and checks the session tokens of the agent API.
    pub sessions: SessionKeys,
}

impl Access {
    /// `listen` is the address the server is bound to; `allowed` are the `--allowed-host` names.
    pub(crate) fn new(token: &str, listen: SocketAddr, allowed: &[String]) -> Access {
        let mut allowed_hosts: Vec<String> = allowed.iter().map(|h| h.trim().to_ascii_lowercase()).collect();
        if !listen.ip().is_unspecified() {
            allowed_hosts.push(listen.ip().to_string());
        }
        Access {
            token: token.to_string(),
            allowed_hosts,
            logins: LoginCodes::default(),
            cookie_key: CookieKey::from_token(token),
            sessions: SessionKeys::new(token, listen),
        }
    }

    /// The session whose token the request carries in `Authorization: Bearer`, if any.
    fn session_caller(&self, headers: &HeaderMap) -> Option<SessionCaller> {
        let given = headers.get(header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ")?;
        self.sessions.verify(given)
    }

    /// Whether `host` (a `Host` header's host part, without the port) may be served.
    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if host == "localhost" || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
            return true;
        }
        self.allowed_hosts.iter().any(|a| a.trim_start_matches('[').trim_end_matches(']') == bare)
    }

    pub(super) fn token_matches(&self, headers: &HeaderMap) -> bool {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        constant_time_eq(given.as_bytes(), self.token.as_bytes())
    }

    /// Every check but the token, in the order they apply; `Err` is the refusal.
    fn check(&self, method: &Method, path: &str, headers: &HeaderMap, authority: Option<&str>) -> Result<(), AppError> {
        let Some(authority) = authority.filter(|a| !a.is_empty()) else {
            return Err(AppError::Forbidden("the request has no Host header".into()));
        };
        let (host, _) = split_authority(authority);
        if !self.host_allowed(host) {
            return Err(AppError::Forbidden(format!(
                "host `{host}` is not served here; serve it with --allowed-host {host} (requests naming other hosts are refused to stop DNS rebinding)"
            )));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !same_origin(origin, authority) {
                return Err(AppError::Forbidden(format!(
                    "origin `{origin}` may not use this API: only pages of the API's own origin may"
                )));
            }
        }
        // Browsers say where a request comes from even when they send no Origin (a GET, an image).
        // A sign-in link may be followed from anywhere (a chat, a mail): its one-time code is the
        // proof, and it changes nothing but the browser's own cookie.
        let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()).unwrap_or("none");
        let sign_in = *method == Method::GET && path == "/login";
        if !matches!(site, "same-origin" | "none") && !sign_in {
            return Err(AppError::Forbidden(format!(
                "a {site} request from a web page may not use this API (Sec-Fetch-Site: {site})"
            )));
        }
        if changes_state(method) && (has_body(headers) || *method != Method::DELETE) {
            let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
            let essence = ct.map(|c| c.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
            if !essence.as_deref().is_some_and(|e| JSON_MEDIA_TYPES.contains(&e)) {
                let given = ct.map_or("none".to_string(), |c| format!("`{c}`"));
                return Err(AppError::UnsupportedMediaType(format!(
                    "a {method} request takes a JSON body (Content-Type: {}), not content type {given}",
                    JSON_MEDIA_TYPES.join(" or ")
                )));
            }
        }
        Ok(())
    }
}

/// The middleware: refuses what [`Access::check`] refuses, then asks for the token on every path
/// but the open ones (unknown paths included, so probing reveals nothing).
/// On the agent API it asks for a session token instead, and hands the handler the session it
/// speaks for as a request extension ([`SessionCaller`]).
pub(super) async fn guard(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let access = &state.access;
    let authority = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_string()));
    match refusal(access, &req, authority.as_deref()) {
        Err(refusal) => return *refusal,
        Ok(Some(caller)) => {
            req.extensions_mut().insert(caller);
        }
        Ok(None) => {}
    }
    next.run(req).await
}

/// Every check of [`guard`] on one request: the answer to send instead, if it is refused, else
/// the session an agent API request speaks for.
fn refusal(access: &Access, req: &Request, authority: Option<&str>) -> Result<Option<SessionCaller>, Box<Response>> {
    let path = req.uri().path();
    if let Err(e) = access.check(req.method(), path, req.headers(), authority) {
        return Err(Box::new(e.into_response()));
    }
    if path.starts_with(AGENT_PREFIX) {
        // A session's token, and only that: the bearer token and the cookie speak for no session.
        return match access.session_caller(req.headers()) {
            Some(caller) if path.starts_with(ORCHESTRATOR_PREFIX) && !caller.orchestrator => {
                let why = "the orchestrator's tools take the project's orchestrator token; this is a worker's";
                Err(Box::new(AppError::Forbidden(why.into()).into_response()))
            }
            Some(caller) => Ok(Some(caller)),
            None => Err(Box::new(AppError::SessionUnauthorized.into_response())),
        };
    }
    other_paths(access, req, path).map_or(Ok(None), |r| Err(Box::new(r)))
}

/// The bearer token or the cookie, on every path but the agent API's.
fn other_paths(access: &Access, req: &Request, path: &str) -> Option<Response> {
    let signed_in = access.token_matches(req.headers()) || access.cookie_key.signed_in(req.headers());
    if OPEN_PATHS.contains(&path) || signed_in {
        return None;
    }
    if path == "/" || path.starts_with("/assets/") {
        return Some(login::page(
            axum::http::StatusCode::UNAUTHORIZED,
            "Sign in first: run <code>aoctl dashboard</code> and open the link it prints (it works once, for a minute).",
        ));
    }
    Some(AppError::Unauthorized.into_response())
}

fn changes_state(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH | Method::DELETE)
}

fn has_body(headers: &HeaderMap) -> bool {
    let length = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    length.is_some_and(|l| l > 0) || headers.contains_key(header::TRANSFER_ENCODING)
}

/// `host[:port]` (with `[v6]` brackets kept on the host) split into host and port.
fn split_authority(authority: &str) -> (&str, Option<&str>) {
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => (&authority[..=end], authority[end + 1..].strip_prefix(':')),
            None => (authority, None),
        };
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, Some(p)),
        _ => (authority, None),
    }
}

/// Whether `origin` (`scheme://host[:port]`) is the origin of a page served from `authority`
/// (the request's `Host`): same host and same port, the scheme's default port filled in.
fn same_origin(origin: &str, authority: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else { return false };
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" => "80",
        "https" => "443",
        _ => return false,
    };
    if rest.contains('/') || rest.contains('@') {
        return false;
    }
    let (oh, op) = split_authority(rest);
    let (rh, rp) = split_authority(authority);
    oh.eq_ignore_ascii_case(rh) && op.unwrap_or(default) == rp.unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn access() -> Access {
        Access::new("t0ken", "127.0.0.1:7420".parse().unwrap(), &["aoctl.example.com".to_string()])
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }

    #[test]
    fn hosts_are_localhost_loopback_the_listen_address_and_the_allowed_names() {
        let a = Access::new("t", "10.1.2.3:7420".parse().unwrap(), &["Box.Lan".to_string()]);
        for ok in ["localhost", "127.0.0.1", "127.9.9.9", "[::1]", "10.1.2.3", "box.lan", "BOX.LAN.", "localhost."] {
            assert!(a.host_allowed(ok), "{ok}");
        }
        for bad in ["evil.example", "localhost.evil.example", "10.1.2.4", "[::2]", "box.lan.evil", ""] {
            assert!(!a.host_allowed(bad), "{bad}");
        }
        let any = Access::new("t", "0.0.0.0:7420".parse().unwrap(), &[]);
        assert!(!any.host_allowed("0.0.0.0"), "an unspecified listen address names no host");
    }

    #[test]
    fn a_rebinding_host_is_refused_before_anything_else() {
        let e = access().check(&Method::GET, "/apis", &HeaderMap::new(), Some("evil.example:7420")).unwrap_err();
        assert_eq!(e.code(), 403);
        assert!(e.to_string().contains("--allowed-host evil.example"), "{e}");
        assert_eq!(access().check(&Method::GET, "/apis", &HeaderMap::new(), None).unwrap_err().code(), 403);
        assert!(access().check(&Method::GET, "/apis", &HeaderMap::new(), Some("localhost:7420")).is_ok());
    }

    #[test]
    fn origins_must_be_the_apis_own() {
        let a = access();
        let get = |origin: &'static str, host: &str| {
            a.check(&Method::GET, "/apis", &headers(&[("origin", origin)]), Some(host))
        };
        assert!(get("http://127.0.0.1:7420", "127.0.0.1:7420").is_ok());
        assert!(get("https://aoctl.example.com", "aoctl.example.com").is_ok());
        assert!(get("https://aoctl.example.com:443", "aoctl.example.com").is_ok());
        for (origin, host) in [
            ("http://evil.example", "127.0.0.1:7420"),
            ("http://localhost:3000", "localhost:7420"),
            ("http://127.0.0.1:7420", "localhost:7420"),
            ("null", "127.0.0.1:7420"),
            ("file://", "127.0.0.1:7420"),
            ("http://127.0.0.1:7420/x", "127.0.0.1:7420"),
        ] {
            assert_eq!(get(origin, host).unwrap_err().code(), 403, "{origin} on {host}");
        }
    }

    #[test]
    fn cross_site_fetches_are_refused() {
        let a = access();
        for site in ["cross-site", "same-site"] {
            let h = headers(&[("sec-fetch-site", site)]);
            assert_eq!(a.check(&Method::GET, "/apis", &h, Some("127.0.0.1:7420")).unwrap_err().code(), 403, "{site}");
        }
        let h = headers(&[("sec-fetch-site", "same-origin")]);
        assert!(a.check(&Method::GET, "/apis", &h, Some("127.0.0.1:7420")).is_ok());
        let h = headers(&[("sec-fetch-site", "cross-site")]);
        assert!(a.check(&Method::GET, "/login", &h, Some("127.0.0.1:7420")).is_ok(), "a sign-in link from a chat");
        let post = headers(&[("sec-fetch-site", "cross-site"), ("content-type", "application/json")]);
        assert_eq!(a.check(&Method::POST, "/login", &post, Some("127.0.0.1:7420")).unwrap_err().code(), 403);
        assert_eq!(a.check(&Method::GET, "/", &h, Some("127.0.0.1:7420")).unwrap_err().code(), 403);
    }

    #[test]
    fn writes_take_only_json() {
        let a = access();
        let host = Some("127.0.0.1:7420");
        for ct in ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data"]
        {
            let h = headers(&[("content-type", ct), ("content-length", "12")]);
            for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
                assert_eq!(a.check(&m, "/apis", &h, host).unwrap_err().code(), 415, "{m} {ct}");
            }
        }
        let no_type = headers(&[("content-length", "12")]);
        assert_eq!(a.check(&Method::POST, "/apis", &no_type, host).unwrap_err().code(), 415, "a body without a type");
        assert_eq!(
            a.check(&Method::POST, "/apis", &HeaderMap::new(), host).unwrap_err().code(),
            415,
            "a POST needs JSON"
        );
        assert!(a.check(&Method::DELETE, "/apis", &HeaderMap::new(), host).is_ok(), "a DELETE without a body");
        let json = headers(&[("content-type", "application/json; charset=utf-8"), ("content-length", "2")]);
        assert!(a.check(&Method::POST, "/apis", &json, host).is_ok());
        let patch = headers(&[("content-type", "application/merge-patch+json")]);
        assert!(a.check(&Method::PATCH, "/apis", &patch, host).is_ok());
        assert!(a.check(&Method::GET, "/apis", &headers(&[("content-type", "text/plain")]), host).is_ok());
    }

    fn request(method: Method, path: &str, bearer: Option<&str>) -> Request {
        let mut b = Request::builder().method(method).uri(path).header("host", "127.0.0.1:7420");
        if let Some(t) = bearer {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        b.header("content-type", "application/json").body(axum::body::Body::empty()).unwrap()
    }

    fn verdict(a: &Access, method: Method, path: &str, bearer: Option<&str>) -> Result<Option<String>, u16> {
        refusal(a, &request(method, path, bearer), Some("127.0.0.1:7420"))
            .map(|c| c.map(|c| c.name))
            .map_err(|r| r.status().as_u16())
    }

    #[test]
    fn a_session_token_opens_the_agent_api_and_nothing_else() {
        let a = access();
        let token = a.sessions.token("fix-1", "uid-1");
        assert_eq!(verdict(&a, Method::GET, "/agent/v1/status", Some(&token)), Ok(Some("fix-1".into())));
        assert_eq!(verdict(&a, Method::POST, "/agent/v1/report", Some(&token)), Ok(Some("fix-1".into())));
        for path in [
            "/apis/ao.dev/v1alpha1/sessions",
            "/apis/ao.dev/v1alpha1/sessions/fix-1",
            "/apis/ao.dev/v1alpha1/sessions/fix-1/input",
            "/apis/ao.dev/v1alpha1/projects",
            "/metrics",
            "/dashboard/login",
            "/agent/v2/status",
            "/nothing",
        ] {
            assert_eq!(verdict(&a, Method::GET, path, Some(&token)), Err(401), "GET {path}");
            assert_eq!(verdict(&a, Method::POST, path, Some(&token)), Err(401), "POST {path}");
        }
        assert_eq!(verdict(&a, Method::GET, "/", Some(&token)), Err(401), "nor the dashboard");
        // Nor does a session token stand in for the checks before the token.
        let mut cross = request(Method::GET, "/agent/v1/status", Some(&token));
        cross.headers_mut().insert("origin", HeaderValue::from_static("http://evil.example"));
        assert_eq!(refusal(&a, &cross, Some("127.0.0.1:7420")).unwrap_err().status(), 403);
        let plain = Request::builder()
            .method(Method::POST)
            .uri("/agent/v1/report")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "text/plain")
            .body(axum::body::Body::from("x"))
            .unwrap();
        assert_eq!(refusal(&a, &plain, Some("127.0.0.1:7420")).unwrap_err().status(), 415);
    }

    #[test]
    fn only_an_orchestrators_token_opens_the_orchestrators_tools() {
        let a = access();
        let worker = a.sessions.token("fix-1", "uid-1");
        let orchestrator = a.sessions.orchestrator_token("demo-orchestrator", "uid-2");
        let spawn = "/agent/v1/orchestrator/spawn";
        assert_eq!(verdict(&a, Method::POST, spawn, Some(&worker)), Err(403));
        assert_eq!(verdict(&a, Method::POST, spawn, Some(&orchestrator)), Ok(Some("demo-orchestrator".into())));
        assert_eq!(
            verdict(&a, Method::POST, "/agent/v1/report", Some(&orchestrator)),
            Ok(Some("demo-orchestrator".into()))
        );
        for path in ["/apis/ao.dev/v1alpha1/sessions", "/metrics", "/"] {
            assert_eq!(verdict(&a, Method::GET, path, Some(&orchestrator)), Err(401), "GET {path}");
        }
        assert_eq!(verdict(&a, Method::POST, spawn, Some("t0ken")), Err(401), "nor does the bearer token");
    }

    #[test]
    fn the_agent_api_takes_no_bearer_token_no_cookie_and_no_forged_token() {
        let a = access();
        let cookie = format!("{}={}", login::COOKIE, a.cookie_key.make(u64::MAX, b"n"));
        let mut with_cookie = request(Method::GET, "/agent/v1/status", None);
        with_cookie.headers_mut().insert("cookie", HeaderValue::from_str(&cookie).unwrap());
        assert_eq!(refusal(&a, &with_cookie, Some("127.0.0.1:7420")).unwrap_err().status(), 401);
        assert_eq!(verdict(&a, Method::GET, "/agent/v1/status", Some("t0ken")), Err(401));
        assert_eq!(verdict(&a, Method::GET, "/agent/v1/status", None), Err(401));
        let other = Access::new("other", "127.0.0.1:7420".parse().unwrap(), &[]);
        let foreign = other.sessions.token("fix-1", "uid-1");
        assert_eq!(verdict(&a, Method::GET, "/agent/v1/status", Some(&foreign)), Err(401));
        // The bearer token and the cookie keep the rest of the API.
        assert_eq!(verdict(&a, Method::GET, "/apis/ao.dev/v1alpha1/sessions", Some("t0ken")), Ok(None));
        let mut page = request(Method::GET, "/apis/ao.dev/v1alpha1/sessions", None);
        page.headers_mut().insert("cookie", HeaderValue::from_str(&cookie).unwrap());
        assert!(refusal(&a, &page, Some("127.0.0.1:7420")).is_ok_and(|c| c.is_none()));
    }

    #[test]
    fn authorities_split() {
        assert_eq!(split_authority("a:1"), ("a", Some("1")));
        assert_eq!(split_authority("a"), ("a", None));
        assert_eq!(split_authority("[::1]:7420"), ("[::1]", Some("7420")));
        assert_eq!(split_authority("[::1]"), ("[::1]", None));
    }
}
