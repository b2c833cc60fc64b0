//! What runs an agent, shared by every kind that names one: the built-in agents and `AgentRef`,
//! the permission, runtime, workspace and restart settings, and a docker session's container and
//! engines (`DockerSpec`, `DockerHost`), each with its checks.

use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::meta::string_enum;
use crate::quantity::Quantity;
use crate::validate::{dns1123_label, Errors, Invalid};

/// The built-in agent adapters, by the name a manifest uses.
pub const BUILTIN_AGENTS: &[&str] = &[
    "claude-code",
    "codex",
    "aider",
    "opencode",
    "grok",
    "droid",
    "amp",
    "agy",
    "crush",
    "cursor",
    "qwen",
    "copilot",
    "goose",
    "auggie",
    "continue",
    "devin",
    "cline",
    "kimi",
    "kiro",
    "kilocode",
    "vibe",
    "pi",
    "autohand",
    "gemini",
];

/// A built-in adapter by name, or a custom command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentRef {
    Builtin(String),
    /// Argument vector; `{prompt}` and `{promptFile}` are substituted.
    Custom {
        command: Vec<String>,
    },
}

impl Serialize for AgentRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            AgentRef::Builtin(name) => s.serialize_str(name),
            AgentRef::Custom { command } => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("command", command)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for AgentRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = AgentRef;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a built-in agent name or {command: [...]}")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<AgentRef, E> {
                if BUILTIN_AGENTS.contains(&s) {
                    Ok(AgentRef::Builtin(s.to_string()))
                } else {
                    Err(E::unknown_variant(s, BUILTIN_AGENTS))
                }
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<AgentRef, A::Error> {
                let mut command: Option<Vec<String>> = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "command" {
                        command = Some(map.next_value()?);
                    } else {
                        return Err(serde::de::Error::unknown_field(&key, &["command"]));
                    }
                }
                match command {
                    Some(c) if !c.is_empty() => Ok(AgentRef::Custom { command: c }),
                    Some(_) => Err(serde::de::Error::custom("agent.command must not be empty")),
                    None => Err(serde::de::Error::missing_field("command")),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for AgentRef {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AgentRef".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "oneOf": [
                {"type": "string", "enum": BUILTIN_AGENTS},
                {"type": "object", "additionalProperties": false, "required": ["command"],
                 "properties": {"command": {"type": "array", "minItems": 1, "items": {"type": "string"}}}}
            ]
        })
    }
}

impl fmt::Display for AgentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentRef::Builtin(n) => f.write_str(n),
            AgentRef::Custom { command } => write!(f, "custom:{}", command.first().map(String::as_str).unwrap_or("")),
        }
    }
}

string_enum!(
    /// Whether the agent is started with its own flag to skip approval prompts.
    Permissions { Bypass = "bypass", Ask = "ask" }
);
string_enum!(
    /// Where the agent runs.
    RuntimeKind { Tmux = "tmux", Process = "process", Docker = "docker" }
);
string_enum!(
    /// How the session's checkout is made: a git worktree (`worktree`) or a clone (`clone`) on the
    /// session's own branch; a checkout of the base at no branch whose changes are discarded
    /// (`readonly`); or an empty folder (`none`). The last two have no branch and no pull request.
    WorkspaceKind { Worktree = "worktree", Clone = "clone", Readonly = "readonly", None = "none" }
);

impl WorkspaceKind {
    /// Whether a session of this kind works on a branch of its own (and, with a forge, opens a
    /// pull request from it).
    pub fn has_branch(self) -> bool {
        matches!(self, WorkspaceKind::Worktree | WorkspaceKind::Clone)
    }
}

/// A session's checkout, `spec.workspace`: `{kind: worktree}`. The string form of earlier
/// versions (`workspace: worktree`) is read as the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspaceSpec {
    pub kind: WorkspaceKind,
}

impl WorkspaceSpec {
    pub fn of(kind: WorkspaceKind) -> WorkspaceSpec {
        WorkspaceSpec { kind }
    }
}

impl<'de> Deserialize<'de> for WorkspaceSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<WorkspaceSpec, D::Error> {
        /// The object form, as declared.
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        struct Object {
            kind: WorkspaceKind,
        }
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = WorkspaceSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object `{kind: worktree | clone | readonly | none}`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<WorkspaceSpec, E> {
                WorkspaceKind::deserialize(serde::de::value::StrDeserializer::<E>::new(v)).map(WorkspaceSpec::of)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<WorkspaceSpec, A::Error> {
                let o = Object::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(WorkspaceSpec::of(o.kind))
            }
        }
        d.deserialize_any(Either)
    }
}
string_enum!(
    /// When an exited agent is started again.
    RestartPolicy { Never = "Never", OnFailure = "OnFailure", Always = "Always" }
);

/// Container settings for `runtime: docker`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DockerSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_limit: Option<i64>,
    /// `none` (default), `bridge`, `host` or a network name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// Engine address: `unix://`, `tcp://` (TLS) or `ssh://`. A session that names one is pinned
    /// to it; exclusive with `hosts` at one level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Engines sessions are placed on, each with the number of sessions it takes at once: a
    /// session goes to the least loaded one that answers and has room.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<DockerHost>,
}

/// One engine of `spec.docker.hosts`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DockerHost {
    /// Engine address, as `spec.docker.host`.
    pub host: String,
    /// How many live sessions the engine takes at once (at least 1).
    pub capacity: u32,
    /// A short label for messages and metrics; derived from the address when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl DockerHost {
    /// The label: `name`, else the address's host name (`tcp://build-1:2376` → `build-1`,
    /// `ssh://me@gpu-box` → `gpu-box`) or, for a socket, its file name without extension
    /// (`unix:///run/b/docker.sock` → `docker`, unless the folder tells more: `b`).
    pub fn label(&self) -> String {
        if let Some(n) = self.name.as_deref().filter(|n| !n.is_empty()) {
            return n.to_string();
        }
        derived_label(&self.host)
    }
}

/// The label of an engine address (see [`DockerHost::label`]).
pub fn derived_label(address: &str) -> String {
    let (scheme, rest) = address.split_once("://").unwrap_or(("", address));
    if matches!(scheme, "unix" | "npipe") {
        let parts: Vec<&str> = rest.split(['/', '\\']).filter(|p| !p.is_empty()).collect();
        let file = parts.last().copied().unwrap_or(rest);
        let stem = file.split('.').next().filter(|s| !s.is_empty()).unwrap_or(file);
        // `…/b/docker.sock`: the folder names the engine better than the usual file name.
        return match (stem, parts.len()) {
            ("docker" | "dockerd", n) if n >= 2 && !["run", "var"].contains(&parts[n - 2]) => parts[n - 2].to_string(),
            _ => stem.to_string(),
        };
    }
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => host.split(':').next().unwrap_or(host),
    };
    if host.is_empty() {
        address.to_string()
    } else {
        host.to_string()
    }
}

/// Checks an agent reference at `field`: a custom command names a program.
pub(crate) fn check_agent(field: &str, a: &AgentRef, e: &mut Errors) {
    if let AgentRef::Custom { command } = a {
        if command[0].trim().is_empty() {
            e.check(format!("{field}.command[0]"), Err("the program must not be empty".into()));
        }
    }
}

/// Checks a docker engine address: `unix://`, `tcp://`, `ssh://` or `npipe://`, with something after.
fn engine_address(h: &str) -> Result<(), Invalid> {
    let known = ["unix://", "tcp://", "ssh://", "npipe://"].iter().find(|s| h.starts_with(**s));
    match known {
        Some(scheme) if h.len() > scheme.len() && !h.chars().any(char::is_whitespace) => Ok(()),
        Some(_) => Err(format!("`{h}` is not an engine address: it needs a path or host after the scheme").into()),
        None => Err(format!("`{h}` must start with unix://, tcp://, ssh:// or npipe://").into()),
    }
}

/// Checks a `docker` block at `field`: limits, the engine or engines, the image.
pub(crate) fn check_docker(field: &str, d: &DockerSpec, e: &mut Errors) {
    if let Some(c) = d.cpus {
        if !(c > 0.0 && c.is_finite()) {
            e.check(format!("{field}.cpus"), Err(format!("must be a positive number of CPUs, not {c}").into()));
        }
    }
    if let Some(p) = d.pids_limit {
        if p <= 0 {
            e.check(format!("{field}.pidsLimit"), Err(format!("must be positive, not {p}").into()));
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
            e.check(format!("{f}.host"), Err(format!("`{}` is listed twice", h.host).into()));
        }
        if h.capacity == 0 {
            e.check(format!("{f}.capacity"), Err("must be at least 1 session".into()));
        }
        if let Some(n) = &h.name {
            e.check(format!("{f}.name"), dns1123_label(n));
        }
        if h.name.is_some() && d.hosts[..i].iter().any(|o| o.label() == h.label()) {
            e.check(format!("{f}.name"), Err(format!("`{}` names another host too", h.label()).into()));
        }
    }
    if let Some(img) = &d.image {
        if img.is_empty() || img.chars().any(char::is_whitespace) {
            e.check(format!("{field}.image"), Err(format!("`{img}` is not an image reference").into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_labels_come_from_the_name_or_the_address() {
        let label = |host: &str, name: Option<&str>| {
            DockerHost { host: host.into(), capacity: 1, name: name.map(str::to_string) }.label()
        };
        assert_eq!(label("tcp://build-1:2376", None), "build-1");
        assert_eq!(label("ssh://me@gpu-box", None), "gpu-box");
        assert_eq!(label("tcp://[::1]:2376", None), "::1");
        assert_eq!(label("unix:///run/user/1000/docker.sock", None), "1000");
        assert_eq!(label("unix:///var/run/docker.sock", None), "docker");
        assert_eq!(label("unix:///tmp/engines/b.sock", None), "b");
        assert_eq!(label("unix:///tmp/engines/b.sock", Some("second")), "second");
    }

    #[test]
    fn docker_hosts_are_checked_field_by_field() {
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
