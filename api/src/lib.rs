//! Resource types of aoctl: metadata, `Project`, `Session`, `GitSource`, `IssueSource`, `Event`, conditions, durations,
//! quantities, validation, defaults, selectors, finalizer names, JSON Schema, CustomResourceDefinitions and the API's envelopes
//! (`Status`, watch lines, lists, tables, the messages of multiplexed streams) and the backup file.
//! This crate does no IO.

pub mod agent;
pub mod backup;
pub mod condition;
pub mod crd;
pub mod decode;
pub mod duration;
pub mod event;
pub mod feedback;
pub mod finalizers;
pub mod gitsource;
mod invalid;
pub mod issuesource;
pub mod meta;
pub mod notification;
pub mod orchestrator;
pub mod project;
pub mod quantity;
pub mod reactions;
pub mod review;
pub mod schema;
pub mod selector;
pub mod session;
pub mod source;
pub mod stream;
pub mod table;
pub mod validate;
pub mod wire;

pub use condition::{Condition, ConditionStatus};
pub use decode::{AnyObject, DecodeError};
pub use duration::Duration;
pub use event::{Event, EventType, InvolvedObject};
pub use gitsource::{GitSource, GitSourceSpec, GitSourceStatus};
pub use issuesource::{IssueSource, IssueSourceSpec, IssueSourceStatus};
pub use meta::{Kind, ObjectMeta, OwnerReference, Resource, Time};
pub use project::{Project, ProjectSpec, ProjectStatus, WorkspacePoolSpec, WorkspacePoolStatus};
pub use quantity::Quantity;
pub use session::{Session, SessionSpec, SessionStatus};
pub use validate::FieldError;

/// The API group of every aoctl resource.
pub const GROUP: &str = "ao.dev";
/// The served version of the group.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of every aoctl object.
pub const API_VERSION: &str = "ao.dev/v1alpha1";
