//! Signing a browser in to the dashboard without a browser: `aoctl dashboard` prints a link with a
//! one-time code; following it once sets an HttpOnly, SameSite=Strict cookie that then stands in
//! for the bearer token (same-origin requests only); anything else is refused.

use std::time::{Duration, Instant};

use crate::harness::{Server, API};

/// The link `aoctl dashboard` prints, checked to be alone on the last line.
fn login_link(server: &Server) -> String {
    let started = Instant::now();
    let out = server.aoctl(&["dashboard"]);
    out.ok();
    assert!(started.elapsed() < Duration::from_secs(10), "aoctl dashboard should exit at once:\n{out}");
    let last = out.stdout.lines().last().unwrap_or("").to_string();
    assert!(last.starts_with(&server.url("/login?code=")), "the link should be alone on the last line:\n{out}");
    assert!(!out.stdout.contains(&server.token), "the token must never be printed:\n{out}");
    last
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("HTTP client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_link_works_once_and_its_cookie_stands_in_for_the_token() {
    let server = Server::start().await;
    let http = no_redirects();
    let link = login_link(&server);

    let resp = http.get(&link).send().await.expect("follow the link");
    assert_eq!(resp.status().as_u16(), 303, "{:?}", resp.headers());
    assert_eq!(resp.headers()["location"], "/");
    let set = resp.headers()["set-cookie"].to_str().expect("ASCII").to_string();
    for attr in ["aoctl_dashboard=", "HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
        assert!(set.contains(attr), "{attr} missing from {set}");
    }
    let cookie = set.split(';').next().expect("name=value").to_string();

    // A code works once.
    let again = http.get(&link).send().await.expect("follow again");
    assert_eq!(again.status().as_u16(), 401);
    assert!(again.headers().get("set-cookie").is_none());
    assert!(again.text().await.unwrap_or_default().contains("aoctl dashboard"), "the page says what to do");

    // The cookie opens the page and the API, from the page's own origin.
    let sessions = format!("{API}/sessions");
    for path in ["/", sessions.as_str()] {
        let ok = http.get(server.url(path)).header("cookie", &cookie).send().await.expect("request");
        assert_eq!(ok.status().as_u16(), 200, "{path} with the cookie");
    }
    let same_origin = http
        .get(server.url(&sessions))
        .header("cookie", &cookie)
        .header("origin", &server.base)
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .expect("request");
    assert_eq!(same_origin.status().as_u16(), 200);
    let foreign = http
        .get(server.url(&sessions))
        .header("cookie", &cookie)
        .header("origin", "http://evil.example")
        .send()
        .await
        .expect("request");
    assert_eq!(foreign.status().as_u16(), 403, "another origin's page, even with the cookie");

    // Without it, or with a forged one, nothing is served: the page answers how to sign in.
    let forged = cookie.replace("v1.", "v1.9").to_string();
    for jar in [None, Some(forged.as_str()), Some("aoctl_dashboard=")] {
        let mut r = http.get(server.url("/"));
        if let Some(c) = jar {
            r = r.header("cookie", c);
        }
        let resp = r.send().await.expect("request");
        assert_eq!(resp.status().as_u16(), 401, "{jar:?}");
        assert!(resp.headers()["content-type"].to_str().unwrap_or("").starts_with("text/html"));
        let mut r = http.get(server.url(&sessions));
        if let Some(c) = jar {
            r = r.header("cookie", c);
        }
        assert_eq!(r.send().await.expect("request").status().as_u16(), 401, "{jar:?}");
    }

    // A code is only ever made for the token: the cookie cannot mint more.
    let minted = http
        .post(server.url("/dashboard/login"))
        .header("cookie", &cookie)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("request");
    assert_eq!(minted.status().as_u16(), 401);
    assert_eq!(http.get(server.url("/login?code=")).send().await.expect("request").status().as_u16(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_followed_from_another_site_signs_in_through_a_page_of_our_own() {
    let server = Server::start().await;
    let link = login_link(&server);
    let resp = no_redirects().get(&link).header("sec-fetch-site", "cross-site").send().await.expect("follow");
    // A browser sends no SameSite=Strict cookie on a redirect another site started, so the page
    // moves on by itself.
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp.headers()["set-cookie"].to_str().unwrap_or("").contains("SameSite=Strict"));
    assert_eq!(resp.headers()["refresh"], "0; url=/");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_open_hands_the_link_to_the_browser() {
    let server = Server::start().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let seen = tmp.path().join("seen");
    let browser = tmp.path().join("browser");
    std::fs::write(&browser, format!("#!/bin/sh\nprintf '%s\\n' \"$1\" >{}\n", seen.display())).expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let mut cmd = server.cli();
    cmd.args(["dashboard", "--open"]).env("BROWSER", &browser);
    let out = crate::harness::run(cmd, None);
    out.ok();
    let link = out.stdout.lines().last().unwrap_or("").to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let opened = std::fs::read_to_string(&seen).unwrap_or_default();
    assert_eq!(opened.trim(), link, "the browser got the printed link");
    let resp = no_redirects().get(&link).send().await.expect("follow");
    assert_eq!(resp.status().as_u16(), 303, "the link still works once the browser has it");
}
