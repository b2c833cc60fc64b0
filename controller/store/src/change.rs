//! The type of a change (added, modified, deleted), as the write rules record it and a watch
//! reports it.

/// The type of a change, as a watch reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}
