//! Semantic validation after decoding: names, labels, paths, refs and cross-field rules.
//! Every error names the field it is about.

use std::collections::BTreeMap;
use std::fmt;

mod forges;

use crate::condition::validate_reason;
use crate::event::Event;
use crate::gitsource::GitSource;
use crate::issuesource::IssueSource;
use crate::meta::ObjectMeta;
use crate::project::{NotifierType, Project};
use crate::review::ReviewSpec;
use crate::session::{AgentRef, DockerSpec, Session};

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
pub fn dns1123_label(value: &str) -> Result<(), String> {
    let b = value.as_bytes();
    if b.is_empty() {
        return Err("must not be empty".into());
    }
    if b.len() > 63 {
        return Err(format!("`{value}` is {} characters long; at most 63 are allowed", b.len()));
    }
    let ok = b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric();
    if !ok {
        return Err(format!(
            "`{value}` is not a DNS-1123 label: use lower-case letters, digits and `-`, starting and ending with a letter or digit"
        ));
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
pub fn label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty() && p.len() <= 253 && p.split('.').all(|part| dns1123_label(part).is_ok());
        if !ok {
            return Err(format!("label key `{key}`: the prefix must be a DNS subdomain"));
        }
    }
    if name.is_empty() || !label_part(name, 63) {
        return Err(format!("label key `{key}`: the name must be 1–63 letters, digits, `-`, `_` or `.`, starting and ending alphanumeric"));
    }
    Ok(())
}

/// Checks a label value: ≤ 63 letters, digits, `-`, `_` or `.`, starting and ending alphanumeric.
pub fn label_value(value: &str) -> Result<(), String> {
    if label_part(value, 63) {
        Ok(())
    } else {
        Err(format!("label value `{value}` must be at most 63 letters, digits, `-`, `_` or `.`, starting and ending alphanumeric"))
    }
}

/// Checks a branch or ref name with the rules of `git check-ref-format --allow-onelevel`.
pub fn git_ref(value: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("`{value}` is not a valid git branch name: {why}"));
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
pub fn env_name(name: &str) -> Result<(), String> {
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not an environment variable name: use letters, digits and `_`, not starting with a digit"
        ))
    }
}

fn http_url(value: &str) -> Result<(), String> {
    let rest = value.strip_prefix("https://").or_else(|| value.strip_prefix("http://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') && !value.chars().any(char::is_whitespace) => Ok(()),
        _ => Err(format!("`{value}` is not an http:// or https:// URL")),
    }
}

fn relative_path(value: &str) -> Result<(), String> {
    if value.is_empty() || value.starts_with('/') || value.contains('\0') || value.split(['/', '\\']).any(|c| c == "..")
    {
        Err(format!("`{value}` must be a relative path inside the repository (no leading `/`, no `..`)"))
    } else {
        Ok(())
    }
}

fn is_absolute(p: &str) -> bool {
    p.starts_with('/') || (p.len() > 2 && p.as_bytes()[1] == b':' && matches!(p.as_bytes()[2], b'\\' | b'/'))
}

/// Collects problems with a common field prefix.
struct Errors(Vec<FieldError>);

impl Errors {
    fn check(&mut self, field: impl Into<String>, r: Result<(), String>) {
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
                        Err(format!("`{g}` is longer than 58 characters"))
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
                Err(format!("`{f}` is not a finalizer name such as `ao.dev/cleanup`")),
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

fn check_labels(field: &str, map: &BTreeMap<String, String>, e: &mut Errors, values_too: bool) {
    for (k, v) in map {
        e.check(format!("{field}.{k}"), label_key(k));
        if values_too {
            e.check(format!("{field}.{k}"), label_value(v));
        }
    }
}

/// Checks a docker engine address: `unix://`, `tcp://`, `ssh://` or `npipe://`, with something after.
fn engine_address(h: &str) -> Result<(), String> {
    let known = ["unix://", "tcp://", "ssh://", "npipe://"].iter().find(|s| h.starts_with(**s));
    match known {
        Some(scheme) if h.len() > scheme.len() && !h.chars().any(char::is_whitespace) => Ok(()),
        Some(_) => Err(format!("`{h}` is not an engine address: it needs a path or host after the scheme")),
        None => Err(format!("`{h}` must start with unix://, tcp://, ssh:// or npipe://")),
    }
}

fn check_docker(field: &str, d: &DockerSpec, e: &mut Errors) {
    if let Some(c) = d.cpus {
        if !(c > 0.0 && c.is_finite()) {
            e.check(format!("{field}.cpus"), Err(format!("must be a positive number of CPUs, not {c}")));
        }
    }
    if let Some(p) = d.pids_limit {
        if p <= 0 {
            e.check(format!("{field}.pidsLimit"), Err(format!("must be positive, not {p}")));
        }
    }
    if let Some(h) = &d.host {
        e.check(format!("{field}.host"), engine_address(h));
        if !d.hosts.is_empty() {
            e.check(
                format!("{field}.hosts"),
                Err("cannot be set together with `host`: `host` pins to one engine, `hosts` places on several".into()),
            );
        }
    }
    for (i, h) in d.hosts.iter().enumerate() {
        let f = format!("{field}.hosts[{i}]");
        e.check(format!("{f}.host"), engine_address(&h.host));
        if d.hosts[..i].iter().any(|o| o.host == h.host) {
            e.check(format!("{f}.host"), Err(format!("`{}` is listed twice", h.host)));
        }
        if h.capacity == 0 {
            e.check(format!("{f}.capacity"), Err("must be at least 1 session".into()));
        }
        if let Some(n) = &h.name {
            e.check(format!("{f}.name"), dns1123_label(n));
        }
        if h.name.is_some() && d.hosts[..i].iter().any(|o| o.label() == h.label()) {
            e.check(format!("{f}.name"), Err(format!("`{}` names another host too", h.label())));
        }
    }
    if let Some(img) = &d.image {
        if img.is_empty() || img.chars().any(char::is_whitespace) {
            e.check(format!("{field}.image"), Err(format!("`{img}` is not an image reference")));
        }
    }
}

impl Validate for Project {
    fn validate(&self) -> Vec<FieldError> {
        let mut errs = vec![];
        validate_meta(&self.metadata, &mut errs);
        let mut e = Errors(errs);
        let s = &self.spec;
        if s.path.is_empty() {
            e.check("spec.path", Err("is required: the absolute path of a local git repository".into()));
        } else if !is_absolute(&s.path) || s.path.contains('\0') {
            e.check("spec.path", Err(format!("`{}` must be an absolute path", s.path)));
        }
        forges::check_project(s, &mut e);
        if let Some(b) = &s.default_branch {
            e.check("spec.defaultBranch", git_ref(b));
        }
        if let Some(p) = &s.session_prefix {
            e.check("spec.sessionPrefix", git_ref(p));
        }
        if let Some(d) = &s.defaults {
            if let Some(a) = &d.agent {
                check_agent("spec.defaults.agent", a, &mut e);
            }
        }
        if let Some(setup) = &s.setup {
            for (i, p) in setup.copy.iter().enumerate() {
                e.check(format!("spec.setup.copy[{i}]"), relative_path(p));
            }
            for (i, p) in setup.symlink.iter().enumerate() {
                e.check(format!("spec.setup.symlink[{i}]"), relative_path(p));
            }
            for (i, c) in setup.commands.iter().enumerate() {
                if c.trim().is_empty() {
                    e.check(format!("spec.setup.commands[{i}]"), Err("must not be empty".into()));
                }
            }
        }
        if s.max_concurrent_sessions == Some(0) {
            e.check("spec.maxConcurrentSessions", Err("must be at least 1".into()));
        }
        if let Some(pool) = &s.workspace_pool {
            if pool.size > MAX_POOL_SIZE {
                e.check(
                    "spec.workspacePool.size",
                    Err(format!("must be at most {MAX_POOL_SIZE}: each one is a full checkout")),
                );
            }
        }
        if let Some(b) = &s.budget {
            if b.tokens == Some(0) {
                e.check("spec.budget.tokens", Err("must be at least 1".into()));
            }
            if let Some(c) = b.cost_usd {
                if !c.is_finite() || c <= 0.0 {
                    e.check("spec.budget.costUSD", Err("must be a positive number of dollars".into()));
                }
            }
            if b.tokens.is_none() && b.cost_usd.is_none() {
                e.check("spec.budget", Err("must set tokens or costUSD".into()));
            }
        }
        for (i, n) in s.notifiers.iter().enumerate() {
            let f = format!("spec.notifiers[{i}]");
            match n.type_ {
                NotifierType::Webhook | NotifierType::Slack | NotifierType::Discord => match &n.url {
                    Some(u) => e.check(format!("{f}.url"), http_url(u)),
                    None => {
                        e.check(format!("{f}.url"), Err(format!("is required for a {} notifier", n.type_.as_str())))
                    }
                },
                NotifierType::Command if n.command.is_empty() => {
                    e.check(format!("{f}.command"), Err("is required for a command notifier".into()))
                }
                _ => {}
            }
        }
        if let Some(d) = &s.docker {
            check_docker("spec.docker", d, &mut e);
        }
        if let Some(r) = &s.review {
            check_review("spec.review", r, &mut e);
        }
        e.0
    }
}

fn check_review(field: &str, r: &ReviewSpec, e: &mut Errors) {
    if r.reviewers.is_empty() {
        e.check(format!("{field}.reviewers"), Err("must name at least one reviewer agent".into()));
    }
    if r.reviewers.len() > 8 {
        e.check(format!("{field}.reviewers"), Err(format!("has {} reviewers, more than 8", r.reviewers.len())));
    }
    for (i, rv) in r.reviewers.iter().enumerate() {
        if let Some(a) = &rv.agent {
            check_agent(&format!("{field}.reviewers[{i}].agent"), a, e);
        }
        if rv.prompt.as_deref().is_some_and(|p| p.contains('\0')) {
            e.check(format!("{field}.reviewers[{i}].prompt"), Err("must not contain NUL".into()));
        }
    }
    for (i, t) in r.on.iter().enumerate() {
        if r.on[..i].contains(t) {
            e.check(format!("{field}.on[{i}]"), Err(format!("`{t}` is listed twice")));
        }
    }
    if let Some(v) = &r.token_env {
        e.check(format!("{field}.tokenEnv"), env_name(v));
    }
}

impl NotifierType {
    pub fn as_str(self) -> &'static str {
        match self {
            NotifierType::Webhook => "webhook",
            NotifierType::Slack => "slack",
            NotifierType::Discord => "discord",
            NotifierType::Desktop => "desktop",
            NotifierType::Command => "command",
        }
    }
}

fn check_agent(field: &str, a: &AgentRef, e: &mut Errors) {
    if let AgentRef::Custom { command } = a {
        if command[0].trim().is_empty() {
            e.check(format!("{field}.command[0]"), Err("the program must not be empty".into()));
        }
    }
}

impl Validate for Session {
    fn validate(&self) -> Vec<FieldError> {
        let mut errs = vec![];
        validate_meta(&self.metadata, &mut errs);
        let mut e = Errors(errs);
        let s = &self.spec;
        if s.project.is_empty() {
            e.check("spec.project", Err("is required: the name of the Project this session works on".into()));
        } else {
            e.check("spec.project", dns1123_label(&s.project));
        }
        if let Some(a) = &s.agent {
            check_agent("spec.agent", a, &mut e);
        }
        for (i, a) in s.agent_args.iter().enumerate() {
            if a.contains('\0') {
                e.check(format!("spec.agentArgs[{i}]"), Err("must not contain NUL".into()));
            }
        }
        if let Some(b) = &s.branch {
            e.check("spec.branch", git_ref(b));
        }
        if let Some(b) = &s.base_ref {
            e.check("spec.baseRef", git_ref(b));
        }
        for k in s.env.keys() {
            e.check(format!("spec.env.{k}"), env_name(k));
        }
        if let Some(i) = &s.issue {
            let number = i.strip_prefix('#').unwrap_or(i);
            let ok = (!number.is_empty() && number.bytes().all(|c| c.is_ascii_digit())) || forges::linear_identifier(i);
            if !ok {
                e.check("spec.issue", Err(format!("`{i}` is not an issue reference such as `42`, `#42` or `ENG-42`")));
            }
        }
        if let Some(d) = &s.docker {
            check_docker("spec.docker", d, &mut e);
        }
        if let Some(r) = &s.review {
            check_review("spec.review", r, &mut e);
        }
        if let Some(w) = &s.review_of {
            e.check("spec.reviewOf", dns1123_label(w));
            if s.review.is_some() {
                e.check("spec.review", Err("a reviewer session has no reviewers of its own".into()));
            }
            if *w == self.metadata.name {
                e.check("spec.reviewOf", Err("a session cannot review itself".into()));
            }
        }
        e.0
    }
}

impl Validate for Event {
    fn validate(&self) -> Vec<FieldError> {
        let mut errs = vec![];
        validate_meta(&self.metadata, &mut errs);
        let mut e = Errors(errs);
        e.check("involvedObject.name", dns1123_label(&self.involved_object.name));
        e.check("reason", validate_reason(&self.reason));
        e.0
    }
}

impl Validate for GitSource {
    fn validate(&self) -> Vec<FieldError> {
        let mut errs = vec![];
        validate_meta(&self.metadata, &mut errs);
        let mut e = Errors(errs);
        let s = &self.spec;
        e.check("spec.url", source_url(&s.url));
        if let Some(r) = &s.git_ref {
            let set = [&r.branch, &r.tag, &r.commit].iter().filter(|v| v.is_some()).count();
            if set != 1 {
                e.check("spec.ref", Err("must name exactly one of branch, tag and commit".into()));
            }
            if let Some(b) = &r.branch {
                e.check("spec.ref.branch", git_ref(b));
            }
            if let Some(t) = &r.tag {
                e.check("spec.ref.tag", git_ref(t));
            }
            if let Some(c) = &r.commit {
                if c.len() != 40 || !c.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                    e.check(
                        "spec.ref.commit",
                        Err(format!("`{c}` is not a full commit id (40 lower-case hex digits)")),
                    );
                }
            }
        }
        if let Some(p) = &s.path {
            if p != "." && p != "./" {
                e.check("spec.path", relative_path(p.trim_start_matches("./")));
            }
        }
        if let Some(i) = s.interval {
            e.check("spec.interval", at_least_a_second(i));
        }
        if let Some(v) = &s.token_env {
            e.check("spec.tokenEnv", env_name(v));
            if !(s.url.starts_with("https://") || loopback_http(&s.url)) {
                e.check(
                    "spec.tokenEnv",
                    Err("a token is only sent to an https:// URL (or http:// on this machine)".into()),
                );
            }
        }
        if let Some(v) = &s.webhook_secret_env {
            e.check("spec.webhookSecretEnv", env_name(v));
        }
        if let Some(p) = &s.policy {
            e.0.extend(p.validate());
        }
        e.0
    }
}

/// The repository URLs a GitSource fetches: a local absolute path, `file://` or `http(s)://`.
fn source_url(url: &str) -> Result<(), String> {
    if url.is_empty() {
        return Err("is required: an absolute path, a file:// URL or an https:// URL".into());
    }
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!("`{}` contains a space or a control character", url.escape_debug()));
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        return http_url(url);
    }
    if let Some(p) = url.strip_prefix("file://") {
        return if p.starts_with('/') { Ok(()) } else { Err(format!("`{url}` must name an absolute path")) };
    }
    if is_absolute(url) {
        return Ok(());
    }
    Err(format!("`{url}` is not a repository aoctl fetches: use an absolute path, file:// or https://"))
}

/// Whether `url` is `http://` to this machine's loopback address.
fn loopback_http(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else { return false };
    let authority = rest.split('/').next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host_port.split(':').next().unwrap_or(""),
    };
    matches!(host, "127.0.0.1" | "localhost" | "::1")
}

fn at_least_a_second(d: crate::Duration) -> Result<(), String> {
    if d.as_std() < std::time::Duration::from_secs(1) {
        Err(format!("`{d}` is shorter than a second"))
    } else {
        Ok(())
    }
}

/// The most worktrees a project's warm pool may keep.
pub const MAX_POOL_SIZE: u32 = 100;

/// The longest IssueSource name: `<name>-<number>` must still be a DNS label for issue numbers of
/// up to ten digits.
pub const MAX_ISSUESOURCE_NAME: usize = 52;

impl Validate for IssueSource {
    fn validate(&self) -> Vec<FieldError> {
        let mut errs = vec![];
        validate_meta(&self.metadata, &mut errs);
        let mut e = Errors(errs);
        if self.metadata.name.len() > MAX_ISSUESOURCE_NAME {
            e.check(
                "metadata.name",
                Err(format!(
                    "is {} characters long; at most {MAX_ISSUESOURCE_NAME} are allowed, so that `<name>-<issue number>` names a session",
                    self.metadata.name.len()
                )),
            );
        }
        let s = &self.spec;
        if s.project.is_empty() {
            e.check("spec.project", Err("is required: the name of the Project whose issues become sessions".into()));
        } else {
            e.check("spec.project", dns1123_label(&s.project));
        }
        forges::check_issue_query(s, &mut e);
        if s.max_sessions == Some(0) {
            e.check("spec.maxSessions", Err("must be at least 1 (delete the source to have no sessions)".into()));
        }
        if let Some(i) = s.interval {
            e.check("spec.interval", at_least_a_second(i));
        }
        let t = &s.template;
        if let Some(p) = &t.prompt {
            for name in crate::issuesource::placeholders(p) {
                if !crate::issuesource::PLACEHOLDERS.contains(&name) {
                    e.check(
                        "spec.template.prompt",
                        Err(format!(
                            "`{{{{{name}}}}}` is not a placeholder; use {}",
                            crate::issuesource::PLACEHOLDERS.map(|p| format!("{{{{{p}}}}}")).join(", ")
                        )),
                    );
                }
            }
        }
        check_labels("spec.template.labels", &t.labels, &mut e, true);
        // The rest of the template is checked as the spec of a session made from it.
        let spec = t.to_spec(if s.project.is_empty() { "p" } else { &s.project }, &Default::default());
        let session =
            Session { metadata: ObjectMeta { name: "s-1".into(), ..Default::default() }, spec, ..Default::default() };
        for fe in session.validate() {
            if let Some(rest) = fe.field.strip_prefix("spec.") {
                if !rest.starts_with("project") && !rest.starts_with("issue") {
                    e.0.push(FieldError::new(format!("spec.template.{rest}"), fe.message));
                }
            }
        }
        e.0
    }
}

/// Validates conditions written through a status update.
pub fn validate_conditions(field: &str, conditions: &[crate::Condition]) -> Vec<FieldError> {
    let mut e = Errors(vec![]);
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in conditions.iter().enumerate() {
        e.check(format!("{field}[{i}].type"), validate_reason(&c.type_));
        e.check(format!("{field}[{i}].reason"), validate_reason(&c.reason));
        if !seen.insert(&c.type_) {
            e.check(format!("{field}[{i}].type"), Err(format!("condition `{}` appears twice", c.type_)));
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

    #[test]
    fn gitsources() {
        use crate::gitsource::{GitRef, GitSourceSpec};
        let with = |spec: GitSourceSpec| {
            let g = GitSource {
                metadata: ObjectMeta { name: "fleet".into(), ..Default::default() },
                spec,
                ..Default::default()
            };
            g.validate().into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>()
        };
        let spec = |url: &str| GitSourceSpec { url: url.into(), ..Default::default() };
        for ok in
            ["/srv/git/fleet.git", "file:///srv/git/fleet", "https://github.com/o/fleet.git", "http://127.0.0.1:9/f"]
        {
            assert_eq!(with(spec(ok)), Vec::<String>::new(), "{ok}");
        }
        for bad in ["", "fleet", "ssh://git@host/f", "git@github.com:o/f", "ext::sh -c x", "file://rel", "/a b"] {
            assert_eq!(with(spec(bad)).len(), 1, "{bad}");
        }
        let two = GitRef { branch: Some("main".into()), tag: Some("v1".into()), commit: None };
        assert_eq!(
            with(GitSourceSpec { git_ref: Some(two), ..spec("/r") }),
            ["spec.ref: must name exactly one of branch, tag and commit"]
        );
        let short = GitRef { commit: Some("abc123".into()), ..Default::default() };
        assert_eq!(with(GitSourceSpec { git_ref: Some(short), ..spec("/r") }).len(), 1);
        assert_eq!(with(GitSourceSpec { path: Some("../up".into()), ..spec("/r") }).len(), 1);
        assert_eq!(with(GitSourceSpec { path: Some("./sessions".into()), ..spec("/r") }), Vec::<String>::new());
        let policy = |p: crate::gitsource::SourcePolicy| with(GitSourceSpec { policy: Some(p), ..spec("/r") });
        let good = crate::gitsource::SourcePolicy {
            kinds: vec!["Project".into(), "Session".into()],
            project_roots: vec!["/srv/repos".into()],
            ..Default::default()
        };
        assert_eq!(policy(good.clone()), Vec::<String>::new());
        let bad = crate::gitsource::SourcePolicy {
            kinds: vec!["Event".into()],
            project_roots: vec!["repos".into(), "/srv/../etc".into()],
            ..good
        };
        assert_eq!(
            policy(bad),
            [
                "spec.policy.kinds[0]: `Event` is not one of Project, Session, IssueSource, GitSource",
                "spec.policy.projectRoots[0]: `repos` must be an absolute path without `..`",
                "spec.policy.projectRoots[1]: `/srv/../etc` must be an absolute path without `..`"
            ]
        );
        let token = |url: &str| with(GitSourceSpec { token_env: Some("FLEET_TOKEN".into()), ..spec(url) });
        assert_eq!(token("https://github.com/o/f"), Vec::<String>::new());
        assert_eq!(token("http://localhost:8080/f"), Vec::<String>::new());
        assert_eq!(token("http://[::1]:8080/f"), Vec::<String>::new());
        assert_eq!(token("http://example.com/f").len(), 1, "a token never travels in the clear");
        assert_eq!(token("/srv/f").len(), 1);
    }

    #[test]
    fn issuesources() {
        use crate::issuesource::{IssueSourceSpec, SessionTemplate};
        let with = |name: &str, spec: IssueSourceSpec| {
            let i = IssueSource {
                metadata: ObjectMeta { name: name.into(), ..Default::default() },
                spec,
                ..Default::default()
            };
            i.validate().into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>()
        };
        let spec = IssueSourceSpec { project: "demo".into(), ..Default::default() };
        assert_eq!(with("bugs", spec.clone()), Vec::<String>::new());
        assert_eq!(with(&"b".repeat(53), spec.clone()).len(), 1, "no room left for the issue number");
        assert_eq!(with("bugs", IssueSourceSpec { project: String::new(), ..spec.clone() }).len(), 1);
        assert_eq!(with("bugs", IssueSourceSpec { max_sessions: Some(0), ..spec.clone() }).len(), 1);
        let mut labels = spec.clone();
        labels.github.labels = vec!["agent".into(), "a,b".into()];
        assert_eq!(
            with("bugs", labels),
            ["spec.github.labels[1]: `a,b` is not a GitHub label name (1 to 50 characters, no comma)"]
        );
        let template = |t: SessionTemplate| with("bugs", IssueSourceSpec { template: t, ..spec.clone() });
        let prompt = |p: &str| template(SessionTemplate { prompt: Some(p.into()), ..Default::default() });
        assert_eq!(prompt("Fix #{{number}}: {{ title }}\n{{body}} {{labels}} {{url}}"), Vec::<String>::new());
        assert_eq!(
            prompt("Fix {{nubmer}}"),
            ["spec.template.prompt: `{{nubmer}}` is not a placeholder; use {{number}}, {{reference}}, {{title}}, {{body}}, {{labels}}, {{url}}"]
        );
        let env = SessionTemplate { env: [("1BAD".to_string(), "x".to_string())].into(), ..Default::default() };
        assert_eq!(template(env).len(), 1);
        let bad_ref = SessionTemplate { base_ref: Some("a..b".into()), ..Default::default() };
        assert!(template(bad_ref)[0].starts_with("spec.template.baseRef: "));
    }

    #[test]
    fn workspace_pools() {
        let with = |size| {
            let mut p = Project::new("demo", "/abs/repo");
            p.spec.workspace_pool = Some(crate::project::WorkspacePoolSpec { size });
            p.validate().into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>()
        };
        assert!(with(0).is_empty());
        assert!(with(MAX_POOL_SIZE).is_empty());
        assert_eq!(
            with(MAX_POOL_SIZE + 1),
            ["spec.workspacePool.size: must be at most 100: each one is a full checkout"]
        );
    }

    #[test]
    fn budgets() {
        use crate::project::Budget;
        let with = |b: Budget| {
            let mut p = Project::new("demo", "/abs/repo");
            p.spec.budget = Some(b);
            p.validate().into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>()
        };
        assert_eq!(with(Budget { tokens: Some(1000), cost_usd: Some(2.5) }), Vec::<String>::new());
        assert_eq!(with(Budget { tokens: Some(0), cost_usd: None }), ["spec.budget.tokens: must be at least 1"]);
        assert_eq!(
            with(Budget { tokens: None, cost_usd: Some(-1.0) }),
            ["spec.budget.costUSD: must be a positive number of dollars"]
        );
        assert_eq!(with(Budget { tokens: None, cost_usd: Some(f64::NAN) }).len(), 1);
        assert_eq!(with(Budget::default()), ["spec.budget: must set tokens or costUSD"]);
    }
}

#[cfg(test)]
mod review_tests {
    use super::*;
    use crate::review::{ReviewSpec, ReviewTrigger, ReviewerSpec};

    #[test]
    fn review_settings_are_checked_field_by_field() {
        let mut p = Project::new("p", "/repo");
        p.spec.review = Some(ReviewSpec::default());
        let fields = |errs: Vec<FieldError>| errs.into_iter().map(|e| e.to_string()).collect::<Vec<_>>();
        assert_eq!(fields(p.validate()), ["spec.review.reviewers: must name at least one reviewer agent"]);
        p.spec.review = Some(ReviewSpec {
            reviewers: vec![ReviewerSpec {
                agent: Some(AgentRef::Custom { command: vec![" ".into()] }),
                ..Default::default()
            }],
            on: vec![ReviewTrigger::Push, ReviewTrigger::Push],
            gate: true,
            token_env: Some("REVIEW TOKEN".into()),
        });
        let errors = fields(p.validate());
        assert_eq!(
            errors[..2],
            [
                "spec.review.reviewers[0].agent.command[0]: the program must not be empty",
                "spec.review.on[1]: `push` is listed twice"
            ]
        );
        assert!(errors[2].starts_with("spec.review.tokenEnv: "), "{errors:?}");
        let mut s = Session::new("w", "p", "x");
        s.spec.review_of = Some("w".into());
        assert_eq!(fields(s.validate()), ["spec.reviewOf: a session cannot review itself"]);
        s.spec.review_of = Some("Not_A_Name".into());
        assert!(fields(s.validate())[0].starts_with("spec.reviewOf: "), "{:?}", s.validate());
    }

    #[test]
    fn docker_hosts_are_checked_field_by_field() {
        use crate::session::{DockerHost, DockerSpec};
        let host = |h: &str, capacity: u32, name: Option<&str>| DockerHost {
            host: h.into(),
            capacity,
            name: name.map(str::to_string),
        };
        let errors = |d: DockerSpec| {
            let mut e = Errors(vec![]);
            check_docker("spec.docker", &d, &mut e);
            e.0.iter().map(|e| e.to_string()).collect::<Vec<_>>()
        };
        let good = DockerSpec {
            hosts: vec![host("unix:///run/a.sock", 2, None), host("tcp://build-1:2376", 1, Some("build"))],
            ..Default::default()
        };
        assert_eq!(errors(good.clone()), Vec::<String>::new());
        let bad = DockerSpec {
            hosts: vec![
                host("unix:///run/a.sock", 2, None),
                host("unix:///run/a.sock", 0, Some("Big Box")),
                host("http://x", 1, None),
                host("tcp://", 1, Some("a")),
            ],
            ..Default::default()
        };
        let found = errors(bad);
        for want in [
            "spec.docker.hosts[1].host: `unix:///run/a.sock` is listed twice",
            "spec.docker.hosts[1].capacity: must be at least 1 session",
            "spec.docker.hosts[2].host: `http://x` must start with unix://, tcp://, ssh:// or npipe://",
            "spec.docker.hosts[3].host: `tcp://` is not an engine address: it needs a path or host after the scheme",
            "spec.docker.hosts[3].name: `a` names another host too",
        ] {
            assert!(found.iter().any(|f| f == want), "{want} not in {found:#?}");
        }
        assert!(found.iter().any(|f| f.starts_with("spec.docker.hosts[1].name: `Big Box` is not a DNS-1123 label")));
        let both = DockerSpec { host: Some("unix:///run/b.sock".into()), ..good };
        assert_eq!(
            errors(both),
            ["spec.docker.hosts: cannot be set together with `host`: `host` pins to one engine, `hosts` places on several"]
        );
    }
}
