//! Which controller node a session's runtime belongs to. A tmux session, a process or a
//! container on a docker engine behind a local socket can be reached only from the machine (and
//! data folder) that started it, so its status names that node, and a controller leading from
//! another node leaves it alone rather than start it a second time; containers on engines every
//! node reaches (tcp://, ssh://) belong to whichever controller leads.

use std::time::Duration;

use aoctl_api::condition::types;
use aoctl_api::session::{reasons, RuntimeKind, SessionStatus};
use aoctl_api::{ConditionStatus, Session};
use aoctl_engine::Action;
use std::ops::ControlFlow::{Break, Continue};

use super::{cond, Context, Step};

/// How often a session held by another node is looked at again.
const RECHECK: Duration = Duration::from_secs(60);

/// Whether a runtime of `kind` on the docker engine `engine` (`None`: the local one) lives on
/// one node only.
pub(super) fn local_to_node(kind: RuntimeKind, engine: Option<&str>) -> bool {
    match kind {
        RuntimeKind::Tmux | RuntimeKind::Process => true,
        RuntimeKind::Docker => engine.is_none_or(|h| h.starts_with("unix://") || h.starts_with("npipe://")),
    }
}

/// The node a runtime just started or adopted belongs to, if it belongs to one.
pub(super) fn owner(kind: RuntimeKind, engine: Option<&str>, here: &str) -> Option<String> {
    local_to_node(kind, engine).then(|| here.to_string())
}

/// The node other than `here` the session's runtime lives on, if it lives on one.
pub(super) fn elsewhere<'a>(st: &'a SessionStatus, here: &str) -> Option<&'a str> {
    st.runtime.as_ref().and_then(|r| r.node.as_deref()).filter(|n| *n != here)
}

/// A session whose runtime lives on another node is not driven from this one: its conditions
/// say where it runs, and it is looked at again now and then (and whenever it changes).
pub(super) fn held_elsewhere(s: &Session, ctx: &Context, st: &mut SessionStatus) -> Step {
    let Some(node) = elsewhere(st, &ctx.node).map(str::to_string) else {
        return Ok(Continue(()));
    };
    let kind = st.runtime.as_ref().map(|r| r.kind.to_string()).unwrap_or_default();
    let msg = format!(
        "its {kind} runtime lives on node \"{node}\"; the leading controller runs on node \"{}\" and leaves it alone",
        ctx.node
    );
    cond(st, s, types::RUNTIME_READY, ConditionStatus::Unknown, reasons::ON_ANOTHER_NODE, msg);
    Ok(Break(Action::requeue(RECHECK)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::session::RuntimeStatus;

    #[test]
    fn runtimes_only_one_machine_reaches_belong_to_its_node() {
        assert!(local_to_node(RuntimeKind::Tmux, None));
        assert!(local_to_node(RuntimeKind::Process, Some("tcp://build:2376")));
        assert!(local_to_node(RuntimeKind::Docker, None));
        assert!(local_to_node(RuntimeKind::Docker, Some("unix:///run/docker.sock")));
        assert!(!local_to_node(RuntimeKind::Docker, Some("tcp://build:2376")));
        assert!(!local_to_node(RuntimeKind::Docker, Some("ssh://ci@build")));
        assert_eq!(owner(RuntimeKind::Docker, Some("tcp://build:2376"), "a"), None);
        assert_eq!(owner(RuntimeKind::Tmux, None, "a").as_deref(), Some("a"));
    }

    #[test]
    fn only_a_runtime_of_another_node_is_elsewhere() {
        let mut st = SessionStatus::default();
        assert_eq!(elsewhere(&st, "a"), None, "no runtime yet");
        st.runtime = Some(RuntimeStatus {
            kind: RuntimeKind::Tmux,
            handle: "ao-x".into(),
            started_at: None,
            restarts: 0,
            exit_code: None,
            attach_command: vec![],
            host: None,
            node: Some("a".into()),
        });
        assert_eq!(elsewhere(&st, "a"), None);
        assert_eq!(elsewhere(&st, "b"), Some("a"));
        st.runtime.as_mut().unwrap().node = None;
        assert_eq!(elsewhere(&st, "b"), None, "a shared engine's container follows the leader");
    }
}
