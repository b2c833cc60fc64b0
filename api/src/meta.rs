//! Object metadata shared by every kind, the `Kind` enum and the `Resource` trait.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The kinds this API serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Project,
    Session,
    GitSource,
    IssueSource,
    Event,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Project, Kind::Session, Kind::Event, Kind::GitSource, Kind::IssueSource];

    /// The `kind` field value, e.g. `Session`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Project => "Project",
            Kind::Session => "Session",
            Kind::GitSource => "GitSource",
            Kind::IssueSource => "IssueSource",
            Kind::Event => "Event",
        }
    }

    /// The plural used in URLs, e.g. `sessions`.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Project => "projects",
            Kind::Session => "sessions",
            Kind::GitSource => "gitsources",
            Kind::IssueSource => "issuesources",
            Kind::Event => "events",
        }
    }

    /// The `kind` of a list of this kind, e.g. `SessionList`.
    pub fn list_kind(self) -> &'static str {
        match self {
            Kind::Project => "ProjectList",
            Kind::Session => "SessionList",
            Kind::GitSource => "GitSourceList",
            Kind::IssueSource => "IssueSourceList",
            Kind::Event => "EventList",
        }
    }

    /// Parses a kind as users type it: `Session`, `session`, `sessions`, `sess`, `proj`, `gs`, `is`, `ev`.
    pub fn parse(s: &str) -> Option<Kind> {
        match s.to_ascii_lowercase().as_str() {
            "project" | "projects" | "proj" => Some(Kind::Project),
            "session" | "sessions" | "sess" => Some(Kind::Session),
            "gitsource" | "gitsources" | "gs" => Some(Kind::GitSource),
            "issuesource" | "issuesources" | "is" => Some(Kind::IssueSource),
            "event" | "events" | "ev" => Some(Kind::Event),
            _ => None,
        }
    }

    /// Where objects of this kind go when several are written together (`aoctl apply`, a
    /// GitSource's revision): Projects first, as the other kinds name them; deletes go in the
    /// reverse order.
    pub fn apply_rank(self) -> u8 {
        match self {
            Kind::Project => 0,
            Kind::IssueSource => 1,
            Kind::Session => 2,
            Kind::GitSource => 3,
            Kind::Event => 4,
        }
    }

    /// Whether objects of this kind have a `spec` users write (events do not).
    pub fn has_spec(self) -> bool {
        !matches!(self, Kind::Event)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A point in time, serialised as RFC 3339 in UTC with second precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub DateTime<Utc>);

impl Time {
    /// Reads the wall clock, truncated to whole seconds so that a value survives a round trip.
    pub fn now() -> Time {
        Time::from_unix(Utc::now().timestamp())
    }

    pub fn from_unix(secs: i64) -> Time {
        Time(DateTime::from_timestamp(secs, 0).unwrap_or_default())
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_rfc3339_opts(SecondsFormat::Secs, true))
    }
}

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&s)
            .map(|t| Time(t.with_timezone(&Utc)))
            .map_err(|e| serde::de::Error::custom(format!("invalid RFC 3339 time `{s}`: {e}")))
    }
}

impl JsonSchema for Time {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Time".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "format": "date-time"})
    }
}

/// Metadata every object carries. Users set `name`, `generateName`, `labels`, `annotations`,
/// `finalizers` and `ownerReferences`; the store alone sets the rest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectMeta {
    /// DNS-1123 label, unique per kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Prefix of a name the store generates when `name` is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Assigned by the store at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Opaque; assigned by the store on every write. Sent back for optimistic concurrency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Bumped by the store when, and only when, the spec changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Time>,
    /// Set by the store when deletion was asked for while finalizers remain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Time>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference>,
}

/// Points at the object that owns this one; deleting the owner deletes this object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OwnerReference {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

/// A typed top-level object of one kind.
pub trait Resource: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    const KIND: Kind;
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;

    /// The object's name.
    fn name(&self) -> &str {
        &self.meta().name
    }
}

/// Serde helper: the fixed `apiVersion` value, rejected when it differs.
pub(crate) fn de_api_version<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s != crate::API_VERSION {
        return Err(serde::de::Error::custom(format!(
            "unsupported apiVersion `{s}`, expected `{}`",
            crate::API_VERSION
        )));
    }
    Ok(s)
}

pub(crate) fn default_api_version() -> String {
    crate::API_VERSION.to_string()
}

/// Implements `Resource` and the `kind` field check for a kind.
macro_rules! resource_impl {
    ($ty:ty, $kind:expr) => {
        impl $crate::meta::Resource for $ty {
            const KIND: $crate::meta::Kind = $kind;
            fn meta(&self) -> &$crate::meta::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut $crate::meta::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
pub(crate) use resource_impl;

/// A fieldless enum written as fixed strings: serde and JSON Schema by those strings, `as_str`
/// and `Display`.
macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum $name { $($(#[$vm])* #[serde(rename = $text)] $variant),+ }
        impl $name {
            pub fn as_str(self) -> &'static str { match self { $($name::$variant => $text),+ } }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.as_str()) }
        }
    };
}
pub(crate) use string_enum;

/// Serde helper for the `kind` field of one kind.
pub(crate) fn check_kind<'de, D: Deserializer<'de>>(d: D, want: Kind) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s != want.as_str() {
        return Err(serde::de::Error::custom(format!("kind `{s}` where `{}` was expected", want.as_str())));
    }
    Ok(s)
}
