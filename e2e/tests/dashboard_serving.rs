//! The dashboard as the real binary serves it: the page at `/` and its files under `/assets/`,
//! each with its type and the security headers, revalidated by `ETag`, behind the same access
//! checks as the API (no token, or a request from another site's page, gets nothing).

use crate::harness::Server;

/// A GET with the token and extra headers: code, headers, body.
async fn get(server: &Server, path: &str, headers: &[(&str, &str)]) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut r = server.request(reqwest::Method::GET, path);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let resp = r.send().await.unwrap_or_else(|e| panic!("{path}: {e}"));
    (resp.status().as_u16(), resp.headers().clone(), resp.bytes().await.expect("body").to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_its_files_are_served_with_their_types_and_policy() {
    let server = Server::start().await;
    let (code, h, body) = get(&server, "/", &[]).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert_eq!(h["cache-control"], "no-cache");
    let html = String::from_utf8(body).unwrap();

    // Every file the page names is there, with its type.
    let named: Vec<&str> = html.split("\"/assets/").skip(1).map(|r| r.split('"').next().unwrap()).collect();
    assert!(named.contains(&"app.js") && named.contains(&"app.css"), "{named:?}");
    for path in named.iter().chain(&["xterm/xterm.js", "xterm/xterm.css", "xterm/addon-fit.js"]) {
        let (code, h, body) = get(&server, &format!("/assets/{path}"), &[]).await;
        assert_eq!(code, 200, "{path}");
        assert!(!body.is_empty(), "{path}");
        let ct = h["content-type"].to_str().unwrap();
        let want = match path.rsplit('.').next() {
            Some("js") => "text/javascript",
            Some("css") => "text/css",
            Some("svg") => "image/svg+xml",
            other => panic!("{path}: unexpected kind {other:?}"),
        };
        assert!(ct.starts_with(want), "{path}: {ct}");
        assert!(h.contains_key("content-security-policy"), "{path}");
        let etag = h["etag"].to_str().unwrap().to_string();
        let (again, _, body) = get(&server, &format!("/assets/{path}"), &[("if-none-match", &etag)]).await;
        assert_eq!((again, body.len()), (304, 0), "{path} is revalidated");
    }
    for missing in
        ["/assets/nope.js", "/assets/index.html", "/assets/vendor/xterm/LICENSE", "/assets/xterm/xterm.js.map"]
    {
        assert_eq!(get(&server, missing, &[]).await.0, 404, "{missing}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_behind_the_apis_access_checks() {
    let server = Server::start().await;
    let bare = server.http.get(server.url("/")).send().await.expect("GET /");
    assert_eq!(bare.status().as_u16(), 401, "no token, no page");
    let asset = server.http.get(server.url("/assets/app.js")).send().await.expect("GET app.js");
    assert_eq!(asset.status().as_u16(), 401, "no token, no script");
    for (k, v) in [("sec-fetch-site", "cross-site"), ("origin", "http://evil.example")] {
        assert_eq!(get(&server, "/", &[(k, v)]).await.0, 403, "{k}: {v}");
    }
    assert_eq!(get(&server, "/", &[("host", "evil.example")]).await.0, 403, "a rebinding host");
}
