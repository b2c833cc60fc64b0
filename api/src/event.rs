//! The `Event` kind: a record of something the controller did or saw, kept for a while.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::validate_reason;
use crate::meta::{check_kind, de_api_version, default_api_version, resource_impl, Kind, ObjectMeta, Time};
use crate::validate::{dns1123_label, validate_meta, Errors, FieldError, Validate};

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum EventType {
    Normal,
    Warning,
}

/// The object an event is about.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InvolvedObject {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// A controller event, like Kubernetes' core `Event`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Event {
    #[serde(default = "default_api_version", deserialize_with = "de_api_version")]
    pub api_version: String,
    #[serde(default = "event_kind", deserialize_with = "de_kind")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub involved_object: InvolvedObject,
    #[serde(rename = "type")]
    pub type_: EventType,
    pub reason: String,
    #[serde(default)]
    pub message: String,
    /// How many times this event was seen (repeats are folded into one object).
    #[serde(default = "one")]
    pub count: u32,
    pub first_timestamp: Time,
    pub last_timestamp: Time,
    /// The component that reported it, e.g. `session-controller`.
    #[serde(default)]
    pub source: String,
}

fn one() -> u32 {
    1
}

fn event_kind() -> String {
    Kind::Event.as_str().to_string()
}

fn de_kind<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    check_kind(d, Kind::Event)
}

resource_impl!(Event, Kind::Event);

impl Event {
    /// A new event about `object`, named after it so repeats can be found.
    pub fn new(
        object: InvolvedObject,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
        source: &str,
        now: Time,
    ) -> Event {
        Event {
            api_version: default_api_version(),
            kind: event_kind(),
            metadata: ObjectMeta { generate_name: Some(format!("{}-", object.name)), ..Default::default() },
            involved_object: object,
            type_,
            reason: reason.to_string(),
            message: message.into(),
            count: 1,
            first_timestamp: now,
            last_timestamp: now,
            source: source.to_string(),
        }
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
