//! The pane's rendering of a protocol log: what a person watching `aoctl attach`, the transcript
//! or `aoctl logs` reads instead of JSON — the user's messages, what the agent says, its tool calls
//! and their results, approvals and how to answer them, and a line at each turn's end.

use crate::fold::{Approval, Conversation};
use crate::{short, Event, Protocol, Record};

/// Renders records one by one, folding them as it goes (turn ends name the fold's numbers).
#[derive(Debug, Clone)]
pub struct Renderer {
    conversation: Conversation,
    /// The session's name, for the answer command an approval shows.
    session: String,
    /// ACP's message chunks, held until the message ends.
    said: String,
}

/// The widest a line of the agent's text is shown before it is cut.
const WIDTH: usize = 160;

impl Renderer {
    pub fn new(protocol: Protocol, agent: &str, session: &str) -> Renderer {
        Renderer { conversation: Conversation::new(protocol, agent), session: session.to_string(), said: String::new() }
    }

    /// The fold so far.
    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    /// The lines a record adds to the pane.
    pub fn record(&mut self, rec: &Record) -> Vec<String> {
        let events = self.conversation.protocol.events(rec, &self.conversation.outstanding);
        self.conversation.apply(rec);
        let mut out = vec![];
        for e in events {
            if let Event::Said { text, chunk: true } = &e {
                self.said.push_str(text);
                continue;
            }
            if matches!(e, Event::Progress | Event::Conversation(_) | Event::TurnTokens(_)) {
                continue;
            }
            self.flush(&mut out);
            self.event(e, rec, &mut out);
        }
        out
    }

    /// The held chunks of a message, as one message.
    fn flush(&mut self, out: &mut Vec<String>) {
        if !self.said.is_empty() {
            let text = std::mem::take(&mut self.said);
            said(&text, out);
        }
    }

    fn event(&mut self, e: Event, rec: &Record, out: &mut Vec<String>) {
        let c = &self.conversation;
        match e {
            Event::Started => out.push(format!(
                "aoctl: {} started (run {}); this pane only shows the conversation, keys typed here are ignored",
                c.agent, rec.run
            )),
            Event::Exited { code, why } => {
                let code = code.map_or_else(|| "by a signal".to_string(), |c| format!("with code {c}"));
                out.push(format!("aoctl: {} exited {code} ({why})", c.agent));
            }
            Event::Sent { id, text, .. } => {
                let id = id.map(|i| format!("  (message {})", short(&i, 9))).unwrap_or_default();
                let mut lines = text.lines();
                out.push(format!("› you: {}{id}", short(lines.next().unwrap_or_default(), WIDTH)));
                out.extend(lines.map(|l| format!("  {}", short(l, WIDTH))));
            }
            Event::Said { text, .. } => said(&text, out),
            Event::Tool { name, summary } => out.push(format!("⚙ {name} {summary}").trim_end().to_string()),
            Event::ToolResult { text, is_error } => {
                let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("(no output)");
                let mark = if is_error { " (error)" } else { "" };
                out.push(format!("  ⎿ {}{mark}", short(first, WIDTH)));
            }
            Event::ApprovalAsked(a) => out.push(approval_line(&a, &self.session)),
            Event::ApprovalAnswered { allowed, .. } => {
                out.push(if allowed { "  ✓ allowed".to_string() } else { "  ✗ denied".to_string() })
            }
            Event::TurnEnded(_) => {
                if let Some(l) = &c.last_turn {
                    let mut parts = vec![l.result.clone()];
                    if let Some(d) = l.duration_ms {
                        parts.push(format!("{:.1} s", d as f64 / 1000.0));
                    }
                    if let Some(t) = l.tokens {
                        parts.push(format!("{} in / {} out tokens", t.input, t.output));
                    }
                    if let Some(cost) = l.cost {
                        parts.push(format!("${cost:.4}"));
                    }
                    out.push(format!("─ turn {} ended: {} ─", l.n, parts.join(" · ")));
                }
            }
            Event::RateLimited { text } => out.push(format!("! rate limit: {}", short(&text, WIDTH))),
            Event::AuthFailed { text } => out.push(format!("! not logged in: {}", short(&text, WIDTH))),
            Event::Error { text } => out.push(format!("! {}", short(&text, WIDTH))),
            Event::NotJson => {
                out.push(format!("» {}", short(rec.text.as_deref().unwrap_or_default(), WIDTH)));
            }
            _ => {}
        }
    }
}

/// A message of the agent's: its first line marked, the others indented.
fn said(text: &str, out: &mut Vec<String>) {
    let mut lines = text.trim_end().lines();
    out.push(format!("● {}", short(lines.next().unwrap_or_default(), WIDTH)));
    out.extend(lines.map(|l| format!("  {}", short(l, WIDTH))));
}

/// `? approval: Bash `touch approved.txt` — aoctl answer agent --approve | --deny`.
fn approval_line(a: &Approval, session: &str) -> String {
    let what = a.command.as_deref().or(a.path.as_deref()).or(a.title.as_deref()).unwrap_or_default();
    format!("? approval: {} `{}` — aoctl answer {session} --approve | --deny", a.tool, short(what, 100))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(protocol: Protocol, agent: &str, name: &str) -> Vec<String> {
        let path = format!("{}/tests/fixtures/{name}.jsonl", env!("CARGO_MANIFEST_DIR"));
        let log = std::fs::read_to_string(path).expect("the fixture");
        let mut r = Renderer::new(protocol, agent, "demo");
        Record::parse_log(&log).iter().flat_map(|rec| r.record(rec)).collect()
    }

    #[test]
    fn render_names_approvals_and_turn_ends() {
        let pane = render(Protocol::StreamJson, "claude-code", "c6");
        let want = [
            "aoctl: claude-code started (run 1); this pane only shows the conversation, keys typed here are ignored",
            "› you: asktool please  (message 11111111…)",
            "● Calling Bash.",
            "⚙ Bash touch /workspace/demo/asked.txt",
            "? approval: Bash `touch /workspace/demo/asked.txt` — aoctl answer demo --approve | --deny",
            "  ✓ allowed",
            "  ⎿ (Bash completed with no output)",
            "● ask turn done",
            "─ turn 1 ended: success · 1.5 s · 200 in / 40 out tokens · $0.0016 ─",
            "› you: writeask please  (message 21111111…)",
            "● Calling Write.",
            "⚙ Write /workspace/demo/w.txt",
            "? approval: Write `/workspace/demo/w.txt` — aoctl answer demo --approve | --deny",
            "  ✗ denied",
            "  ⎿ denied by aoctl answer (error)",
            "● write done",
            "─ turn 2 ended: success · 0.1 s · 200 in / 40 out tokens · $0.0016 ─",
            "aoctl: claude-code exited with code 0 (agent-exited)",
        ];
        assert_eq!(pane, want);
    }

    #[test]
    fn render_reads_every_protocol() {
        let codex = render(Protocol::AppServer, "codex", "x1");
        assert!(codex.contains(&"● The file is written.".to_string()), "{codex:#?}");
        assert!(codex.iter().any(|l| l.starts_with("─ turn 2 ended: completed · ")), "{codex:#?}");
        assert!(codex.iter().any(|l| l.starts_with("  ⎿ completed (exit code 0)")), "{codex:#?}");
        let acp = render(Protocol::Acp, "qwen", "q2");
        assert!(acp.contains(&"● The file is written.".to_string()), "chunks make one message: {acp:#?}");
        assert!(acp.iter().any(|l| l.starts_with("? approval: run_shell_command `printf")), "{acp:#?}");
        assert!(acp.iter().any(|l| l.starts_with("─ turn 1 ended: end_turn")), "{acp:#?}");
        let limited = render(Protocol::StreamJson, "claude-code", "c14");
        assert!(
            limited.iter().any(|l| l.starts_with("! rate limit: API Error: Request rejected (429)")),
            "{limited:#?}"
        );
    }
}
