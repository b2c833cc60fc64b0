//! Semantic validation after decoding, the part every kind shares: `FieldError`, the `Validate`
//! trait, the checks of names, labels, paths, refs and URLs, of metadata and of conditions. Each
//! kind's own rules are beside it (`impl Validate for Session` in `session/validate.rs`, the others
//! in their kind's module). Every error names the field it is about.

use std::collections::BTreeMap;
use std::fmt;

pub(crate) mod forges;

pub use crate::invalid::Invalid;

use crate::condition::validate_reason;
use crate::meta::ObjectMeta;

/// One invalid field: its path (`spec.branch`) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError { field: field.into(), message: message.into() }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

/// Objects that can check themselves.
pub trait Validate {
    /// All problems found; empty when valid.
    fn validate(&self) -> Vec<FieldError>;
}

/// Checks a DNS-1123 label: ≤ 63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub fn dns1123_label(value: &str) -> Result<(), Invalid> {
    let b = value.as_bytes();
    if b.is_empty() {
        return Err("must not be empty".into());
    }
    if b.len() > 63 {
        return Err(format!("`{value}` is {} characters long; at most 63 are allowed", b.len()).into());
    }
    let ok = b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric();
    if !ok {
        return Err(format!(
            "`{value}` is not a DNS-1123 label: use lower-case letters, digits and `-`, starting and ending with a letter or digit"
        ).into());
    }
    Ok(())
}

fn label_part(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    b.len() <= max
        && (b.is_empty()
            || (b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))))
}

/// Checks a label key (`[prefix/]name`) as Kubernetes does.
pub fn label_key(key: &str) -> Result<(), Invalid> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty() && p.len() <= 253 && p.split('.').all(|part| dns1123_label(part).is_ok());
        if !ok {
            return Err(format!("label key `{key}`: the prefix must be a DNS subdomain").into());
        }
    }
    if name.is_empty() || !label_part(name, 63) {
        return Err(format!("label key `{key}`: the name must be 1–63 letters, digits, `-`, `_` or `.`, starting and ending alphanumeric").into());
    }
    Ok(())
}

/// Checks a label value: ≤ 63 letters, digits, `-`, `_` or `.`, starting and ending alphanumeric.
pub fn label_value(value: &str) -> Result<(), Invalid> {
    if label_part(value, 63) {
        Ok(())
    } else {
        Err(format!("label value `{value}` must be at most 63 letters, digits, `-`, `_` or `.`, starting and ending alphanumeric").into())
    }
}

/// Checks a branch or ref name with the rules of `git check-ref-format --allow-onelevel`.
pub fn git_ref(value: &str) -> Result<(), Invalid> {
    let bad = |why: &str| Err(format!("`{value}` is not a valid git branch name: {why}").into());
    if value.is_empty() {
        return bad("it is empty");
    }
    if value.bytes().any(|c| c < 0x20 || c == 0x7f || b" ~^:?*[\\".contains(&c)) {
        return bad("it contains a space, control character or one of ~ ^ : ? * [ \\");
    }
    if value.contains("..") || value.contains("@{") || value.contains("//") {
        return bad("it contains `..`, `@{` or `//`");
    }
    if value.starts_with('/') || value.ends_with('/') || value.ends_with('.') || value == "@" || value.starts_with('-')
    {
        return bad("it starts with `/` or `-`, ends with `/` or `.`, or is `@`");
    }
    if value.split('/').any(|c| c.starts_with('.') || c.ends_with(".lock")) {
        return bad("a component starts with `.` or ends with `.lock`");
    }
    Ok(())
}

/// Checks an environment variable name.
pub fn env_name(name: &str) -> Result<(), Invalid> {
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not an environment variable name: use letters, digits and `_`, not starting with a digit"
        )
        .into())
    }
}

pub(crate) fn http_url(value: &str) -> Result<(), Invalid> {
    let rest = value.strip_prefix("https://").or_else(|| value.strip_prefix("http://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') && !value.chars().any(char::is_whitespace) => Ok(()),
        _ => Err(format!("`{value}` is not an http:// or https:// URL").into()),
    }
}

pub(crate) fn relative_path(value: &str) -> Result<(), Invalid> {
    if value.is_empty() || value.starts_with('/') || value.contains('\0') || value.split(['/', '\\']).any(|c| c == "..")
    {
        Err(format!("`{value}` must be a relative path inside the repository (no leading `/`, no `..`)").into())
    } else {
        Ok(())
    }
}

pub(crate) fn is_absolute(p: &str) -> bool {
    p.starts_with('/') || (p.len() > 2 && p.as_bytes()[1] == b':' && matches!(p.as_bytes()[2], b'\\' | b'/'))
}

/// Collects problems with a common field prefix.
pub(crate) struct Errors(pub(crate) Vec<FieldError>);

impl Errors {
    pub(crate) fn check(&mut self, field: impl Into<String>, r: Result<(), Invalid>) {
        if let Err(m) = r {
            self.0.push(FieldError::new(field, m));
        }
    }
}

/// Validates user-settable metadata. `name_required` is false when `generateName` may stand in.
pub fn validate_meta(meta: &ObjectMeta, errs: &mut Vec<FieldError>) {
    let mut e = Errors(vec![]);
    match (&meta.name[..], &meta.generate_name) {
        ("", None) => e.check("metadata.name", Err("is required".into())),
        ("", Some(g)) => {
            // The store appends five characters.
            let trimmed = g.trim_end_matches('-');
            e.check(
                "metadata.generateName",
                dns1123_label(trimmed).and_then(|_| {
                    if g.len() > 58 {
                        Err(format!("`{g}` is longer than 58 characters").into())
                    } else {
                        Ok(())
                    }
                }),
            );
        }
        (name, _) => e.check("metadata.name", dns1123_label(name)),
    }
    check_labels("metadata.labels", &meta.labels, &mut e, true);
    check_labels("metadata.annotations", &meta.annotations, &mut e, false);
    for (i, f) in meta.finalizers.iter().enumerate() {
        let ok =
            !f.is_empty() && f.len() <= 253 && f.bytes().all(|c| c.is_ascii_alphanumeric() || b"-._/".contains(&c));
        if !ok {
            e.check(
                format!("metadata.finalizers[{i}]"),
                Err(format!("`{f}` is not a finalizer name such as `ao.dev/cleanup`").into()),
            );
        }
    }
    for (i, o) in meta.owner_references.iter().enumerate() {
        e.check(format!("metadata.ownerReferences[{i}].name"), dns1123_label(&o.name));
        if o.uid.is_empty() {
            e.check(format!("metadata.ownerReferences[{i}].uid"), Err("is required".into()));
        }
    }
    errs.extend(e.0);
}

pub(crate) fn check_labels(field: &str, map: &BTreeMap<String, String>, e: &mut Errors, values_too: bool) {
    for (k, v) in map {
        e.check(format!("{field}.{k}"), label_key(k));
        if values_too {
            e.check(format!("{field}.{k}"), label_value(v));
        }
    }
}

pub(crate) fn at_least_a_second(d: crate::duration::Duration) -> Result<(), Invalid> {
    if d.as_std() < std::time::Duration::from_secs(1) {
        Err(format!("`{d}` is shorter than a second").into())
    } else {
        Ok(())
    }
}

/// Validates conditions written through a status update.
pub fn validate_conditions(field: &str, conditions: &[crate::condition::Condition]) -> Vec<FieldError> {
    let mut e = Errors(vec![]);
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in conditions.iter().enumerate() {
        e.check(format!("{field}[{i}].type"), validate_reason(&c.type_));
        e.check(format!("{field}[{i}].reason"), validate_reason(&c.reason));
        if !seen.insert(&c.type_) {
            e.check(format!("{field}[{i}].type"), Err(format!("condition `{}` appears twice", c.type_).into()));
        }
    }
    e.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        dns1123_label("fix-login").unwrap();
        dns1123_label(&"a".repeat(63)).unwrap();
        for bad in ["", "Fix", "-a", "a-", "a_b", "a.b", &"a".repeat(64)] {
            assert!(dns1123_label(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refs() {
        for ok in ["main", "demo/fix-login", "feature/a.b"] {
            git_ref(ok).unwrap();
        }
        for bad in ["", "a..b", "a b", "/a", "a/", "a.lock", "a/.b", "a@{b", "-x", "a:b"] {
            assert!(git_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn labels() {
        label_key("team").unwrap();
        label_key("ao.dev/session").unwrap();
        assert!(label_key("ao.dev/").is_err());
        assert!(label_key("Bad_Prefix/x").is_err());
        label_value("").unwrap();
        assert!(label_value("a b").is_err());
    }
}
