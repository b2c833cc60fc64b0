//! The fold of real recordings (Claude Code 2.1.332, Codex 0.171.0, qwen 0.24.4 against the model
//! stand-in; see fixtures/README.md): states, usage, cost, conversation ids, accepted message ids,
//! approvals and evidence at the points the recordings show.

use std::time::Duration;

use aoctl_structured::outbound::{self, Decision};
use aoctl_structured::{Activity, Conversation, Protocol, Record, Src};
use serde_json::Value;

/// The fixtures' clock: a recording's second 0.
const T0: i64 = 1_796_571_640_000;
const STUCK: Duration = Duration::from_secs(600);

fn records(name: &str) -> Vec<Record> {
    let path = format!("{}/tests/fixtures/{name}.jsonl", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let recs = Record::parse_log(&text);
    assert_eq!(recs.len(), text.lines().count(), "every line of {name} is a record");
    recs
}

/// The fold of the records up to and including second `at` of the recording.
fn fold_until(protocol: Protocol, agent: &str, recs: &[Record], at_ms: i64) -> Conversation {
    let upto: Vec<Record> = recs.iter().filter(|r| r.t - T0 <= at_ms).cloned().collect();
    Conversation::from_log(protocol, agent, &upto)
}

fn claude(name: &str, at_ms: i64) -> Conversation {
    fold_until(Protocol::StreamJson, "claude-code", &records(name), at_ms)
}

fn codex(name: &str, at_ms: i64) -> Conversation {
    fold_until(Protocol::AppServer, "codex", &records(name), at_ms)
}

fn state(c: &Conversation, at_ms: i64) -> (Activity, String, i64) {
    c.activity(T0 + at_ms, STUCK)
}

#[test]
fn claude_turn_with_a_tool_folds_to_idle_with_usage() {
    // c1: two turns; the inputs carry no uuid, so no lifecycle and no accepted ids.
    let mid = claude("c1", 936);
    assert_eq!(state(&mid, 936).0, Activity::Idle, "without a uuid nothing says a turn started");
    let c = claude("c1", 1_300);
    let (s, evidence, since) = state(&c, 1_300);
    assert_eq!(s, Activity::Idle);
    assert_eq!(since, T0 + 1_204, "since is the result's time");
    assert_eq!(c.turns, 2);
    assert_eq!(c.usage.tokens.input, 300);
    assert_eq!(c.usage.tokens.output, 60);
    assert!((c.usage.cost.unwrap() - 0.0024).abs() < 1e-9, "{:?}", c.usage.cost);
    let last = c.last_turn.as_ref().unwrap();
    assert_eq!((last.tokens.unwrap().input, last.tokens.unwrap().output), (100, 20));
    assert!((last.cost.unwrap() - 0.0008).abs() < 1e-9, "the turn's own cost: {:?}", last.cost);
    assert!(evidence.starts_with("claude-code stream-json: result success, turn 2 ("), "{evidence}");
    assert_eq!(evidence, "claude-code stream-json: result success, turn 2 (0.1 s; 100 in / 20 out tokens; $0.0008)");
    assert_eq!(c.conversation.as_deref(), Some("f0b34024-1c20-4287-99e1-8a71ae0e2cbd"));
    assert!(c.accepted.is_empty());
    let end = claude("c1", 2_000);
    assert_eq!(state(&end, 2_000).0, Activity::Exited);
}

#[test]
fn claude_message_is_working_from_its_start_until_its_result() {
    let id = "11111111-1111-4111-8111-111111111111";
    let written = claude("c3", 100);
    let (s, evidence, _) = state(&written, 100);
    assert_eq!(s, Activity::Working, "written, not yet taken: {evidence}");
    assert!(written.pending.contains_key(id));
    assert!(!written.is_accepted(id));
    let started = claude("c3", 800);
    let (s, evidence, since) = state(&started, 800);
    assert_eq!(s, Activity::Working);
    assert_eq!(since, T0 + 754, "since the lifecycle's started");
    assert_eq!(evidence, "claude-code stream-json: turn 1 running (message 11111111…)");
    assert!(started.is_accepted(id));
    assert!(started.pending.is_empty());
}

#[test]
fn claude_queued_messages_share_one_turn() {
    // c3: two messages written during a turn without a tool are queued, then run as ONE turn.
    let queued = claude("c3", 2_300);
    assert_eq!(queued.turns, 1);
    assert_eq!(state(&queued, 2_300).0, Activity::Working);
    assert_eq!(queued.pending.len(), 2, "queued is not taken");
    let c = claude("c3", 6_000);
    assert_eq!(c.turns, 2, "the two queued messages are one turn");
    let last = c.last_turn.as_ref().unwrap();
    assert_eq!(last.n, 2);
    assert_eq!(last.messages, ["22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333"]);
    assert!(c.pending.is_empty());
    assert_eq!(c.accepted.len(), 3);
    assert_eq!(state(&c, 6_000).0, Activity::Idle);
    assert!((c.usage.cost.unwrap() - 0.0016).abs() < 1e-9);
}

#[test]
fn claude_steered_message_is_accepted_mid_turn() {
    // c4: a message written during a tool call joins the running turn after the tool's result.
    let during = claude("c4", 4_000);
    assert_eq!(state(&during, 4_000).0, Activity::Working);
    assert!(!during.is_accepted("22222222-2222-4222-8222-222222222222"));
    let steered = claude("c4", 4_850);
    assert!(steered.is_accepted("22222222-2222-4222-8222-222222222222"));
    assert_eq!(steered.turns, 1, "steered, not a new turn");
    assert_eq!(steered.turn.as_ref().unwrap().messages.len(), 2);
    let c = claude("c4", 5_000);
    assert_eq!(state(&c, 5_000).0, Activity::Idle);
    assert_eq!(c.turns, 1);
    // Quiet for longer than the threshold during the tool call: stuck, naming the tool.
    let (s, evidence, _) = during.activity(T0 + 4_000 + 700_000, STUCK);
    assert_eq!(s, Activity::Stuck);
    assert!(
        evidence.starts_with("claude-code stream-json: no event for 11m (last: tool_use Bash \"sleep 4; echo slept\")"),
        "{evidence}"
    );
}

#[test]
fn claude_without_lifecycle_lines_folds_the_same_turns() {
    // Should a CLI stop printing command_lifecycle, the answers' user_message_uuids still say
    // which messages were taken and that a turn ran.
    for name in ["c3", "c4", "c6"] {
        let all = records(name);
        let without: Vec<Record> = all.iter().filter(|r| r.line["type"] != "command_lifecycle").cloned().collect();
        let with = Conversation::from_log(Protocol::StreamJson, "claude-code", &all);
        let bare = Conversation::from_log(Protocol::StreamJson, "claude-code", &without);
        assert_eq!(bare.turns, with.turns, "{name}");
        assert_eq!(bare.accepted, with.accepted, "{name}");
        assert!(bare.pending.is_empty(), "{name}");
        assert_eq!(bare.usage, with.usage, "{name}");
    }
}

#[test]
fn claude_can_use_tool_is_an_open_approval_until_answered() {
    let asked = claude("c6", 1_500);
    let (s, evidence, since) = state(&asked, 1_500);
    assert_eq!(s, Activity::NeedsInput);
    assert_eq!(since, T0 + 969);
    assert_eq!(
        evidence,
        "claude-code stream-json: control_request can_use_tool Bash \"touch /workspace/demo/asked.txt\" (request 5f45e9d1…)"
    );
    let a = asked.approval().unwrap();
    assert_eq!(a.request, "5f45e9d1-7f9d-44ca-b721-6ad0a0cd51ad");
    assert_eq!(a.tool, "Bash");
    assert_eq!(a.command.as_deref(), Some("touch /workspace/demo/asked.txt"));
    assert_eq!(a.path.as_deref(), Some("/workspace/demo/asked.txt"), "from blocked_path");
    assert_eq!(a.title.as_deref(), Some("make a file"));
    // Our answer is the line the recording wrote.
    let answer = outbound::answer(Protocol::StreamJson, a, Decision::Approve);
    let written = records("c6").into_iter().find(|r| r.src == Src::In && r.line["type"] == "control_response").unwrap();
    assert_eq!(answer, written.line);

    // A rule over the recorded request answers it as a person would.
    let allow = [aoctl_structured::rules::Rule::parse("Bash(touch *)").unwrap()];
    assert_eq!(aoctl_structured::rules::decide(&allow, &[], a), aoctl_structured::rules::Verdict::Allow(0));

    let answered = claude("c6", 2_050);
    assert!(answered.approvals.is_empty());
    assert_eq!(state(&answered, 2_050).0, Activity::Working);
    // The second request, for Write, is denied; the turn goes on and ends.
    let second = claude("c6", 2_255);
    let a = second.approval().unwrap();
    assert_eq!((a.tool.as_str(), a.path.as_deref()), ("Write", Some("/workspace/demo/w.txt")));
    let deny = outbound::answer(Protocol::StreamJson, a, Decision::Deny);
    assert_eq!(deny["response"]["response"]["behavior"], "deny");
    assert_eq!(deny["response"]["request_id"], "95ab0c1e-19b1-41d2-9473-58fd29596bb9");
    let c = claude("c6", 3_000);
    assert!(c.approvals.is_empty());
    assert_eq!(c.turns, 2);
    assert_eq!(c.accepted.len(), 2);
}

#[test]
fn claude_resume_does_not_repeat_the_interrupted_turn() {
    // The first run of c3 killed mid-turn (kill -9: no exit code), then the resumed run of c8.
    let mut log: Vec<Record> = records("c3").into_iter().filter(|r| r.t - T0 <= 2_300).collect();
    let killed = Record::parse(&format!(
        r#"{{"n":99,"t":{},"run":1,"src":"holder","event":"exited","code":null,"signal":9,"why":"agent-exited"}}"#,
        T0 + 2_400
    ))
    .unwrap();
    log.push(killed);
    let c = Conversation::from_log(Protocol::StreamJson, "claude-code", &log);
    let (s, evidence, _) = c.activity(T0 + 2_500, STUCK);
    assert_eq!(s, Activity::Exited);
    assert!(evidence.contains("exited with a signal"), "{evidence}");
    let last = c.last_turn.as_ref().unwrap();
    assert_eq!(last.result, "interrupted");
    assert!(last.evidence.ends_with("ended with the agent"), "{}", last.evidence);
    assert!(c.is_accepted("11111111-1111-4111-8111-111111111111"), "its message is not sent again");
    assert!(c.pending.is_empty());
    assert_eq!(c.lost.len(), 2, "queued only, never taken: these are sent again");

    let mut resumed = c.clone();
    // The resumed run up to just after the same uuid was written again (before its exit).
    for mut r in records("c8").into_iter().filter(|r| r.t - T0 <= 5_300) {
        r.run = 2;
        r.t += 10_000;
        resumed.apply(&r);
    }
    assert_eq!(resumed.run, 2);
    assert_eq!(resumed.conversation.as_deref(), Some("5e551011-aaaa-4bbb-8ccc-000000000001"));
    assert_eq!(resumed.turns, 2, "the resumed run's message is one turn; the interrupted one is not run again");
    assert!(resumed.is_accepted("a3111111-1111-4111-8111-111111111111"));
    assert!(resumed.accepted_text("after resume"));
    // The same uuid written again is known: not pending, no turn.
    assert!(!resumed.pending.contains_key("a3111111-1111-4111-8111-111111111111"));
    assert_eq!(resumed.activity(T0 + 15_300, STUCK).0, Activity::Idle);
}

#[test]
fn claude_known_uuid_is_accepted_without_a_turn() {
    let c = claude("c9", 1_000);
    assert!(c.is_accepted("a3111111-1111-4111-8111-111111111111"));
    assert_eq!(c.turns, 0);
    assert_eq!(state(&c, 1_000).0, Activity::Idle);
    let c = claude("c9", 4_300);
    assert_eq!(c.turns, 1);
    assert!((c.last_turn.as_ref().unwrap().cost.unwrap() - 0.0008).abs() < 1e-9);
}

#[test]
fn claude_interrupt_ends_the_turn_without_refusing_its_message() {
    let id = "d1111111-1111-4111-8111-111111111111";
    let running = claude("c13", 2_000);
    assert_eq!(state(&running, 2_000).0, Activity::Working);
    let written = records("c13").into_iter().find(|r| r.src == Src::In && r.line["type"] == "control_request").unwrap();
    assert_eq!(outbound::claude::interrupt("int-1"), written.line);
    let c = claude("c13", 2_300);
    let (s, evidence, _) = state(&c, 2_300);
    assert_eq!(s, Activity::Idle);
    assert!(evidence.starts_with("claude-code stream-json: result error_during_execution, turn 1 ("), "{evidence}");
    let last = c.last_turn.as_ref().unwrap();
    assert!(last.is_error);
    assert!((last.cost.unwrap() - 0.0013).abs() < 1e-9, "what the interrupted turn cost: {:?}", last.cost);
    assert!(c.is_accepted(id));
    assert!(c.refused.is_empty(), "the model answered (in part): the message is not sent again");
}

#[test]
fn claude_429_is_rate_limited_and_refused() {
    let id = "e1111111-1111-4111-8111-111111111111";
    let c = claude("c14", 1_000);
    let (s, evidence, since) = state(&c, 1_000);
    assert_eq!(s, Activity::RateLimited);
    assert!(
        evidence.starts_with("claude-code stream-json: rate limit: API Error: Request rejected (429)"),
        "{evidence}"
    );
    assert_eq!(since, T0 + 794);
    assert!(c.limit.as_deref().unwrap().contains("rate limit"));
    assert!(c.is_accepted(id));
    assert_eq!(
        c.refused.get(id).map(String::as_str),
        Some("rate-limited"),
        "taken, never answered: sent again with a new attempt"
    );
    let last = c.last_turn.as_ref().unwrap();
    assert!(last.is_error);
    assert!(last.evidence.contains("API status 429"), "{}", last.evidence);
}

#[test]
fn claude_without_key_is_not_logged_in() {
    let id = "f1111111-1111-4111-8111-111111111111";
    let c = claude("c15", 1_000);
    let (s, evidence, _) = state(&c, 1_000);
    assert_eq!(s, Activity::NeedsInput);
    assert!(evidence.contains("not logged in: Not logged in"), "{evidence}");
    assert_eq!(c.refused.get(id).map(String::as_str), Some("not-logged-in"));
    let exited = claude("c15", 2_000);
    assert_eq!(exited.exited.as_ref().unwrap().code, Some(1));
}

#[test]
fn codex_client_id_marks_acceptance() {
    let thread = "01a24c03-c2d1-7803-90a4-8208419468b4";
    let before = codex("x1", 500);
    assert_eq!(state(&before, 500).0, Activity::Starting, "no thread yet");
    let ready = codex("x1", 655);
    assert!(ready.ready);
    assert_eq!(ready.conversation.as_deref(), Some(thread));
    assert_eq!(state(&ready, 655).0, Activity::Idle);
    let sent = codex("x1", 700);
    assert_eq!(state(&sent, 700).0, Activity::Working, "turn/start written");
    assert!(!sent.is_accepted("m-0001"));
    let c = codex("x1", 800);
    assert!(c.is_accepted("m-0001"));
    let (s, evidence, _) = state(&c, 800);
    assert_eq!(s, Activity::Working);
    assert_eq!(evidence, "codex app-server: turn 1 running 01a24c03… (message m-0001)");
    let c = codex("x1", 1_200);
    let (s, evidence, _) = state(&c, 1_200);
    assert_eq!(s, Activity::Idle);
    assert_eq!(c.turns, 2);
    assert!(c.is_accepted("m-0002"));
    assert!(evidence.starts_with("codex app-server: turn/completed completed, turn 2 ("), "{evidence}");
    assert_eq!(c.usage.tokens.input, 300, "Σ tokenUsage.last over the turns");
    assert_eq!(c.usage.cost, None, "Codex reports no cost");
    assert!(c.outstanding.is_empty());
}

#[test]
fn codex_steer_joins_the_running_turn() {
    let c = codex("x2", 2_000);
    assert_eq!(c.turns, 1);
    assert!(c.is_accepted("m-0002") && c.is_accepted("m-0003"));
    assert_eq!(c.turn.as_ref().unwrap().messages, ["m-0001", "m-0002", "m-0003"]);
    let c = codex("x2", 6_100);
    assert_eq!(state(&c, 6_100).0, Activity::Idle);
    assert_eq!(c.last_turn.as_ref().unwrap().messages.len(), 3);
}

#[test]
fn codex_request_approval_and_decline() {
    for (name, decision) in [("x3", "accept"), ("x6", "decline")] {
        let recs = records(name);
        let ask = recs.iter().position(|r| r.line["method"] == "item/commandExecution/requestApproval").unwrap();
        let at = recs[ask].t - T0;
        let c = Conversation::from_log(Protocol::AppServer, "codex", &recs[..=ask]);
        let (s, evidence, _) = state(&c, at);
        assert_eq!(s, Activity::NeedsInput, "{name}");
        assert!(evidence.starts_with("codex app-server: requestApproval command \"/bin/bash -lc"), "{evidence}");
        let a = c.approval().unwrap();
        assert_eq!(a.request, "0");
        assert_eq!(a.path.as_deref(), Some("/workspace/demo"));
        let d = if decision == "accept" { Decision::Approve } else { Decision::Deny };
        let ours = outbound::answer(Protocol::AppServer, a, d);
        let written = recs.iter().find(|r| r.src == Src::In && r.line.get("result").is_some()).unwrap();
        assert_eq!(ours, written.line, "{name}");
        let after = fold_until(Protocol::AppServer, "codex", &recs, written.t - T0);
        assert!(after.approvals.is_empty(), "{name}");
        let end = fold_until(Protocol::AppServer, "codex", &recs, 1_500);
        assert_eq!(state(&end, 1_500).0, Activity::Idle, "{name}: the turn goes on and ends");
    }
}

#[test]
fn codex_resume_lists_the_interrupted_turn() {
    let recs = records("x5");
    let c = fold_until(Protocol::AppServer, "codex", &recs, 400);
    assert!(c.ready);
    assert!(c.is_accepted("m-0001") && c.is_accepted("m-0002"), "the resumed thread's turns carry our client ids");
    let resume = recs.iter().find(|r| r.line.get("result").and_then(|x| x.get("thread")).is_some()).unwrap();
    let turns = aoctl_structured::codex::past_turns(&resume.line["result"]["thread"]);
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1].status, "interrupted");
    assert_eq!(turns[1].client_ids, ["m-0002"]);
    let c = fold_until(Protocol::AppServer, "codex", &recs, 9_700);
    assert_eq!(state(&c, 9_700).0, Activity::Idle);
    assert_eq!(c.turns, 2, "two turns ran after the resume (Codex does not dedupe m-0002)");
}

#[test]
fn acp_permission_and_end_turn() {
    let recs = records("q2");
    let acp = |at: i64| fold_until(Protocol::Acp, "qwen", &recs, at);
    let c = acp(2_300);
    assert!(c.ready);
    assert_eq!(c.conversation.as_deref(), Some("606da378-9df2-4f13-95f6-638421dac8d6"));
    let c = acp(2_400);
    assert_eq!(state(&c, 2_400).0, Activity::Working);
    assert!(!c.is_accepted("4"), "nothing from the agent yet");
    let c = acp(2_800);
    assert!(c.is_accepted("4"), "its first update takes the prompt");
    let c = acp(2_940);
    let (s, evidence, _) = state(&c, 2_940);
    assert_eq!(s, Activity::NeedsInput);
    assert!(evidence.starts_with("qwen acp: session/request_permission run_shell_command \"printf"), "{evidence}");
    let a = c.approval().unwrap();
    let ours = outbound::answer(Protocol::Acp, a, Decision::Approve);
    let written = recs.iter().find(|r| r.src == Src::In && r.line.get("result").is_some()).unwrap();
    assert_eq!(ours, written.line);
    let c = acp(6_100);
    let (s, evidence, _) = state(&c, 6_100);
    assert_eq!(s, Activity::Idle);
    assert!(evidence.starts_with("qwen acp: session/prompt → stopReason end_turn, turn 1 ("), "{evidence}");
    assert!(evidence.contains("200 in / 40 out tokens"), "{evidence}");
}

#[test]
fn acp_unknown_agent_request_is_answered_method_not_found() {
    let c = fold_until(Protocol::Acp, "qwen", &records("q2"), 3_100);
    let (id, req) = c.unanswered_ext.iter().next().expect("craft/drainMidTurnQueue waits");
    assert_eq!(req["method"], "craft/drainMidTurnQueue");
    let answer = outbound::method_not_found(Protocol::Acp, &req["id"]);
    assert_eq!(answer["error"]["code"], -32601);
    let mut answered = c.clone();
    let line = serde_json::json!({"n": 100, "t": T0 + 3_200, "run": 1, "src": "aoctl", "line": answer});
    answered.apply(&Record::from_value(line).unwrap());
    assert!(answered.unanswered_ext.is_empty(), "{id} answered");
}

#[test]
fn acp_load_replays_user_text() {
    let c = fold_until(Protocol::Acp, "qwen", &records("q3"), 4_500);
    assert!(c.ready);
    assert!(c.accepted_text("create-file /workspace/demo/q.txt hi"), "the replayed prompt is known by its text");
    assert_eq!(c.turns, 0, "a replay is no turn");
    assert_eq!(state(&c, 4_500).0, Activity::Idle);
}

#[test]
fn acp_session_without_credentials_is_not_logged_in() {
    for (name, agent, said) in [
        ("acp-kimi", "kimi", "Authentication required"),
        ("acp-cline", "cline", "Authentication required: Call authenticate before starting a session"),
    ] {
        let recs = records(name);
        let answered = recs.iter().position(|r| r.line.get("error").is_some()).unwrap();
        let c = Conversation::from_log(Protocol::Acp, agent, &recs[..=answered]);
        let (s, evidence, _) = c.activity(recs[answered].t, STUCK);
        assert_eq!(s, Activity::NeedsInput, "{name}");
        assert_eq!(evidence, format!("{agent} acp: not logged in: {said}"));
        assert!(!c.ready && c.conversation.is_none() && c.outstanding.is_empty(), "{name}");
    }
}

#[test]
fn acp_prompt_refused_by_the_agent_is_not_taken() {
    // q2 up to its prompt, then an error response instead of the turn.
    let recs = records("q2");
    let prompt = recs.iter().position(|r| r.line["method"] == "session/prompt").unwrap();
    let mut c = Conversation::from_log(Protocol::Acp, "qwen", &recs[..=prompt]);
    assert_eq!(c.pending.len(), 1);
    let error = serde_json::json!({"n": 50, "t": T0 + 2_500, "run": 1, "src": "agent",
        "line": {"jsonrpc": "2.0", "id": 4, "error": {"code": -32603, "message": "Internal error"}}});
    c.apply(&Record::from_value(error).unwrap());
    assert!(!c.is_accepted("4"));
    assert!(c.pending.is_empty());
    assert_eq!(c.refused.get("4").map(String::as_str), Some("error: Internal error"));
    let (s, evidence, _) = c.activity(T0 + 2_600, STUCK);
    assert_eq!(s, Activity::Idle);
    assert!(evidence.starts_with("qwen acp: session/prompt → stopReason error, turn 1"), "{evidence}");
}

#[test]
fn a_new_run_without_an_exit_record_ends_the_old_runs_turn() {
    // c3's agent mid-turn with two messages queued, then the holder starts c8's run with no exit
    // between (a holder that died with its agent).
    let mut c = claude("c3", 2_300);
    let run2: Vec<Record> = records("c8")
        .into_iter()
        .filter(|r| r.t - T0 <= 5_300)
        .map(|mut r| {
            r.run = 2;
            r.t += 10_000;
            r
        })
        .collect();
    assert_eq!(run2[0].holder_event(), Some("started"));
    c.apply(&run2[0]);
    let interrupted = c.last_turn.as_ref().unwrap();
    assert_eq!((interrupted.n, interrupted.result.as_str()), (1, "interrupted"));
    assert!(c.turn.is_none());
    assert!(c.is_accepted("11111111-1111-4111-8111-111111111111"), "its message is not sent again");
    assert_eq!(c.lost.len(), 2, "the queued messages are to be sent again");
    for r in &run2[1..] {
        c.apply(r);
    }
    assert_eq!(c.turns, 2);
    assert_eq!(c.activity(T0 + 15_300, STUCK).0, Activity::Idle);
    // Sent again, a lost message is pending, no longer lost.
    let again = serde_json::json!({"n": 90, "t": T0 + 16_000, "run": 2, "src": "aoctl",
        "line": outbound::claude::user("22222222-2222-4222-8222-222222222222", "during one")});
    c.apply(&Record::from_value(again).unwrap());
    assert_eq!(c.lost.len(), 1);
    assert!(c.pending.contains_key("22222222-2222-4222-8222-222222222222"));
    assert_eq!(c.activity(T0 + 16_000, STUCK).0, Activity::Working);
}

#[test]
fn fold_of_a_log_is_the_fold_of_its_parts() {
    for (name, protocol) in [
        ("c1", Protocol::StreamJson),
        ("c3", Protocol::StreamJson),
        ("c6", Protocol::StreamJson),
        ("c13", Protocol::StreamJson),
        ("c14", Protocol::StreamJson),
        ("x2", Protocol::AppServer),
        ("x6", Protocol::AppServer),
        ("q2", Protocol::Acp),
    ] {
        let recs = records(name);
        let whole = Conversation::from_log(protocol, "agent", &recs);
        // Every split point: fold the first part, clone (a memo kept across reconciles), go on.
        for split in 0..=recs.len() {
            let mut part = Conversation::from_log(protocol, "agent", &recs[..split]);
            let kept = part.clone();
            part = kept;
            for r in &recs[split..] {
                part.apply(r);
            }
            assert_eq!(part, whole, "{name} split at {split}");
        }
    }
}

#[test]
fn five_non_json_lines_break_the_stream() {
    let mut c = claude("c1", 1_300);
    let text = |n: i64| {
        Record::from_value(
            serde_json::json!({"n": n, "t": T0 + 1_400 + n, "run": 1, "src": "agent", "text": "garbage"}),
        )
        .unwrap()
    };
    for n in 0..4 {
        c.apply(&text(n));
    }
    assert!(c.broken.is_none());
    assert_eq!(state(&c, 1_500).0, Activity::Idle);
    c.apply(&text(5));
    let (s, evidence, _) = state(&c, 1_500);
    assert_eq!(s, Activity::Stuck);
    assert!(evidence.contains("stream broken"), "{evidence}");
}

#[test]
fn outbound_lines_match_the_recorded_inputs() {
    let first = |name: &str, pred: &dyn Fn(&Value) -> bool| {
        records(name).into_iter().find(|r| r.src == Src::In && pred(&r.line)).unwrap().line
    };
    assert_eq!(
        outbound::claude::user("11111111-1111-4111-8111-111111111111", "asktool please"),
        first("c6", &|l| l["type"] == "user")
    );
    let thread = "01a24c03-c2d1-7803-90a4-8208419468b4";
    assert_eq!(outbound::codex::initialize("1", "0.1.0"), first("x1", &|l| l["method"] == "initialize"));
    assert_eq!(outbound::codex::initialized(), first("x1", &|l| l["method"] == "initialized"));
    assert_eq!(
        outbound::codex::thread_start("2", "/workspace/demo", "never", "danger-full-access"),
        first("x1", &|l| l["method"] == "thread/start")
    );
    assert_eq!(
        outbound::codex::turn_start("3", thread, "m-0001", "first-task create-file cx.txt hello"),
        first("x1", &|l| l["method"] == "turn/start")
    );
    assert_eq!(
        outbound::codex::thread_resume(
            "2",
            "01a24c04-4034-7b32-af0d-9b702cee742b",
            "/workspace/demo",
            "never",
            "danger-full-access"
        ),
        first("x5", &|l| l["method"] == "thread/resume")
    );
    let steer = first("x2", &|l| l["method"] == "turn/steer");
    assert_eq!(
        outbound::codex::turn_steer(
            "5",
            "01a24c03-db53-7992-942e-ced4f70529a2",
            "01a24c03-dba9-7ab3-ad8f-7b0aba5d69a8",
            "m-0003",
            "during via steer"
        ),
        steer
    );
    let session = "606da378-9df2-4f13-95f6-638421dac8d6";
    assert_eq!(
        outbound::acp::session_new("2", "/workspace/demo", serde_json::json!([])),
        first("q2", &|l| l["method"] == "session/new")
    );
    assert_eq!(outbound::acp::set_mode("3", session, "default"), first("q2", &|l| l["method"] == "session/set_mode"));
    assert_eq!(
        outbound::acp::prompt("4", session, "create-file /workspace/demo/q.txt hi"),
        first("q2", &|l| l["method"] == "session/prompt")
    );
    assert_eq!(
        outbound::acp::session_load("2", session, "/workspace/demo", serde_json::json!([])),
        first("q3", &|l| l["method"] == "session/load")
    );
    // Our initialize adds clientInfo to what the recording sent.
    let mut init = outbound::acp::initialize("1", "0.1.0");
    init["params"].as_object_mut().unwrap().remove("clientInfo");
    assert_eq!(init, first("q2", &|l| l["method"] == "initialize"));
}
