//! The checks of forge and tracker fields that Projects and IssueSources share: API URLs, token
//! variables, poll intervals, label names, GitLab project paths, Linear team keys and issue
//! identifiers.

use super::{env_name, http_url, Errors, Invalid};

/// The longest label name GitHub, GitLab and Linear all take.
pub(crate) const MAX_LABEL: usize = 50;

pub(crate) fn api_url(e: &mut Errors, field: &str, url: Option<&str>) {
    if let Some(u) = url {
        e.check(field, http_url(u));
    }
}

pub(crate) fn env_var(e: &mut Errors, field: &str, name: Option<&str>) {
    if let Some(n) = name {
        e.check(field, env_name(n));
    }
}

pub(crate) fn poll(e: &mut Errors, field: &str, d: Option<crate::duration::Duration>) {
    if d.is_some_and(|d| d.0 < std::time::Duration::from_secs(1)) {
        e.check(field, Err("must be at least 1s".into()));
    }
}

pub(crate) fn labels(e: &mut Errors, field: &str, labels: &[String], tracker: &str) {
    for (i, l) in labels.iter().enumerate() {
        let ok = !l.trim().is_empty()
            && !l.contains(',')
            && l.chars().count() <= MAX_LABEL
            && !l.chars().any(char::is_control);
        if !ok {
            e.check(
                format!("{field}[{i}]"),
                Err(format!("`{}` is not a {tracker} label name (1 to 50 characters, no comma)", l.escape_debug())
                    .into()),
            );
        }
    }
}

/// A GitLab project path: `group/name` or deeper, each part of `[A-Za-z0-9_.-]`, not starting with
/// `-` or `.` and not ending in `.git` or `.atom`.
pub(crate) fn project_path(path: &str) -> Result<(), Invalid> {
    let parts: Vec<&str> = path.split('/').collect();
    let part_ok = |p: &&str| {
        !p.is_empty()
            && p.len() <= 255
            && !p.starts_with(['-', '.'])
            && !p.ends_with(".git")
            && !p.ends_with(".atom")
            && p.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c))
    };
    if parts.len() >= 2 && parts.iter().all(part_ok) {
        Ok(())
    } else {
        Err(format!("`{path}` is not a GitLab project path such as `group/name` or `group/subgroup/name`").into())
    }
}

/// A Linear team key: 1 to 7 upper-case letters or digits, starting with a letter.
pub(crate) fn team_key(key: &str) -> Result<(), Invalid> {
    let b = key.as_bytes();
    let ok = (1..=7).contains(&b.len())
        && b[0].is_ascii_uppercase()
        && b.iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(format!("`{key}` is not a Linear team key such as `ENG` (upper-case letters and digits)").into())
    }
}

/// A Linear issue identifier: a team key, `-`, a number (`ENG-42`).
pub(crate) fn linear_identifier(reference: &str) -> bool {
    reference.split_once('-').is_some_and(|(k, n)| {
        team_key(k).is_ok() && !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) && !n.starts_with('0')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_paths() {
        for ok in ["acme/widgets", "g/sub/x.y_z-1"] {
            assert!(project_path(ok).is_ok(), "{ok}");
        }
        for bad in ["", "widgets", "acme/", "/acme/w", "acme/../w", "acme/w.git", "acme/-w", "a b/c", "acme//w"] {
            assert!(project_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn team_keys_and_identifiers() {
        assert!(team_key("ENG").is_ok() && team_key("A1").is_ok());
        for bad in ["", "eng", "1A", "TOOLONGKEY", "E-G"] {
            assert!(team_key(bad).is_err(), "{bad}");
        }
        assert!(linear_identifier("ENG-42"));
        for bad in ["ENG-", "ENG-04", "eng-4", "42", "#42", "ENG-4a"] {
            assert!(!linear_identifier(bad), "{bad}");
        }
    }
}
