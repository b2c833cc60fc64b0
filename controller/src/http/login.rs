//! The dashboard's sign-in (docs/dashboard.md, "Opening it"): `POST /dashboard/login` (bearer token) makes a one-time
//! code valid for a minute; `GET /login?code=…` trades it for a cookie and sends the browser to
//! `/`. The cookie is HttpOnly and SameSite=Strict and carries no secret of the server's: it is an
//! expiry and a nonce signed with a key derived from the bearer token, so it survives a restart
//! and a new token signs every browser out.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aoctl_api::wire::LoginCode;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use sha2::Sha256;

use super::{AppError, AppState};

/// The cookie's name.
pub(super) const COOKIE: &str = "aoctl_dashboard";
/// How long a login code can be used.
pub(super) const CODE_TTL: Duration = Duration::from_secs(60);
/// How long a browser stays signed in.
pub(super) const COOKIE_TTL: Duration = Duration::from_secs(24 * 3600);
/// Codes outstanding at once; older ones are dropped past this.
const MAX_CODES: usize = 64;

/// The codes handed out and not yet used, by code, with the instant each stops working.
#[derive(Debug, Default)]
pub(super) struct LoginCodes {
    codes: Mutex<HashMap<String, Instant>>,
}

impl LoginCodes {
    /// A new code, valid for [`CODE_TTL`] from `now`.
    pub(super) fn issue(&self, now: Instant) -> Result<String, AppError> {
        let code = hex::encode(random::<24>()?);
        let mut codes = self.codes.lock();
        codes.retain(|_, until| *until > now);
        if codes.len() >= MAX_CODES {
            // The oldest code goes: a caller with the token asking for many cannot lock others out.
            if let Some(oldest) = codes.iter().min_by_key(|(_, until)| **until).map(|(c, _)| c.clone()) {
                codes.remove(&oldest);
            }
        }
        codes.insert(code.clone(), now + CODE_TTL);
        Ok(code)
    }

    /// Takes `code` if it was issued and is still valid: a code works once.
    pub(super) fn redeem(&self, code: &str, now: Instant) -> bool {
        let mut codes = self.codes.lock();
        // Compared in constant time against every outstanding code, so timing tells nothing.
        let found = codes.keys().find(|c| constant_time_eq(c.as_bytes(), code.as_bytes())).cloned();
        match found.and_then(|c| codes.remove(&c)) {
            Some(until) => until > now,
            None => false,
        }
    }
}

fn random<const N: usize>() -> Result<[u8; N], AppError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| AppError::Internal(format!("no random source: {e}")))?;
    Ok(bytes)
}

/// Signs and checks cookies with a key derived from the bearer token.
#[derive(Clone)]
pub(super) struct CookieKey([u8; 32]);

impl std::fmt::Debug for CookieKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CookieKey(..)")
    }
}

type HmacSha256 = Hmac<Sha256>;

impl CookieKey {
    pub(super) fn from_token(token: &str) -> CookieKey {
        let mut mac = HmacSha256::new_from_slice(token.as_bytes()).expect("HMAC takes any key length");
        mac.update(b"aoctl dashboard cookie v1");
        CookieKey(mac.finalize().into_bytes().into())
    }

    fn sign(&self, payload: &str) -> String {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(payload.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// A cookie value valid until `expires` (seconds since the Unix epoch).
    pub(super) fn make(&self, expires: u64, nonce: &[u8]) -> String {
        let payload = format!("v1.{expires}.{}", hex::encode(nonce));
        let signature = self.sign(&payload);
        format!("{payload}.{signature}")
    }

    /// Whether `value` is a cookie this key signed that has not expired at `now` (Unix seconds).
    pub(super) fn verify(&self, value: &str, now: u64) -> bool {
        let Some((payload, signature)) = value.rsplit_once('.') else { return false };
        let mut parts = payload.split('.');
        let (Some("v1"), Some(expires), Some(_nonce), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        let Ok(expires) = expires.parse::<u64>() else { return false };
        constant_time_eq(self.sign(payload).as_bytes(), signature.as_bytes()) && expires > now
    }

    /// Whether the request's `Cookie` headers carry a valid dashboard cookie.
    pub(super) fn signed_in(&self, headers: &HeaderMap) -> bool {
        let now = unix_now();
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| name == COOKIE && self.verify(value, now))
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `POST /dashboard/login`: a one-time code. Only the bearer token may ask (not the cookie).
pub(super) async fn issue(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, AppError> {
    if !state.access.token_matches(&headers) {
        return Err(AppError::Unauthorized);
    }
    let code = state.access.logins.issue(Instant::now())?;
    let body = LoginCode { path: format!("/login?code={code}"), code, expires_in_seconds: CODE_TTL.as_secs() };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct LoginParams {
    #[serde(default)]
    code: String,
}

/// `GET /login?code=…`: a valid code sets the cookie and sends the browser to `/`; any other
/// answer is a page saying how to get a new link.
pub(super) async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    params: Result<Query<LoginParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let code = params.map(|Query(p)| p.code).unwrap_or_default();
    if code.is_empty() || !state.access.logins.redeem(&code, Instant::now()) {
        return page(
            StatusCode::UNAUTHORIZED,
            "This sign-in link was used already or has expired. Run <code>aoctl dashboard</code> for a new one.",
        );
    }
    let nonce = match random::<16>() {
        Ok(n) => n,
        Err(e) => return e.into_response(),
    };
    let value = state.access.cookie_key.make(unix_now() + COOKIE_TTL.as_secs(), &nonce);
    let cookie = format!("{COOKIE}={value}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict", COOKIE_TTL.as_secs());
    // A link followed from another site's page: a browser does not send a SameSite=Strict cookie
    // on a redirect that other site started, so the page moves on by itself, from this origin.
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()).unwrap_or("none");
    if matches!(site, "cross-site" | "same-site") {
        let mut res = page(StatusCode::OK, "Signed in. Opening the dashboard…");
        res.headers_mut().insert(header::REFRESH, header::HeaderValue::from_static("0; url=/"));
        res.headers_mut().insert(header::SET_COOKIE, cookie.parse().expect("a cookie of ASCII"));
        return res;
    }
    (StatusCode::SEE_OTHER, [(header::LOCATION, "/".to_string()), (header::SET_COOKIE, cookie)]).into_response()
}

/// A small HTML page with one message (the message is ours, never the caller's).
pub(super) fn page(code: StatusCode, message: &'static str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width, initial-scale=1\"><title>aoctl</title></head><body \
         style=\"font-family: system-ui, sans-serif; max-width: 36rem; margin: 4rem auto; padding: 0 1rem\">\
         <h1>aoctl</h1><p>{message}</p></body></html>"
    );
    let mut res = (code, Html(html)).into_response();
    res.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static("default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"),
    );
    res
}

/// Compares without an early exit, so the time taken does not reveal how much of a guess was right.
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_works_once_and_for_a_minute() {
        let codes = LoginCodes::default();
        let t0 = Instant::now();
        let a = codes.issue(t0).unwrap();
        let b = codes.issue(t0).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 48);
        assert!(codes.redeem(&a, t0 + Duration::from_secs(59)));
        assert!(!codes.redeem(&a, t0 + Duration::from_secs(59)), "a second use");
        assert!(!codes.redeem(&b, t0 + CODE_TTL), "an expired code");
        assert!(!codes.redeem(&b, t0), "an expired code is gone once tried");
        assert!(!codes.redeem("", t0));
        assert!(!codes.redeem("nonsense", t0));
    }

    #[test]
    fn outstanding_codes_are_bounded() {
        let codes = LoginCodes::default();
        let t0 = Instant::now();
        let first = codes.issue(t0).unwrap();
        for i in 1..=MAX_CODES as u64 {
            codes.issue(t0 + Duration::from_millis(i)).unwrap();
        }
        assert_eq!(codes.codes.lock().len(), MAX_CODES);
        assert!(!codes.redeem(&first, t0), "the oldest went");
    }

    #[test]
    fn cookies_are_signed_by_the_token_and_expire() {
        let key = CookieKey::from_token("t0ken");
        let value = key.make(1_000, b"nonce");
        assert!(key.verify(&value, 999));
        assert!(!key.verify(&value, 1_000), "expired");
        assert!(!CookieKey::from_token("other").verify(&value, 999), "another token's key");
        let forged = value.replacen("v1.1000", "v1.9999", 1);
        assert!(!key.verify(&forged, 999), "a changed expiry breaks the signature");
        for bad in ["", "v1", "v1.1.2", "v1.x.6e.00", "v2.1000.6e.00", "v1.1000.6e.00.extra"] {
            assert!(!key.verify(bad, 0), "{bad}");
        }
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let key = CookieKey::from_token("t");
        let value = key.make(unix_now() + 60, b"n");
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, format!("a=b; {COOKIE}={value}; c=d").parse().unwrap());
        assert!(key.signed_in(&headers));
        let mut other = HeaderMap::new();
        other.insert(header::COOKIE, format!("x{COOKIE}={value}").parse().unwrap());
        assert!(!key.signed_in(&other));
        assert!(!key.signed_in(&HeaderMap::new()));
    }
}
