//! Who may write to a project: the access level GitLab gives a user there (`GET
//! /projects/:id/members/all/:user_id`, inherited memberships included), read once per user and
//! kept for a while, so reading a merge request's notes costs a request only for an author not
//! seen lately. Notes do not carry it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aoctl_forge_core::{Error, ErrorKind};
use serde::Deserialize;

use crate::client::{project_id, Client};

const GET_MEMBER: &str = "GET /projects/:id/members/all/:user_id";

/// How long a user's access level is believed.
const KEEP_FOR: Duration = Duration::from_secs(600);
/// Users' levels remembered at most; past it the oldest answer is forgotten.
const MAX_KEPT: usize = 1000;

/// Access levels by project and user, as read, and when.
#[derive(Debug, Default)]
pub(crate) struct Levels {
    by_user: HashMap<(String, u64), (Option<u64>, Instant)>,
}

impl Levels {
    fn get(&self, key: &(String, u64), now: Instant) -> Option<Option<u64>> {
        self.by_user.get(key).filter(|(_, at)| now.duration_since(*at) < KEEP_FOR).map(|(level, _)| *level)
    }

    fn put(&mut self, key: (String, u64), level: Option<u64>, now: Instant) {
        self.by_user.retain(|_, (_, at)| now.duration_since(*at) < KEEP_FOR);
        if self.by_user.len() >= MAX_KEPT {
            if let Some(oldest) = self.by_user.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| k.clone()) {
                self.by_user.remove(&oldest);
            }
        }
        self.by_user.insert(key, (level, now));
    }
}

#[derive(Deserialize)]
struct WireMember {
    access_level: u64,
}

impl Client {
    /// The access level user `user_id` has in `project` (direct, inherited or shared); `None`
    /// when the user is no member. Remembered for ten minutes.
    pub async fn access_level(&self, project: &str, user_id: u64) -> Result<Option<u64>, Error> {
        let id = project_id(project)?;
        let key = (id.clone(), user_id);
        if let Some(level) = self.levels.lock().unwrap_or_else(|e| e.into_inner()).get(&key, Instant::now()) {
            return Ok(level);
        }
        let path = format!("/projects/{id}/members/all/{user_id}");
        let level = match self.get_json::<WireMember>(GET_MEMBER, &path, || format!("member {user_id}")).await {
            Ok(m) => Some(m.access_level),
            Err(Error { kind: ErrorKind::NotFound { .. }, .. }) => None,
            Err(e) => return Err(e),
        };
        self.levels.lock().unwrap_or_else(|e| e.into_inner()).put(key, level, Instant::now());
        Ok(level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_kept_for_a_while_and_bounded() {
        let mut l = Levels::default();
        let t0 = Instant::now();
        l.put(("p".into(), 1), Some(30), t0);
        l.put(("p".into(), 2), None, t0);
        assert_eq!(l.get(&("p".into(), 1), t0), Some(Some(30)));
        assert_eq!(l.get(&("p".into(), 2), t0), Some(None), "not a member is remembered too");
        assert_eq!(l.get(&("q".into(), 1), t0), None, "per project");
        assert_eq!(l.get(&("p".into(), 1), t0 + KEEP_FOR), None, "forgotten after a while");
        for u in 0..(MAX_KEPT as u64 + 5) {
            l.put(("p".into(), u + 10), Some(10), t0 + Duration::from_millis(u));
        }
        assert_eq!(l.by_user.len(), MAX_KEPT);
    }
}
