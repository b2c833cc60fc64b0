//! Selectors of lists and watches, in the Kubernetes syntax: label selectors (`a=b`, `a!=b`,
//! `a in (x,y)`, `a notin (x)`, `a`, `!a`) and field selectors (`path=value`, `path!=value`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// What is wrong with a label or field selector, in words that name the offending part.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

use crate::validate::{label_key, label_value};
use serde_json::Value;

/// One condition on the labels of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` or `key==value`: the label is present with this value.
    Equals(String, String),
    /// `key!=value`: the label is absent or has another value.
    NotEquals(String, String),
    /// `key in (a,b)`: the label is present with one of the values.
    In(String, BTreeSet<String>),
    /// `key notin (a,b)`: the label is absent or has none of the values.
    NotIn(String, BTreeSet<String>),
    /// `key`: the label is present.
    Exists(String),
    /// `!key`: the label is absent.
    DoesNotExist(String),
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_lookup(|k| labels.get(k).map(String::as_str))
    }

    /// Whether the labels that `label` looks up satisfy this requirement.
    fn matches_lookup<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        match self {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, set) => label(k).is_some_and(|v| set.contains(v)),
            Requirement::NotIn(k, set) => !label(k).is_some_and(|v| set.contains(v)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::DoesNotExist(k) => label(k).is_none(),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |s: &BTreeSet<String>| s.iter().map(String::as_str).collect::<Vec<_>>().join(",");
        match self {
            Requirement::Equals(k, v) => write!(f, "{k}={v}"),
            Requirement::NotEquals(k, v) => write!(f, "{k}!={v}"),
            Requirement::In(k, s) => write!(f, "{k} in ({})", set(s)),
            Requirement::NotIn(k, s) => write!(f, "{k} notin ({})", set(s)),
            Requirement::Exists(k) => write!(f, "{k}"),
            Requirement::DoesNotExist(k) => write!(f, "!{k}"),
        }
    }
}

/// A conjunction of requirements; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// The selector that matches every object.
    pub fn everything() -> Selector {
        Selector::default()
    }

    /// Whether this selector matches every object.
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, all of which must hold.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Parses a selector such as `a=b,c!=d,e in (x,y),f notin (z),g,!h`. An empty string selects everything.
    pub fn parse(s: &str) -> Result<Selector, SelectorError> {
        let tokens = lex(s)?;
        let mut p = Parser { tokens, pos: 0 };
        let mut requirements = vec![];
        if p.peek().is_none() {
            return Ok(Selector::everything());
        }
        loop {
            requirements.push(p.requirement()?);
            match p.next() {
                None => break,
                Some(Token::Comma) => {}
                Some(t) => {
                    return Err(SelectorError(format!(
                        "unexpected `{t}` after `{}`",
                        requirements[requirements.len() - 1]
                    )))
                }
            }
        }
        Ok(Selector { requirements })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the `metadata.labels` of a JSON object satisfy every requirement.
    pub fn matches_object(&self, obj: &Value) -> bool {
        if self.is_everything() {
            return true;
        }
        // Read the labels where they are: listing a thousand objects copies none of them.
        let labels = obj.get("metadata").and_then(|m| m.get("labels")).and_then(Value::as_object);
        let label = |k: &str| labels.and_then(|m| m.get(k)).and_then(Value::as_str);
        self.requirements.iter().all(|r| r.matches_lookup(label))
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Selector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Selector, SelectorError> {
        Selector::parse(s)
    }
}

/// A field selector: `path=value`, `path==value` or `path!=value` terms on dotted JSON paths
/// (`metadata.name`, `spec.project`), all of which must hold; the empty one matches everything. A
/// missing or null field reads as the empty string, a string as itself, anything else as its JSON.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct FieldTerm {
    path: String,
    equals: bool,
    value: String,
}

impl FieldSelector {
    /// Parses a comma-separated list of terms. An empty string selects everything.
    pub fn parse(s: &str) -> Result<FieldSelector, SelectorError> {
        let mut terms = vec![];
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (path, equals, value) = if let Some((p, v)) = term.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (p, true, v)
            } else {
                return Err(SelectorError(format!("`{term}` is not of the form path=value")));
            };
            terms.push(FieldTerm { path: path.trim().to_string(), equals, value: value.trim().to_string() });
        }
        Ok(FieldSelector { terms })
    }

    /// Whether this selector matches every object.
    pub fn is_everything(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether a JSON object satisfies every term.
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|t| {
            let got = obj.pointer(&format!("/{}", t.path.replace('.', "/")));
            let got = match got {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(v) => v.to_string(),
            };
            (got == t.value) == t.equals
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Eq,
    DoubleEq,
    NotEq,
    Bang,
    Open,
    Close,
    Comma,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Word(w) => f.write_str(w),
            Token::Eq => f.write_str("="),
            Token::DoubleEq => f.write_str("=="),
            Token::NotEq => f.write_str("!="),
            Token::Bang => f.write_str("!"),
            Token::Open => f.write_str("("),
            Token::Close => f.write_str(")"),
            Token::Comma => f.write_str(","),
        }
    }
}

fn lex(s: &str) -> Result<Vec<Token>, SelectorError> {
    let mut out = vec![];
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '=' if chars.peek() == Some(&'=') => {
                chars.next();
                out.push(Token::DoubleEq);
            }
            '=' => out.push(Token::Eq),
            '!' if chars.peek() == Some(&'=') => {
                chars.next();
                out.push(Token::NotEq);
            }
            '!' => out.push(Token::Bang),
            '(' => out.push(Token::Open),
            ')' => out.push(Token::Close),
            ',' => out.push(Token::Comma),
            c if c.is_ascii_alphanumeric() || "-_./".contains(c) => {
                let mut w = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_ascii_alphanumeric() || "-_./".contains(n) {
                        w.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Token::Word(w));
            }
            other => return Err(SelectorError(format!("unexpected character `{other}` in label selector `{s}`"))),
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn at_end_of_requirement(&self) -> bool {
        matches!(self.peek(), None | Some(Token::Comma))
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        match self.next() {
            Some(Token::Word(w)) => {
                label_key(&w).map_err(|e| SelectorError(e.into()))?;
                Ok(w)
            }
            Some(t) => Err(SelectorError(format!("expected a label key, found `{t}`"))),
            None => Err(SelectorError("expected a label key at the end of the selector".into())),
        }
    }

    fn value(&mut self, key: &str) -> Result<String, SelectorError> {
        if self.at_end_of_requirement() || self.peek() == Some(&Token::Close) {
            return Ok(String::new());
        }
        match self.next() {
            Some(Token::Word(w)) => {
                label_value(&w).map_err(|e| SelectorError(e.into()))?;
                Ok(w)
            }
            Some(t) => Err(SelectorError(format!("expected a value for `{key}`, found `{t}`"))),
            None => Ok(String::new()),
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        if self.peek() == Some(&Token::Bang) {
            self.next();
            let key = self.key()?;
            if !self.at_end_of_requirement() {
                let t = self.peek().map(ToString::to_string).unwrap_or_default();
                return Err(SelectorError(format!("unexpected `{t}` after `!{key}`")));
            }
            return Ok(Requirement::DoesNotExist(key));
        }
        let key = self.key()?;
        if self.at_end_of_requirement() {
            return Ok(Requirement::Exists(key));
        }
        match self.next() {
            Some(Token::Eq | Token::DoubleEq) => {
                let v = self.value(&key)?;
                Ok(Requirement::Equals(key, v))
            }
            Some(Token::NotEq) => {
                let v = self.value(&key)?;
                Ok(Requirement::NotEquals(key, v))
            }
            Some(Token::Word(op)) if op == "in" || op == "notin" => {
                let set = self.set(&key, &op)?;
                Ok(if op == "in" { Requirement::In(key, set) } else { Requirement::NotIn(key, set) })
            }
            Some(t) => {
                Err(SelectorError(format!("unexpected `{t}` after `{key}`: expected `=`, `==`, `!=`, `in` or `notin`")))
            }
            None => Ok(Requirement::Exists(key)),
        }
    }

    fn set(&mut self, key: &str, op: &str) -> Result<BTreeSet<String>, SelectorError> {
        match self.next() {
            Some(Token::Open) => {}
            Some(t) => return Err(SelectorError(format!("expected `(` after `{key} {op}`, found `{t}`"))),
            None => return Err(SelectorError(format!("expected `(` after `{key} {op}`"))),
        }
        let mut set = BTreeSet::new();
        loop {
            set.insert(self.value(key)?);
            match self.next() {
                Some(Token::Comma) => {}
                Some(Token::Close) => return Ok(set),
                Some(t) => return Err(SelectorError(format!("unexpected `{t}` in the values of `{key} {op}`"))),
                None => return Err(SelectorError(format!("missing `)` after the values of `{key} {op}`"))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_every_operator() {
        let s = Selector::parse(" a=b, c!=d ,e in (x, y),f notin (z),g,!h,i==j").unwrap();
        assert_eq!(s.requirements().len(), 7);
        assert_eq!(s.to_string(), "a=b,c!=d,e in (x,y),f notin (z),g,!h,i=j");
        assert_eq!(Selector::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn empty_selects_everything() {
        assert!(Selector::parse("").unwrap().is_everything());
        assert!(Selector::parse("   ").unwrap().is_everything());
        assert!(Selector::everything().matches(&labels(&[])));
    }

    #[test]
    fn matches_like_kubernetes() {
        let l = labels(&[("team", "web"), ("tier", "fe")]);
        let yes = ["team=web", "team==web", "team!=api", "nope!=x", "team in (api,web)", "team notin (api)"];
        for s in yes.iter().chain(&["nope notin (x)", "team", "!nope", "team=web,tier=fe", "empty="]) {
            let sel = Selector::parse(s).unwrap();
            assert_eq!(sel.matches(&l), *s != "empty=", "{s}");
        }
        for s in ["team=api", "team!=web", "nope=x", "team in (api)", "team notin (web)", "nope", "!team"] {
            assert!(!Selector::parse(s).unwrap().matches(&l), "{s}");
        }
        assert!(Selector::parse("empty=").unwrap().matches(&labels(&[("empty", "")])));
        assert!(Selector::parse("aoctl.dev/project=demo").unwrap().matches(&labels(&[("aoctl.dev/project", "demo")])));
    }

    #[test]
    fn errors_name_the_bad_token() {
        for (s, token) in [
            ("a=b,", "end of the selector"),
            ("a in x", "`x`"),
            ("a in (x", "missing `)`"),
            ("a > 3", "`>`"),
            ("a=b c", "`c`"),
            ("!a=b", "`=`"),
            ("a b", "`b`"),
            ("=b", "`=`"),
            ("a=b=c", "`=`"),
            ("-a=b", "-a"),
            ("a in (x y)", "`y`"),
            ("a=b%", "`%`"),
        ] {
            let e = Selector::parse(s).unwrap_err();
            assert!(e.0.contains(token), "{s}: {e}");
        }
    }

    #[test]
    fn matches_object_labels() {
        let obj = serde_json::json!({"metadata": {"name": "x", "labels": {"team": "web"}}});
        assert!(Selector::parse("team=web").unwrap().matches_object(&obj));
        assert!(!Selector::parse("team").unwrap().matches_object(&serde_json::json!({"metadata": {}})));
        let odd = serde_json::json!({"metadata": {"labels": {"team": "web", "n": 3}}});
        for (s, want) in [
            ("team in (web,api)", true),
            ("team notin (web)", false),
            ("n", false),
            ("!n", true),
            ("n!=3", true),
            ("team,!tier", true),
            ("team=api", false),
        ] {
            assert_eq!(Selector::parse(s).unwrap().matches_object(&odd), want, "{s}");
        }
    }

    #[test]
    fn field_selectors_read_dotted_paths() {
        let obj = serde_json::json!({"metadata": {"name": "x"}, "spec": {"project": "web", "stopped": true}});
        for (s, want) in [
            ("", true),
            ("metadata.name=x", true),
            ("metadata.name==x, spec.project=web", true),
            ("metadata.name!=x", false),
            ("spec.stopped=true", true),
            ("spec.branch=", true),
            ("spec.branch!=", false),
            ("spec.project=api", false),
        ] {
            assert_eq!(FieldSelector::parse(s).unwrap().matches(&obj), want, "{s}");
        }
        assert!(FieldSelector::parse(" , ").unwrap().is_everything());
        let e = FieldSelector::parse("metadata.name").unwrap_err();
        assert!(e.0.contains("`metadata.name` is not of the form path=value"), "{e}");
    }
}
