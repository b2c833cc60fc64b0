//! The lines the controller writes to an agent, per protocol: user messages carrying their ids,
//! the handshakes, and the answers to approvals and to requests we do not handle. Each is a JSON
//! value; the holder writes it as one line.

use serde_json::{json, Value};

use crate::fold::Approval;
use crate::Protocol;

/// A person's or a policy's answer to an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve,
    /// Approve, and do not ask again for the like (where the protocol has it).
    ApproveAlways,
    Deny,
}

/// The answer to `approval` in its protocol.
pub fn answer(protocol: Protocol, approval: &Approval, decision: Decision) -> Value {
    match protocol {
        Protocol::StreamJson => claude::answer(approval, decision),
        Protocol::AppServer => codex::answer(approval, decision),
        Protocol::Acp => acp::answer(approval, decision),
    }
}

/// The answer to a request of the agent's that aoctl does not handle (Codex and ACP).
pub fn method_not_found(protocol: Protocol, id: &Value) -> Value {
    let mut v = json!({"id": id, "error": {"code": -32601, "message": "not supported by aoctl"}});
    if protocol == Protocol::Acp {
        v["jsonrpc"] = json!("2.0");
    }
    v
}

/// Claude Code's stream-json input.
pub mod claude {
    use super::*;

    /// A user message with its id: the CLI reports its lifecycle and drops an id it already has.
    /// The content is a plain string, as the recordings show.
    pub fn user(id: &str, text: &str) -> Value {
        json!({"type": "user", "uuid": id, "message": {"role": "user", "content": text}})
    }

    /// Asks the running turn to stop.
    pub fn interrupt(request_id: &str) -> Value {
        json!({"type": "control_request", "request_id": request_id, "request": {"subtype": "interrupt"}})
    }

    /// The `control_response` to a `can_use_tool` request.
    pub fn answer(approval: &Approval, decision: Decision) -> Value {
        let response = match decision {
            Decision::Approve | Decision::ApproveAlways => {
                json!({"behavior": "allow", "updatedInput": approval.input})
            }
            Decision::Deny => json!({"behavior": "deny", "message": "denied by a person (aoctl answer)"}),
        };
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": approval.request, "response": response}})
    }
}

/// Codex's app-server requests.
pub mod codex {
    use super::*;

    /// A request: Codex takes the `jsonrpc` field, and the recordings carry it.
    fn request(id: &str, method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": rpc(id), "method": method, "params": params})
    }

    pub fn initialize(id: &str, version: &str) -> Value {
        request(id, "initialize", json!({"clientInfo": {"name": "aoctl", "version": version}}))
    }

    pub fn initialized() -> Value {
        json!({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    }

    /// A new thread: `approval_policy` `never` with `danger-full-access` for bypass,
    /// `untrusted` with `workspace-write` to ask.
    pub fn thread_start(id: &str, cwd: &str, approval_policy: &str, sandbox: &str) -> Value {
        request(id, "thread/start", json!({"cwd": cwd, "approvalPolicy": approval_policy, "sandbox": sandbox}))
    }

    /// The thread `thread` again, after the agent restarted; the answer lists its turns.
    pub fn thread_resume(id: &str, thread: &str, cwd: &str, approval_policy: &str, sandbox: &str) -> Value {
        request(
            id,
            "thread/resume",
            json!({"threadId": thread, "cwd": cwd, "approvalPolicy": approval_policy, "sandbox": sandbox}),
        )
    }

    /// A user message, its id as `clientUserMessageId` (echoed as the item's `clientId`).
    pub fn turn_start(id: &str, thread: &str, message_id: &str, text: &str) -> Value {
        request(
            id,
            "turn/start",
            json!({"threadId": thread, "clientUserMessageId": message_id, "input": [{"type": "text", "text": text}]}),
        )
    }

    /// A user message into the running turn `turn`.
    pub fn turn_steer(id: &str, thread: &str, turn: &str, message_id: &str, text: &str) -> Value {
        request(
            id,
            "turn/steer",
            json!({"threadId": thread, "expectedTurnId": turn, "clientUserMessageId": message_id,
                   "input": [{"type": "text", "text": text}]}),
        )
    }

    /// The answer to an `item/*/requestApproval`. A refusal is `decline` even where
    /// `availableDecisions` lists only `accept` and `cancel`: Codex 0.171.0 takes it (the item is
    /// `declined` and the turn goes on), where `cancel` would end the turn.
    pub fn answer(approval: &Approval, decision: Decision) -> Value {
        let offered = |d: &str| approval.options.iter().any(|o| o == d);
        let decision = match decision {
            Decision::Approve => "accept",
            Decision::ApproveAlways if offered("acceptForSession") => "acceptForSession",
            Decision::ApproveAlways => "accept",
            Decision::Deny => "decline",
        };
        json!({"jsonrpc": "2.0", "id": rpc(&approval.request), "result": {"decision": decision}})
    }
}

/// ACP requests (JSON-RPC 2.0, protocol version 1).
pub mod acp {
    use super::*;

    fn request(id: &str, method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": rpc(id), "method": method, "params": params})
    }

    /// We advertise no file system and no terminal: the agent uses its own.
    pub fn initialize(id: &str, version: &str) -> Value {
        request(
            id,
            "initialize",
            json!({"protocolVersion": 1,
                   "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
                   "clientInfo": {"name": "aoctl", "version": version}}),
        )
    }

    /// A new session; `mcp_servers` is the list of `{name, command, args, env}`.
    pub fn session_new(id: &str, cwd: &str, mcp_servers: Value) -> Value {
        request(id, "session/new", json!({"cwd": cwd, "mcpServers": mcp_servers}))
    }

    /// The session `session` again: the agent replays its history, then answers.
    pub fn session_load(id: &str, session: &str, cwd: &str, mcp_servers: Value) -> Value {
        request(id, "session/load", json!({"sessionId": session, "cwd": cwd, "mcpServers": mcp_servers}))
    }

    pub fn set_mode(id: &str, session: &str, mode: &str) -> Value {
        request(id, "session/set_mode", json!({"sessionId": session, "modeId": mode}))
    }

    /// A user message: the request's id is the message's id.
    pub fn prompt(message_id: &str, session: &str, text: &str) -> Value {
        request(message_id, "session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}))
    }

    /// Asks the running turn to stop (a notification).
    pub fn cancel(session: &str) -> Value {
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}})
    }

    /// The answer to a `session/request_permission`: the first option of the decision's kind, or
    /// `cancelled` when the agent offers none.
    pub fn answer(approval: &Approval, decision: Decision) -> Value {
        let kinds: &[&str] = match decision {
            Decision::Approve => &["allow_once", "allow_always"],
            Decision::ApproveAlways => &["allow_always", "allow_once"],
            Decision::Deny => &["reject_once", "reject_always"],
        };
        let option = kinds
            .iter()
            .find_map(|k| approval.options.iter().find_map(|o| o.strip_prefix(&format!("{k}:")).map(str::to_string)));
        let outcome = match option {
            Some(id) => json!({"outcome": "selected", "optionId": id}),
            None => json!({"outcome": "cancelled"}),
        };
        json!({"jsonrpc": "2.0", "id": rpc(&approval.request), "result": {"outcome": outcome}})
    }
}

/// A JSON-RPC id: a number when the text is one (the agent's own ids come back as they were).
fn rpc(id: &str) -> Value {
    id.parse::<u64>().map_or_else(|_| json!(id), |n| json!(n))
}
