//! A project's orchestrator in the dashboard, in a real browser (headless Chromium,
//! e2e/tests/browser.rs) against the real binary and real tmux sessions: the overview's strip of
//! orchestrators and the mark on a worker it spawned, the project page's panel (first on the page,
//! its live transcript, its box that talks to it, Stop through the Project's
//! `spec.orchestrator.stopped`), its workers listed first, and the session pages of the
//! orchestrator (a readonly checkout: no diff, no merge) and of its worker (which names it).
//! The orchestrator's agent is a quiet loop of the shell that says what it heard, and takes its
//! prompt as a file, so nothing waits for tools it does not have.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::browser::{Browser, STEP};
use crate::dashboard::{image, login, signed_in, LIVE};
use crate::harness::{Server, API};
use crate::lifecycle::{agent_repo, project, ready, session, token, wait_all, Cleanup, READY};

/// The orchestrator's agent: says each line it reads, nothing else.
const LISTENER: &str = "while IFS= read -r line; do echo \"orchestrator-heard: $line\"; done";
/// What the person types into the orchestrator from its project's page.
const HELLO: &str = "hello orchestrator";

/// The text of a session's transcript, through the API's log endpoint.
async fn log(server: &Server, name: &str) -> String {
    server.get_path(&format!("{API}/sessions/{name}/log")).await.text().replace('\r', "")
}

/// Waits until the orchestrator's transcript has `heard` in it; the transcript.
async fn heard(server: &Server, name: &str, heard: &str) -> String {
    let deadline = Instant::now() + LIVE;
    loop {
        let text = log(server, name).await;
        if text.contains(heard) {
            return text;
        }
        assert!(Instant::now() < deadline, "{heard:?} is not in the transcript of {name} within {LIVE:?}:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_a_projects_orchestrator_talks_to_it_and_stops_it() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let repo = agent_repo(server.tmp.path(), "shop");
    let orch = "shop-orchestrator";
    let agent = json!({"command": ["sh", "-c", LISTENER, "orchestrator", "{promptFile}"]});
    let spec = json!({"orchestrator": {"agent": agent, "prompt": "Ship the checkout", "limits": {"maxSessions": 3}}});
    server.create("projects", &project("shop", &repo, spec)).await;

    // One worker it spawned (the label the API admits only for the project's own orchestrator),
    // then a session of a person, newer.
    let mut worker = session("checkout-flow", "shop", &token("worker"), json!({}));
    worker["metadata"]["labels"] = json!({"ao.dev/orchestrator": orch});
    server.create("sessions", &worker).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    server.create("sessions", &session("plain-task", "shop", &token("plain"), json!({}))).await;
    let all = wait_all(&server, &[orch, "checkout-flow", "plain-task"], READY, "Ready", ready).await;
    let head = all[0].pointer("/status/workspace/headSha").and_then(Value::as_str).unwrap_or_default().to_string();
    assert_eq!(all[0]["spec"]["role"], "orchestrator", "{:#}", all[0]);
    assert!(head.len() >= 7, "the orchestrator's checkout has a head: {:#}", all[0]);

    let browser = Browser::launch();
    let (origin, cookie) = login(&server, &browser);

    // The overview: a strip with the orchestrator's card, above the groups; the worker's row
    // says who spawned it, in words; the orchestrator has no row while it asks nothing.
    let page = signed_in(&browser, &origin, &cookie, None, "/");
    page.wait_for("#live[data-state=live]", LIVE);
    let card = format!("section.orchestrators:not([hidden]) article.orch-card[data-orchestrator=\"{orch}\"]");
    page.wait_visible(&card, LIVE);
    page.wait_until(
        "one alive worker of three on the card",
        "(sel) => document.querySelector(sel)?.textContent.includes('workers 1 / 3')",
        json!(format!("{card} [data-field=workers]")),
        LIVE,
    );
    assert_eq!(
        page.attribute(&format!("{card} a[data-field=name]"), "href").as_deref(),
        Some(&*format!("#/sessions/{orch}"))
    );
    assert_eq!(page.attribute(&format!("{card} a[data-field=project]"), "href").as_deref(), Some("#/projects/shop"));
    assert!(page.count(&format!("{card} [data-field=activity]")) == 1, "the card shows its activity");
    let order = page.eval(
        "() => { const s = document.querySelector('section.orchestrators'); const g = document.querySelector('section.group'); \
         return !!(s && g && (s.compareDocumentPosition(g) & Node.DOCUMENT_POSITION_FOLLOWING)); }",
        json!(null),
    );
    assert_eq!(order, json!(true), "the strip comes before the groups");
    let mark = "a.session[data-session=\"checkout-flow\"] [data-field=orchestrator]";
    page.wait_visible(mark, LIVE);
    assert_eq!(page.text(mark).trim(), "by orchestrator");
    page.wait_visible("a.session[data-session=\"plain-task\"]", LIVE);
    assert_eq!(
        page.count("a.session[data-session=\"plain-task\"] [data-field=orchestrator]"),
        0,
        "a person's session is not marked"
    );
    let o = server.object("sessions", orch).await.unwrap_or(Value::Null);
    let asks =
        o.pointer("/status/activity/state") == Some(&json!("needs-input")) || o["status"]["phase"] == "NeedsInput";
    if !asks {
        assert_eq!(page.count(&format!("a.session[data-session=\"{orch}\"]")), 0, "the orchestrator has a row: {o:#}");
    }
    let d = page.diagnostics();
    assert!(!d.console_errors.iter().any(|e| e.starts_with("uncaught")), "the overview threw: {d:#?}");

    // The project page: the orchestrator's panel first, its transcript live, its workers first.
    let page = signed_in(&browser, &origin, &cookie, Some((1280, 960)), "/#/projects/shop");
    let panel = format!("section#orchestrator[data-orchestrator=\"{orch}\"]:not([hidden])");
    page.wait_visible(&panel, LIVE);
    let first = page.eval("() => document.querySelector('#project .panel')?.id ?? null", json!(null));
    assert_eq!(first, json!("orchestrator"), "the orchestrator's panel is the page's first");
    page.wait_until(
        "its workers and limit in the panel",
        "(sel) => document.querySelector(sel)?.textContent === '1 of at most 3'",
        json!(format!("{panel} [data-field=workers]")),
        LIVE,
    );
    let rows = page.eval(
        "() => [...document.querySelectorAll('[data-field=sessions] a.session')].map((a) => a.dataset.session)",
        json!(null),
    );
    assert_eq!(rows, json!(["checkout-flow", "plain-task"]), "its worker first, the orchestrator in no row");
    page.wait_for("#orchestrator-transcript[data-state=live]", LIVE);

    // Talking to it: the words reach its agent once, and show in the panel's transcript.
    page.fill("#talk textarea[name=text]", HELLO);
    page.click("#talk button[type=submit]");
    page.wait_until(
        "the answer to the message",
        "() => /delivered|queued/.test(document.querySelector('#toast')?.textContent ?? '')",
        json!(null),
        LIVE,
    );
    let said = format!("orchestrator-heard: {HELLO}");
    heard(&server, orch, &said).await;
    page.wait_until(
        "the message in the panel's transcript",
        "(want) => document.querySelector('#orchestrator-transcript')?.textContent.includes(want)",
        json!(said),
        LIVE,
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let text = log(&server, orch).await;
    assert_eq!(text.matches(&said).count(), 1, "the orchestrator heard it once:\n{text}");
    let left = page.eval("() => document.querySelector('#talk textarea[name=text]').value", json!(null));
    assert_eq!(left, json!(""), "the box is emptied once sent");
    page.eval("() => { document.activeElement?.blur(); window.scrollTo(0, 0); return true; }", json!(null));
    page.screenshot(&image("dashboard-orchestrator.png"), false);

    // Stop: the Project says so, and the reconciler stops its Session.
    page.click("#orchestrator [data-action=stop-orchestrator]");
    server.wait_for("projects", "shop", LIVE, |p| p.pointer("/spec/orchestrator/stopped") == Some(&json!(true))).await;
    let stopped = server
        .wait_for("sessions", orch, LIVE, |s| s["spec"]["stopped"] == json!(true) && s["status"]["phase"] == "Stopped")
        .await;
    assert_eq!(stopped["spec"]["role"], "orchestrator", "{stopped:#}");
    page.wait_for("#orchestrator [data-action=resume-orchestrator]:not([disabled])", LIVE);
    page.wait_for("#orchestrator [data-action=stop-orchestrator][disabled]", STEP);
    let p = server.object("projects", "shop").await.unwrap_or(Value::Null);
    assert_eq!(p["spec"]["orchestrator"]["limits"]["maxSessions"], 3, "the patch changed nothing else: {p:#}");
    assert_eq!(p["spec"]["orchestrator"]["prompt"], "Ship the checkout", "{p:#}");

    // The orchestrator's own page: its readonly checkout, and no diff or merge.
    let page = signed_in(&browser, &origin, &cookie, None, &format!("/#/sessions/{orch}"));
    page.wait_for(&format!("section#session[data-session=\"{orch}\"]"), LIVE);
    let checkout = format!("readonly checkout at {}", &head[..7]);
    page.wait_until(
        "its readonly checkout in the header",
        "(want) => document.querySelector('#session [data-field=checkout]')?.textContent === want",
        json!(checkout),
        LIVE,
    );
    page.wait_for("#session .changes-panel[hidden]", STEP);
    page.wait_for("#session [data-action=merge][hidden]", STEP);
    assert!(page.count("#session .changes-panel:not([hidden])") == 0, "no diff for a session without a branch");

    // A worker's page names its orchestrator.
    let page = signed_in(&browser, &origin, &cookie, None, "/#/sessions/checkout-flow");
    let by = "#session [data-field=orchestrator] a";
    page.wait_visible(by, LIVE);
    assert_eq!(page.attribute(by, "href").as_deref(), Some(&*format!("#/sessions/{orch}")));
    assert_eq!(page.text(by), orch);
    page.wait_visible("#session .changes-panel", LIVE);
    let d = page.diagnostics();
    assert!(!d.console_errors.iter().any(|e| e.starts_with("uncaught")), "the page threw: {d:#?}");

    // Taking spec.orchestrator away removes its Session; then every other goes.
    let r = server.json("PATCH", &format!("{API}/projects/shop"), &json!({"spec": {"orchestrator": null}})).await;
    assert_eq!(r.code, 200, "{}", r.text());
    let deadline = Instant::now() + READY;
    while server.object("sessions", orch).await.is_some() {
        assert!(Instant::now() < deadline, "the orchestrator's Session is not removed within {READY:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cleanup.finish();
}
