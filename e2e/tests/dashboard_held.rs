//! The session page's held comments in a real browser (headless Chromium) against the GitHub
//! stand-in and the scripted agent: a passer-by's line comment is not typed into the agent, the
//! page lists it with its author, and one click on its button types it, quoted as theirs, once.

use std::time::Duration;

use serde_json::{json, Value};

use crate::browser::Browser;
use crate::dashboard::{login, signed_in};
use crate::github_feedback::{heard, open_pr, STEP};
use crate::lifecycle::{transcript, Cleanup};
use crate::standin::{count, delivered};

/// How long the page may take to follow a change on a loaded machine.
const LIVE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_comment_is_passed_on_by_one_click_and_typed_once() {
    let name = "passon";
    let (gh, number) = open_pr(name, json!({}), json!({})).await;
    let cleanup = Cleanup::new(&gh.server);
    let notes = format!("notes/{name}.md");
    let words = "Log the redirect target before you follow it";
    let comment = json!([{"path": notes, "line": 1, "body": words}]);
    let answer = gh.standin.review(number, "drive-by", "COMMENTED", "A thought.", comment).await;
    delivered(&answer, 202);
    let s = gh
        .server
        .wait_for("sessions", name, STEP, |o| {
            o.pointer("/status/heldComments")
                .and_then(Value::as_array)
                .is_some_and(|h| h.iter().any(|c| c["kind"] == "comment"))
        })
        .await;
    let held = s["status"]["heldComments"].as_array().cloned().unwrap_or_default();
    let id = held.iter().find(|c| c["kind"] == "comment").map(|c| c["id"].clone()).unwrap_or_default();
    let id = id.as_u64().map(|n| n.to_string()).or_else(|| id.as_str().map(String::from)).expect("the comment's id");

    let browser = Browser::launch();
    let (origin, cookie) = login(&gh.server, &browser);
    let page = signed_in(&browser, &origin, &cookie, None, &format!("/#/sessions/{name}"));
    let entry = format!("#session [data-held=\"comment-{id}\"]");
    page.wait_visible(&entry, LIVE);
    let shown = page.text(&entry);
    assert!(shown.contains("drive-by") && shown.contains(words) && shown.contains("(NONE)"), "{shown}");
    assert!(!transcript(&gh.server, name).contains(words), "a held comment was typed before anyone passed it on");

    let button = format!("{entry} [data-action=pass-on]");
    page.click(&button);
    page.wait_until(
        "the button saying it was passed on",
        "(sel) => document.querySelector(sel)?.textContent === 'Passed on'",
        json!(button),
        LIVE,
    );
    let got = "got: ----- BEGIN COMMENT BY drive-by -----";
    let t = heard(&gh, name, got).await;
    assert!(t.contains(words), "the comment's words reached the agent:\n{t}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t = transcript(&gh.server, name);
    assert_eq!(count(&t, got), 1, "the agent got it once:\n{t}");
    assert!(page.attribute(&button, "disabled").is_some(), "the button cannot send it twice");
    let d = page.diagnostics();
    assert!(!d.console_errors.iter().any(|e| e.starts_with("uncaught")), "the page threw: {d:#?}");
    cleanup.finish();
}
