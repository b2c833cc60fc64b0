"""Tests of the scripted model endpoint (standin.py): in the Anthropic Messages format its rules
file, `call-tool` with arguments, and that without a matching rule it answers as before; in the
chat completions format its tool calls (`create-file`, `call-tool`, rules) as qwen-code gets them
and aider's whole-file answer without tools; `rate-limit` in all three formats.

Run from the repository's root: python3 -m unittest e2e/model-standin/test_standin.py
(or python3 e2e/model-standin/test_standin.py).
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "standin.py"
# How long the stand-in may take to start, answer a request or stop.
TIMEOUT = 10

TOOLS = [
    {"name": "Write", "description": "Writes a file", "input_schema": {"type": "object"}},
    {"name": "mcp__aoctl__spawn", "description": "Spawns a session", "input_schema": {"type": "object"}},
    {"name": "mcp__aoctl__status", "description": "Reports a status", "input_schema": {"type": "object"}},
]


class Standin:
    """The stand-in as a child process on a free port, with its log (and rules file) in a
    temporary directory."""

    def __init__(self, rules=True):
        self.dir = tempfile.TemporaryDirectory()
        self.log = Path(self.dir.name) / "requests.jsonl"
        self.rules = Path(self.dir.name) / "rules.json"
        argv = [sys.executable, str(SCRIPT), "--log", str(self.log), "--port", "0"]
        if rules:
            argv += ["--rules", str(self.rules)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        first = []
        reader = threading.Thread(target=lambda: first.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(TIMEOUT)
        line = first[0].strip() if first else ""
        if not line.startswith("listening "):
            self.stop()
            raise RuntimeError(f"the stand-in did not say where it listens: {line!r}")
        self.port = int(line.split()[1])

    def send(self, body, path):
        """(status, headers, body text) of a request, whatever its status."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                return resp.status, resp.headers, resp.read().decode()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.headers, e.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(TIMEOUT)
        self.proc.stdout.close()
        self.dir.cleanup()

    def post(self, body, path="/v1/messages"):
        """The answer: for a streamed request the message its events add up to, checked for shape."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            raw = resp.read().decode()
            kind = resp.headers.get("Content-Type")
        if not body.get("stream"):
            return json.loads(raw)
        assert kind == "text/event-stream", kind
        return assemble(raw)

    def write_rules(self, rules):
        """Replaces the rules file at once (a JSON value, or raw text)."""
        text = rules if isinstance(rules, str) else json.dumps(rules)
        tmp = self.rules.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.rules)

    def remove_rules(self):
        try:
            self.rules.unlink()
        except FileNotFoundError:
            pass

    def entries(self, n=None, event=None, since=0):
        """The log's lines (of request `n`, of that event, of requests after number `since`)."""
        lines = self.log.read_text(encoding="utf-8").splitlines() if self.log.exists() else []
        found = [json.loads(l) for l in lines if l.strip()]
        return [e for e in found if (n is None or e["n"] == n) and (event is None or e["event"] == event)
                and e["n"] > since]

    def settled_entries(self, n, timeout=5.0):
        """Request `n`'s log lines once its `done` line is there (written after the answer is
        sent, so a client can read the answer first), waiting at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.entries(n)
            if any(e["event"] == "done" for e in found) or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def last_n(self):
        """The number of the newest request, 0 before any."""
        return max((e["n"] for e in self.entries(event="request")), default=0)


def assemble(raw):
    """The message a stream of Anthropic Messages events adds up to; asserts the events' order."""
    events = []
    for frame in raw.split("\n\n"):
        name, data = None, None
        for line in frame.splitlines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: "):])
        if data is not None:
            assert name == data["type"], (name, data)
            events.append(data)
    assert events[0]["type"] == "message_start", events[0]
    assert events[-1]["type"] == "message_stop", events[-1]
    assert events[-2]["type"] == "message_delta", events[-2]
    message = dict(events[0]["message"], content=[])
    open_block, partial = None, {}
    for e in events[1:-2]:
        if e["type"] == "content_block_start":
            assert open_block is None and e["index"] == len(message["content"]), e
            open_block = e["index"]
            block = dict(e["content_block"])
            if block["type"] == "tool_use":
                assert block["input"] == {}, block
                partial[open_block] = ""
            message["content"].append(block)
        elif e["type"] == "content_block_delta":
            assert e["index"] == open_block, e
            block, delta = message["content"][open_block], e["delta"]
            if delta["type"] == "text_delta":
                assert block["type"] == "text", e
                block["text"] += delta["text"]
            else:
                assert delta["type"] == "input_json_delta" and block["type"] == "tool_use", e
                partial[open_block] += delta["partial_json"]
        elif e["type"] == "content_block_stop":
            assert e["index"] == open_block, e
            if open_block in partial:
                message["content"][open_block]["input"] = json.loads(partial[open_block])
            open_block = None
        else:
            raise AssertionError(f"unexpected event {e}")
    assert open_block is None
    message["stop_reason"] = events[-2]["delta"]["stop_reason"]
    return message


# --- requests as Claude Code sends them ---------------------------------------------------------


def user(*texts):
    return {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}


def called(msg_id, name, args):
    return {"role": "assistant", "content": [{"type": "text", "text": "Calling."},
                                             {"type": "tool_use", "id": msg_id, "name": name, "input": args}]}


def result(msg_id, *texts):
    """A user message of a tool result, with texts after it (reminders, or a message typed meanwhile)."""
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": msg_id, "content": "ok"}]
            + [{"type": "text", "text": t} for t in texts]}


def main_request(*messages, stream=True):
    return {"model": "claude-x", "max_tokens": 1000, "stream": stream, "tools": TOOLS, "messages": list(messages)}


def tool_uses(message):
    return [b for b in message["content"] if b["type"] == "tool_use"]


def text_of(message):
    return "".join(b["text"] for b in message["content"] if b["type"] == "text")


REMINDER = "<system-reminder>\nThe date is today. spawn two workers\n</system-reminder>"


class RulesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Standin()

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    def setUp(self):
        self.s.remove_rules()
        self.since = self.s.last_n()

    def rule_lines(self, n):
        return [{k: v for k, v in e.items() if k not in ("n", "event")} for e in self.s.entries(n, "rule")]

    def test_a_rule_makes_its_calls_in_turn_then_answers(self):
        self.s.write_rules([{"when": r"spawn (\w+) workers", "then": "both are spawned",
                             "calls": [{"tool": "spawn", "input": {"name": "a"}},
                                       {"tool": "spawn", "input": {"name": "b", "labels": ["x", "y"]}}]}])
        ask = user(REMINDER, "please spawn two workers")
        first = self.s.post(main_request(ask))
        n = self.s.last_n()
        self.assertEqual(first["stop_reason"], "tool_use")
        [use] = tool_uses(first)
        self.assertEqual((use["id"], use["name"], use["input"]), (f"toolu_{n}", "mcp__aoctl__spawn", {"name": "a"}))
        self.assertEqual(self.rule_lines(n), [{"rule": 0, "step": 0, "tool": "spawn", "called": "mcp__aoctl__spawn",
                                               "text": None, "input": {"name": "a"}}])

        # The tool result comes back with a reminder only: the asking message still decides.
        history = [ask, called(use["id"], use["name"], use["input"]), result(use["id"], REMINDER)]
        second = self.s.post(main_request(*history))
        n = self.s.last_n()
        [use] = tool_uses(second)
        self.assertEqual((use["name"], use["input"]), ("mcp__aoctl__spawn", {"name": "b", "labels": ["x", "y"]}))
        self.assertEqual(self.rule_lines(n), [{"rule": 0, "step": 1, "tool": "spawn", "called": "mcp__aoctl__spawn",
                                               "text": None, "input": {"name": "b", "labels": ["x", "y"]}}])

        history += [called(use["id"], use["name"], use["input"]), result(use["id"])]
        third = self.s.post(main_request(*history))
        n = self.s.last_n()
        self.assertEqual((third["stop_reason"], tool_uses(third), text_of(third)), ("end_turn", [], "both are spawned"))
        self.assertEqual(self.rule_lines(n), [{"rule": 0, "step": 2, "tool": None, "called": None,
                                               "text": "both are spawned"}])

    def test_then_defaults_to_done_and_calls_to_none(self):
        self.s.write_rules([{"when": "^hello"}])
        answer = self.s.post(main_request(user("hello there")))
        self.assertEqual(text_of(answer), "done")
        self.assertEqual(self.rule_lines(self.s.last_n()),
                         [{"rule": 0, "step": 0, "tool": None, "called": None, "text": "done"}])

    def test_the_first_matching_rule_decides(self):
        self.s.write_rules([{"when": "never", "then": "zero"}, {"when": "status", "then": "one"},
                            {"when": "stat", "then": "two"}])
        self.assertEqual(text_of(self.s.post(main_request(user("what is the status?")))), "one")
        self.assertEqual(self.rule_lines(self.s.last_n())[0]["rule"], 1)

    def test_all_texts_of_the_newest_message_count_and_only_those(self):
        # Claude Code appends a message typed while it was busy to the same content.
        self.s.write_rules([{"when": "first one.*second one", "then": "both seen"}])
        answer = self.s.post(main_request(user("the first one", REMINDER, "and the second one")))
        self.assertEqual(text_of(answer), "both seen")
        # The texts of an older message do not.
        answer = self.s.post(main_request(user("the first one"), {"role": "assistant", "content": "ok"},
                                          user("and the second one")))
        self.assertEqual(text_of(answer), "ack and the second one")
        self.assertEqual(self.s.entries(self.s.last_n(), "rule"), [])

    def test_a_message_typed_beside_a_tool_result_starts_over(self):
        self.s.write_rules([{"when": "spawn", "calls": [{"tool": "spawn", "input": {"name": "a"}}], "then": "x"},
                            {"when": "status now", "calls": [{"tool": "status"}]}])
        history = [user("spawn one"), called("toolu_1", "mcp__aoctl__spawn", {"name": "a"}),
                   result("toolu_1", "status now")]
        answer = self.s.post(main_request(*history))
        [use] = tool_uses(answer)
        self.assertEqual((use["name"], use["input"]), ("mcp__aoctl__status", {}))
        self.assertEqual(self.rule_lines(self.s.last_n()), [{"rule": 1, "step": 0, "tool": "status",
                                                             "called": "mcp__aoctl__status", "text": None,
                                                             "input": {}}])

    def test_a_tool_not_offered_is_said_and_logged(self):
        self.s.write_rules([{"when": "go", "calls": [{"tool": "vanish"}]}])
        answer = self.s.post(main_request(user("go")))
        self.assertEqual((answer["stop_reason"], text_of(answer)), ("end_turn", "no tool vanish offered"))
        self.assertEqual(self.rule_lines(self.s.last_n()), [{"rule": 0, "step": 0, "tool": "vanish", "called": None,
                                                             "text": "no tool vanish offered"}])

    def test_a_tool_is_found_by_its_whole_name_too(self):
        self.s.write_rules([{"when": "go", "calls": [{"tool": "Write", "input": {"file_path": "f", "content": "c"}}]}])
        [use] = tool_uses(self.s.post(main_request(user("go"))))
        self.assertEqual((use["name"], use["input"]), ("Write", {"file_path": "f", "content": "c"}))

    def test_without_a_matching_rule_the_commands_decide(self):
        self.s.write_rules([{"when": "spawn", "then": "never"}])
        ask = user("create-file notes.txt hello")
        answer = self.s.post(main_request(ask))
        [use] = tool_uses(answer)
        self.assertEqual(text_of(answer), "Writing the file.")
        self.assertEqual((use["name"], use["input"]), ("Write", {"file_path": "notes.txt", "content": "hello\n"}))
        answer = self.s.post(main_request(ask, called(use["id"], "Write", use["input"]), result(use["id"])))
        self.assertEqual(text_of(answer), "The file is written.")
        self.assertEqual(text_of(self.s.post(main_request(user("slow 0.2 please")))),
                         "Streaming this answer slowly. " * 20 + "Done.")
        self.assertEqual(self.s.entries(event="rule", since=self.since), [])

    def test_a_side_request_without_tools_is_no_business_of_the_rules(self):
        self.s.write_rules([{"when": "title", "then": "ruled"}])
        body = dict(main_request(user("a title for this")), tools=[])
        self.assertEqual(text_of(self.s.post(body)), "ack a title for this")
        del body["tools"]
        self.assertEqual(text_of(self.s.post(body)), "ack a title for this")
        self.assertEqual(self.s.entries(event="rule", since=self.since), [])

    def test_the_file_is_read_again_for_each_request(self):
        ask = main_request(user("which version?"))
        self.assertEqual(text_of(self.s.post(ask)), "ack which version?")
        self.s.write_rules([{"when": "version", "then": "one"}])
        self.assertEqual(text_of(self.s.post(ask)), "one")
        self.s.write_rules([{"when": "version", "then": "two"}])
        self.assertEqual(text_of(self.s.post(ask)), "two")
        self.s.remove_rules()
        self.assertEqual(text_of(self.s.post(ask)), "ack which version?")
        self.assertEqual(self.s.entries(event="rules-error", since=self.since), [])

    def test_a_file_that_does_not_parse_gives_no_rules_and_is_logged(self):
        for bad, says in [('[{"when": "x"', "Expecting"), ('{"when": "x"}', "no JSON array"),
                          ('[{"when": "("}]', "no regular expression"), ('[{"then": "x"}]', "no `when`"),
                          ('[{"when": "x", "calls": [{"input": {}}]}]', "no `tool`"),
                          ('[{"when": "x", "calls": [{"tool": "t", "input": [1]}]}]', "no JSON object")]:
            with self.subTest(bad=bad):
                self.s.write_rules(bad)
                self.assertEqual(text_of(self.s.post(main_request(user("x marks")))), "ack x marks")
                [error] = self.s.entries(self.s.last_n(), "rules-error")
                self.assertEqual(error["file"], str(self.s.rules))
                self.assertIn(says, error["error"])

    def test_a_rule_answers_unstreamed_requests_too(self):
        self.s.write_rules([{"when": "go", "calls": [{"tool": "spawn", "input": {"name": "z"}}]}])
        answer = self.s.post(main_request(user("go"), stream=False))
        self.assertEqual(answer["stop_reason"], "tool_use")
        self.assertEqual(answer["content"], [{"type": "tool_use", "id": f"toolu_{self.s.last_n()}",
                                              "name": "mcp__aoctl__spawn", "input": {"name": "z"}}])


class CallToolTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Standin()

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    def call(self, text):
        answer = self.s.post(main_request(user(text)))
        n = self.s.last_n()
        uses = tool_uses(answer)
        return (uses[0]["name"], uses[0]["input"]) if uses else text_of(answer), self.s.entries(n, "call-tool-error")

    def test_without_arguments(self):
        self.assertEqual(self.call("call-tool status"), (("mcp__aoctl__status", {}), []))

    def test_with_a_json_object_after_the_name(self):
        args = {"state": "working", "detail": "a {brace} and \"quotes\"", "n": [1, 2]}
        self.assertEqual(self.call(f"please call-tool status {json.dumps(args)} now"),
                         (("mcp__aoctl__status", args), []))
        self.assertEqual(self.call('call-tool spawn {"name": "w"}'), (("mcp__aoctl__spawn", {"name": "w"}), []))

    def test_json_on_the_next_line_is_not_its_arguments(self):
        self.assertEqual(self.call('call-tool status\n{"state": "x"}'), (("mcp__aoctl__status", {}), []))

    def test_bad_arguments_are_logged_and_dropped(self):
        for text in ['call-tool status {"state": ', "call-tool status {state}"]:
            with self.subTest(text=text):
                (found, errors) = self.call(text)
                self.assertEqual(found, ("mcp__aoctl__status", {}))
                self.assertEqual([(e["tool"], "error" in e) for e in errors], [("status", True)])

    def test_a_tool_not_offered(self):
        self.assertEqual(self.call("call-tool vanish"), ("I have no vanish tool.", []))


class NoRulesOptionTest(unittest.TestCase):
    def test_without_the_option_the_commands_decide(self):
        s = Standin(rules=False)
        self.addCleanup(s.stop)
        s.write_rules([{"when": "create", "then": "ruled"}])
        [use] = tool_uses(s.post(main_request(user("create-file a.txt word"))))
        self.assertEqual((use["name"], use["input"]), ("Write", {"file_path": "a.txt", "content": "word\n"}))
        self.assertEqual(s.entries(event="rule") + s.entries(event="rules-error"), [])


# --- requests as qwen-code (chat completions, with tools) and aider (without) send them ------------


def function(name):
    return {"type": "function", "function": {"name": name, "description": name, "parameters": {"type": "object"}}}


QWEN_TOOLS = [function("read_file"), function("write_file"), function("run_shell_command"),
              function("mcp__aoctl__spawn"), function("mcp__aoctl__status")]


def chat_request(*messages, tools=QWEN_TOOLS, stream=True):
    body = {"model": "qwen-x", "stream": stream, "messages": [{"role": "system", "content": "Be brief."}]
            + list(messages)}
    if tools is not None:
        body["tools"] = tools
    return body


def chat_user(text):
    return {"role": "user", "content": text}


def chat_called(call_id, name, args):
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def chat_result(call_id):
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def chat_chunks(raw):
    """The JSON chunks of a chat completions stream; asserts it ends in `data: [DONE]`."""
    frames = [f for f in raw.split("\n\n") if f.strip()]
    assert all(f.startswith("data: ") and "\n" not in f for f in frames), frames
    assert frames[-1] == "data: [DONE]", frames[-1]
    return [json.loads(f[len("data: "):]) for f in frames[:-1]]


def chat_assemble(chunks, n):
    """The message the chunks add up to, with its finish_reason; asserts the ids, the usage chunk
    last and that only the last choice chunk finishes."""
    assert all(c["id"] == f"chatcmpl-{n}" and c["object"] == "chat.completion.chunk" for c in chunks), chunks
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 120, chunks[-1]
    choices = [c["choices"][0] for c in chunks[:-1]]
    assert all(c["finish_reason"] is None for c in choices[:-1]) and choices[-1]["delta"] == {}, choices
    message, calls = {"content": ""}, {}
    for c in choices:
        delta = c["delta"]
        message["content"] += delta.get("content") or ""
        for call in delta.get("tool_calls") or []:
            whole = calls.setdefault(call["index"], {"id": None, "name": None, "arguments": ""})
            whole["id"] = call.get("id", whole["id"])
            whole["name"] = call.get("function", {}).get("name", whole["name"])
            whole["arguments"] += call.get("function", {}).get("arguments", "")
    message["tool_calls"] = [dict(c, arguments=json.loads(c["arguments"])) for _, c in sorted(calls.items())]
    message["finish_reason"] = choices[-1]["finish_reason"]
    return message


class ChatTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Standin()

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    def setUp(self):
        self.s.remove_rules()
        self.since = self.s.last_n()

    def post(self, body):
        """(the assembled message, the request's number, the raw chunks)."""
        status, headers, raw = self.s.send(body, "/v1/chat/completions")
        self.assertEqual((status, headers.get("Content-Type")), (200, "text/event-stream"))
        n = self.s.last_n()
        found = chat_chunks(raw)
        return chat_assemble(found, n), n, found

    def calls(self, message):
        return [(c["name"], c["arguments"]) for c in message["tool_calls"]]

    def test_create_file_calls_write_file_in_the_verified_shape(self):
        message, n, found = self.post(chat_request(chat_user("create-file notes.txt hello")))
        self.assertEqual(found[0]["choices"], [{"index": 0, "finish_reason": None, "delta": {
            "role": "assistant", "content": None, "tool_calls": [{"index": 0, "id": f"call_{n}", "type": "function",
                                                                  "function": {"name": "write_file",
                                                                               "arguments": ""}}]}}])
        parts = found[1:-2]
        self.assertGreater(len(parts), 1)
        for c in parts:
            [call] = c["choices"][0]["delta"]["tool_calls"]
            self.assertEqual((list(c["choices"][0]["delta"]), list(call), call["index"], list(call["function"])),
                             (["tool_calls"], ["index", "function"], 0, ["arguments"]))
        self.assertEqual(found[-2]["choices"][0]["finish_reason"], "tool_calls")
        self.assertTrue(all(c["model"] == "qwen-x" and c["created"] == found[0]["created"] for c in found))
        self.assertEqual((message["content"], message["finish_reason"]), ("", "tool_calls"))
        self.assertEqual(message["tool_calls"], [{"id": f"call_{n}", "name": "write_file",
                                                  "arguments": {"file_path": "notes.txt", "content": "hello"}}])

    def test_create_file_with_only_a_shell_tool_runs_printf(self):
        tools = [function("read_file"), function("run_shell_command")]
        message, _, _ = self.post(chat_request(chat_user("create-file out/a.txt world"), tools=tools))
        self.assertEqual(self.calls(message), [("run_shell_command", {"command": "printf %s world > out/a.txt"})])
        self.assertEqual(message["finish_reason"], "tool_calls")

    def test_create_file_without_tools_answers_in_aiders_whole_format(self):
        for tools in (None, [], [function("read_file")]):
            with self.subTest(tools=tools):
                message, _, found = self.post(chat_request(chat_user("create-file notes.txt hello"), tools=tools))
                self.assertEqual((message["content"], message["tool_calls"], message["finish_reason"]),
                                 ("notes.txt\n```\nhello\n```\n", [], "stop"))
                self.assertEqual(found[0]["choices"][0]["delta"], {"role": "assistant", "content": ""})

    def test_call_tool_calls_the_offered_tool_with_its_arguments(self):
        args = {"state": "working", "detail": "a {brace}"}
        message, _, _ = self.post(chat_request(chat_user(f"call-tool status {json.dumps(args)}")))
        self.assertEqual(self.calls(message), [("mcp__aoctl__status", args)])
        message, _, _ = self.post(chat_request(chat_user("call-tool read_file")))
        self.assertEqual(self.calls(message), [("read_file", {})])
        message, _, _ = self.post(chat_request(chat_user("call-tool vanish")))
        self.assertEqual((message["content"], message["tool_calls"]), ("I have no vanish tool.", []))

    def test_after_a_tool_message_the_file_is_written(self):
        history = [chat_user("create-file notes.txt hello"),
                   chat_called("call_1", "write_file", {"file_path": "notes.txt", "content": "hello"}),
                   chat_result("call_1")]
        message, _, _ = self.post(chat_request(*history))
        self.assertEqual((message["content"], message["tool_calls"], message["finish_reason"]),
                         ("The file is written.", [], "stop"))

    def test_rules_make_their_calls_in_turn_then_answer(self):
        self.s.write_rules([{"when": "never", "then": "no"},
                            {"when": r"spawn (\w+) workers", "then": "both are spawned",
                             "calls": [{"tool": "spawn", "input": {"name": "a"}},
                                       {"tool": "spawn", "input": {"name": "b", "labels": ["x"]}}]}])
        ask = chat_user("please spawn two workers")
        rules = lambda n: [{k: v for k, v in e.items() if k not in ("n", "event")} for e in self.s.entries(n, "rule")]

        message, n, _ = self.post(chat_request(ask))
        self.assertEqual(self.calls(message), [("mcp__aoctl__spawn", {"name": "a"})])
        self.assertEqual(rules(n), [{"rule": 1, "step": 0, "tool": "spawn", "called": "mcp__aoctl__spawn",
                                     "text": None, "input": {"name": "a"}}])

        history = [ask, chat_called(f"call_{n}", "mcp__aoctl__spawn", {"name": "a"}), chat_result(f"call_{n}")]
        message, n, _ = self.post(chat_request(*history))
        self.assertEqual(self.calls(message), [("mcp__aoctl__spawn", {"name": "b", "labels": ["x"]})])
        self.assertEqual(rules(n), [{"rule": 1, "step": 1, "tool": "spawn", "called": "mcp__aoctl__spawn",
                                     "text": None, "input": {"name": "b", "labels": ["x"]}}])

        history += [chat_called(f"call_{n}", "mcp__aoctl__spawn", {"name": "b"}), chat_result(f"call_{n}")]
        message, n, _ = self.post(chat_request(*history))
        self.assertEqual((message["content"], message["tool_calls"], message["finish_reason"]),
                         ("both are spawned", [], "stop"))
        self.assertEqual(rules(n), [{"rule": 1, "step": 2, "tool": None, "called": None, "text": "both are spawned"}])

    def test_rules_count_the_text_parts_and_skip_requests_without_tools(self):
        self.s.write_rules([{"when": "first.*second", "calls": [{"tool": "status"}]}])
        ask = {"role": "user", "content": [{"type": "text", "text": "the first"}, {"type": "text", "text": "second"}]}
        message, n, _ = self.post(chat_request(ask))
        self.assertEqual(self.calls(message), [("mcp__aoctl__status", {})])
        message, n, _ = self.post(chat_request(chat_user("first and second"), tools=None))
        self.assertEqual(message["content"], "ack first and second")
        self.assertEqual(self.s.entries(n, "rule"), [])

    def test_a_tool_call_unstreamed(self):
        status, _, raw = self.s.send(chat_request(chat_user("create-file a.txt b"), stream=False),
                                     "/v1/chat/completions")
        answer = json.loads(raw)
        [choice] = answer["choices"]
        self.assertEqual((status, choice["finish_reason"], choice["message"]["content"]), (200, "tool_calls", None))
        [call] = choice["message"]["tool_calls"]
        self.assertEqual((call["id"], call["type"], call["function"]["name"]),
                         (f"call_{self.s.last_n()}", "function", "write_file"))
        self.assertEqual(json.loads(call["function"]["arguments"]), {"file_path": "a.txt", "content": "b"})


class RateLimitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Standin()

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    OPENAI_ERROR = {"error": {"message": "Rate limit reached for requests", "type": "requests", "param": None,
                              "code": "rate_limit_exceeded"}}

    def check(self, body, path, error):
        for stream in (True, False):
            with self.subTest(path=path, stream=stream):
                status, headers, raw = self.s.send(dict(body, stream=stream), path)
                n = self.s.last_n()
                self.assertEqual((status, headers.get("retry-after"), headers.get("Content-Type")),
                                 (429, "7", "application/json"))
                self.assertEqual(json.loads(raw), error)
                self.assertEqual([(e["event"], e.get("seconds")) for e in self.s.settled_entries(n)],
                                 [("request", None), ("rate-limited", 7), ("done", None)])

    def test_anthropic_messages(self):
        self.check(main_request(user("rate-limit 7 please")), "/v1/messages",
                   {"type": "error", "error": {"type": "rate_limit_error", "message":
                                               "Number of request tokens has exceeded your per-minute rate limit"}})

    def test_openai_responses(self):
        self.check({"model": "gpt-x", "input": [{"type": "message", "role": "user",
                                                 "content": [{"type": "input_text", "text": "rate-limit 7"}]}]},
                   "/v1/responses", self.OPENAI_ERROR)

    def test_chat_completions(self):
        self.check(chat_request(chat_user("rate-limit 7")), "/v1/chat/completions", self.OPENAI_ERROR)
        self.check(chat_request(chat_user("rate-limit 7"), tools=None), "/chat/completions", self.OPENAI_ERROR)


if __name__ == "__main__":
    unittest.main()
