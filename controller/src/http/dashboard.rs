//! The web dashboard (docs/dashboard.md): `GET /` answers its page and `GET /assets/{path}` its scripts,
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
pub(super) const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
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
    asset!("orchestrator.js", JS, "orchestrator.js"),
    asset!("notify.js", JS, "notify.js"),
    asset!("labels.js", JS, "labels.js"),
    asset!("diff.js", JS, "diff.js"),
    asset!("overview.js", JS, "overview.js"),
    asset!("session.js", JS, "session.js"),
    asset!("project.js", JS, "project.js"),
    asset!("create.js", JS, "create.js"),
    asset!("terminal.js", JS, "terminal.js"),
    asset!("hub.js", JS, "hub.js"),
    asset!("stream-worker.js", JS, "stream-worker.js"),
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
pub(super) async fn index(headers: HeaderMap) -> Response {
    answer(INDEX, &headers)
}

/// `GET /assets/{*path}`: one file of the table, or 404.
pub(super) async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
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

    /// The schemas of the kinds the dashboard reads (manifests/schema/, generated from api/).
    fn schemas() -> Vec<(&'static str, serde_json::Value)> {
        [
            ("session", include_str!("../../../manifests/schema/session.json")),
            ("project", include_str!("../../../manifests/schema/project.json")),
            ("gitsource", include_str!("../../../manifests/schema/gitsource.json")),
            ("issuesource", include_str!("../../../manifests/schema/issuesource.json")),
        ]
        .into_iter()
        .map(|(k, text)| (k, serde_json::from_str(text).expect("a schema is JSON")))
        .collect()
    }

    /// Every `x.spec.a.b` and `x.status.a.b` (with or without `?.`) a script reads: the path from
    /// `spec` or `status` on.
    fn paths_read(text: &str) -> Vec<Vec<String>> {
        let bytes = text.as_bytes();
        let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
        let mut found = vec![];
        let mut i = 0;
        while i < bytes.len() {
            let root = ["spec", "status"].into_iter().find(|r| bytes[i..].starts_with(r.as_bytes()));
            let after_dot = i > 0 && bytes[i - 1] == b'.';
            let (Some(root), true) = (root, after_dot) else {
                i += 1;
                continue;
            };
            if bytes.get(i + root.len()).is_some_and(|&b| ident(b)) {
                i += root.len();
                continue;
            }
            // The receiver: not `this` (a view's own fields).
            let mut r = i - 1;
            if r > 0 && bytes[r - 1] == b'?' {
                r -= 1;
            }
            let mut start = r;
            while start > 0 && ident(bytes[start - 1]) {
                start -= 1;
            }
            let receiver = &text[start..r];
            let mut path = vec![root.to_string()];
            let mut j = i + root.len();
            loop {
                let tail = &text[j..];
                let skip = if tail.starts_with("?.") {
                    2
                } else if tail.starts_with('.') {
                    1
                } else {
                    break;
                };
                let name: String =
                    tail[skip..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if name.is_empty() {
                    break;
                }
                j += skip + name.len();
                path.push(name);
            }
            if receiver != "this" && path.len() > 1 {
                found.push(path);
            }
            i = j;
        }
        found
    }

    /// The schemas `schema` stands for: its `$ref` followed, its `anyOf`/`oneOf`/`allOf` spread.
    fn alternatives<'a>(root: &'a serde_json::Value, schema: &'a serde_json::Value) -> Vec<&'a serde_json::Value> {
        if let Some(r) = schema.get("$ref").and_then(|r| r.as_str()) {
            let name = r.strip_prefix("#/$defs/").expect("refs name $defs");
            return alternatives(root, &root["$defs"][name]);
        }
        let mut out = vec![];
        for key in ["anyOf", "oneOf", "allOf"] {
            for s in schema.get(key).and_then(|v| v.as_array()).into_iter().flatten() {
                out.extend(alternatives(root, s));
            }
        }
        if out.is_empty() {
            out.push(schema);
        }
        out
    }

    /// Whether `path` is there in `schema`. Past a string or an array the script reads its own
    /// properties (`length`, `slice`, `map`), which any value of them has.
    fn has_path(root: &serde_json::Value, schema: &serde_json::Value, path: &[String]) -> bool {
        let Some((first, rest)) = path.split_first() else { return true };
        alternatives(root, schema).into_iter().any(|s| {
            let types: Vec<&str> = match &s["type"] {
                serde_json::Value::String(t) => vec![t.as_str()],
                serde_json::Value::Array(ts) => ts.iter().filter_map(|t| t.as_str()).collect(),
                _ => vec![],
            };
            if types.contains(&"string") || types.contains(&"array") {
                return true;
            }
            if let Some(p) = s.get("properties").and_then(|p| p.get(first.as_str())) {
                if has_path(root, p, rest) {
                    return true;
                }
            }
            match s.get("additionalProperties") {
                Some(serde_json::Value::Bool(true)) => true,
                Some(v @ serde_json::Value::Object(_)) => has_path(root, v, rest),
                // A free-form object.
                None => types.contains(&"object") && s.get("properties").is_none(),
                _ => false,
            }
        })
    }

    #[test]
    fn every_spec_and_status_field_the_dashboard_reads_is_in_a_schema() {
        let schemas = schemas();
        let mut read = 0;
        let mut missing = vec![];
        for a in ASSETS.iter().filter(|a| a.content_type == JS && !a.path.starts_with("xterm/")) {
            let text = std::str::from_utf8(a.body).unwrap();
            for path in paths_read(text) {
                read += 1;
                if !schemas.iter().any(|(_, schema)| has_path(schema, schema, &path)) {
                    missing.push(format!("{}: {}", a.path, path.join(".")));
                }
            }
        }
        assert!(read >= 40, "the scan finds what the scripts read ({read} paths)");
        assert!(missing.is_empty(), "fields the dashboard reads that no schema has:\n{}", missing.join("\n"));
        // The check sees a field that is not there, and the one that is.
        let session = &schemas[0].1;
        let wrong = paths_read("s.status.merge.state");
        assert_eq!(wrong, vec![vec!["status".to_string(), "merge".into(), "state".into()]]);
        assert!(!has_path(session, session, &wrong[0]));
        assert!(has_path(session, session, &paths_read("s.status?.merge?.result")[0]));
        // A key in brackets ends the path.
        let keyed = paths_read("s.spec.reactions?.['approved-and-green']");
        assert_eq!(keyed, vec![vec!["spec".to_string(), "reactions".into()]]);
        assert!(has_path(session, session, &keyed[0]));
        assert!(!has_path(session, session, &paths_read("s.spec.reactions?.x")[0]));
        assert!(paths_read("this.status.textContent").is_empty());
    }

    #[test]
    fn the_hub_holds_as_many_subscriptions_on_a_socket_as_the_server_takes() {
        let hub = ASSETS.iter().find(|a| a.path == "hub.js").unwrap();
        let text = std::str::from_utf8(hub.body).unwrap();
        let n = text.split("export const MAX_SUBSCRIPTIONS = ").nth(1).and_then(|r| r.split(';').next()).unwrap();
        assert_eq!(n.parse::<usize>().unwrap(), aoctl_api::stream::MAX_SUBSCRIPTIONS);
        let api = ASSETS.iter().find(|a| a.path == "api.js").unwrap();
        let api = std::str::from_utf8(api.body).unwrap();
        let streams = "/apis/ao.dev/v1alpha1/streams";
        assert!(text.contains(&format!("'{streams}'")), "hub.js connects to {streams}");
        assert!(api.contains("export const API = '/apis/ao.dev/v1alpha1';"));
    }
}
