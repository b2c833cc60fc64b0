#!/usr/bin/env python3
"""A scripted model endpoint for the end-to-end tests of real agent CLIs.

It speaks three wire formats, each as the real service streams it:

- Anthropic Messages (`POST /v1/messages`, SSE: message_start, content_block_start/delta/stop,
  message_delta, message_stop; tool_use blocks, their input streamed as input_json_delta), which
  Claude Code speaks;
- OpenAI Responses (`POST /v1/responses` or `/responses`, SSE: response.created,
  response.output_item.added/done, response.output_text.delta, response.completed), which Codex
  speaks;
- OpenAI chat completions (`POST /v1/chat/completions` or `/chat/completions`, SSE chunks and
  `data: [DONE]`; a tool call streamed as `tool_calls` deltas, its arguments in parts, ending in
  finish_reason `tool_calls`), which aider speaks through litellm (without tools) and qwen-code
  speaks (with function tools).

Each turn is decided from the newest user text of the request (see `decide`):

- `create-file PATH WORD` answers with a tool call that writes WORD into PATH, using the agent's
  own tool from the request's `tools`: Claude Code's `Write`; Codex's `apply_patch`, else
  `shell_command`, `exec_command` or `shell`; on chat completions `write_file` (`{"file_path":
  PATH, "content": WORD}`), else `run_shell_command` (`{"command": "printf %s WORD > PATH"}`, each
  quoted for the shell where it needs it), as qwen-code offers them, else (aider, which offers no
  tools) no call but the file in aider's "whole" edit format: PATH, then WORD in a fenced block;
- `call-tool NAME` (Anthropic Messages and chat completions) answers with a call of the tool of
  the request's `tools` named NAME or ending in `__NAME` (an MCP server's tool, as Claude Code
  names them: `mcp__SERVER__NAME`), without arguments, or the text `I have no NAME tool.` when
  there is none; `call-tool NAME {"key": "value"}` passes the JSON object that follows the name on
  its line as the arguments (JSON that is not an object, or does not parse, gives no arguments and
  a `call-tool-error` line in the log);
- `rate-limit SECONDS` (all three formats) answers, not streamed, HTTP 429 with the header
  `retry-after: SECONDS` and the service's error body: Anthropic's `{"type": "error", "error":
  {"type": "rate_limit_error", "message": ...}}`, OpenAI's `{"error": {"message": ..., "type":
  "requests", "param": null, "code": "rate_limit_exceeded"}}`. An agent retrying sends the same
  newest user text, so each retry is refused too;
- `slow SECONDS` streams its answer over that many seconds;
- anything else gets a short answer at once;
- once the newest user content is a tool result (on chat completions: the newest message is a
  `tool` message), the answer is `The file is written.`

Rules (Anthropic Messages and chat completions, `--rules FILE`) script longer turns. The file is
read again on every request, so a test may write it (best atomically, by a rename) before or while
the agent runs; while it is missing there are no rules, and while it does not parse there are none
either and each main request (see below) logs a `rules-error` line. It holds a JSON array of
rules:

    [{"when": REGEX, "calls": [{"tool": NAME, "input": {...}}, ...], "then": TEXT}, ...]

(`calls` defaults to none, a call's `input` to `{}`, `then` to `done`). They apply to a main
request, one whose `tools` is not empty (not a side request for a title or the like). Its text is
that of the newest user message holding text once `<system-reminder>` blocks are taken out (all
its text blocks, or text parts, joined by newlines: a message typed while the agent was busy is
appended to the same content; a message of tool results alone does not count), and its step k is
the number of tool calls the assistant made after that message (Anthropic's tool_use blocks, chat
completions' `tool_calls` entries). The first rule whose `when` matches the text (re.search,
DOTALL) decides: while k is below the number of its calls, call k is made (of the tool named NAME
or ending in `__NAME` among the request's `tools`, with the call's `input` as its arguments; when
there is none the answer is the text `no tool NAME offered`); after them the answer is the text
`then`. When no rule matches, the commands above decide.

Every request is appended to the log file, one JSON object a line:
- `{"n", "event": "request", "api", "path", "t", "body"}` when it arrives;
- `{"n", "event": "rule", "rule", "step", "tool", "called", "text"}` when a rule decided the
  answer: `rule` is the rule's index in the file, `step` is k, `tool` the NAME of call k (null once
  the calls are done), `called` the name of the tool called (null when none was), `text` the text
  answered (null when a tool is called); the line of a call also holds its `input`;
- `{"n", "event": "rules-error", "file", "error"}` when the rules file does not parse (or is no
  array of rules of the shape above) as a main request reads it;
- `{"n", "event": "call-tool-error", "tool", "error"}` when `call-tool`'s arguments are no object;
- `{"n", "event": "rate-limited", "seconds"}` when `rate-limit` refused it;
- `{"n", "event": "done", "t"}` when its answer is complete;
so a test can assert what arrived, what the model did and when it was streaming.

Usage: standin.py --log FILE [--rules FILE] [--port N]. It prints `listening PORT` once it accepts
connections.
"""

import argparse
import json
import re
import shlex
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
COUNTER = [0]
LOG_PATH = [None]
RULES_PATH = [None]
MODEL = "standin-model"


def record(entry):
    with LOCK:
        with open(LOG_PATH[0], "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def next_n():
    with LOCK:
        COUNTER[0] += 1
        return COUNTER[0]


def strip_reminders(text):
    return re.sub(r"<system-reminder>.*?</system-reminder>", "", text, flags=re.S).strip()


# --- what the newest user turn says, per wire format -------------------------------------------


def anthropic_turn(body):
    """(newest user text, whether the newest user content is a tool result)."""
    msgs = [m for m in body.get("messages") or [] if m.get("role") != "system"]
    if not msgs or msgs[-1].get("role") != "user":
        return "", False
    content = msgs[-1].get("content")
    if isinstance(content, str):
        return strip_reminders(content), False
    texts = [strip_reminders(b.get("text", "")) for b in content if b.get("type") == "text"]
    tool_result = any(b.get("type") == "tool_result" for b in content)
    return "\n".join(t for t in texts if t), tool_result


def responses_turn(body):
    items = body.get("input") or []
    if isinstance(items, str):
        return items, False
    texts = []
    for item in reversed(items):
        kind = item.get("type", "message")
        if kind in ("function_call_output", "custom_tool_call_output"):
            return "\n".join(reversed(texts)), not texts
        if kind == "message" and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                texts.append(content)
            else:
                texts.append("\n".join(c.get("text", "") for c in content if "text" in c))
            continue
        if kind == "message" and item.get("role") == "assistant":
            break
        if kind in ("function_call", "custom_tool_call", "reasoning"):
            break
    return "\n".join(reversed(texts)), False


def chat_turn(body):
    msgs = body.get("messages") or []
    if msgs and msgs[-1].get("role") == "tool":
        return "", True
    if not msgs or msgs[-1].get("role") != "user":
        return "", False
    content = msgs[-1].get("content")
    if isinstance(content, list):
        content = "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
    return content or "", False


CALL_TOOL = re.compile(r"\bcall-tool (\w+)")


def decide(text, after_tool):
    """The scripted answer: ("tool", path, word) | ("call", name, 0) | ("rate-limit", seconds) |
    ("text", answer, seconds)."""
    if after_tool:
        return ("text", "The file is written.", 0)
    m = re.search(r"\brate-limit (\d+)\b", text)
    if m:
        return ("rate-limit", int(m.group(1)))
    lines = [l for l in text.splitlines() if l.strip()]
    last_create = None
    for line in lines:
        m = re.search(r"create-file (\S+) (\S+)", line)
        if m:
            last_create = m
    if last_create:
        return ("tool", last_create.group(1), last_create.group(2))
    m = CALL_TOOL.search(text)
    if m:
        return ("call", m.group(1), 0)
    m = re.search(r"\bslow (\d+(?:\.\d+)?)\b", text)
    if m:
        return ("text", "Streaming this answer slowly. " * 20 + "Done.", float(m.group(1)))
    first = lines[0][:40] if lines else ""
    return ("text", "ack " + first, 0)


def call_tool_input(text, n):
    """The arguments of the text's `call-tool NAME {json}`: the JSON object after the name on its
    line, `{}` without one; JSON that does not parse or is no object is logged and gives `{}`."""
    m = CALL_TOOL.search(text)
    if not m:
        return {}
    rest = text[m.end():]
    start = len(rest) - len(rest.lstrip(" \t"))
    if not rest[start:].startswith("{"):
        return {}
    try:
        value, _ = json.JSONDecoder().raw_decode(rest, start)
    except ValueError as e:
        record({"n": n, "event": "call-tool-error", "tool": m.group(1), "error": str(e)})
        return {}
    if not isinstance(value, dict):
        record({"n": n, "event": "call-tool-error", "tool": m.group(1), "error": "the arguments are no JSON object"})
        return {}
    return value


def offered(tools, name):
    """The tool of the request's `tools` named `name` or ending in `__name`, or None."""
    found = [t for t in tools if t == name or (t or "").endswith("__" + name)]
    return found[0] if found else None


# --- rules (Anthropic Messages, chat completions) -----------------------------------------------


def parse_rules(raw):
    """The rules of the file's text: [(index, compiled when, [(tool, input)], then)]; ValueError
    when it is not the documented shape."""
    doc = json.loads(raw)
    if not isinstance(doc, list):
        raise ValueError("the rules are no JSON array")
    rules = []
    for i, rule in enumerate(doc):
        if not isinstance(rule, dict):
            raise ValueError(f"rule {i} is no JSON object")
        when = rule.get("when")
        if not isinstance(when, str):
            raise ValueError(f"rule {i} has no `when` string")
        try:
            pattern = re.compile(when, re.S)
        except re.error as e:
            raise ValueError(f"rule {i}: `when` is no regular expression: {e}") from None
        calls = rule.get("calls", [])
        if not isinstance(calls, list):
            raise ValueError(f"rule {i}: `calls` is no JSON array")
        steps = []
        for j, call in enumerate(calls):
            if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
                raise ValueError(f"rule {i}, call {j}: no `tool` string")
            args = call.get("input", {})
            if not isinstance(args, dict):
                raise ValueError(f"rule {i}, call {j}: `input` is no JSON object")
            steps.append((call["tool"], args))
        then = rule.get("then", "done")
        if not isinstance(then, str):
            raise ValueError(f"rule {i}: `then` is no string")
        rules.append((i, pattern, steps, then))
    return rules


def load_rules(n):
    """The rules file as it is now: no rules while it is missing or does not parse (then logged)."""
    path = RULES_PATH[0]
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as f:
            raw = f.read()
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        record({"n": n, "event": "rules-error", "file": path, "error": str(e)})
        return []
    try:
        return parse_rules(raw)
    except ValueError as e:
        record({"n": n, "event": "rules-error", "file": path, "error": str(e)})
        return []


def user_text(content):
    """A user message's text: its text blocks without `<system-reminder>` blocks, joined by newlines."""
    if isinstance(content, str):
        return strip_reminders(content)
    texts = [strip_reminders(b.get("text") or "") for b in content or []
             if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(t for t in texts if t)


def anthropic_rule_turn(body):
    """(the newest user message's text, the number of tool_use blocks the assistant sent after it),
    or None when no user message holds text."""
    msgs = body.get("messages") or []
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].get("role") != "user":
            continue
        text = user_text(msgs[i].get("content"))
        if not text:
            continue
        calls = 0
        for m in msgs[i + 1:]:
            if m.get("role") == "assistant" and isinstance(m.get("content"), list):
                calls += sum(1 for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use")
        return text, calls
    return None


def chat_rule_turn(body):
    """(the newest user message's text, the number of tool calls the assistant made after it), or
    None when no user message holds text; a chat request's counterpart of `anthropic_rule_turn`."""
    msgs = body.get("messages") or []
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].get("role") != "user":
            continue
        text = user_text(msgs[i].get("content"))
        if not text:
            continue
        calls = sum(len(m.get("tool_calls") or []) for m in msgs[i + 1:] if m.get("role") == "assistant")
        return text, calls
    return None


def rule_plan(body, tools, n, turn_of=anthropic_rule_turn):
    """The plan of the first rule matching a main request, logged, or None when no rule matches."""
    rules = load_rules(n)
    if not rules:
        return None
    turn = turn_of(body)
    if turn is None:
        return None
    text, step = turn
    for i, pattern, steps, then in rules:
        if not pattern.search(text):
            continue
        entry = {"n": n, "event": "rule", "rule": i, "step": step, "tool": None, "called": None, "text": None}
        if step < len(steps):
            name, args = steps[step]
            entry["tool"] = name
            called = offered(tools, name)
            if called:
                record(dict(entry, called=called, input=args))
                return ("tool", called, args, f"Calling {name}.")
            answer = f"no tool {name} offered"
        else:
            answer = then
        record(dict(entry, text=answer))
        return ("text", answer, 0)
    return None


def anthropic_plan(body, n):
    """("tool", name, input, preamble) | ("text", answer, seconds) for an Anthropic request."""
    tools = [t.get("name") for t in body.get("tools") or []]
    if tools:
        plan = rule_plan(body, tools, n)
        if plan:
            return plan
    text, after_tool = anthropic_turn(body)
    plan = decide(text, after_tool)
    if plan[0] == "tool":
        if "Write" not in tools:
            return ("text", "I have no Write tool.", 0)
        return ("tool", "Write", {"file_path": plan[1], "content": plan[2] + "\n"}, "Writing the file.")
    if plan[0] == "call":
        found = offered(tools, plan[1])
        if not found:
            return ("text", f"I have no {plan[1]} tool.", 0)
        return ("tool", found, call_tool_input(text, n), "Writing the file.")
    return plan


def chat_plan(body, n):
    """("tool", name, arguments, preamble) | ("text", answer, seconds) | ("rate-limit", seconds) for a
    chat completions request. Without a tool to write with, `create-file` answers in aider's "whole"
    edit format: the path, then the file's content fenced."""
    tools = [(t.get("function") or {}).get("name") or t.get("name") for t in body.get("tools") or []
             if isinstance(t, dict)]
    if tools:
        plan = rule_plan(body, tools, n, chat_rule_turn)
        if plan:
            return plan
    text, after_tool = chat_turn(body)
    plan = decide(text, after_tool)
    if plan[0] == "tool":
        path, word = plan[1], plan[2]
        if "write_file" in tools:
            return ("tool", "write_file", {"file_path": path, "content": word}, "Writing the file.")
        if "run_shell_command" in tools:
            return ("tool", "run_shell_command", {"command": f"printf %s {shlex.quote(word)} > {shlex.quote(path)}"},
                    "Writing the file.")
        return ("text", f"{path}\n```\n{word}\n```\n", 0)
    if plan[0] == "call":
        found = offered(tools, plan[1])
        if not found:
            return ("text", f"I have no {plan[1]} tool.", 0)
        return ("tool", found, call_tool_input(text, n), "Writing the file.")
    return plan


def chunks(text, n):
    size = max(1, len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


# --- the server --------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def send_json(self, code, value, headers=()):
        data = json.dumps(value).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, header in headers:
            self.send_header(name, header)
        self.end_headers()
        self.wfile.write(data)

    def rate_limited(self, api, seconds, n):
        """The 429 the service answers a request over its rate limit, with its error body."""
        record({"n": n, "event": "rate-limited", "seconds": seconds})
        if api == "anthropic":
            error = {"type": "error", "error": {"type": "rate_limit_error", "message":
                                                "Number of request tokens has exceeded your per-minute rate limit"}}
        else:
            error = {"error": {"message": "Rate limit reached for requests", "type": "requests", "param": None,
                               "code": "rate_limit_exceeded"}}
        self.send_json(429, error, [("retry-after", str(seconds))])

    def start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data):
        data = data.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event(self, name, value):
        prefix = f"event: {name}\n" if name else ""
        self.chunk(f"{prefix}data: {json.dumps(value)}\n\n")

    def end_sse(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_GET(self):
        path = self.path.split("?")[0]
        if path.endswith("/models"):
            return self.send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        return self.send_json(404, {"error": {"message": f"no route {path}"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        path = self.path.split("?")[0]
        body = self.body()
        if path.endswith("/count_tokens"):
            return self.send_json(200, {"input_tokens": 100})
        if path.endswith("/messages"):
            api = "anthropic"
        elif path.endswith("/responses"):
            api = "responses"
        elif path.endswith("/chat/completions"):
            api = "chat"
        else:
            return self.send_json(404, {"error": {"message": f"no route {path}"}})
        n = next_n()
        record({"n": n, "event": "request", "api": api, "path": self.path, "t": time.time(), "body": body})
        try:
            getattr(self, "wire_" + api)(body, n)
        except (BrokenPipeError, ConnectionResetError):
            pass
        record({"n": n, "event": "done", "t": time.time()})

    # Anthropic Messages.
    def wire_anthropic(self, body, n):
        plan = anthropic_plan(body, n)
        if plan[0] == "rate-limit":
            return self.rate_limited("anthropic", plan[1], n)
        usage = {"input_tokens": 100, "output_tokens": 1}
        if not body.get("stream"):
            if plan[0] == "tool":
                content = [{"type": "tool_use", "id": f"toolu_{n}", "name": plan[1], "input": plan[2]}]
                stop = "tool_use"
            else:
                content = [{"type": "text", "text": plan[1]}]
                stop = "end_turn"
            return self.send_json(200, {"id": f"msg_{n}", "type": "message", "role": "assistant",
                                        "model": body.get("model", MODEL), "content": content,
                                        "stop_reason": stop, "stop_sequence": None, "usage": usage})
        self.start_sse()
        self.event("message_start", {"type": "message_start", "message": {
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model", MODEL),
            "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}})
        if plan[0] == "tool":
            self.event("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}})
            self.event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": plan[3]}})
            self.event("content_block_stop", {"type": "content_block_stop", "index": 0})
            args = json.dumps(plan[2])
            self.event("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
                "type": "tool_use", "id": f"toolu_{n}", "name": plan[1], "input": {}}})
            for part in chunks(args, 3):
                self.event("content_block_delta", {"type": "content_block_delta", "index": 1,
                                                   "delta": {"type": "input_json_delta", "partial_json": part}})
            self.event("content_block_stop", {"type": "content_block_stop", "index": 1})
            stop = "tool_use"
        else:
            self.event("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "text", "text": ""}})
            parts = chunks(plan[1], 40 if plan[2] else 1)
            for part in parts:
                self.event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                   "delta": {"type": "text_delta", "text": part}})
                if plan[2]:
                    time.sleep(plan[2] / len(parts))
            self.event("content_block_stop", {"type": "content_block_stop", "index": 0})
            stop = "end_turn"
        self.event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 20}})
        self.event("message_stop", {"type": "message_stop"})
        self.end_sse()

    # OpenAI Responses.
    def wire_responses(self, body, n):
        text, after_tool = responses_turn(body)
        plan = decide(text, after_tool)
        if plan[0] == "rate-limit":
            return self.rate_limited("responses", plan[1], n)
        tools = {}
        for t in body.get("tools") or []:
            tools[t.get("name") or t.get("type")] = t.get("type")
        model = body.get("model", MODEL)
        resp = {"id": f"resp_{n}", "object": "response", "created_at": int(time.time()), "status": "in_progress",
                "model": model, "output": []}
        self.start_sse()
        self.event("response.created", {"type": "response.created", "response": resp})
        if plan[0] == "tool" and "apply_patch" in tools:
            patch = f"*** Begin Patch\n*** Add File: {plan[1]}\n+{plan[2]}\n*** End Patch\n"
            if tools["apply_patch"] == "custom":
                item = {"type": "custom_tool_call", "id": f"ctc_{n}", "call_id": f"call_{n}",
                        "name": "apply_patch", "input": patch, "status": "completed"}
            else:
                item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "apply_patch",
                        "arguments": json.dumps({"input": patch}), "status": "completed"}
        elif plan[0] == "tool" and ("shell" in tools or "exec_command" in tools or "shell_command" in tools):
            script = f"printf '%s\\n' {plan[2]} > {plan[1]}"
            if "shell_command" in tools:
                name, args = "shell_command", {"command": script}
            elif "exec_command" in tools:
                name, args = "exec_command", {"cmd": script}
            else:
                name, args = "shell", {"command": ["bash", "-lc", script]}
            item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": name,
                    "arguments": json.dumps(args), "status": "completed"}
        else:
            answer = plan[1] if plan[0] == "text" else "I have no tool to write files."
            seconds = plan[2] if plan[0] == "text" else 0
            mid = f"msg_{n}"
            item = {"type": "message", "id": mid, "role": "assistant", "status": "in_progress", "content": []}
            self.event("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                      "item": item})
            self.event("response.content_part.added", {"type": "response.content_part.added", "item_id": mid,
                                                       "output_index": 0, "content_index": 0,
                                                       "part": {"type": "output_text", "text": "",
                                                                "annotations": []}})
            parts = chunks(answer, 40 if seconds else 1)
            for part in parts:
                self.event("response.output_text.delta", {"type": "response.output_text.delta", "item_id": mid,
                                                          "output_index": 0, "content_index": 0, "delta": part})
                if seconds:
                    time.sleep(seconds / len(parts))
            self.event("response.output_text.done", {"type": "response.output_text.done", "item_id": mid,
                                                     "output_index": 0, "content_index": 0, "text": answer})
            item = {"type": "message", "id": mid, "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": answer, "annotations": []}]}
        if item["type"] != "message":
            self.event("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                      "item": item})
        self.event("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                                 "item": item})
        resp = dict(resp, status="completed", output=[item], usage={
            "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120})
        self.event("response.completed", {"type": "response.completed", "response": resp})
        self.end_sse()

    # OpenAI chat completions.
    def wire_chat(self, body, n):
        plan = chat_plan(body, n)
        if plan[0] == "rate-limit":
            return self.rate_limited("chat", plan[1], n)
        model = body.get("model", MODEL)
        created = int(time.time())
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}

        def chunk_of(delta, finish=None):
            return {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        if plan[0] == "tool":
            name, args = plan[1], json.dumps(plan[2])
            call = {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": args}}
            message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        else:
            answer, seconds = plan[1], plan[2]
            message, finish = {"role": "assistant", "content": answer}, "stop"
        if not body.get("stream"):
            return self.send_json(200, {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": created,
                                        "model": model, "choices": [{"index": 0, "finish_reason": finish,
                                                                     "message": message}], "usage": usage})
        self.start_sse()
        if plan[0] == "tool":
            self.event(None, chunk_of({"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": ""}}]}))
            for part in chunks(args, 3):
                self.event(None, chunk_of({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}))
        else:
            self.event(None, chunk_of({"role": "assistant", "content": ""}))
            parts = chunks(answer, 40 if seconds else 1)
            for part in parts:
                self.event(None, chunk_of({"content": part}))
                if seconds:
                    time.sleep(seconds / len(parts))
        self.event(None, chunk_of({}, finish))
        self.event(None, {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": created,
                          "model": model, "choices": [], "usage": usage})
        self.chunk("data: [DONE]\n\n")
        self.end_sse()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", required=True)
    parser.add_argument("--rules", help="a JSON file of rules, read again on every request (see above)")
    args = parser.parse_args()
    LOG_PATH[0] = args.log
    RULES_PATH[0] = args.rules
    open(args.log, "a").close()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
