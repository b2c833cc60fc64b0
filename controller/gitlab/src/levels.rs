//! The access levels users were last read to have in projects, kept for ten minutes and at most
//! a thousand of them, so an author's level costs a member request only when not seen lately. A
//! `Client` holds one, shared by its clones.

use std::time::Duration;

use aoctl_forge_core::Kept;

/// How long a user's access level is believed.
const KEEP_FOR: Duration = Duration::from_secs(600);
/// Users' levels remembered at most; past it the oldest answer is forgotten.
const MAX_KEPT: usize = 1000;

/// Access levels by project and user (`None`: no member), as read, and when.
pub(crate) type Levels = Kept<(String, u64), Option<u64>>;

/// An empty memory of levels.
pub(crate) fn levels() -> Levels {
    Kept::new(KEEP_FOR, MAX_KEPT)
}
