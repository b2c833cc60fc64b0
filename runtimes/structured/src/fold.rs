//! The fold: a conversation's state from its protocol log, record by record. Folding a log whole
//! or in any number of pieces gives the same state, so a restarted controller re-folds the log and
//! is exactly where it was. Times are the records' own; the caller passes `now` in.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;

use crate::{short, Ended, Event, Protocol, Record, Src, Tokens};

/// What the agent is doing, as far as the protocol says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Not started, or the handshake is not done.
    Starting,
    /// A turn runs, or a message was written and not yet taken.
    Working,
    /// Nothing runs; the agent takes the next message.
    Idle,
    /// An approval waits for an answer, or the agent is not logged in.
    NeedsInput,
    /// The model's API refused for a rate limit.
    RateLimited,
    /// Working, and no record for longer than the threshold.
    Stuck,
    /// The agent exited.
    Exited,
}

impl Activity {
    /// The state's word, as `status.activity.state` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Starting => "starting",
            Activity::Working => "working",
            Activity::Idle => "idle",
            Activity::NeedsInput => "needs-input",
            Activity::RateLimited => "rate-limited",
            Activity::Stuck => "stuck",
            Activity::Exited => "exited",
        }
    }
}

/// A permission the agent asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    /// The protocol's id of the request (Claude's `request_id`, the JSON-RPC id).
    pub request: String,
    /// The tool as the agent names it (`Bash`, `Write`, Codex `command` / `edit`, ACP's tool name or kind).
    pub tool: String,
    pub command: Option<String>,
    pub path: Option<String>,
    pub title: Option<String>,
    pub asked_at: i64,
    /// The request's input as the agent sent it (Claude's answer repeats it as `updatedInput`).
    pub input: Value,
    /// The decisions offered: Codex's `availableDecisions`, ACP's options as `kind:optionId`.
    pub options: Vec<String>,
}

/// The running turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Turn {
    /// Its number in the conversation, from 1.
    pub n: u32,
    /// The protocol's id for it, where there is one.
    pub id: Option<String>,
    pub started_at: i64,
    /// The message ids it took.
    pub messages: Vec<String>,
    /// Tokens reported during the turn (Codex, ACP).
    pub tokens: Option<Tokens>,
    /// The last tool it started: name and summary.
    pub last_tool: Option<(String, String)>,
    /// A rate limit or a missing login seen during the turn.
    pub refused: Option<String>,
}

/// How the last turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    pub n: u32,
    pub id: Option<String>,
    /// The protocol's word (`success`, `completed`, `interrupted`, `end_turn`, …).
    pub result: String,
    pub is_error: bool,
    pub ended_at: i64,
    pub duration_ms: Option<u64>,
    pub tokens: Option<Tokens>,
    pub cost: Option<f64>,
    pub messages: Vec<String>,
    /// The evidence that names it.
    pub evidence: String,
}

/// Tokens and cost of a conversation, over all its runs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    pub tokens: Tokens,
    /// The cost in USD, when the protocol says it (Claude).
    pub cost: Option<f64>,
}

/// The agent's exit.
#[derive(Debug, Clone, PartialEq)]
pub struct Exit {
    pub code: Option<i64>,
    pub why: String,
    pub at: i64,
}

/// Non-JSON lines in a row from which the stream is not trusted.
const BROKEN_AFTER: u32 = 5;

/// A conversation's state, folded from its protocol log.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub protocol: Protocol,
    /// The agent's name, for evidence (`claude-code`, `codex`, `qwen`).
    pub agent: String,
    /// The holder's run the last record belongs to.
    pub run: u32,
    /// Claude's `session_id`, Codex's thread id, ACP's `sessionId`.
    pub conversation: Option<String>,
    /// The agent takes messages (Claude at once; Codex after `thread/start`; ACP after `session/new`).
    pub ready: bool,
    pub turn: Option<Turn>,
    pub last_turn: Option<TurnEnd>,
    /// Turns started in this conversation.
    pub turns: u32,
    /// Message ids the agent took.
    pub accepted: BTreeSet<String>,
    /// Taken, but the model never answered: the id and why (a rate limit, no login).
    pub refused: BTreeMap<String, String>,
    /// Messages written and not yet taken, by id, with the time they were written.
    pub pending: BTreeMap<String, i64>,
    /// Messages written to a run that ended before it took them: to be sent again (same id).
    pub lost: BTreeSet<String>,
    /// SHA-256 of the texts of taken messages (a reaction's marker is found here; ACP's dedupe
    /// after an agent crash compares texts).
    pub accepted_texts: Vec<[u8; 32]>,
    /// SHA-256 of the texts of messages written, by id, until they are taken.
    sent_texts: BTreeMap<String, [u8; 32]>,
    /// The message each open request of ours carries (Codex `turn/start`, ACP `session/prompt`).
    request_messages: BTreeMap<String, String>,
    /// Open approvals, by request id.
    pub approvals: BTreeMap<String, Approval>,
    /// Our requests awaiting a response: id → method (Codex, ACP).
    pub outstanding: BTreeMap<String, String>,
    /// Requests of the agent's that we do not handle, by id, to answer with -32601.
    pub unanswered_ext: BTreeMap<String, Value>,
    /// Over all runs.
    pub usage: Usage,
    /// What the API said when it refused for a rate limit; cleared by the next turn.
    pub limit: Option<String>,
    /// What the agent said when it had no credentials; cleared by a turn that succeeds.
    pub auth_failed: Option<String>,
    /// Why the stream cannot be trusted.
    pub broken: Option<String>,
    pub exited: Option<Exit>,
    pub last_event_at: i64,
    /// What the last meaningful record said, for evidence.
    pub last_event: String,
    /// When the agent was started or became ready, for `since`.
    pub started_at: Option<i64>,
    /// Non-JSON stdout lines in a row.
    not_json: u32,
    /// Claude's `total_cost_usd` at the last `result` of this run, to take deltas from.
    run_cost: Option<f64>,
}

impl Conversation {
    /// A conversation with nothing folded yet.
    pub fn new(protocol: Protocol, agent: &str) -> Conversation {
        Conversation {
            protocol,
            agent: agent.to_string(),
            run: 0,
            conversation: None,
            ready: false,
            turn: None,
            last_turn: None,
            turns: 0,
            accepted: BTreeSet::new(),
            refused: BTreeMap::new(),
            pending: BTreeMap::new(),
            lost: BTreeSet::new(),
            accepted_texts: Vec::new(),
            sent_texts: BTreeMap::new(),
            request_messages: BTreeMap::new(),
            approvals: BTreeMap::new(),
            outstanding: BTreeMap::new(),
            unanswered_ext: BTreeMap::new(),
            usage: Usage::default(),
            limit: None,
            auth_failed: None,
            broken: None,
            exited: None,
            last_event_at: 0,
            last_event: String::new(),
            started_at: None,
            not_json: 0,
            run_cost: None,
        }
    }

    /// The fold of a whole log.
    pub fn from_log(protocol: Protocol, agent: &str, records: &[Record]) -> Conversation {
        let mut c = Conversation::new(protocol, agent);
        for r in records {
            c.apply(r);
        }
        c
    }

    /// `<agent> <protocol>:`, the start of every evidence.
    fn who(&self) -> String {
        format!("{} {}:", self.agent, self.protocol.short())
    }

    /// Whether the message with this id was taken.
    pub fn is_accepted(&self, id: &str) -> bool {
        self.accepted.contains(id)
    }

    /// The approval to show first: the oldest open one.
    pub fn approval(&self) -> Option<&Approval> {
        self.approvals.values().min_by_key(|a| a.asked_at)
    }

    /// Folds one record in.
    pub fn apply(&mut self, rec: &Record) {
        self.run = self.run.max(rec.run);
        if rec.src == Src::Out {
            self.last_event_at = rec.t;
        }
        for e in self.protocol.events(rec, &self.outstanding) {
            self.event(e, rec.t);
        }
    }

    /// Folds one event in, at time `t`.
    fn event(&mut self, e: Event, t: i64) {
        if !matches!(e, Event::NotJson) {
            self.not_json = 0;
        }
        match e {
            Event::Started => {
                // A start without an exit before it: the previous run's agent is gone all the same.
                if self.exited.is_none() && self.started_at.is_some() {
                    self.agent_gone(t);
                }
                self.exited = None;
                self.ready = self.protocol == Protocol::StreamJson;
                self.started_at = Some(t);
                self.last_event_at = t;
                self.run_cost = None;
                self.broken = None;
                self.last_event = "started".into();
            }
            Event::Exited { code, why } => {
                self.agent_gone(t);
                let code_text = code.map_or_else(|| "a signal".to_string(), |c| format!("code {c}"));
                self.last_event = format!("exited with {code_text} ({why})");
                self.exited = Some(Exit { code, why, at: t });
                self.last_event_at = t;
            }
            Event::Sent { id, text, request } => {
                if let (Some(id), Some(request)) = (&id, request) {
                    self.request_messages.insert(request, id.clone());
                }
                if let Some(id) = id {
                    self.lost.remove(&id);
                    if !self.accepted.contains(&id) {
                        self.pending.insert(id.clone(), t);
                        self.sent_texts.insert(id.clone(), crate::ids::text_hash(&text));
                    }
                    self.last_event = format!("sent message {id} \"{}\"", short(&text, 40));
                }
            }
            Event::Requested { id, method } => {
                self.outstanding.insert(id, method);
            }
            Event::Responded { id, error } => {
                let method = self.outstanding.remove(&id);
                let message = self.request_messages.remove(&id);
                if let Some(err) = error {
                    let m = method.unwrap_or_else(|| format!("request {id}"));
                    self.last_event = format!("{m} → error {}", short(&err, 80));
                    // The agent refused the request that carried a message: it was not taken.
                    if let Some(msg) = message.filter(|m| !self.accepted.contains(m)) {
                        self.pending.remove(&msg);
                        self.sent_texts.remove(&msg);
                        if let Some(turn) = self.turn.as_mut() {
                            turn.messages.retain(|m| *m != msg);
                        }
                        self.refused.insert(msg, format!("error: {}", short(&err, 120)));
                    }
                }
            }
            Event::Accepted { id } => {
                if let Some(turn) = self.turn.as_mut() {
                    if !turn.messages.contains(&id) {
                        turn.messages.push(id.clone());
                    }
                }
                self.accept(id);
            }
            Event::Conversation(id) => self.conversation = Some(id),
            Event::Ready => {
                if !self.ready {
                    self.ready = true;
                    self.started_at = Some(t);
                }
            }
            Event::TurnStarted { turn, message } => {
                self.limit = None;
                match self.turn.as_mut() {
                    // Claude steers a message into the running turn; Codex joins a second turn/start.
                    Some(running) if turn.is_none() || running.id == turn => {
                        if let Some(m) = message {
                            if !running.messages.contains(&m) {
                                running.messages.push(m);
                            }
                        }
                    }
                    _ => {
                        self.turns += 1;
                        let what = match (&turn, &message) {
                            (Some(id), Some(m)) if id != m => format!("{} (message {m})", short_id(id)),
                            (Some(id), _) => short_id(id),
                            (None, Some(m)) => format!("message {}", short_id(m)),
                            (None, None) => String::new(),
                        };
                        self.last_event = format!("turn {} started {what}", self.turns).trim_end().to_string();
                        self.turn = Some(Turn {
                            n: self.turns,
                            id: turn,
                            started_at: t,
                            messages: message.into_iter().collect(),
                            ..Turn::default()
                        });
                    }
                }
            }
            Event::TurnTokens(tokens) => {
                if let Some(turn) = self.turn.as_mut() {
                    turn.tokens = Some(turn.tokens.unwrap_or_default() + tokens);
                }
            }
            Event::TurnEnded(ended) => {
                let turn = self.turn.take();
                self.end_turn(turn, ended, t, None);
            }
            Event::Tool { name, summary } => {
                self.last_event = format!("tool {name} \"{summary}\"");
                if let Some(turn) = self.turn.as_mut() {
                    turn.last_tool = Some((name, summary));
                }
            }
            Event::ApprovalAsked(a) => {
                self.last_event = approval_evidence(self.protocol, &a);
                self.approvals.insert(a.request.clone(), a);
            }
            Event::ApprovalAnswered { request, allowed } => {
                if self.approvals.remove(&request).is_some() {
                    let word = if allowed { "allowed" } else { "denied" };
                    self.last_event = format!("approval {} {word}", short_id(&request));
                }
            }
            Event::ApprovalResolved { request } => {
                self.approvals.remove(&request);
            }
            Event::RateLimited { text } => {
                if let Some(turn) = self.turn.as_mut() {
                    turn.refused = Some("rate-limited".into());
                }
                self.last_event = format!("rate limit: {}", short(&text, 100));
                self.limit = Some(text);
            }
            Event::AuthFailed { text } => {
                if let Some(turn) = self.turn.as_mut() {
                    turn.refused = Some("not-logged-in".into());
                }
                self.last_event = format!("not logged in: {}", short(&text, 100));
                self.auth_failed = Some(text);
            }
            Event::ExtRequest(v) => {
                if let Some(id) = v
                    .get("id")
                    .and_then(crate::rpc_id)
                    .or_else(|| v.get("request_id").and_then(Value::as_str).map(str::to_string))
                {
                    self.unanswered_ext.insert(id, v);
                }
            }
            Event::AnsweredAgent { id } => {
                self.unanswered_ext.remove(&id);
            }
            Event::Said { .. } | Event::ToolResult { .. } => {}
            Event::Error { text } => {
                self.last_event = format!("error: {}", short(&text, 100));
            }
            Event::Replayed { text } => {
                let hash = crate::ids::text_hash(&text);
                if !self.accepted_texts.contains(&hash) {
                    self.accepted_texts.push(hash);
                }
            }
            Event::Progress => {
                // ACP: an update after our prompt means the agent took it.
                if let Some(turn) = self.turn.as_ref() {
                    let taken: Vec<String> =
                        turn.messages.iter().filter(|m| self.pending.contains_key(*m)).cloned().collect();
                    for id in taken {
                        self.accept(id);
                    }
                }
            }
            Event::NotJson => {
                self.not_json += 1;
                if self.not_json >= BROKEN_AFTER && self.broken.is_none() {
                    self.broken = Some(format!("{BROKEN_AFTER} lines in a row that are not JSON"));
                }
            }
        }
    }

    /// The agent of the run is gone (exited, or a new run started): a running turn ends
    /// interrupted, messages it had not taken are lost (sent again, same id), and what waited on
    /// the process (approvals, requests either way) died with it.
    fn agent_gone(&mut self, t: i64) {
        if let Some(turn) = self.turn.take() {
            let ended = Ended {
                result: "interrupted".into(),
                is_error: true,
                turn: turn.id.clone(),
                duration_ms: None,
                tokens: None,
                cost: None,
                cost_total: None,
                messages: vec![],
                api_status: None,
            };
            self.end_turn(Some(turn), ended, t, Some("ended with the agent".into()));
        }
        self.approvals.clear();
        self.outstanding.clear();
        self.request_messages.clear();
        self.unanswered_ext.clear();
        self.lost.extend(std::mem::take(&mut self.pending).into_keys());
        self.ready = false;
    }

    /// Marks the message `id` taken.
    fn accept(&mut self, id: String) {
        self.pending.remove(&id);
        self.lost.remove(&id);
        if let Some(hash) = self.sent_texts.remove(&id) {
            self.accepted_texts.push(hash);
        }
        self.accepted.insert(id);
    }

    /// Whether a message with this text was taken.
    pub fn accepted_text(&self, text: &str) -> bool {
        self.accepted_texts.contains(&crate::ids::text_hash(text))
    }

    /// Ends the running turn (or a turn the log did not see start, after a resume).
    fn end_turn(&mut self, turn: Option<Turn>, ended: Ended, t: i64, note: Option<String>) {
        let turn = turn.unwrap_or_else(|| {
            self.turns += 1;
            Turn { n: self.turns, id: ended.turn.clone(), started_at: t, ..Turn::default() }
        });
        let tokens = ended.tokens.or(turn.tokens);
        let cost = ended.cost.or_else(|| match (ended.cost_total, self.run_cost) {
            (Some(total), Some(before)) => Some((total - before).max(0.0)),
            (Some(total), None) => Some(total),
            _ => None,
        });
        if ended.cost_total.is_some() {
            self.run_cost = ended.cost_total;
        }
        if let Some(tk) = tokens {
            self.usage.tokens = self.usage.tokens + tk;
        }
        if let Some(c) = cost {
            self.usage.cost = Some(self.usage.cost.unwrap_or(0.0) + c);
        }
        let mut messages = turn.messages.clone();
        for m in ended.messages {
            if !messages.contains(&m) {
                messages.push(m);
            }
        }
        for m in &messages {
            self.accept(m.clone());
        }
        let refused = turn.refused.clone().or_else(|| (ended.api_status == Some(429)).then(|| "rate-limited".into()));
        if let Some(why) = &refused {
            for m in &messages {
                self.refused.insert(m.clone(), why.clone());
            }
        } else if !ended.is_error {
            self.auth_failed = None;
        }
        let duration_ms =
            ended.duration_ms.or_else(|| u64::try_from(t - turn.started_at).ok().filter(|_| turn.started_at > 0));
        let mut detail = vec![];
        if let Some(d) = duration_ms {
            detail.push(seconds(d));
        }
        if let Some(tk) = tokens {
            detail.push(format!("{} in / {} out tokens", tk.input, tk.output));
        }
        if let Some(c) = cost {
            detail.push(format!("${c:.4}"));
        }
        let word = match self.protocol {
            Protocol::StreamJson => format!("result {}", ended.result),
            Protocol::AppServer => format!("turn/completed {}", ended.result),
            Protocol::Acp => format!("session/prompt → stopReason {}", ended.result),
        };
        let mut evidence = format!("{} {word}, turn {}", self.who(), turn.n);
        if !detail.is_empty() {
            evidence.push_str(&format!(" ({})", detail.join("; ")));
        }
        if let Some(s) = ended.api_status {
            evidence.push_str(&format!(", API status {s}"));
        }
        if let Some(n) = note {
            evidence.push_str(&format!(", {n}"));
        }
        self.last_event = evidence.trim_start_matches(&self.who()).trim().to_string();
        self.last_turn = Some(TurnEnd {
            n: turn.n,
            id: turn.id.or(ended.turn),
            result: ended.result,
            is_error: ended.is_error,
            ended_at: t,
            duration_ms,
            tokens,
            cost,
            messages,
            evidence,
        });
    }

    /// The agent's activity at `now` (milliseconds), its evidence and since when (a record's time).
    /// Working without a record for `stuck_after` is stuck.
    pub fn activity(&self, now_ms: i64, stuck_after: Duration) -> (Activity, String, i64) {
        let who = self.who();
        if let Some(x) = &self.exited {
            return (Activity::Exited, format!("{who} agent {}", self.last_event), x.at);
        }
        if let Some(b) = &self.broken {
            return (Activity::Stuck, format!("{who} stream broken: {b}"), self.last_event_at);
        }
        if let Some(a) = self.approval() {
            return (Activity::NeedsInput, format!("{who} {}", approval_evidence(self.protocol, a)), a.asked_at);
        }
        if let Some(turn) = &self.turn {
            let quiet = now_ms - self.last_event_at.max(turn.started_at);
            if u128::try_from(quiet).unwrap_or(0) > stuck_after.as_millis() {
                let last = turn.last_tool.as_ref().map_or_else(
                    || self.last_event.clone(),
                    |(name, summary)| format!("tool_use {name} \"{summary}\""),
                );
                return (
                    Activity::Stuck,
                    format!("{who} no event for {} (last: {last})", age(quiet)),
                    self.last_event_at,
                );
            }
            let messages = if turn.messages.is_empty() {
                String::new()
            } else {
                format!(" (message {})", turn.messages.iter().map(|m| short_id(m)).collect::<Vec<_>>().join(", "))
            };
            let id = turn.id.as_deref().map(|i| format!(" {}", short_id(i))).unwrap_or_default();
            return (Activity::Working, format!("{who} turn {} running{id}{messages}", turn.n), turn.started_at);
        }
        if let Some(limit) = &self.limit {
            let at = self.last_turn.as_ref().map_or(self.last_event_at, |l| l.ended_at);
            return (Activity::RateLimited, format!("{who} rate limit: {}", short(limit, 120)), at);
        }
        if let Some(text) = &self.auth_failed {
            return (Activity::NeedsInput, format!("{who} not logged in: {}", short(text, 120)), self.last_event_at);
        }
        if let Some((id, at)) = self.pending.iter().max_by_key(|(_, at)| **at) {
            return (Activity::Working, format!("{who} message {} written, not yet taken", short_id(id)), *at);
        }
        if !self.ready {
            let since = self.started_at.unwrap_or(self.last_event_at);
            let what = if self.started_at.is_some() { "handshake not done" } else { "not started" };
            return (Activity::Starting, format!("{who} {what}"), since);
        }
        match &self.last_turn {
            Some(l) if self.started_at.is_none_or(|s| l.ended_at >= s) => {
                (Activity::Idle, l.evidence.clone(), l.ended_at)
            }
            _ => (Activity::Idle, format!("{who} ready"), self.started_at.unwrap_or(self.last_event_at)),
        }
    }
}

/// How evidence names an approval: `control_request can_use_tool Bash "touch approved.txt" (request 5f45e9d1)`.
fn approval_evidence(protocol: Protocol, a: &Approval) -> String {
    let word = match protocol {
        Protocol::StreamJson => "control_request can_use_tool",
        Protocol::AppServer => "requestApproval",
        Protocol::Acp => "session/request_permission",
    };
    let what = a.command.as_deref().or(a.path.as_deref()).or(a.title.as_deref()).unwrap_or_default();
    format!("{word} {} \"{}\" (request {})", a.tool, short(what, 80), short_id(&a.request))
}

/// The first 8 characters of a long id (a UUID's first group); short ids whole.
fn short_id(id: &str) -> String {
    if id.chars().count() > 12 {
        id.chars().take(8).collect::<String>() + "…"
    } else {
        id.to_string()
    }
}

/// Milliseconds as `1.2 s`, or `2m 5s` from a minute on.
fn seconds(ms: u64) -> String {
    if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{}m {}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// A quiet time as `45s`, `10m`, `2h 5m`.
fn age(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        _ => format!("{}h {}m", s / 3600, (s % 3600) / 60),
    }
}
