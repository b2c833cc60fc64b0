//! Admission: what an object gets between its validation and the store, the same whether it came
//! through the API or from a source. A Session's project must exist and owns it (deleting the
//! Project deletes its Sessions), and a new Session holds the cleanup finalizer from the start;
//! an IssueSource is owned by its project too.

use aoctl_api::decode::AnyObject;
use aoctl_api::{finalizers, FieldError, Kind, OwnerReference, Project, API_VERSION};
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
    let uid = match owner_uid(store, &project, staged).await? {
        Some(uid) => uid,
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

/// The uid to name project `name` by: its own when stored, empty (filled in by the store) when it
/// is only among `staged`, `None` when it is nowhere.
async fn owner_uid(store: &Store, name: &str, staged: &[AnyObject]) -> Result<Option<String>, StoreError> {
    match store.get_typed::<Project>(name).await {
        Ok(p) => Ok(Some(p.metadata.uid.unwrap_or_default())),
        Err(StoreError::NotFound { .. }) => {
            let staged = staged.iter().any(|o| matches!(o, AnyObject::Project(p) if p.metadata.name == name));
            Ok(staged.then(String::new))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use aoctl_api::{Session, SessionSpec};

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
}
