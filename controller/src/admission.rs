//! Admission: what an object gets between its validation and the store, the same whether it came
//! through the API or from a source. A Session's project must exist and owns it (deleting the
//! Project deletes its Sessions), and a new Session holds the cleanup finalizer from the start;
//! an IssueSource is owned by its project too. A project's orchestrator Session needs the
//! project's `spec.orchestrator`, and a worker's orchestrator label names its own project's.

use aoctl_api::decode::AnyObject;
use aoctl_api::orchestrator::{orchestrator_name, ORCHESTRATOR_LABEL};
use aoctl_api::session::SessionRole;
use aoctl_api::{finalizers, FieldError, Kind, ObjectMeta, OwnerReference, Project, Session, API_VERSION};
use aoctl_store::{Store, StoreError};

/// Why an object was not admitted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdmissionError {
    #[error("{kind} \"{name}\" is invalid: {}", .errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    Invalid { kind: Kind, name: String, errors: Vec<FieldError> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Admits `obj` for a create (`creating`) or an update. `staged` are the objects written in the
/// same batch before it: a project among them counts as existing, and is named as the owner by
/// kind and name, so the store fills in its uid when it creates it.
pub(crate) async fn admit(
    store: &Store,
    obj: &mut AnyObject,
    creating: bool,
    staged: &[AnyObject],
) -> Result<(), AdmissionError> {
    let (kind, project) = match obj {
        AnyObject::Session(s) => (Kind::Session, s.spec.project.clone()),
        AnyObject::IssueSource(i) => (Kind::IssueSource, i.spec.project.clone()),
        AnyObject::Project(_) | AnyObject::GitSource(_) => return Ok(()),
    };
    let uid = match owner(store, &project, staged).await? {
        Some(p) => {
            if let AnyObject::Session(s) = obj {
                let errors = orchestration(s, &p);
                if !errors.is_empty() {
                    return Err(AdmissionError::Invalid { kind, name: s.metadata.name.clone(), errors });
                }
            }
            p.metadata.uid.unwrap_or_default()
        }
        None => {
            return Err(AdmissionError::Invalid {
                kind,
                name: obj.meta().name.clone(),
                errors: vec![FieldError::new("spec.project", format!("project \"{project}\" not found"))],
            })
        }
    };
    // The session controller cleans up before a Session goes; holding its finalizer from the
    // start saves the controller a write and a round trip on every spawn.
    if let AnyObject::Session(s) = obj {
        if creating && !finalizers::holds(&s.metadata.finalizers, finalizers::SESSION_CLEANUP) {
            s.metadata.finalizers.push(finalizers::SESSION_CLEANUP.to_string());
        }
    }
    let refs = &mut obj.meta_mut().owner_references;
    refs.retain(|r| r.kind != Kind::Project.as_str());
    refs.push(OwnerReference {
        api_version: API_VERSION.into(),
        kind: Kind::Project.as_str().into(),
        name: project,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    });
    Ok(())
}

/// Project `name`: stored, else among `staged` (without a uid yet, which the store fills in), else
/// `None`.
async fn owner(store: &Store, name: &str, staged: &[AnyObject]) -> Result<Option<Project>, StoreError> {
    match store.get_typed::<Project>(name).await {
        Ok(p) => Ok(Some(p)),
        Err(StoreError::NotFound { .. }) => Ok(staged.iter().find_map(|o| match o {
            AnyObject::Project(p) if p.metadata.name == name => {
                Some(Project { metadata: ObjectMeta { uid: None, ..p.metadata.clone() }, ..p.clone() })
            }
            _ => None,
        })),
        Err(e) => Err(e),
    }
}

/// What a Session's orchestration says that its project must agree with: an orchestrator needs
/// the project's `spec.orchestrator`; a worker's orchestrator label names the project's own.
fn orchestration(s: &Session, project: &Project) -> Vec<FieldError> {
    let mut errors = vec![];
    let name = orchestrator_name(&project.metadata.name);
    if s.spec.role == SessionRole::Orchestrator && project.spec.orchestrator.is_none() {
        errors.push(FieldError::new(
            "spec.role",
            format!(
                "project \"{}\" has no spec.orchestrator; set it, or run aoctl up --orchestrator",
                project.metadata.name
            ),
        ));
    }
    if let Some(o) = s.metadata.labels.get(ORCHESTRATOR_LABEL).filter(|o| **o != name) {
        errors.push(FieldError::new(
            format!("metadata.labels.{ORCHESTRATOR_LABEL}"),
            format!("`{o}` is not the orchestrator of project {}, which is `{name}`", project.metadata.name),
        ));
    }
    if s.spec.role == SessionRole::Orchestrator && s.metadata.labels.contains_key(ORCHESTRATOR_LABEL) {
        errors.push(FieldError::new(
            format!("metadata.labels.{ORCHESTRATOR_LABEL}"),
            "an orchestrator is no one's worker",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use aoctl_api::SessionSpec;

    use super::*;

    fn session(project: &str) -> AnyObject {
        AnyObject::Session(Session {
            metadata: aoctl_api::ObjectMeta { name: "fix".into(), ..Default::default() },
            spec: SessionSpec { project: project.into(), ..Default::default() },
            ..Default::default()
        })
    }

    #[tokio::test]
    async fn a_session_is_owned_by_its_project_stored_or_staged() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut missing = session("demo");
        let err = admit(&store, &mut missing, true, &[]).await.unwrap_err();
        assert_eq!(err.to_string(), "Session \"fix\" is invalid: spec.project: project \"demo\" not found");

        let staged = [AnyObject::Project(Project::new("demo", "/src/demo"))];
        let mut s = session("demo");
        admit(&store, &mut s, true, &staged).await.unwrap();
        let meta = s.meta();
        assert_eq!(meta.owner_references.len(), 1);
        assert_eq!((meta.owner_references[0].name.as_str(), meta.owner_references[0].uid.as_str()), ("demo", ""));
        assert_eq!(meta.finalizers, [finalizers::SESSION_CLEANUP]);

        let p = store.create_typed(&Project::new("demo", "/src/demo")).await.unwrap();
        let mut s = session("demo");
        admit(&store, &mut s, false, &[]).await.unwrap();
        assert_eq!(s.meta().owner_references[0].uid, p.metadata.uid.unwrap());
        assert!(s.meta().finalizers.is_empty(), "an update adds no finalizer");
    }

    #[tokio::test]
    async fn an_orchestrator_needs_its_projects_say_and_a_mark_points_at_its_own_project() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.create_typed(&Project::new("demo", "/src/demo")).await.unwrap();
        let mut o = Session::new("demo-orchestrator", "demo", "goal");
        o.spec.role = SessionRole::Orchestrator;
        let err = admit(&store, &mut AnyObject::Session(o.clone()), true, &[]).await.unwrap_err();
        assert!(err.to_string().contains("spec.role: project \"demo\" has no spec.orchestrator"), "{err}");
        let mut p = Project::new("demo", "/src/demo");
        p.spec.orchestrator = Some(Default::default());
        admit(&store, &mut AnyObject::Session(o), true, &[AnyObject::Project(p)]).await.unwrap_err();
        let mut with = store.get_typed::<Project>("demo").await.unwrap();
        with.spec.orchestrator = Some(Default::default());
        store.update_typed(&with).await.unwrap();
        let mut o = Session::new("demo-orchestrator", "demo", "goal");
        o.spec.role = SessionRole::Orchestrator;
        admit(&store, &mut AnyObject::Session(o), true, &[]).await.unwrap();

        let mut w = Session::new("w", "demo", "task");
        w.metadata.labels.insert(ORCHESTRATOR_LABEL.into(), "other-orchestrator".into());
        let err = admit(&store, &mut AnyObject::Session(w.clone()), true, &[]).await.unwrap_err();
        assert!(err.to_string().contains("`other-orchestrator` is not the orchestrator of project demo"), "{err}");
        w.metadata.labels.insert(ORCHESTRATOR_LABEL.into(), "demo-orchestrator".into());
        admit(&store, &mut AnyObject::Session(w), true, &[]).await.unwrap();
    }
}
