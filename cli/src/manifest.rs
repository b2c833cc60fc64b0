//! Reading manifests for `apply`, `diff` and `delete -f`: files, directories and stdin, every
//! document decoded and validated before anything is sent, in the order objects must be applied.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use aoctl_api::decode::decode_manifests;
use aoctl_api::{AnyObject, DecodeError, Kind};

/// One decoded object and where it came from.
#[derive(Clone, Debug)]
pub(crate) struct Manifest {
    pub object: AnyObject,
    /// File name, or `-` for stdin.
    pub source: String,
    /// 1-based line where the document starts.
    pub line: usize,
}

impl Manifest {
    pub(crate) fn kind(&self) -> Kind {
        self.object.kind()
    }

    pub(crate) fn name(&self) -> &str {
        &self.object.meta().name
    }
}

/// Why manifests could not be read. A decode error is shown as it is: it names file, line and field.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ManifestError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: no such file or directory")]
    Missing { path: String },
    #[error("no objects found in {paths}")]
    Empty { paths: String },
    #[error("{file}:{line}: metadata.name: is required here (generateName is not enough)")]
    NoName { file: String, line: usize },
    #[error("{file}:{line}: {reference} is also defined at {first}")]
    Duplicate { file: String, line: usize, reference: String, first: String },
}

/// Reads and decodes every manifest under `paths` (`-` is stdin), then orders them for applying:
/// Projects before Sessions, otherwise in file order. Fails, having sent nothing, on the first error.
pub(crate) fn load(paths: &[String], recursive: bool) -> Result<Vec<Manifest>, ManifestError> {
    let mut out = vec![];
    for path in paths {
        let sources = if path == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|source| ManifestError::Read { path: "-".into(), source })?;
            vec![("-".to_string(), text)]
        } else {
            let mut files = vec![];
            collect_files(Path::new(path), recursive, true, &mut files)?;
            let mut texts = vec![];
            for f in files {
                let shown = f.display().to_string();
                let text = std::fs::read_to_string(&f)
                    .map_err(|source| ManifestError::Read { path: shown.clone(), source })?;
                texts.push((shown, text));
            }
            texts
        };
        for (source, text) in sources {
            for d in decode_manifests(&source, &text)? {
                out.push(Manifest { object: d.object, source: source.clone(), line: d.line });
            }
        }
    }
    if out.is_empty() {
        return Err(ManifestError::Empty { paths: paths.join(", ") });
    }
    check_names(&out)?;
    sort_for_apply(&mut out);
    Ok(out)
}

/// Every object needs a name, and each kind/name appears once.
fn check_names(list: &[Manifest]) -> Result<(), ManifestError> {
    let mut seen: HashMap<(Kind, &str), &Manifest> = HashMap::new();
    for m in list {
        if m.name().is_empty() {
            return Err(ManifestError::NoName { file: m.source.clone(), line: m.line });
        }
        if let Some(first) = seen.insert((m.kind(), m.name()), m) {
            return Err(ManifestError::Duplicate {
                file: m.source.clone(),
                line: m.line,
                reference: crate::object::reference(m.kind(), m.name()),
                first: format!("{}:{}", first.source, first.line),
            });
        }
    }
    Ok(())
}

/// Projects first, as the objects of the other kinds refer to them (`Kind::apply_rank`); the
/// order within a kind is kept.
pub(crate) fn sort_for_apply(list: &mut [Manifest]) {
    list.sort_by_key(|m| m.kind().apply_rank());
}

/// Sessions first, so that their project is deleted last.
pub(crate) fn sort_for_delete(list: &mut [Manifest]) {
    list.sort_by_key(|m| std::cmp::Reverse(m.kind().apply_rank()));
}

/// A named file is read whatever its extension; directories give their `*.yaml|*.yml|*.json`
/// files sorted by name, and their subdirectories' when `recursive`.
fn collect_files(path: &Path, recursive: bool, top: bool, out: &mut Vec<PathBuf>) -> Result<(), ManifestError> {
    let shown = || path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => ManifestError::Missing { path: shown() },
        _ => ManifestError::Read { path: shown(), source },
    })?;
    if !meta.is_dir() {
        if top || is_manifest_name(path) {
            out.push(path.to_path_buf());
        }
        return Ok(());
    }
    if !top && !recursive {
        return Ok(());
    }
    let mut entries = vec![];
    for e in std::fs::read_dir(path).map_err(|source| ManifestError::Read { path: shown(), source })? {
        entries.push(e.map_err(|source| ManifestError::Read { path: shown(), source })?.path());
    }
    entries.sort();
    for e in entries {
        collect_files(&e, recursive, false, out)?;
    }
    Ok(())
}

fn is_manifest_name(path: &Path) -> bool {
    let hidden = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or_default();
    !hidden && matches!(ext, "yaml" | "yml" | "json")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: &str =
        "apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {name: s1}\nspec: {project: demo, prompt: hi}\n";
    const PROJECT: &str =
        "apiVersion: ao.dev/v1alpha1\nkind: Project\nmetadata: {name: demo}\nspec: {path: /tmp/demo}\n";

    fn names(list: &[Manifest]) -> Vec<String> {
        list.iter().map(|m| crate::object::reference(m.kind(), m.name())).collect()
    }

    #[test]
    fn directory_is_sorted_and_projects_come_first() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.yaml"), SESSION).unwrap();
        std::fs::write(dir.path().join("b.yml"), PROJECT).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not yaml").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/c.yaml"), SESSION.replace("s1", "s2")).unwrap();
        let p = dir.path().display().to_string();

        let list = load(std::slice::from_ref(&p), false).unwrap();
        assert_eq!(names(&list), ["project/demo", "session/s1"]);
        let mut list = load(&[p], true).unwrap();
        assert_eq!(names(&list), ["project/demo", "session/s1", "session/s2"]);
        sort_for_delete(&mut list);
        assert_eq!(names(&list), ["session/s1", "session/s2", "project/demo"]);
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.yaml");
        std::fs::write(&good, PROJECT).unwrap();
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, format!("{SESSION}---\n{}", SESSION.replace("prompt", "promtp"))).unwrap();
        let e = load(&[good.display().to_string(), bad.display().to_string()], false).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with(&format!("{}:9:", bad.display())), "{msg}");
        assert!(msg.contains("spec.promtp"), "{msg}");

        let dup = dir.path().join("dup.yaml");
        std::fs::write(&dup, format!("{PROJECT}---\n{PROJECT}")).unwrap();
        let e = load(&[dup.display().to_string()], false).unwrap_err().to_string();
        assert!(e.contains("project/demo is also defined at"), "{e}");

        let e = load(&[dir.path().join("nope.yaml").display().to_string()], false).unwrap_err().to_string();
        assert!(e.ends_with("nope.yaml: no such file or directory"), "{e}");
    }
}
