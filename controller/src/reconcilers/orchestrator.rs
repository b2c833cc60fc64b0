//! A project's orchestrator Session, kept in line with `Project.spec.orchestrator` by the project
//! reconciler: made (through admission, so the Project owns it) once the project is Ready, its
//! agent, prompt, runtime, environment, arguments and `stopped` carried over when they change, and
//! deleted when `spec.orchestrator` is taken away. Its workers are not its children: they stay.

use aoctl_api::decode::AnyObject;
use aoctl_api::orchestrator::{orchestrator_name, OrchestratorSpec};
use aoctl_api::session::{RestartPolicy, SessionRole, WorkspaceKind, WorkspaceSpec};
use aoctl_api::{EventType, Kind, Project, Session, SessionSpec};
use aoctl_store::StoreError;

use aoctl_store::Store;

use super::Error;
use crate::admission::{self, AdmissionError};
use crate::recorder::Recorder;

/// The first message of an orchestrator whose project gives it none.
fn default_prompt(project: &str) -> String {
    format!(
        "You are the orchestrator of project {project}. You have a read-only checkout of its repository. \
         A person will give you a goal here. Split it into pieces of work and give each to a worker \
         session with your aoctl tools: spawn one per piece, follow them with list_sessions, \
         read_transcript and read_diff, message them with send, and stop, resume or delete them. \
         What your workers report reaches you as messages that start with [aoctl:reports:. \
         Until a person gives you a goal, wait."
    )
}

/// The orchestrator Session `project` asks for.
pub(super) fn wanted(project: &Project, o: &OrchestratorSpec) -> Session {
    let name = &project.metadata.name;
    let mut s = Session::new(&orchestrator_name(name), name, "");
    s.spec = SessionSpec {
        project: name.clone(),
        role: SessionRole::Orchestrator,
        workspace: Some(WorkspaceSpec::of(WorkspaceKind::Readonly)),
        restart_policy: Some(RestartPolicy::Always),
        ..carried(o, name)
    };
    s
}

/// The fields of the orchestrator Session that follow `spec.orchestrator`.
fn carried(o: &OrchestratorSpec, project: &str) -> SessionSpec {
    SessionSpec {
        agent: o.agent.clone(),
        prompt: Some(o.prompt.clone().unwrap_or_else(|| default_prompt(project))),
        runtime: o.runtime,
        env: o.env.clone(),
        agent_args: o.agent_args.clone(),
        stopped: o.stopped,
        ..Default::default()
    }
}

/// `live`'s spec with what `spec.orchestrator` says carried over; `None` when nothing differs.
fn carried_over(live: &Session, o: &OrchestratorSpec, project: &str) -> Option<Session> {
    let c = carried(o, project);
    let s = &live.spec;
    let same = s.agent == c.agent
        && s.prompt == c.prompt
        && s.runtime == c.runtime
        && s.env == c.env
        && s.agent_args == c.agent_args
        && s.stopped == c.stopped;
    if same {
        return None;
    }
    let mut next = live.clone();
    next.spec = SessionSpec {
        agent: c.agent,
        prompt: c.prompt,
        runtime: c.runtime,
        env: c.env,
        agent_args: c.agent_args,
        stopped: c.stopped,
        ..live.spec.clone()
    };
    Some(next)
}

/// Makes, updates or removes the project's orchestrator Session; `ready` is the project's Ready
/// condition (nothing is made for a project whose repository is not there).
pub(super) async fn keep(project: &Project, ready: bool, store: &Store, recorder: &Recorder) -> Result<(), Error> {
    let name = orchestrator_name(&project.metadata.name);
    let live = match store.get_typed::<Session>(&name).await {
        Ok(s) => Some(s),
        Err(StoreError::NotFound { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let live = live.filter(|s| s.metadata.deletion_timestamp.is_none());
    match (&project.spec.orchestrator, live) {
        (None, Some(s)) if s.spec.role == SessionRole::Orchestrator && s.spec.project == project.metadata.name => {
            let rv = s.metadata.resource_version.clone();
            match store.delete(Kind::Session, &name, rv.as_deref(), Default::default()).await {
                Ok(_) | Err(StoreError::NotFound { .. }) | Err(StoreError::Conflict { .. }) => {}
                Err(e) => return Err(e.into()),
            }
            let msg = format!("session {name} is deleted: the project has no spec.orchestrator; its workers stay");
            recorder.publish(project, EventType::Normal, "OrchestratorRemoved", &msg).await;
        }
        (Some(o), None) if ready => {
            let mut obj = AnyObject::Session(wanted(project, o));
            match admission::admit(store, &mut obj, true, &[]).await {
                Ok(()) => {}
                Err(AdmissionError::Invalid { errors, .. }) => {
                    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
                    let msg = format!("session {name} cannot be made: {}", text.join("; "));
                    recorder.publish(project, EventType::Warning, "OrchestratorInvalid", &msg).await;
                    return Ok(());
                }
                Err(AdmissionError::Store(e)) => return Err(e.into()),
            }
            match store.create(Kind::Session, obj.to_value(), Default::default()).await {
                Ok(_) => {
                    let msg = format!("session {name} is the project's orchestrator");
                    recorder.publish(project, EventType::Normal, "OrchestratorCreated", &msg).await;
                }
                Err(StoreError::AlreadyExists { .. }) => {}
                Err(StoreError::Invalid { message }) => {
                    let msg = format!("session {name} cannot be made: {message}");
                    recorder.publish(project, EventType::Warning, "OrchestratorInvalid", &msg).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        (Some(_), Some(s)) if s.spec.role != SessionRole::Orchestrator || s.spec.project != project.metadata.name => {
            let msg = format!("a session named {name} exists and is not this project's orchestrator: rename it");
            recorder.publish(project, EventType::Warning, "OrchestratorNameTaken", &msg).await;
        }
        (Some(o), Some(s)) => {
            let Some(next) = carried_over(&s, o, &project.metadata.name) else { return Ok(()) };
            let prompt_changed = next.spec.prompt != s.spec.prompt;
            match store.update_typed(&next).await {
                Ok(_) => {
                    let mut msg = format!("session {name} follows spec.orchestrator");
                    if prompt_changed {
                        msg.push_str("; the new prompt is its first message when it starts afresh");
                    }
                    recorder.publish(project, EventType::Normal, "OrchestratorUpdated", &msg).await;
                }
                // Changed meanwhile: the change wakes this project again.
                Err(StoreError::Conflict { .. }) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_orchestrator_session_reads_the_repository_and_follows_the_spec() {
        let mut p = Project::new("demo", "/src/demo");
        let o = OrchestratorSpec { prompt: Some("GOAL".into()), ..Default::default() };
        p.spec.orchestrator = Some(o.clone());
        let s = wanted(&p, &o);
        assert_eq!(s.metadata.name, "demo-orchestrator");
        assert_eq!(s.spec.role, SessionRole::Orchestrator);
        assert_eq!(s.spec.workspace, Some(WorkspaceSpec::of(WorkspaceKind::Readonly)));
        assert_eq!(s.spec.prompt.as_deref(), Some("GOAL"));
        assert!(aoctl_api::validate::Validate::validate(&s).is_empty());
        assert_eq!(carried_over(&s, &o, "demo"), None);
        let stopped = OrchestratorSpec { stopped: true, ..o.clone() };
        let next = carried_over(&s, &stopped, "demo").unwrap();
        assert!(next.spec.stopped);
        assert_eq!(next.spec.workspace, s.spec.workspace, "what it does not carry stays");
        let defaulted = wanted(&p, &OrchestratorSpec::default());
        assert!(defaulted.spec.prompt.unwrap().contains("orchestrator of project demo"));
    }
}
