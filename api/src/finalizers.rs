//! The finalizers aoctl's controllers hold on objects: each names the cleanup that must run
//! before the object may go, and is released by the controller that ran it.

/// Held on every Session: the session controller stops its runtime and removes its workspace
/// and files before the Session goes. Admission adds it on create, so the controller need not.
pub const SESSION_CLEANUP: &str = "ao.dev/session-cleanup";

/// Held on a Project with a warm pool (`spec.workspacePool`): the project controller removes the
/// pool's worktrees before the Project goes. The controller adds it before it makes the first one.
pub const WORKSPACE_POOL: &str = "ao.dev/workspace-pool";

/// Whether `finalizers` holds `name`.
pub fn holds(finalizers: &[String], name: &str) -> bool {
    finalizers.iter().any(|f| f == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_compares_whole_names() {
        let f = vec!["ao.dev/session-cleanup".to_string()];
        assert!(holds(&f, SESSION_CLEANUP));
        assert!(!holds(&f, "ao.dev/session"));
        assert!(!holds(&[], SESSION_CLEANUP));
    }
}
