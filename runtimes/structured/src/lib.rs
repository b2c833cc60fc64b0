//! Structured control, pure: a session's protocol log as [`Record`]s, the codecs that read Claude
//! Code's stream-json, Codex's app-server and ACP into protocol-neutral [`Event`]s, the fold of a
//! log into a [`Conversation`], the lines the controller writes to an agent, a readable rendering
//! of a log, approval rules and message ids. No IO: records and times come in as arguments.

pub mod acp;
pub mod claude;
pub mod codex;
pub mod fold;
pub mod ids;
pub mod outbound;
pub mod render;
pub mod rules;

pub use fold::{Activity, Approval, Conversation, TurnEnd, Usage};

use serde_json::Value;

/// Who a record comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Src {
    /// A line the agent wrote on its stdout (the log's `"agent"`).
    Out,
    /// A line the controller had written to the agent's stdin (the log's `"aoctl"`).
    In,
    /// The holder's own note: the agent started or exited (the log's `"holder"`).
    Holder,
}

/// One line of a session's protocol log (`structured/events.jsonl`).
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The record's number, continuing across runs.
    pub n: u64,
    /// Its time, milliseconds since the Unix epoch.
    pub t: i64,
    /// The agent's run it belongs to (the holder's `started` count).
    pub run: u32,
    pub src: Src,
    /// The protocol object for `In` and `Out`; the whole record for `Holder`; `Null` for a line
    /// that was not JSON (its text is in `text`).
    pub line: Value,
    /// A stdout line that was not JSON.
    pub text: Option<String>,
}

/// Why a log line is not a record.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not a record: {0}")]
    NotARecord(&'static str),
}

impl Record {
    /// Reads one line of the log.
    pub fn parse(line: &str) -> Result<Record, ParseError> {
        let v: Value = serde_json::from_str(line.trim()).map_err(|e| ParseError::NotJson(e.to_string()))?;
        Record::from_value(v)
    }

    /// A record from the log line's JSON.
    pub fn from_value(mut v: Value) -> Result<Record, ParseError> {
        let src = match v.get("src").and_then(Value::as_str) {
            Some("agent") => Src::Out,
            Some("aoctl") => Src::In,
            Some("holder") => Src::Holder,
            Some(_) => return Err(ParseError::NotARecord("unknown src")),
            None => return Err(ParseError::NotARecord("no src")),
        };
        let t = v.get("t").and_then(Value::as_i64).ok_or(ParseError::NotARecord("no t"))?;
        let n = v.get("n").and_then(Value::as_u64).unwrap_or(0);
        let run = v.get("run").and_then(Value::as_u64).map_or(0, |r| u32::try_from(r).unwrap_or(u32::MAX));
        let text = v.get("text").and_then(Value::as_str).map(str::to_string);
        let line = match src {
            Src::Holder => v,
            _ => v.get_mut("line").map(Value::take).unwrap_or(Value::Null),
        };
        Ok(Record { n, t, run, src, line, text })
    }

    /// The records of a whole log; lines that are not records are skipped (a torn last line
    /// while the holder writes it is read again next time).
    pub fn parse_log(log: &str) -> Vec<Record> {
        log.lines().filter(|l| !l.trim().is_empty()).filter_map(|l| Record::parse(l).ok()).collect()
    }

    /// The holder's event (`started`, `exited`), for a `Holder` record.
    pub fn holder_event(&self) -> Option<&str> {
        (self.src == Src::Holder).then(|| self.line.get("event").and_then(Value::as_str)).flatten()
    }
}

/// The structured protocol an agent speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// Claude Code: `claude -p --input-format stream-json --output-format stream-json`.
    StreamJson,
    /// Codex: `codex app-server` (JSON-RPC without the `jsonrpc` field).
    AppServer,
    /// The Agent Client Protocol (JSON-RPC 2.0), version 1.
    Acp,
}

impl Protocol {
    /// The protocol's name in the log and in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::StreamJson => "claude-stream-json",
            Protocol::AppServer => "codex-app-server",
            Protocol::Acp => "acp",
        }
    }

    /// How evidence names it: `stream-json`, `app-server`, `acp`.
    pub fn short(self) -> &'static str {
        match self {
            Protocol::StreamJson => "stream-json",
            Protocol::AppServer => "app-server",
            Protocol::Acp => "acp",
        }
    }

    /// The protocol a name stands for.
    pub fn parse(name: &str) -> Option<Protocol> {
        match name {
            "claude-stream-json" | "stream-json" => Some(Protocol::StreamJson),
            "codex-app-server" | "app-server" => Some(Protocol::AppServer),
            "acp" => Some(Protocol::Acp),
            _ => None,
        }
    }

    /// The protocol's codec: the events one record means. `outstanding` maps the ids of the
    /// requests the controller sent and that are not answered yet to their methods (JSON-RPC
    /// responses name only the id).
    pub fn events(self, rec: &Record, outstanding: &std::collections::BTreeMap<String, String>) -> Vec<Event> {
        if rec.src == Src::Holder {
            return holder_events(rec);
        }
        if rec.line.is_null() {
            return if rec.src == Src::Out { vec![Event::NotJson] } else { vec![] };
        }
        let (v, t) = (&rec.line, rec.t);
        match (self, rec.src == Src::In) {
            (Protocol::StreamJson, true) => claude::inbound(v),
            (Protocol::StreamJson, false) => claude::outbound(v, t),
            (Protocol::AppServer, true) => codex::inbound(v),
            (Protocol::AppServer, false) => codex::outbound(v, t, outstanding),
            (Protocol::Acp, true) => acp::inbound(v),
            (Protocol::Acp, false) => acp::outbound(v, t, outstanding),
        }
    }
}

/// The texts of a list of content parts (an ACP prompt, a Codex turn's input), one a line.
pub(crate) fn texts(list: Option<&Value>) -> String {
    let items = list.and_then(Value::as_array);
    items.into_iter().flatten().filter_map(|i| str_at(i, "text")).collect::<Vec<_>>().join("\n")
}

/// What the holder's records mean.
fn holder_events(rec: &Record) -> Vec<Event> {
    match rec.holder_event() {
        Some("started") => vec![Event::Started],
        Some("exited") => vec![Event::Exited {
            code: rec.line.get("code").and_then(Value::as_i64),
            why: rec.line.get("why").and_then(Value::as_str).unwrap_or("agent-exited").to_string(),
        }],
        _ => vec![],
    }
}

/// Tokens of a turn or a conversation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// Every input token, cached or not.
    pub input: u64,
    /// The cached part of `input`.
    pub cached: u64,
    pub output: u64,
}

impl std::ops::Add for Tokens {
    type Output = Tokens;

    fn add(self, o: Tokens) -> Tokens {
        Tokens { input: self.input + o.input, cached: self.cached + o.cached, output: self.output + o.output }
    }
}

/// How a turn ended, as the protocol said.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    /// The protocol's word: Claude's `result` subtype, Codex's turn status, ACP's `stopReason`.
    pub result: String,
    pub is_error: bool,
    /// The turn's id, where the protocol has one.
    pub turn: Option<String>,
    pub duration_ms: Option<u64>,
    /// The turn's tokens, when the protocol reports them at the turn's end.
    pub tokens: Option<Tokens>,
    /// The turn's cost in USD, when the protocol says it.
    pub cost: Option<f64>,
    /// The cost of the agent process so far (Claude's `total_cost_usd`), to take a delta from.
    pub cost_total: Option<f64>,
    /// The message ids the turn answered.
    pub messages: Vec<String>,
    /// An HTTP status of the model's API, when the turn ended on an API error.
    pub api_status: Option<u16>,
}

/// What a record means, whatever the protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The holder started the agent (a new run).
    Started,
    /// The agent exited.
    Exited { code: Option<i64>, why: String },
    /// The controller wrote a user message with this id (`None` when it carried none), in the
    /// request `request` where the protocol answers one (Codex, ACP).
    Sent { id: Option<String>, text: String, request: Option<String> },
    /// The controller sent a request (`id`, `method`) that awaits a response.
    Requested { id: String, method: String },
    /// A response arrived for one of our requests.
    Responded { id: String, error: Option<String> },
    /// The agent took the message with this id.
    Accepted { id: String },
    /// The conversation's id: Claude's `session_id`, Codex's thread id, ACP's `sessionId`.
    Conversation(String),
    /// The handshake is done: the agent takes messages.
    Ready,
    /// A turn started.
    TurnStarted { turn: Option<String>, message: Option<String> },
    /// Tokens spent within the running turn (Codex's per-call usage, ACP's `_meta.usage`).
    TurnTokens(Tokens),
    /// The running turn ended.
    TurnEnded(Ended),
    /// Text the agent said: a whole message, or for ACP a chunk of one.
    Said { text: String, chunk: bool },
    /// A tool call's result (its text) or failure.
    ToolResult { text: String, is_error: bool },
    /// A tool call started (its name and a short summary), for evidence.
    Tool { name: String, summary: String },
    /// The agent asks for a permission.
    ApprovalAsked(Approval),
    /// The controller answered the approval with this request id.
    ApprovalAnswered { request: String, allowed: bool },
    /// The agent says the approval no longer waits (Codex `serverRequest/resolved`).
    ApprovalResolved { request: String },
    /// The model's API refused for a rate limit; `text` is what it said.
    RateLimited { text: String },
    /// The agent has no credentials; `text` is what it said.
    AuthFailed { text: String },
    /// A request from the agent the controller does not handle (answer -32601).
    ExtRequest(Value),
    /// The controller answered a request of the agent's (by id).
    AnsweredAgent { id: String },
    /// An error the agent reported outside a turn's end.
    Error { text: String },
    /// A user message the agent replays from its history (ACP's `session/load`).
    Replayed { text: String },
    /// The agent reports progress on what it was sent (ACP's `session/update`).
    Progress,
    /// A stdout line that was not JSON.
    NotJson,
}

/// A JSON-RPC id as a string (numbers and strings alike).
pub(crate) fn rpc_id(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `v[key]` as a string.
pub(crate) fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The first line of a text, at most `max` characters, for evidence.
pub(crate) fn short(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= max {
        line.to_string()
    } else {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_line_is_a_record() {
        let r = Record::parse(r#"{"n":3,"t":1796571644612,"run":2,"src":"agent","line":{"type":"result"}}"#).unwrap();
        assert_eq!((r.n, r.t, r.run, r.src), (3, 1_796_571_644_612, 2, Src::Out));
        assert_eq!(r.line["type"], "result");
        let h = Record::parse(r#"{"n":1,"t":5,"run":1,"src":"holder","event":"started","pid":42}"#).unwrap();
        assert_eq!(h.holder_event(), Some("started"));
        let x = Record::parse(r#"{"n":4,"t":6,"run":1,"src":"agent","text":"not json"}"#).unwrap();
        assert_eq!((x.line.clone(), x.text.as_deref()), (Value::Null, Some("not json")));
        assert!(matches!(Record::parse("{torn"), Err(ParseError::NotJson(_))));
        assert_eq!(Record::parse(r#"{"t":1,"src":"other"}"#), Err(ParseError::NotARecord("unknown src")));
        assert_eq!(Record::parse(r#"{"src":"agent"}"#), Err(ParseError::NotARecord("no t")));
        let log = "{\"n\":1,\"t\":1,\"run\":1,\"src\":\"aoctl\",\"line\":{}}\n\n{\"n\":2,\"t\":2,\"ru";
        assert_eq!(Record::parse_log(log).len(), 1, "a torn last line is left for next time");
    }

    #[test]
    fn protocols_have_names() {
        for p in [Protocol::StreamJson, Protocol::AppServer, Protocol::Acp] {
            assert_eq!(Protocol::parse(p.as_str()), Some(p));
        }
        assert_eq!(Protocol::parse("telnet"), None);
    }

    #[test]
    fn codecs_ignore_what_they_do_not_know() {
        let odd = [
            serde_json::json!([]),
            serde_json::json!("text"),
            serde_json::json!(7),
            serde_json::json!({"type": 5}),
            serde_json::json!({"type": "result", "usage": "x", "model_usage_since_last_result": [1]}),
            serde_json::json!({"type": "assistant", "message": {"content": {"type": "tool_use"}}, "error": 3}),
            serde_json::json!({"type": "control_request", "request": {"subtype": "can_use_tool"}}),
            serde_json::json!({"type": "command_lifecycle", "command_uuid": 1, "state": "started"}),
            serde_json::json!({"type": "user", "uuid": "u", "message": {"content": [{"type": "image"}]}}),
            serde_json::json!({"id": {}, "method": null}),
            serde_json::json!({"id": 1, "result": {"thread": {"turns": [{"items": "x"}]}}}),
            serde_json::json!({"method": "turn/completed", "params": {"turn": []}}),
            serde_json::json!({"method": "item/started", "params": {"item": {"type": "userMessage"}}}),
            serde_json::json!({"method": "x/requestApproval", "id": "a", "params": {"availableDecisions": [1, null]}}),
            serde_json::json!({"jsonrpc": "2.0", "method": "session/update", "params": {"update": {"sessionUpdate": "tool_call", "_meta": 1}}}),
            serde_json::json!({"jsonrpc": "2.0", "id": 9, "method": "session/request_permission", "params": {"options": [{}]}}),
            serde_json::json!({"jsonrpc": "2.0", "id": 9, "result": {"outcome": 5}}),
            serde_json::json!({"jsonrpc": "2.0", "id": 9, "error": {"data": 4}}),
            serde_json::json!({"unknown": {"deeply": ["nested"]}}),
        ];
        for p in [Protocol::StreamJson, Protocol::AppServer, Protocol::Acp] {
            let mut outstanding = std::collections::BTreeMap::new();
            outstanding.insert("9".to_string(), "session/prompt".to_string());
            outstanding.insert("1".to_string(), "thread/resume".to_string());
            let mut c = Conversation::new(p, "agent");
            for (n, line) in odd.iter().enumerate() {
                for src in [Src::In, Src::Out] {
                    let rec = Record { n: n as u64, t: n as i64, run: 1, src, line: line.clone(), text: None };
                    let _ = p.events(&rec, &outstanding);
                    c.apply(&rec);
                }
            }
            let _ = c.activity(1_000, std::time::Duration::from_secs(60));
        }
    }
}
