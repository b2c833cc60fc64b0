//! Preparing an agent's own configuration under `$HOME` before it starts: pre-trusting the
//! workspaces root or the session's workdir and switching off warnings, so that a new worktree does not stop at a dialog.
//! Edits are JSON merges: every other key is kept, a file that already says the same is not
//! rewritten, and a file that is not valid JSON is left alone and reported.

use std::fs;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::adapter::{Adapter, HomeEdit, JsonLit};
use super::AgentError;

/// Serialises edits within this process; the agent itself may still write the same file, and
/// the last writer wins as with the agent's own updates.
static LOCK: Mutex<()> = Mutex::new(());

/// [`prepare_home`] in the home folder of the controller's user (`HOME`); nothing without one.
pub fn prepare_own_home(adapter: &Adapter, workspaces_root: &Path, workdir: &Path) -> Result<(), AgentError> {
    match std::env::var_os("HOME") {
        Some(home) => prepare_home(adapter, home.as_ref(), workspaces_root, workdir),
        None => Ok(()),
    }
}

/// Applies the adapter's [`HomeEdit`]s under `home` for `workspaces_root` and `workdir` (each as
/// given, and resolved through symlinks when that differs). Idempotent; a no-op for agents without
/// edits.
pub fn prepare_home(adapter: &Adapter, home: &Path, workspaces_root: &Path, workdir: &Path) -> Result<(), AgentError> {
    if adapter.home.is_empty() {
        return Ok(());
    }
    let text = |p: &Path| p.to_string_lossy().into_owned();
    let real = |p: &Path| fs::canonicalize(p).map(|r| text(&r)).unwrap_or_else(|_| text(p));
    let mut places = vec![(text(workspaces_root), text(workdir))];
    let resolved = (real(workspaces_root), real(workdir));
    if !places.contains(&resolved) {
        places.push(resolved);
    }
    let _guard = LOCK.lock();
    let mut files: Vec<&'static str> = Vec::new();
    for edit in adapter.home {
        if !files.contains(&file_of(edit)) {
            files.push(file_of(edit));
        }
    }
    for file in files {
        let path = home.join(file);
        let mut doc = read(&path)?;
        let mut changed = false;
        for edit in adapter.home.iter().filter(|e| file_of(e) == file) {
            for (root, workdir) in &places {
                changed |= apply(&mut doc, edit, root, workdir, &path)?;
            }
        }
        if changed {
            write(&path, &doc)?;
        }
    }
    Ok(())
}

fn file_of(edit: &HomeEdit) -> &'static str {
    match edit {
        HomeEdit::Set { file, .. } | HomeEdit::Add { file, .. } => file,
    }
}

fn read(path: &Path) -> Result<Value, AgentError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(AgentError::Io { path: path.to_path_buf(), source: e }),
    };
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| AgentError::Json { path: path.to_path_buf(), source: e })?;
    if !doc.is_object() {
        return Err(shape(path, "(top level)", "object"));
    }
    Ok(doc)
}

/// Applies one edit for one root and workdir; true when the document changed.
fn apply(doc: &mut Value, edit: &HomeEdit, root: &str, workdir: &str, file: &Path) -> Result<bool, AgentError> {
    let sub = |s: &str| match s {
        "{root}" => root.to_string(),
        "{workdir}" => workdir.to_string(),
        _ => s.to_string(),
    };
    let (path, leaf) = match edit {
        HomeEdit::Set { path, .. } | HomeEdit::Add { path, .. } => match path.split_last() {
            Some((last, parents)) => (parents.iter().map(|s| sub(s)).collect::<Vec<_>>(), sub(last)),
            None => return Ok(false),
        },
    };
    let map = object_at(doc, &path, file)?;
    match edit {
        HomeEdit::Set { value, .. } => {
            let value = match value {
                JsonLit::Bool(b) => Value::Bool(*b),
                JsonLit::Str(s) => Value::String(sub(s)),
            };
            if map.get(&leaf) == Some(&value) {
                return Ok(false);
            }
            map.insert(leaf, value);
            Ok(true)
        }
        HomeEdit::Add { item, .. } => {
            let item = Value::String(sub(item));
            match map.get_mut(&leaf) {
                None => {
                    map.insert(leaf, Value::Array(vec![item]));
                    Ok(true)
                }
                Some(Value::Array(items)) if items.contains(&item) => Ok(false),
                Some(Value::Array(items)) => {
                    items.push(item);
                    Ok(true)
                }
                Some(_) => Err(shape(file, &[path.join("."), leaf].join("."), "array")),
            }
        }
    }
}

/// The object at `path`, creating missing objects on the way.
fn object_at<'v>(doc: &'v mut Value, path: &[String], file: &Path) -> Result<&'v mut Map<String, Value>, AgentError> {
    let mut cur = doc;
    let mut key = String::from("(top level)");
    for seg in path {
        let map = cur.as_object_mut().ok_or_else(|| shape(file, &key, "object"))?;
        key = if key.starts_with('(') { seg.clone() } else { format!("{key}.{seg}") };
        cur = map.entry(seg.clone()).or_insert_with(|| Value::Object(Map::new()));
    }
    cur.as_object_mut().ok_or_else(|| shape(file, &key, "object"))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AgentError + '_ {
    move |e| AgentError::Io { path: path.to_path_buf(), source: e }
}

fn shape(path: &Path, key: &str, expected: &'static str) -> AgentError {
    AgentError::Shape { path: path.to_path_buf(), key: key.to_string(), expected }
}

/// Writes through a temporary file and a rename, keeping the file's mode (0600 for a new file)
/// and writing through a symlink rather than replacing it.
fn write(path: &Path, doc: &Value) -> Result<(), AgentError> {
    let target: PathBuf = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = target.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io(dir))?;
    let mut text =
        serde_json::to_string_pretty(doc).map_err(|e| AgentError::Json { path: target.clone(), source: e })?;
    text.push('\n');
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.aoctl-{}.tmp", std::process::id()));
    fs::write(&tmp, text).map_err(io(&tmp))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&target).map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o600);
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode)).map_err(io(&tmp))?;
    }
    fs::rename(&tmp, &target).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        AgentError::Io { path: target.clone(), source: e }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin;

    #[test]
    fn claude_trust_merges_keeps_keys_and_is_idempotent() {
        let home = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let claude_json = home.path().join(".claude.json");
        fs::write(&claude_json, r#"{"numStartups": 3, "projects": {"/other": {"allowedTools": ["Bash"]}}}"#).unwrap();
        fs::create_dir_all(home.path().join(".claude")).unwrap();
        fs::write(home.path().join(".claude/settings.json"), r#"{"model": "opus"}"#).unwrap();
        let adapter = builtin("claude-code").unwrap();

        prepare_home(adapter, home.path(), root.path(), &root.path().join("demo/s1")).unwrap();
        let doc: Value = serde_json::from_str(&fs::read_to_string(&claude_json).unwrap()).unwrap();
        assert_eq!(doc["numStartups"], 3);
        assert_eq!(doc["projects"]["/other"]["allowedTools"][0], "Bash");
        let key = root.path().to_string_lossy();
        assert_eq!(doc["projects"][key.as_ref()]["hasTrustDialogAccepted"], true);
        let wt = root.path().join("demo/s1");
        assert_eq!(doc["projects"][wt.to_string_lossy().as_ref()]["hasTrustDialogAccepted"], true);
        let settings: Value =
            serde_json::from_str(&fs::read_to_string(home.path().join(".claude/settings.json")).unwrap()).unwrap();
        assert_eq!(settings["model"], "opus");
        assert_eq!(settings["skipDangerousModePermissionPrompt"], true);

        let before = fs::read_to_string(&claude_json).unwrap();
        let modified = fs::metadata(&claude_json).unwrap().modified().unwrap();
        prepare_home(adapter, home.path(), root.path(), &root.path().join("demo/s1")).unwrap();
        assert_eq!(fs::read_to_string(&claude_json).unwrap(), before);
        assert_eq!(fs::metadata(&claude_json).unwrap().modified().unwrap(), modified, "no rewrite when unchanged");
    }

    #[test]
    fn missing_files_are_created_private() {
        let home = tempfile::tempdir().unwrap();
        prepare_home(builtin("claude-code").unwrap(), home.path(), Path::new("/srv/ws"), Path::new("/srv/ws/demo/s1"))
            .unwrap();
        let doc: Value = serde_json::from_str(&fs::read_to_string(home.path().join(".claude.json")).unwrap()).unwrap();
        assert_eq!(doc["projects"]["/srv/ws"]["hasTrustDialogAccepted"], true);
        assert_eq!(doc["projects"]["/srv/ws/demo/s1"]["hasTrustDialogAccepted"], true, "each worktree is trusted");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(home.path().join(".claude.json")).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn invalid_json_is_reported_and_left_alone() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(".claude.json");
        fs::write(&file, "{not json").unwrap();
        let err =
            prepare_home(builtin("claude-code").unwrap(), home.path(), Path::new("/srv/ws"), Path::new("/srv/ws/a"))
                .unwrap_err();
        assert!(matches!(err, AgentError::Json { .. }), "{err}");
        assert_eq!(fs::read_to_string(&file).unwrap(), "{not json");
    }

    #[test]
    fn array_edits_add_once() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(".local/share/devin/cli/trusted_workspaces.json");
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(&file, r#"{"trusted_paths": ["/a"], "v": 1}"#).unwrap();
        let devin = builtin("devin").unwrap();
        prepare_home(devin, home.path(), Path::new("/srv/ws"), Path::new("/srv/ws/a")).unwrap();
        prepare_home(devin, home.path(), Path::new("/srv/ws"), Path::new("/srv/ws/a")).unwrap();
        let doc: Value = serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(doc["trusted_paths"], serde_json::json!(["/a", "/srv/ws"]));
        assert_eq!(doc["v"], 1);
    }

    #[test]
    fn agents_without_edits_touch_nothing() {
        let home = tempfile::tempdir().unwrap();
        prepare_home(builtin("codex").unwrap(), home.path(), Path::new("/srv/ws"), Path::new("/srv/ws/a")).unwrap();
        assert_eq!(fs::read_dir(home.path()).unwrap().count(), 0);
    }
}
