//! The example manifests (manifests/examples/ and the GitOps repository layout of
//! manifests/gitops-example/) decode and validate with the decoder `aoctl apply` and the
//! GitSource reconciler use, and each object is named once.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use aoctl_api::decode::decode_manifests;
use aoctl_api::Kind;

fn manifests_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("folder entry").path();
        if path.is_dir() {
            manifests_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json") {
            out.push(path);
        }
    }
    out.sort();
}

/// Decodes every manifest under `folder` of manifests/; the kinds and names found.
fn decode_folder(folder: &str) -> Vec<(Kind, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests").join(folder);
    let mut files = vec![];
    manifests_under(&root, &mut files);
    assert!(!files.is_empty(), "no manifests under {}", root.display());
    let mut found = vec![];
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(&root).unwrap().display().to_string();
        let docs = decode_manifests(&shown, &text).unwrap_or_else(|e| panic!("{e}"));
        assert!(!docs.is_empty(), "{shown} holds no object");
        found.extend(docs.into_iter().map(|d| (d.object.kind(), d.object.meta().name.clone())));
    }
    found
}

#[test]
fn the_examples_decode() {
    let found = decode_folder("examples");
    assert!(found.contains(&(Kind::GitSource, "fleet".into())), "{found:?}");
}

#[test]
fn the_gitops_example_is_a_revision_a_source_applies() {
    let found = decode_folder("gitops-example");
    let unique: BTreeSet<_> = found.iter().collect();
    assert_eq!(unique.len(), found.len(), "an object is defined twice: {found:?}");
    let projects: Vec<_> = found.iter().filter(|(k, _)| *k == Kind::Project).collect();
    assert_eq!(projects.len(), 1, "{found:?}");
    assert!(found.iter().filter(|(k, _)| *k == Kind::Session).count() >= 3, "{found:?}");
}
