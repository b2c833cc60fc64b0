//! `aoctl attach`: replace aoctl with the command the session's runtime gives for attaching a
//! terminal (`status.runtime.attachCommand`, e.g. `tmux -S … attach-session -t =NAME`). That
//! command names the server's local socket, so it works on the server's machine only; the
//! process runtime has none. Running it belongs to the runtimes crate (`daemon::exec_replace`).

use std::process::ExitCode;

use anyhow::{anyhow, bail};
use aoctl_api::condition::types;
use aoctl_api::session::reasons;
use aoctl_api::Kind;
use aoctl_runtimes::daemon;
use serde_json::Value;

use crate::args::AttachArgs;
use crate::client::Client;
use crate::object;

pub(crate) async fn run(client: &Client, a: AttachArgs) -> anyhow::Result<ExitCode> {
    let session = client.get(Kind::Session, &a.session).await?;
    let argv = attach_command(&session)?;
    let e = daemon::exec_replace(&argv);
    Err(anyhow!("{e} (aoctl attach works only on the machine the server runs on)"))
}

/// The session's attach command, or why there is none.
pub(crate) fn attach_command(session: &Value) -> anyhow::Result<Vec<String>> {
    let name = object::name(session);
    // A stopped session's runtime is gone; an exited agent's screen stays, and can be looked at.
    let stopped = object::condition(session, types::RUNTIME_READY)
        .is_some_and(|c| object::str_at(c, "/reason") == Some(reasons::STOPPED));
    let runtime = session.pointer("/status/runtime").filter(|r| r.is_object() && !stopped);
    let Some(runtime) = runtime else {
        bail!("session \"{name}\" has no running agent (phase {})", object::session_phase(session));
    };
    let argv: Vec<String> = runtime
        .get("attachCommand")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    if argv.is_empty() {
        let kind = runtime.get("kind").and_then(Value::as_str).unwrap_or("unknown");
        bail!("session \"{name}\" cannot be attached (runtime {kind}); use aoctl logs -f and aoctl send");
    }
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn attach_commands() {
        let s = |runtime: Value| json!({"metadata": {"name": "x"}, "status": {"phase": "Working", "runtime": runtime}});
        let tmux = s(json!({"kind": "tmux", "handle": "x",
            "attachCommand": ["tmux", "-S", "/data/tmux.sock", "attach-session", "-t", "=x"]}));
        assert_eq!(attach_command(&tmux).unwrap(), ["tmux", "-S", "/data/tmux.sock", "attach-session", "-t", "=x"]);
        let process = s(json!({"kind": "process", "handle": "123"}));
        assert_eq!(
            attach_command(&process).unwrap_err().to_string(),
            "session \"x\" cannot be attached (runtime process); use aoctl logs -f and aoctl send"
        );
        let empty = s(json!({"kind": "process", "handle": "123", "attachCommand": []}));
        assert!(attach_command(&empty).is_err());
        let mut stopped = tmux.clone();
        stopped["status"]["phase"] = json!("Stopped");
        stopped["status"]["conditions"] = json!([{"type": "RuntimeReady", "status": "False", "reason": "Stopped"}]);
        assert_eq!(
            attach_command(&stopped).unwrap_err().to_string(),
            "session \"x\" has no running agent (phase Stopped)"
        );
        let mut exited = tmux.clone();
        exited["status"]["conditions"] = json!([{"type": "RuntimeReady", "status": "False", "reason": "AgentExited"}]);
        assert!(attach_command(&exited).is_ok(), "the last screen of an exited agent can be looked at");
        let pending = json!({"metadata": {"name": "x"}});
        assert_eq!(
            attach_command(&pending).unwrap_err().to_string(),
            "session \"x\" has no running agent (phase Pending)"
        );
    }
}
