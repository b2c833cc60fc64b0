//! Approval rules (`spec.permissions` `allow` / `deny`): `Tool` or `Tool(glob)`, the glob over the
//! approval's command (else its path, for edit tools), `*` standing for any characters. Deny rules
//! are read first, then allow rules; what none matches waits for a person.

use crate::fold::Approval;

/// One rule: a tool as the agent names it (`Bash`, `Write`, Codex `command` / `edit`, an ACP kind
/// or tool name), and an optional glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub tool: String,
    pub glob: Option<String>,
}

/// Why a rule's text is not a rule.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuleError {
    #[error("a rule names a tool: `Tool` or `Tool(glob)`")]
    NoTool,
    #[error("`{0}` opens a `(` it does not close")]
    Unclosed(String),
    #[error("a tool name has letters, digits, `_`, `-`, `.`, `:` and `/` only: `{0}`")]
    BadTool(String),
}

impl Rule {
    /// Reads `Tool` or `Tool(glob)`.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let text = text.trim();
        let (tool, glob) = match text.split_once('(') {
            Some((tool, rest)) => {
                let glob = rest.strip_suffix(')').ok_or_else(|| RuleError::Unclosed(text.to_string()))?;
                (tool.trim(), Some(glob.to_string()))
            }
            None => (text, None),
        };
        if tool.is_empty() {
            return Err(RuleError::NoTool);
        }
        if !tool.chars().all(|c| c.is_alphanumeric() || "_-.:/".contains(c)) {
            return Err(RuleError::BadTool(tool.to_string()));
        }
        Ok(Rule { tool: tool.to_string(), glob })
    }

    /// Whether the rule covers the approval.
    pub fn matches(&self, a: &Approval) -> bool {
        if self.tool != a.tool {
            return false;
        }
        match &self.glob {
            None => true,
            Some(glob) => {
                let subject = a.command.as_deref().or(a.path.as_deref()).unwrap_or_default();
                glob_match(glob, subject)
            }
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.glob {
            Some(g) => write!(f, "{}({g})", self.tool),
            None => write!(f, "{}", self.tool),
        }
    }
}

/// What the rules say about an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Denied by the deny rule at this index.
    Deny(usize),
    /// Allowed by the allow rule at this index.
    Allow(usize),
    /// No rule covers it: a person answers.
    Ask,
}

/// The rules' answer to `a`: deny rules first, then allow rules.
pub fn decide(allow: &[Rule], deny: &[Rule], a: &Approval) -> Verdict {
    if let Some(i) = deny.iter().position(|r| r.matches(a)) {
        return Verdict::Deny(i);
    }
    match allow.iter().position(|r| r.matches(a)) {
        Some(i) => Verdict::Allow(i),
        None => Verdict::Ask,
    }
}

/// Whether `text` matches `glob`, where `*` is any characters (none included) and every other
/// character stands for itself.
pub fn glob_match(glob: &str, text: &str) -> bool {
    let g: Vec<char> = glob.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut gi, mut ti) = (0, 0);
    // Where the last `*` was, and the text position it has taken up to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if gi < g.len() && g[gi] == '*' {
            star = Some((gi, ti));
            gi += 1;
        } else if gi < g.len() && g[gi] == t[ti] {
            gi += 1;
            ti += 1;
        } else if let Some((sg, st)) = star {
            gi = sg + 1;
            ti = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn approval(tool: &str, command: Option<&str>, path: Option<&str>) -> Approval {
        Approval {
            request: "r".into(),
            tool: tool.into(),
            command: command.map(str::to_string),
            path: path.map(str::to_string),
            title: None,
            asked_at: 0,
            input: Value::Null,
            options: vec![],
        }
    }

    fn rules(texts: &[&str]) -> Vec<Rule> {
        texts.iter().map(|t| Rule::parse(t).unwrap()).collect()
    }

    #[test]
    fn rules_deny_before_allow() {
        let allow = rules(&["Read", "Bash(git *)", "Write(/workspace/demo/*)"]);
        let deny = rules(&["Bash(git push*)"]);
        let push = approval("Bash", Some("git push origin main"), None);
        assert_eq!(decide(&allow, &deny, &push), Verdict::Deny(0), "deny is read first");
        assert_eq!(decide(&allow, &deny, &approval("Bash", Some("git status"), None)), Verdict::Allow(1));
        assert_eq!(decide(&allow, &deny, &approval("Bash", Some("rm -rf /"), None)), Verdict::Ask);
        assert_eq!(decide(&allow, &deny, &approval("Read", None, Some("/etc/passwd"))), Verdict::Allow(0));
        let write = approval("Write", None, Some("/workspace/demo/w.txt"));
        assert_eq!(decide(&allow, &deny, &write), Verdict::Allow(2), "the path, for tools without a command");
        assert_eq!(decide(&allow, &deny, &approval("Write", None, Some("/etc/w.txt"))), Verdict::Ask);
        assert_eq!(
            decide(&allow, &deny, &approval("bash", Some("git status"), None)),
            Verdict::Ask,
            "names as the agent gives them"
        );
        assert_eq!(decide(&[], &[], &push), Verdict::Ask);
    }

    #[test]
    fn rules_read_and_print() {
        assert_eq!(Rule::parse("Bash(git *)").unwrap(), Rule { tool: "Bash".into(), glob: Some("git *".into()) });
        assert_eq!(Rule::parse(" Write ").unwrap().to_string(), "Write");
        assert_eq!(Rule::parse("Bash(npm (run) *)").unwrap().glob.as_deref(), Some("npm (run) *"));
        assert_eq!(Rule::parse("Bash(git *").unwrap_err(), RuleError::Unclosed("Bash(git *".into()));
        assert_eq!(Rule::parse("(x)").unwrap_err(), RuleError::NoTool);
        assert_eq!(Rule::parse("").unwrap_err(), RuleError::NoTool);
        assert!(matches!(Rule::parse("Ba sh"), Err(RuleError::BadTool(_))));
        assert_eq!(Rule::parse("mcp__aoctl__report").unwrap().to_string(), "mcp__aoctl__report");
    }

    #[test]
    fn globs_match_any_characters_at_stars_only() {
        for (glob, text, want) in [
            ("*", "", true),
            ("*", "anything at all", true),
            ("git *", "git status", true),
            ("git *", "git", false),
            ("git*", "git", true),
            ("*.txt", "/a/b.txt", true),
            ("*.txt", "/a/b.txt.bak", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("?", "x", false),
            ("touch *asked*", "touch /workspace/demo/asked.txt", true),
        ] {
            assert_eq!(glob_match(glob, text), want, "{glob} ~ {text}");
        }
    }
}
