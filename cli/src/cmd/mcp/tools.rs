//! The tools of `aoctl mcp`: their arguments (typed, each with its JSON Schema), the worker
//! session's set and the project orchestrator's, which set a token opens, and the check of a
//! call's arguments before anything reaches the server.

use serde_json::{json, Map, Value};

use super::{err, RpcError, INVALID_PARAMS};

/// What an argument holds, as `check_args` checks it and the tool's schema tells the agent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Kind {
    /// A string; a required one must not be blank.
    Str,
    /// A JSON integer from `min` to `max`, both included.
    Int { min: i64, max: i64 },
    /// A JSON object whose keys are not blank and whose values are strings.
    StrMap,
}

/// One argument of a tool.
pub(super) struct Arg {
    pub(super) name: &'static str,
    pub(super) kind: Kind,
    pub(super) required: bool,
    pub(super) description: &'static str,
}

/// A required string argument.
pub(super) const fn required(name: &'static str, description: &'static str) -> Arg {
    Arg { name, kind: Kind::Str, required: true, description }
}

/// An optional string argument.
pub(super) const fn optional(name: &'static str, description: &'static str) -> Arg {
    Arg { name, kind: Kind::Str, required: false, description }
}

/// What a successful call shows the agent as text (the whole answer is its structured content).
#[derive(Clone, Copy)]
pub(super) enum Shows {
    /// The answer's `message`.
    Message,
    /// The whole answer, as pretty JSON.
    Json,
    /// The answer's string field of that name; the whole answer as pretty JSON when it has none.
    Field(&'static str),
}

/// A tool: its name, description, the arguments it takes and the agent API call it makes. `path`
/// is relative to `/agent/v1/`; a `{session}` in it is filled from the `session` argument, which is
/// then not sent otherwise. A POST sends the other arguments as a JSON object; a GET or DELETE sends
/// them in the query string.
pub(super) struct Tool {
    pub(super) name: &'static str,
    pub(super) description: &'static str,
    pub(super) args: &'static [Arg],
    pub(super) method: &'static str,
    pub(super) path: &'static str,
    pub(super) shows: Shows,
}

/// The tools offered to one kind of token, and what `initialize` says of them.
pub(super) struct ToolSet {
    pub(super) instructions: &'static str,
    pub(super) tools: &'static [Tool],
}

/// An orchestrator's token starts with this; a worker session's with `aos1.`.
pub(super) const ORCHESTRATOR_TOKEN_PREFIX: &str = "aoo1.";

pub(super) const STATUS: Tool = Tool {
    name: "status",
    description: "This session's state as the aoctl controller sees it: phase, activity, branch, pull request \
                  (its checks and review) and what was reported.",
    args: &[],
    method: "GET",
    path: "status",
    shows: Shows::Json,
};

pub(super) const REPORT: Tool = Tool {
    name: "report",
    description: "Report progress and/or a summary of the work; shown in the session's status and recorded \
                  as an event.",
    args: &[
        optional("progress", "What is being done now, in a sentence."),
        optional("summary", "A summary of the work so far."),
    ],
    method: "POST",
    path: "report",
    shows: Shows::Message,
};

pub(super) const ASK_HUMAN: Tool = Tool {
    name: "ask_human",
    description: "Ask a person a question. The session shows that it needs input and the project's \
                  notifiers are told; this returns at once. The person's answer is typed into this \
                  conversation as a new message when they give it (aoctl answer). Ask one question at a time.",
    args: &[required("question", "The question, with what the person needs to answer it.")],
    method: "POST",
    path: "ask",
    shows: Shows::Message,
};

/// The tools of a worker session's agent.
pub(super) static WORKER_TOOLS: ToolSet = ToolSet {
    instructions: "Tools of the aoctl controller that runs this session: report progress, ask a \
                   person a question, hand work to a new session, message another session.",
    tools: &[
        STATUS,
        REPORT,
        ASK_HUMAN,
        Tool {
            name: "send",
            description: "Send a message to another session of the same project; it is typed into that session's \
                          agent, marked as coming from this session.",
            args: &[required("session", "The other session's name."), required("text", "The message.")],
            method: "POST",
            path: "send",
            shows: Shows::Message,
        },
        Tool {
            name: "handoff",
            description: "Create a follow-up session in the same project with a prompt; it is named after this \
                          session, labelled with it, and waits for a slot or budget like any session.",
            args: &[required("prompt", "The follow-up session's first prompt.")],
            method: "POST",
            path: "handoff",
            shows: Shows::Message,
        },
        Tool {
            name: "request_review",
            description: "Ask for a review of this session's work. The request is recorded (as an event and in the \
                          session's status); when the session or its project has reviewers, a review round starts \
                          and their verdicts and comments come back to you. The answer says which.",
            args: &[optional("note", "What to look at.")],
            method: "POST",
            path: "review",
            shows: Shows::Message,
        },
    ],
};

/// The worker session named by a `{session}` path.
pub(super) const SESSION: Arg = required("session", "The session's name.");

/// The tools of a project's orchestrator.
pub(super) static ORCHESTRATOR_TOOLS: ToolSet = ToolSet {
    instructions: "Tools of the aoctl controller for the project's orchestrator: spawn worker sessions, follow \
                   them, message, stop, resume or delete them, request reviews, merge when the project allows.",
    tools: &[
        STATUS,
        REPORT,
        ASK_HUMAN,
        Tool {
            name: "spawn",
            description: "Create a worker session in this project with a prompt. It is bounded by the project's \
                          orchestrator limits: past them the call fails and nothing is created.",
            args: &[
                required("prompt", "The worker's first prompt."),
                optional("agent", "A built-in agent's name; the project's agent when absent."),
                optional("issue", "The issue the worker works on."),
                Arg {
                    kind: Kind::StrMap,
                    ..optional("labels", "Labels for the worker, name to value; none under ao.dev/.")
                },
                optional("name", "The worker's name, a DNS label; generated when absent."),
            ],
            method: "POST",
            path: "orchestrator/spawn",
            shows: Shows::Message,
        },
        Tool {
            name: "list_sessions",
            description: "Every session of this project with its phase, activity, pull request, checks, review, \
                          what it reported and whether this orchestrator created it; and the project's \
                          orchestrator limits.",
            args: &[],
            method: "GET",
            path: "orchestrator/sessions",
            shows: Shows::Json,
        },
        Tool {
            name: "read_transcript",
            description: "The last lines of a session's transcript.",
            args: &[
                SESSION,
                Arg {
                    kind: Kind::Int { min: 1, max: 500 },
                    ..optional("lines", "How many lines, from 1 to 500; 100 when absent.")
                },
            ],
            method: "GET",
            path: "orchestrator/sessions/{session}/transcript",
            shows: Shows::Field("text"),
        },
        Tool {
            name: "read_diff",
            description: "The diff of a session's work.",
            args: &[SESSION],
            method: "GET",
            path: "orchestrator/sessions/{session}/diff",
            shows: Shows::Field("diff"),
        },
        Tool {
            name: "send",
            description: "Send a message to a session of this project; it is typed into that session's agent, \
                          marked as coming from the orchestrator.",
            args: &[SESSION, required("text", "The message.")],
            method: "POST",
            path: "orchestrator/sessions/{session}/send",
            shows: Shows::Message,
        },
        Tool {
            name: "stop",
            description: "Stop a worker session this orchestrator created.",
            args: &[SESSION],
            method: "POST",
            path: "orchestrator/sessions/{session}/stop",
            shows: Shows::Message,
        },
        Tool {
            name: "resume",
            description: "Resume a stopped worker session this orchestrator created. It is bounded by the \
                          project's orchestrator limits like spawn: past them the call fails.",
            args: &[SESSION],
            method: "POST",
            path: "orchestrator/sessions/{session}/resume",
            shows: Shows::Message,
        },
        Tool {
            name: "delete",
            description: "Delete a worker session this orchestrator created: the session and its workspace are \
                          removed; its branch stays.",
            args: &[SESSION],
            method: "DELETE",
            path: "orchestrator/sessions/{session}",
            shows: Shows::Message,
        },
        Tool {
            name: "request_review",
            description: "Ask for a review of a session's work. The request is recorded; when the session or its \
                          project has reviewers, a review round starts. The answer says which.",
            args: &[SESSION, optional("note", "What to look at.")],
            method: "POST",
            path: "orchestrator/sessions/{session}/review",
            shows: Shows::Message,
        },
        Tool {
            name: "merge",
            description: "Merge a worker's pull request once it is approved and its checks pass, when the project \
                          lets the orchestrator merge.",
            args: &[SESSION],
            method: "POST",
            path: "orchestrator/sessions/{session}/merge",
            shows: Shows::Message,
        },
        Tool {
            name: "answer",
            description: "Answer a worker's question (asked with its ask_human tool); the answer is typed into its \
                          agent. Only when the project lets the orchestrator answer questions.",
            args: &[SESSION, required("text", "The answer.")],
            method: "POST",
            path: "orchestrator/sessions/{session}/answer",
            shows: Shows::Message,
        },
    ],
};

/// The tools a token gets: an orchestrator's token the orchestrator's, any other a worker's (the
/// server decides what a token may do; this only picks what to offer).
pub(super) fn tool_set(token: &str) -> &'static ToolSet {
    if token.starts_with(ORCHESTRATOR_TOKEN_PREFIX) {
        &ORCHESTRATOR_TOOLS
    } else {
        &WORKER_TOOLS
    }
}

pub(super) fn schema(tool: &Tool) -> Value {
    let properties: Map<String, Value> = tool
        .args
        .iter()
        .map(|a| {
            let property = match a.kind {
                Kind::Str => json!({ "type": "string", "description": a.description }),
                Kind::Int { min, max } => {
                    json!({ "type": "integer", "minimum": min, "maximum": max, "description": a.description })
                }
                Kind::StrMap => json!({
                    "type": "object",
                    "additionalProperties": { "type": "string" },
                    "description": a.description,
                }),
            };
            (a.name.to_string(), property)
        })
        .collect();
    let required: Vec<&str> = tool.args.iter().filter(|a| a.required).map(|a| a.name).collect();
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

/// The arguments of a call, checked against the tool's: each of its kind (a string; an integer
/// within bounds; an object of strings with keys that are not blank), the required ones present and
/// not blank, no others; otherwise an invalid-params error.
pub(super) fn check_args(tool: &Tool, args: Option<&Value>) -> Result<Map<String, Value>, RpcError> {
    let args = match args {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(err(INVALID_PARAMS, "arguments must be an object")),
    };
    let name = tool.name;
    for (k, v) in &args {
        let Some(arg) = tool.args.iter().find(|a| a.name == k) else {
            return Err(err(INVALID_PARAMS, format!("{name}: unknown argument `{k}`")));
        };
        match arg.kind {
            Kind::Str if !v.is_string() => {
                return Err(err(INVALID_PARAMS, format!("{name}: argument `{k}` must be a string")));
            }
            Kind::Int { min, max } if v.as_i64().is_none_or(|i| i < min || i > max) => {
                return Err(err(
                    INVALID_PARAMS,
                    format!("{name}: argument `{k}` must be an integer from {min} to {max}"),
                ));
            }
            Kind::StrMap => {
                let ok = v.as_object().is_some_and(|m| m.iter().all(|(k, v)| !k.trim().is_empty() && v.is_string()));
                if !ok {
                    let what = "an object whose keys are not blank and whose values are strings";
                    return Err(err(INVALID_PARAMS, format!("{name}: argument `{k}` must be {what}")));
                }
            }
            _ => {}
        }
    }
    for arg in tool.args.iter().filter(|a| a.required) {
        let missing = match (arg.kind, args.get(arg.name)) {
            (_, None) => true,
            (Kind::Str, Some(v)) => v.as_str().is_none_or(|s| s.trim().is_empty()),
            _ => false,
        };
        if missing {
            return Err(err(INVALID_PARAMS, format!("{name}: argument `{}` is required", arg.name)));
        }
    }
    // A dot segment would be resolved away by the URL, and the call would reach another path.
    if tool.path.contains("{session}") && matches!(args.get("session").and_then(Value::as_str), Some("." | "..")) {
        return Err(err(INVALID_PARAMS, format!("{name}: `session` is not a session's name")));
    }
    if tool.name == "report" && args.values().all(|v| v.as_str().is_none_or(|s| s.trim().is_empty())) {
        return Err(err(INVALID_PARAMS, "report: give progress, summary or both"));
    }
    Ok(args)
}
