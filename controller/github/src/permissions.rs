//! The permissions users were last read to have in repositories, kept for ten minutes and at
//! most a thousand of them, so an author's standing costs a permission request only when not seen
//! lately. A `Client` holds one, shared by its clones.

use std::time::Duration;

use aoctl_forge_types::Standing;

/// How long a user's permission is believed.
const KEEP_PERMISSION_FOR: Duration = Duration::from_secs(600);
/// Permissions remembered at most.
const MAX_PERMISSIONS: usize = 1000;

/// Users' permissions by repository and login (lower-cased), as lately read.
pub(crate) type Permissions = aoctl_forge_core::Kept<(String, String), Standing>;

/// An empty memory of permissions.
pub(crate) fn permissions() -> Permissions {
    aoctl_forge_core::Kept::new(KEEP_PERMISSION_FOR, MAX_PERMISSIONS)
}
