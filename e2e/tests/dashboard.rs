//! The web dashboard in a real browser (headless Chromium, e2e/tests/browser.rs) against the real
//! binary and real tmux sessions of the scripted agent: the one-time login link of `aoctl
//! dashboard` and its cookie, the overview's groups and title following agents live, typing into
//! an agent's terminal, a comment on a diff line, a phone-sized screen (the live connections are
//! in `dashboard_streams.rs`). Elements are found only by the attributes and ids the page promises (its DOM contract).
//! The screenshots in docs/images/ are taken by these tests on each run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::browser::{Browser, Options, Page, STEP};
use crate::harness::{run_for, Server, API, NO_REPO};
use crate::lifecycle::{
    agent_committed, agent_repo, eventually, phase, project, ready, session, tip, token, transcript, wait_all,
    workspace, Cleanup, READY,
};

/// The overview's groups, in the order the page shows them.
const GROUPS: [&str; 8] =
    ["needs-input", "stuck", "ci-failed", "changes-requested", "ready-to-merge", "working", "idle", "done"];
/// The groups that ask for a person's attention, counted in the title.
const ATTENTION: usize = 5;
/// The name of the dashboard's cookie.
pub(crate) const COOKIE: &str = "aoctl_dashboard";
/// How long the page may take to follow a change of the store on a loaded machine.
pub(crate) const LIVE: Duration = Duration::from_secs(30);

/// The title's label of a group.
fn label(group: &str) -> &'static str {
    match group {
        "needs-input" => "needs input",
        "stuck" => "stuck",
        "ci-failed" => "CI failed",
        "changes-requested" => "changes requested",
        "ready-to-merge" => "ready to merge",
        "working" => "working",
        "idle" => "idle",
        "done" => "done",
        other => panic!("no group {other}"),
    }
}

/// The group a session of this phase belongs in, for the phases whose group is beyond doubt.
fn group_of(phase: &str) -> Option<&'static str> {
    Some(match phase {
        "NeedsInput" => "needs-input",
        "Stuck" => "stuck",
        "CIFailed" => "ci-failed",
        "ChangesRequested" => "changes-requested",
        "Mergeable" => "ready-to-merge",
        "Working" => "working",
        "Idle" => "idle",
        "Merged" => "done",
        _ => return None,
    })
}

/// The title the page promises for these group sizes (in [`GROUPS`] order).
fn title_for(sizes: &[usize]) -> String {
    if sizes.iter().sum::<usize>() == 0 {
        return "aoctl".to_string();
    }
    let attention: usize = sizes[..ATTENTION].iter().sum();
    let parts: Vec<String> =
        GROUPS.iter().zip(sizes).filter(|(_, n)| **n > 0).map(|(g, n)| format!("{n} {}", label(g))).collect();
    let count = if attention > 0 { format!("({attention}) ") } else { String::new() };
    format!("{count}aoctl — {}", parts.join(", "))
}

/// A phase as words to compare, whatever its case and separators: `NeedsInput` and `needs input`
/// read the same.
fn words(phase: &str) -> String {
    phase.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

/// A file of docs/images/, where the tests put their screenshots.
pub(crate) fn image(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/images").join(name)
}

/// Runs `aoctl dashboard` against `server`: it must exit at once, printing its login link alone on
/// the last line. The link.
fn dashboard_link(server: &Server) -> String {
    let mut cmd = server.cli();
    cmd.arg("dashboard");
    let started = Instant::now();
    let out = run_for(cmd, None, Duration::from_secs(30));
    let took = started.elapsed();
    out.ok();
    assert!(took < Duration::from_secs(10), "aoctl dashboard took {took:?} to exit:\n{out}");
    let last = out.stdout.lines().last().unwrap_or_default();
    assert_eq!(last, last.trim(), "the link is alone on its line:\n{out}");
    let code = last
        .strip_prefix(&format!("http://127.0.0.1:{}/login?code=", server.port))
        .or_else(|| last.strip_prefix(&format!("http://localhost:{}/login?code=", server.port)))
        .unwrap_or_else(|| panic!("the last line is no login link to the server:\n{out}"));
    assert!(
        !code.is_empty() && code.chars().all(|c| c.is_ascii_alphanumeric() || "-_".contains(c)),
        "the code is one URL-safe word:\n{out}"
    );
    assert!(!out.stdout.contains(&server.token), "the token is not printed:\n{out}");
    last.to_string()
}

/// The origin (`http://host:port`) of a link.
fn origin_of(link: &str) -> String {
    let rest = link.strip_prefix("http://").expect("an http link");
    format!("http://{}", rest.split('/').next().unwrap_or_default())
}

/// The dashboard's cookie among a context's cookies.
fn dashboard_cookie(cookies: &[Value]) -> Option<Value> {
    cookies.iter().find(|c| c["name"] == COOKIE).cloned()
}

/// Logs in with a new link in a context of its own: the dashboard's origin and its cookie, which
/// other contexts then start with.
pub(crate) fn login(server: &Server, browser: &Browser) -> (String, Value) {
    let link = dashboard_link(server);
    let page = browser.open(Options::default());
    let nav = page.goto(&link);
    assert_eq!(nav.status, Some(200), "the link leads to the page: {nav:?}");
    let cookie = dashboard_cookie(&page.cookies()).unwrap_or_else(|| page.fail("log in", "no dashboard cookie"));
    (origin_of(&link), cookie)
}

/// A page with the dashboard's cookie, at `path` of the dashboard.
pub(crate) fn signed_in(
    browser: &Browser,
    origin: &str,
    cookie: &Value,
    viewport: Option<(u32, u32)>,
    path: &str,
) -> Page {
    let page = browser.open(Options { cookies: vec![cookie.clone()], viewport, ..Options::default() });
    let nav = page.goto(&format!("{origin}{path}"));
    assert_eq!(nav.status, Some(200), "{path} with the cookie: {nav:?}");
    page
}

/// The overview as the page shows it: each `section.group` in document order with whether it is
/// hidden, its `.count` and its rows (name, href, phase text); and the document's title.
const OVERVIEW: &str = r#"() => ({
  title: document.title,
  groups: [...document.querySelectorAll('section.group')].map((s) => ({
    key: s.dataset.group,
    hidden: s.hidden,
    count: (s.querySelector('.count')?.textContent ?? '').trim(),
    rows: [...s.querySelectorAll('a.session')].map((a) => ({
      name: a.dataset.session,
      href: a.getAttribute('href'),
      phase: (a.querySelector('[data-field=phase]')?.textContent ?? '').trim(),
    })),
  })),
})"#;

/// Wraps the page's `Notification` so that every notification shown (the browser's own, still
/// made) is noted by title in `localStorage['test.shown']`.
const COUNT_NOTIFICATIONS: &str = r#"(() => {
  const Real = window.Notification;
  if (!Real) return;
  class Noted extends Real {
    constructor(title, options) {
      super(title, options);
      const shown = JSON.parse(localStorage.getItem('test.shown') ?? '[]');
      shown.push(title);
      localStorage.setItem('test.shown', JSON.stringify(shown));
    }
  }
  window.Notification = Noted;
})();"#;

/// Notes in `window.__aoctlRedrawn` the session of every row the overview draws from now on.
const REDRAWN: &str = r#"() => {
  window.__aoctlRedrawn = [];
  new MutationObserver((records) => {
    for (const r of records) for (const n of r.addedNodes) {
      if (n.matches?.('a.session')) window.__aoctlRedrawn.push(n.dataset.session);
    }
  }).observe(document.getElementById('view'), { childList: true, subtree: true });
  return true;
}"#;

/// Where each session's row is: name → (group, phase text).
type Rows = std::collections::BTreeMap<String, (String, String)>;

/// Checks the overview against the page's contract and the sessions the API lists: every group
/// in order, hidden exactly when empty, its count its rows; every session in one row linking to
/// its page, in the group its phase calls for; the title counting the groups. The rows.
fn check_overview(shown: &Value, sessions: &[Value]) -> Result<Rows, String> {
    let groups = shown["groups"].as_array().cloned().unwrap_or_default();
    let keys: Vec<&str> = groups.iter().map(|g| g["key"].as_str().unwrap_or("")).collect();
    if keys != GROUPS {
        return Err(format!("groups in the page: {keys:?}, promised {GROUPS:?}"));
    }
    let mut rows = Rows::new();
    let mut sizes = vec![];
    for g in &groups {
        let key = g["key"].as_str().unwrap_or("");
        let in_it = g["rows"].as_array().cloned().unwrap_or_default();
        if g["hidden"].as_bool() != Some(in_it.is_empty()) {
            return Err(format!("group {key} with {} rows has hidden={}", in_it.len(), g["hidden"]));
        }
        if !in_it.is_empty() && g["count"].as_str() != Some(in_it.len().to_string().as_str()) {
            return Err(format!("group {key} has {} rows and shows the count {}", in_it.len(), g["count"]));
        }
        for r in &in_it {
            let name = r["name"].as_str().unwrap_or("").to_string();
            if r["href"].as_str() != Some(format!("#/sessions/{name}").as_str()) {
                return Err(format!("the row of {name} links to {}", r["href"]));
            }
            let text = r["phase"].as_str().unwrap_or("").to_string();
            if rows.insert(name.clone(), (key.to_string(), text)).is_some() {
                return Err(format!("{name} has two rows"));
            }
        }
        sizes.push(in_it.len());
    }
    let mut listed: Vec<String> =
        sessions.iter().map(|s| s["metadata"]["name"].as_str().unwrap_or("").to_string()).collect();
    listed.sort();
    let names: Vec<String> = rows.keys().cloned().collect();
    if names != listed {
        return Err(format!("rows of {names:?}; the API lists {listed:?}"));
    }
    for s in sessions {
        let name = s["metadata"]["name"].as_str().unwrap_or("");
        let (group, text) = &rows[name];
        let p = phase(s);
        if words(text) != words(p) {
            return Err(format!("the row of {name} shows the phase {text:?}; it is {p}"));
        }
        if let Some(want) = group_of(p) {
            if group != want {
                return Err(format!("{name} ({p}) is in group {group}, not {want}"));
            }
        }
    }
    let want = title_for(&sizes);
    if shown["title"].as_str() != Some(want.as_str()) {
        return Err(format!("the title is {}; for these groups it is {want:?}", shown["title"]));
    }
    Ok(rows)
}

/// Waits until the overview agrees with the API (see [`check_overview`]); the rows.
async fn overview_agrees(server: &Server, page: &Page) -> Rows {
    let deadline = Instant::now() + LIVE;
    loop {
        let sessions = server.get_path(&format!("{API}/sessions")).await.expect(200)["items"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let shown = page.eval(OVERVIEW, json!(null));
        match check_overview(&shown, &sessions) {
            Ok(rows) => return rows,
            Err(e) if Instant::now() > deadline => page.fail("the overview as the API lists the sessions", &e),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The lines the scripted agent says it got.
pub(crate) fn got(server: &Server, name: &str) -> Vec<String> {
    let text = transcript(server, name).replace('\r', "");
    text.lines().filter_map(|l| l.split_once("demo-agent: got: ").map(|(_, m)| m.trim().to_string())).collect()
}

/// Starts a project on a repository with the scripted agent and one session of it per name, and
/// waits until every agent has committed its note and waits for input.
pub(crate) async fn agents(server: &Server, project_name: &str, names: &[&str]) -> PathBuf {
    let repo = agent_repo(server.tmp.path(), project_name);
    server.create("projects", &project(project_name, &repo, json!({}))).await;
    for n in names {
        server.create("sessions", &session(n, project_name, &token(n), json!({}))).await;
    }
    wait_all(server, names, READY, "Ready", ready).await;
    for n in names {
        agent_committed(&repo, &format!("{project_name}/{n}"), n).await;
    }
    repo
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_login_link_sets_a_strict_http_only_cookie_once_and_nothing_shows_without_it() {
    let server = Server::start().await;
    // Sessions of a project without a repository: rows to show, no agent to run.
    server.create("projects", &crate::harness::project("vault", NO_REPO)).await;
    for name in ["secret-alpha", "secret-beta"] {
        server.create("sessions", &crate::harness::session(name, "vault", "Rotate the keys")).await;
    }
    let browser = Browser::launch();

    let link = dashboard_link(&server);
    let origin = origin_of(&link);
    let page = browser.open(Options::default());
    let nav = page.goto(&link);
    assert_eq!(nav.status, Some(200), "{nav:?}");
    let landed = nav.url.split('#').next().unwrap_or_default().to_string();
    assert_eq!(landed, format!("{origin}/"), "the link redirects to the overview: {nav:?}");
    for name in ["secret-alpha", "secret-beta"] {
        page.wait_visible(&format!("section.group:not([hidden]) a.session[data-session=\"{name}\"]"), LIVE);
    }
    let cookie = dashboard_cookie(&page.cookies()).unwrap_or_else(|| page.fail("the login", "no dashboard cookie"));
    assert_eq!(cookie["httpOnly"], true, "{cookie:#}");
    assert_eq!(cookie["sameSite"], "Strict", "{cookie:#}");
    assert_eq!(cookie["path"], "/", "{cookie:#}");
    assert!(cookie["value"].as_str().is_some_and(|v| !v.is_empty() && !v.contains(&server.token)), "{cookie:#}");
    let seen = page.eval("() => document.cookie", json!(null));
    assert!(!seen.as_str().unwrap_or_default().contains(COOKIE), "scripts cannot read the cookie: {seen}");

    // The same link a second time, in a browser without the cookie: refused, nothing shown.
    let again = browser.open(Options::default());
    let nav = again.goto(&link);
    assert!(nav.status.is_some_and(|s| s >= 400), "a used code is refused: {nav:?}");
    assert!(dashboard_cookie(&again.cookies()).is_none(), "a used code sets no cookie");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let body = again.eval("() => document.documentElement.outerHTML", json!(null));
    assert!(!body.as_str().unwrap_or_default().contains("secret-"), "a refused link shows no session: {body}");

    // A page without the cookie: 401, a hint to run `aoctl dashboard`, and no session data,
    // neither in the page nor from the API.
    let stranger = browser.open(Options::default());
    let nav = stranger.goto(&format!("{origin}/"));
    assert_eq!(nav.status, Some(401), "{nav:?}");
    let text = stranger.text("body");
    assert!(text.contains("aoctl dashboard"), "the refusal tells what to run: {text}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(stranger.count("a.session"), 0, "no rows without the cookie");
    let body = stranger.eval("() => document.documentElement.outerHTML", json!(null));
    assert!(!body.as_str().unwrap_or_default().contains("secret-"), "no session data without the cookie: {body}");
    let nav = stranger.goto(&format!("{origin}{API}/sessions"));
    assert_eq!(nav.status, Some(401), "the API without the cookie: {nav:?}");
    let body = stranger.text("body");
    assert!(!body.contains("secret-"), "the API shows no session without the cookie: {body}");

    // The cookie alone lets another browser context in.
    let other = signed_in(&browser, &origin, &cookie, None, "/");
    other.wait_visible("a.session[data-session=\"secret-beta\"]", LIVE);
    let d = page.diagnostics();
    assert!(!d.console_errors.iter().any(|e| e.starts_with("uncaught")), "the page threw: {d:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_groups_the_sessions_and_moves_an_agent_that_asks_without_a_reload() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let names = ["api-docs", "login-form", "search-box", "sign-up"];
    agents(&server, "web", &names).await;
    let browser = Browser::launch();
    let (origin, cookie) = login(&server, &browser);

    // The browser's notifications are allowed in this context, and each one shown is noted in
    // the profile's storage (shared by its tabs and kept across reloads).
    let page = browser.open(Options {
        cookies: vec![cookie.clone()],
        permissions: vec!["notifications"],
        init_script: Some(COUNT_NOTIFICATIONS.into()),
        ..Options::default()
    });
    assert_eq!(page.goto(&format!("{origin}/")).status, Some(200));
    page.wait_for("#live[data-state=live]", LIVE);
    let rows = overview_agrees(&server, &page).await;
    assert_eq!(rows.len(), names.len(), "{rows:#?}");
    // A second tab of the same browser, and the person's one click on the bell in the first.
    let other = page.new_tab(&format!("{origin}/"));
    other.wait_for("#live[data-state=live]", LIVE);
    page.wait_for("#notify[data-state=off]", STEP);
    page.click("#notify");
    page.wait_for("#notify[data-state=on]", STEP);
    other.wait_for("#notify[data-state=on]", STEP);

    // The agent asks a person: its row moves to needs-input in the same document; no other row
    // is drawn again.
    page.eval("() => { window.__aoctlKept = 'the same document'; return true; }", json!(null));
    page.eval(REDRAWN, json!(null));
    let r =
        server.json("POST", &format!("{API}/sessions/login-form/input"), &json!({"text": "ask before the edit"})).await;
    assert!(r.code == 200 || r.code == 202, "{}", r.text());
    page.wait_until(
        "login-form in the needs-input group",
        r#"(n) => !!document.querySelector(`section.group[data-group="needs-input"]:not([hidden]) a.session[data-session="${n}"]`)"#,
        json!("login-form"),
        LIVE,
    );
    let kept = page.eval("() => window.__aoctlKept ?? null", json!(null));
    assert_eq!(kept, "the same document", "the page was not reloaded");
    server
        .wait_for("sessions", "login-form", LIVE, |o| {
            o.pointer("/status/activity/state") == Some(&json!("needs-input"))
        })
        .await;
    let rows = overview_agrees(&server, &page).await;
    assert_eq!(rows["login-form"].0, "needs-input", "{rows:#?}");
    let title = page.eval("() => document.title", json!(null));
    assert!(title.as_str().is_some_and(|t| t.starts_with("(1) aoctl — 1 needs input")), "the title: {title}");
    let redrawn = page.eval("() => [...new Set(window.__aoctlRedrawn)]", json!(null));
    assert_eq!(redrawn, json!(["login-form"]), "rows drawn again for one session's change");

    // Told once across both tabs, and not again after a reload.
    let told = || page.eval("() => JSON.parse(localStorage.getItem('test.shown') ?? '[]')", json!(null));
    page.wait_until(
        "one notification",
        "() => (JSON.parse(localStorage.getItem('test.shown') ?? '[]')).length >= 1",
        json!(null),
        LIVE,
    );
    other.goto(&format!("{origin}/"));
    other.wait_for("#live[data-state=live]", LIVE);
    other.wait_for("a.session[data-session=\"login-form\"][data-group=\"needs-input\"]", LIVE);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(told(), json!(["login-form needs input"]), "notifications shown");
    let d = page.diagnostics();
    assert!(!d.console_errors.iter().any(|e| e.starts_with("uncaught")), "the page threw: {d:#?}");
    page.screenshot(&image("dashboard-overview.png"), true);

    // A phone: no horizontal scroll, every row on the screen's width and visible.
    let phone = signed_in(&browser, &origin, &cookie, Some((390, 844)), "/");
    for n in names {
        phone.wait_visible(&format!("a.session[data-session=\"{n}\"]"), LIVE);
    }
    let fit = phone.eval(
        r#"() => ({
          width: window.innerWidth,
          scrollWidth: Math.max(document.documentElement.scrollWidth, document.body.scrollWidth),
          rows: [...document.querySelectorAll('a.session')].map((a) => {
            const r = a.getBoundingClientRect();
            return {name: a.dataset.session, left: r.left, right: r.right, width: r.width, height: r.height};
          }),
        })"#,
        json!(null),
    );
    let width = fit["width"].as_f64().unwrap_or(0.0);
    assert_eq!(width, 390.0, "{fit:#}");
    assert!(fit["scrollWidth"].as_f64().is_some_and(|w| w <= width), "no horizontal scroll on a phone: {fit:#}");
    let shown = fit["rows"].as_array().cloned().unwrap_or_default();
    assert_eq!(shown.len(), names.len(), "{fit:#}");
    for r in &shown {
        let (left, right) = (r["left"].as_f64().unwrap_or(-1.0), r["right"].as_f64().unwrap_or(1e9));
        let visible = r["width"].as_f64().unwrap_or(0.0) > 0.0 && r["height"].as_f64().unwrap_or(0.0) > 0.0;
        assert!(visible && left >= 0.0 && right <= width + 0.5, "a row off the phone's screen: {r} in {fit:#}");
    }
    phone.screenshot(&image("dashboard-phone.png"), false);
    cleanup.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_page_types_into_the_agent_and_a_diff_comment_reaches_it_once() {
    let server = Server::start().await;
    let cleanup = Cleanup::new(&server);
    let name = "checkout-flow";
    let repo = agents(&server, "shop", &[name]).await;
    let browser = Browser::launch();
    let (origin, cookie) = login(&server, &browser);
    let path = format!("/#/sessions/{name}");

    let page = signed_in(&browser, &origin, &cookie, None, &path);
    page.wait_for(&format!("section#session[data-session=\"{name}\"]"), LIVE);
    // The phase, as text, is the one the API has.
    let deadline = Instant::now() + LIVE;
    loop {
        let want = server.object("sessions", name).await.map(|o| phase(&o).to_string()).unwrap_or_default();
        let shown = page.text("#session [data-field=phase]");
        if words(&shown) == words(&want) && !want.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            page.fail("the session's phase", &format!("the page shows {shown:?}; the API has {want:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The terminal shows the agent's screen.
    let screen = r#"(want) => {
      const rows = document.querySelector('#terminal .xterm-rows');
      const text = rows ? [...rows.children].map((r) => r.textContent).join('\n') : '';
      return want.every((w) => text.includes(w)) && text;
    }"#;
    page.wait_until("the agent's screen in the terminal", screen, json!(["demo-agent: working on"]), LIVE);

    // Read-only until the type button is pressed: keys typed before reach no one.
    let button = "#session [data-action=type]";
    assert_ne!(page.attribute(button, "aria-pressed").as_deref(), Some("true"), "the terminal starts read-only");
    page.click("#terminal");
    page.type_text("unheard words");
    page.press("Enter");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !got(&server, name).iter().any(|l| l.contains("unheard")),
        "a read-only terminal typed: {:?}",
        got(&server, name)
    );

    page.click(button);
    page.wait_for(&format!("{button}[aria-pressed=\"true\"]"), STEP);
    page.click("#terminal");
    page.type_text("edit typed.txt");
    page.press("Enter");
    let branch = format!("shop/{name}");
    eventually(LIVE, "the agent's commit of typed.txt", || match tip(&repo, &branch) {
        Some(t) if t == format!("demo-agent|{name}: edit typed.txt") => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .await;
    let typed = std::fs::read_to_string(workspace(&server, "shop", name).join("typed.txt")).unwrap_or_default();
    assert_eq!(typed, format!("edited by {name}\n"), "the workspace has the agent's edit");
    // The first task's commit line is on the screen already: wait for one after the answer.
    let answered = r#"(want) => {
      const rows = document.querySelector('#terminal .xterm-rows');
      const text = rows ? [...rows.children].map((r) => r.textContent).join('\n') : '';
      const asked = text.indexOf(want[0]);
      return asked >= 0 && text.lastIndexOf(want[1]) > asked && text;
    }"#;
    let shown = page.wait_until(
        "the agent's answer in the terminal",
        answered,
        json!(["demo-agent: got: edit typed.txt", "demo-agent: committed"]),
        LIVE,
    );
    let shown = shown.as_str().unwrap_or_default();
    let asked = shown.find("got: edit typed.txt").unwrap_or(usize::MAX);
    assert!(shown.rfind("demo-agent: committed").is_some_and(|c| c > asked), "the commit after the line:\n{shown}");
    assert_eq!(got(&server, name).iter().filter(|l| *l == "edit typed.txt").count(), 1, "typed once");

    // A comment on the new line of typed.txt, in the session page opened anew.
    let page = signed_in(&browser, &origin, &cookie, Some((1280, 960)), &path);
    let line = "#diff [data-path=\"typed.txt\"][data-line=\"1\"]";
    page.wait_visible(line, LIVE);
    page.click(line);
    page.wait_visible("form.diff-comment textarea[name=comment]", STEP);
    page.fill("form.diff-comment textarea[name=comment]", "greet the reader here");
    page.click("form.diff-comment :is(button:not([type]), [type=submit])");
    page.wait_until(
        "the answer to the comment",
        r#"() => /delivered|queued/.test((document.querySelector('#toast')?.textContent ?? '')
            + (document.querySelector('form.diff-comment')?.textContent ?? ''))"#,
        json!(null),
        LIVE,
    );
    let comment = "typed.txt:1: greet the reader here";
    eventually(LIVE, "the comment at the agent", || {
        let lines = got(&server, name);
        lines.iter().any(|l| l == comment).then_some(()).ok_or(format!("{lines:#?}"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let lines = got(&server, name);
    assert_eq!(lines.iter().filter(|l| *l == comment).count(), 1, "the comment arrives once: {lines:#?}");
    let out = server.aoctl(&["logs", name]);
    out.ok();
    assert_eq!(out.stdout.matches(&format!("got: {comment}")).count(), 1, "aoctl logs shows it once:\n{out}");
    page.wait_until("the comment in the terminal", screen, json!([format!("demo-agent: got: {comment}")]), LIVE);
    let d = page.diagnostics();
    assert!(!d.console_errors.iter().any(|e| e.starts_with("uncaught")), "the page threw: {d:#?}");
    page.eval("() => { document.activeElement?.blur(); window.scrollTo(0, 0); return true; }", json!(null));
    page.screenshot(&image("dashboard-session.png"), false);
    cleanup.finish();
}
