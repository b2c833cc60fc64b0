//! The input contract every terminal runtime keeps (tmux, and process on Unix and on Windows), as
//! test bodies each runtime's tests run on its own runtime: typed lines are submitted and
//! verified, multi-line messages arrive as one paste, a lost Enter is retried, and an agent that
//! does not echo counts only when its screen changes.

use std::path::Path;

use aoctl_agents::InputStyle;

use crate::runtime::{Handle, LaunchSpec, Runtime, RuntimeError};
use crate::test_agents::{agent, read, spec, style, transcript_has, wait_for, Agent};

/// Starts `spec` on `rt` and waits until its transcript says `ready`.
async fn start(rt: &dyn Runtime, spec: &LaunchSpec) -> Handle {
    let handle = rt.start(spec).await.unwrap();
    transcript_has(spec, "ready").await;
    handle
}

pub(crate) async fn send_submits_a_line_even_when_it_is_already_on_screen(rt: &dyn Runtime, dir: &Path) {
    let spec = spec(dir, "line", agent(dir, Agent::Reader));
    let handle = start(rt, &spec).await;
    rt.send(&handle, "hello world", &style(3)).await.unwrap();
    transcript_has(&spec, "got: hello world").await;
    rt.send(&handle, "hello world", &style(3)).await.unwrap();
    wait_for("a second answer", || read(&spec.transcript).matches("got: hello world").count() == 2).await;

    // A line too long for one tmux command is pasted instead of typed. Its answer is longer than
    // a row: a console host (Windows) draws it row by row, so the rows are joined again.
    let long: String = (0..1500).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    rt.send(&handle, &long, &style(3)).await.unwrap();
    let answer = format!("got: {long}");
    wait_for("the long line's answer", || read(&spec.transcript).replace(['\r', '\n'], "").contains(&answer)).await;
}

pub(crate) async fn multi_line_message_arrives_as_one_paste(rt: &dyn Runtime, dir: &Path) {
    let spec = spec(dir, "paste", agent(dir, Agent::Paste));
    let handle = start(rt, &spec).await;
    rt.send(&handle, "one\ntwo\nthree", &style(3)).await.unwrap();
    transcript_has(&spec, "blocks=1 lines=3").await;

    // Without bracketed paste the same agent sees three separate messages.
    let spec = self::spec(dir, "typed", agent(dir, Agent::Paste));
    let handle = start(rt, &spec).await;
    let plain = InputStyle { bracketed_paste: false, ..style(3) };
    rt.send(&handle, "one\ntwo\nthree", &plain).await.unwrap();
    wait_for("three messages", || read(&spec.transcript).matches("blocks=0 lines=1").count() == 3).await;
}

pub(crate) async fn submit_is_retried_when_the_first_enter_is_lost(rt: &dyn Runtime, dir: &Path) {
    let spec_a = spec(dir, "no-retry", agent(dir, Agent::LosesFirstEnter));
    let handle = start(rt, &spec_a).await;
    let err = rt.send(&handle, "hello", &style(0)).await.unwrap_err();
    assert!(matches!(err, RuntimeError::NotDelivered { .. }), "{err}");
    assert!(!read(&spec_a.transcript).contains("got:"));

    let spec_b = spec(dir, "retry", agent(dir, Agent::LosesFirstEnter));
    let handle = start(rt, &spec_b).await;
    rt.send(&handle, "hello", &style(2)).await.unwrap();
    transcript_has(&spec_b, "got: hello").await;
}

pub(crate) async fn agent_without_echo_counts_only_when_the_screen_changes(rt: &dyn Runtime, dir: &Path) {
    let spec_a = spec(dir, "no-echo", agent(dir, Agent::NoEcho));
    let handle = start(rt, &spec_a).await;
    rt.send(&handle, "hello", &style(3)).await.unwrap();
    transcript_has(&spec_a, "got: hello").await;

    let spec_b = spec(dir, "silent", agent(dir, Agent::Silent));
    let handle = start(rt, &spec_b).await;
    let err = rt.send(&handle, "hello", &style(3)).await.unwrap_err();
    assert!(matches!(err, RuntimeError::NotDelivered { .. }), "{err}");
}
