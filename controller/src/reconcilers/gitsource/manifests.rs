//! The objects of one revision: every manifest file decoded with the decoder (and errors) of
//! `aoctl apply`, then checked as a whole (every object named, none twice, not the source itself)
//! and put in the order they are applied.

use std::collections::HashMap;

use aoctl_api::decode::{decode_manifests, AnyObject, DecodeError};
use aoctl_api::Kind;
use aoctl_git::repository::source::{ManifestFile, SourceError};

/// Why a revision cannot be applied as it is: the first problem, shown as `file:line: message`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unappliable {
    /// The manifests could not be read from the commit.
    #[error(transparent)]
    Read(#[from] SourceError),
    /// A manifest does not decode or validate (its message names the file, line and field).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{at}: metadata.name: is required here (generateName is not enough)")]
    Unnamed { at: String },
    #[error("{at}: {reference} is this source; a source does not apply itself")]
    Itself { at: String, reference: String },
    #[error("{at}: {reference} is also defined at {first}")]
    Twice { at: String, reference: String, first: String },
}

/// One object of the revision and where its manifest is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Desired {
    pub object: AnyObject,
    /// The file's path from the repository's root.
    pub file: String,
    /// The 1-based line where the object's document starts.
    pub line: usize,
}

impl Desired {
    pub(crate) fn kind(&self) -> Kind {
        self.object.kind()
    }

    pub(crate) fn name(&self) -> &str {
        &self.object.meta().name
    }

    /// `file:line`, where the object's document starts.
    pub(crate) fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// How an object is named in messages: `session/fix-login`.
pub(crate) fn reference(kind: Kind, name: &str) -> String {
    format!("{}/{name}", kind.as_str().to_ascii_lowercase())
}

/// Decodes every file; the objects in the order they are applied (by [`Kind::apply_rank`], then
/// in file order), or the first problem as `file:line: field: message`. `source` is the
/// GitSource's own name: it may not apply itself.
pub(crate) fn decode(files: &[ManifestFile], source: &str) -> Result<Vec<Desired>, Unappliable> {
    let mut out: Vec<Desired> = vec![];
    let mut seen: HashMap<(Kind, String), String> = HashMap::new();
    for f in files {
        let docs = decode_manifests(&f.path, &f.text)?;
        for d in docs {
            let desired = Desired { object: d.object, file: f.path.clone(), line: d.line };
            let at = desired.location();
            let (kind, name) = (desired.kind(), desired.name().to_string());
            if name.is_empty() {
                return Err(Unappliable::Unnamed { at });
            }
            if kind == Kind::GitSource && name == source {
                return Err(Unappliable::Itself { at, reference: reference(kind, &name) });
            }
            if let Some(first) = seen.insert((kind, name.clone()), at.clone()) {
                return Err(Unappliable::Twice { at, reference: reference(kind, &name), first });
            }
            out.push(desired);
        }
    }
    // A stable sort keeps the file order within a kind.
    out.sort_by_key(|d| d.kind().apply_rank());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> ManifestFile {
        ManifestFile { path: path.into(), text: text.into() }
    }

    const PROJECT: &str = "apiVersion: ao.dev/v1alpha1\nkind: Project\nmetadata: {name: web}\nspec: {path: /src/web}\n";

    fn session(name: &str) -> String {
        format!("apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {{name: {name}}}\nspec: {{project: web}}\n")
    }

    #[test]
    fn projects_come_first_then_file_order() {
        let files = [
            file("sessions/a.yaml", &format!("{}---\n{}", session("b"), session("a"))),
            file("z/project.yaml", PROJECT),
        ];
        let got = decode(&files, "fleet").unwrap();
        let names: Vec<_> = got.iter().map(|d| (d.kind(), d.name().to_string(), d.location())).collect();
        assert_eq!(
            names,
            [
                (Kind::Project, "web".into(), "z/project.yaml:1".into()),
                (Kind::Session, "b".into(), "sessions/a.yaml:1".into()),
                (Kind::Session, "a".into(), "sessions/a.yaml:6".into()),
            ]
        );
        assert_eq!(decode(&[], "fleet").unwrap(), vec![], "an empty revision has no objects");
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_field() {
        let bad = "apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {name: x}\nspec:\n  project: web\n  agnt: x\n";
        let err = decode(&[file("ok.yaml", PROJECT), file("sessions/fix.yaml", bad)], "fleet").unwrap_err().to_string();
        assert!(err.starts_with("sessions/fix.yaml:6:"), "{err}");
        assert!(err.contains("spec.agnt"), "{err}");

        let twice = [file("a.yaml", &session("x")), file("b/c.yml", &format!("# one\n{}", session("x")))];
        assert_eq!(
            decode(&twice, "fleet").unwrap_err().to_string(),
            "b/c.yml:1: session/x is also defined at a.yaml:1"
        );

        let unnamed =
            "apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata: {generateName: x-}\nspec: {project: web}\n";
        assert_eq!(
            decode(&[file("u.yaml", unnamed)], "fleet").unwrap_err().to_string(),
            "u.yaml:1: metadata.name: is required here (generateName is not enough)"
        );

        let me = "apiVersion: ao.dev/v1alpha1\nkind: GitSource\nmetadata: {name: fleet}\nspec: {url: /srv/fleet.git}\n";
        assert_eq!(
            decode(&[file("me.yaml", me)], "fleet").unwrap_err().to_string(),
            "me.yaml:1: gitsource/fleet is this source; a source does not apply itself"
        );
        assert_eq!(decode(&[file("me.yaml", me)], "other").unwrap().len(), 1, "another source may apply it");
    }
}
