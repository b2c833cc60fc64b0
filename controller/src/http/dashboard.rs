//! The web dashboard (DESIGN §10): `GET /` answers its page and `GET /assets/{path}` its scripts,
//! styles and the vendored xterm.js, all compiled into the binary from `controller/dashboard/`.
//! Every answer is revalidated (`Cache-Control: no-cache` with an `ETag`), and carries a
//! Content-Security-Policy that lets the page run only its own scripts and be framed by no one.

use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::AppError;

/// The policy of every dashboard answer. Scripts, styles, images, fonts and connections (the
/// API's fetches and the terminal's WebSocket) come only from this origin, no inline script runs,
/// no plugin loads and no other page may frame it. Inline styles are the one thing allowed: the
/// terminal (xterm.js's DOM renderer) writes its theme as `<style>` elements and colours cells of
/// 24-bit colour with `style` attributes. A style can run no script, and with images, fonts and
/// connections held to this origin it has nowhere to send what it reads.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self'; font-src 'self'; connect-src 'self'; \
     object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One file of the dashboard: the path it is served at (below `/assets/`), its media type and
/// its bytes.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

macro_rules! asset {
    ($path:literal, $type:expr, $file:literal) => {
        Asset { path: $path, content_type: $type, body: include_bytes!(concat!("../../dashboard/", $file)) }
    };
}

/// The page itself, served at `/`.
const INDEX: usize = 0;

/// Every file served, the page first. Nothing outside this table is served.
const ASSETS: &[Asset] = &[
    asset!("index.html", HTML, "index.html"),
    asset!("app.css", CSS, "app.css"),
    asset!("app.js", JS, "app.js"),
    asset!("api.js", JS, "api.js"),
    asset!("dom.js", JS, "dom.js"),
    asset!("format.js", JS, "format.js"),
    asset!("group.js", JS, "group.js"),
    asset!("labels.js", JS, "labels.js"),
    asset!("diff.js", JS, "diff.js"),
    asset!("overview.js", JS, "overview.js"),
    asset!("session.js", JS, "session.js"),
    asset!("project.js", JS, "project.js"),
    asset!("create.js", JS, "create.js"),
    asset!("terminal.js", JS, "terminal.js"),
    asset!("icon.svg", SVG, "icon.svg"),
    asset!("xterm/xterm.js", JS, "vendor/xterm/xterm.js"),
    asset!("xterm/xterm.css", CSS, "vendor/xterm/xterm.css"),
    asset!("xterm/addon-fit.js", JS, "vendor/addon-fit/addon-fit.js"),
];

/// The `ETag` of each asset, by its index in [`ASSETS`]: a digest of its bytes, so a new build
/// with changed files is fetched again and an unchanged one is answered `304`.
fn etags() -> &'static [HeaderValue] {
    static TAGS: OnceLock<Vec<HeaderValue>> = OnceLock::new();
    TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let digest = Sha256::digest(a.body);
                HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..12]))).expect("hex is a header value")
            })
            .collect()
    })
}

/// `GET /`: the page.
pub async fn index(headers: HeaderMap) -> Response {
    answer(INDEX, &headers)
}

/// `GET /assets/{*path}`: one file of the table, or 404.
pub async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().position(|a| a.path == path) {
        Some(i) if i != INDEX => answer(i, &headers),
        _ => AppError::NoRoute.into_response(),
    }
}

/// The asset `i`, or `304 Not Modified` when the request already holds this version of it.
fn answer(i: usize, request: &HeaderMap) -> Response {
    let asset = &ASSETS[i];
    let etag = etags()[i].clone();
    let mut response = if holds(request, &etag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type))], asset.body).into_response()
    };
    let h = response.headers_mut();
    h.insert(header::ETAG, etag);
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// Whether `If-None-Match` names `etag` (weakly compared, as RFC 9110 asks for this header) or is `*`.
fn holds(request: &HeaderMap, etag: &HeaderValue) -> bool {
    let ours = etag.to_str().unwrap_or_default();
    request.get_all(header::IF_NONE_MATCH).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(
        |tag| {
            let tag = tag.trim();
            tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == ours
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(r: Response) -> Vec<u8> {
        axum::body::to_bytes(r.into_body(), usize::MAX).await.expect("body").to_vec()
    }

    #[tokio::test]
    async fn the_page_and_its_assets_carry_their_type_and_the_security_headers() {
        let page = index(HeaderMap::new()).await;
        assert_eq!(page.status(), 200);
        let h = page.headers().clone();
        assert_eq!(h[header::CONTENT_TYPE], HTML);
        assert_eq!(h[header::CACHE_CONTROL], "no-cache");
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
        let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        for part in ["default-src 'self'", "script-src 'self';", "frame-ancestors 'none'", "object-src 'none'"] {
            assert!(csp.contains(part), "{part} in {csp}");
        }
        assert!(!csp.contains("unsafe-eval"), "{csp}");
        let html = String::from_utf8(body(page).await).unwrap();
        assert!(html.contains("<script type=\"module\" src=\"/assets/app.js\">"), "{html}");

        for (path, kind) in [("app.js", JS), ("app.css", CSS), ("xterm/xterm.js", JS), ("xterm/addon-fit.js", JS)] {
            let r = asset(Path(path.to_string()), HeaderMap::new()).await;
            assert_eq!(r.status(), 200, "{path}");
            assert_eq!(r.headers()[header::CONTENT_TYPE], kind, "{path}");
            assert!(r.headers().contains_key(header::ETAG), "{path}");
            assert!(!body(r).await.is_empty(), "{path}");
        }
    }

    #[tokio::test]
    async fn unknown_assets_and_the_page_under_assets_are_not_found() {
        for path in ["nope.js", "../Cargo.toml", "index.html", "vendor/xterm/LICENSE", "xterm/xterm.js.map", ""] {
            assert_eq!(asset(Path(path.to_string()), HeaderMap::new()).await.status(), 404, "{path}");
        }
    }

    #[tokio::test]
    async fn a_held_version_is_answered_not_modified() {
        let first = asset(Path("app.js".into()), HeaderMap::new()).await;
        let etag = first.headers()[header::ETAG].clone();
        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, etag.clone());
        let r = asset(Path("app.js".into()), again).await;
        assert_eq!(r.status(), 304);
        assert_eq!(r.headers()[header::ETAG], etag);
        assert!(body(r).await.is_empty());

        let mut listed = HeaderMap::new();
        let weak = format!("\"other\", W/{}", etag.to_str().unwrap());
        listed.insert(header::IF_NONE_MATCH, HeaderValue::from_str(&weak).unwrap());
        assert_eq!(asset(Path("app.js".into()), listed).await.status(), 304);

        let mut stale = HeaderMap::new();
        stale.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"0123\""));
        assert_eq!(asset(Path("app.js".into()), stale).await.status(), 200);
        let css = asset(Path("app.css".into()), HeaderMap::new()).await;
        assert_ne!(css.headers()[header::ETAG], etag, "each file has its own tag");
    }

    #[test]
    fn every_asset_the_page_names_is_served() {
        let html = std::str::from_utf8(ASSETS[INDEX].body).unwrap();
        let named: Vec<&str> = html.split("/assets/").skip(1).map(|rest| rest.split('"').next().unwrap()).collect();
        assert!(named.len() >= 3, "{named:?}");
        for path in named {
            assert!(ASSETS.iter().any(|a| a.path == path), "{path} is named by index.html and not served");
        }
        // And every module and file the scripts load.
        for a in ASSETS.iter().filter(|a| a.content_type == JS && !a.path.starts_with("xterm/")) {
            let text = std::str::from_utf8(a.body).unwrap();
            for imported in text.split("from './").skip(1).map(|rest| rest.split('\'').next().unwrap()) {
                assert!(
                    ASSETS.iter().any(|b| b.path == imported),
                    "{} imports {imported}, which is not served",
                    a.path
                );
            }
            for named in text.split("'/assets/").skip(1).map(|rest| rest.split('\'').next().unwrap()) {
                assert!(ASSETS.iter().any(|b| b.path == named), "{} loads {named}, which is not served", a.path);
            }
        }
        let mut paths: Vec<&str> = ASSETS.iter().map(|a| a.path).collect();
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), ASSETS.len(), "no path twice");
    }

    #[test]
    fn the_new_session_form_offers_every_built_in_agent() {
        let create = ASSETS.iter().find(|a| a.path == "create.js").unwrap();
        let text = std::str::from_utf8(create.body).unwrap();
        let list = text.split("export const AGENTS = [").nth(1).and_then(|r| r.split("];").next()).unwrap();
        let offered: Vec<&str> =
            list.split(',').map(|w| w.trim().trim_matches('\'')).filter(|w| !w.is_empty()).collect();
        assert_eq!(offered, aoctl_api::session::BUILTIN_AGENTS);
    }
}
