//! `GET /apis/ao.dev/v1alpha1/backup` (`aoctl backup`): every stored object at one
//! resourceVersion, streamed as the api's backup file (`aoctl_api::backup`): a header line, then
//! one object a line, as the store holds it. The snapshot is one read of the store's objects in
//! memory, so writes go on while it streams. A backup holds everything, so only the bearer token
//! takes one: the dashboard's cookie is refused.

use aoctl_api::backup::{Header, MEDIA_TYPE};
use aoctl_api::Time;
use aoctl_store::Snapshot;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};

use super::access::Access;
use super::{AppError, AppState};

pub(crate) async fn backup(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, AppError> {
    authorize(&state.access, &headers)?;
    let snapshot = state.store.snapshot().await?;
    tracing::info!(rv = snapshot.rv, objects = snapshot.objects.len(), "a backup was taken");
    let lines = lines(snapshot, Time::now()).map(Ok::<_, std::convert::Infallible>);
    Ok(([(header::CONTENT_TYPE, MEDIA_TYPE)], Body::from_stream(futures::stream::iter(lines))).into_response())
}

/// Only the bearer token itself: the guard let the request in with it or with the dashboard's
/// cookie, and a page's cookie must not carry every object away.
fn authorize(access: &Access, headers: &HeaderMap) -> Result<(), AppError> {
    if access.token_matches(headers) {
        return Ok(());
    }
    Err(AppError::Forbidden(
        "a backup holds every object: only the API's bearer token takes one (aoctl backup), not the dashboard's sign-in"
            .into(),
    ))
}

/// The file's lines: the header, then each object's stored encoding with a newline.
pub(crate) fn lines(snapshot: Snapshot, now: Time) -> impl Iterator<Item = Bytes> {
    let header = Header::new(snapshot.backend, snapshot.rv, now, snapshot.objects.len() as u64, crate::VERSION);
    std::iter::once(Bytes::from(header.to_line())).chain(snapshot.objects.into_iter().map(|(_, o)| {
        let mut line = Vec::with_capacity(o.json().len() + 1);
        line.extend_from_slice(o.json());
        line.push(b'\n');
        Bytes::from(line)
    }))
}

/// A store at `path` holding project `p` and session `s` whose status phase is `phase`: what
/// the tests of the backup and of the restore back up.
#[cfg(test)]
pub(crate) async fn sample_store(path: &std::path::Path, phase: &str) -> aoctl_store::Store {
    use aoctl_api::Kind;
    use aoctl_store::WriteOptions;
    use serde_json::json;
    let store = aoctl_store::Store::open(path).unwrap();
    let project = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Project", "metadata": {"name": "p"},
        "spec": {"path": "/src/p"}});
    store.create(Kind::Project, project, WriteOptions::default()).await.unwrap();
    let session = json!({"apiVersion": "ao.dev/v1alpha1", "kind": "Session", "metadata": {"name": "s"},
        "spec": {"project": "p", "prompt": "fix it"}});
    store.create(Kind::Session, session, WriteOptions::default()).await.unwrap();
    let status = json!({"phase": phase});
    store.update_status(Kind::Session, "s", status, None, WriteOptions::default()).await.unwrap();
    store
}

#[cfg(test)]
mod tests {
    use super::*;
    use aoctl_api::Kind;
    use axum::http::HeaderValue;

    #[test]
    fn only_the_bearer_token_takes_a_backup() {
        let access = Access::new("t0ken", "127.0.0.1:7420".parse().unwrap(), &[]);
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer t0ken"));
        assert!(authorize(&access, &h).is_ok());
        let cookie = format!("{}={}", super::super::login::COOKIE, access.cookie_key.make(u64::MAX, b"n"));
        let mut page = HeaderMap::new();
        page.insert(header::COOKIE, HeaderValue::from_str(&cookie).unwrap());
        assert!(access.cookie_key.signed_in(&page), "the cookie is a good one");
        let e = authorize(&access, &page).unwrap_err();
        assert_eq!(e.code(), 403, "{e}");
        let mut other = HeaderMap::new();
        other.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer t0ke"));
        assert_eq!(authorize(&access, &other).unwrap_err().code(), 403);
    }

    #[tokio::test]
    async fn the_file_is_a_header_and_every_object_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        let store = sample_store(dir.path(), "Pending").await;
        let snapshot = store.snapshot().await.unwrap();
        let text: Vec<u8> = lines(snapshot, Time::from_unix(1_700_000_000)).flat_map(|b| b.to_vec()).collect();
        let text = String::from_utf8(text).unwrap();
        let backup = aoctl_api::backup::parse("backup", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(
            (backup.header.backend.as_str(), backup.header.resource_version(), backup.header.objects),
            ("sled", 3, 2)
        );
        assert_eq!(backup.header.server_version, crate::VERSION);
        assert_eq!(backup.objects[1].object, store.get(Kind::Session, "s").await.unwrap(), "status and all");
        assert_eq!(backup.objects[1].object["status"]["phase"], "Pending");
    }
}
