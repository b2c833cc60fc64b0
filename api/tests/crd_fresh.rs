//! Fails when manifests/crds/ or the chart's copy in charts/aoctl/crds/ no longer matches the
//! types; `make schema` regenerates both.

use std::path::{Path, PathBuf};

#[test]
fn committed_crds_are_fresh() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let update = std::env::var_os("UPDATE_SCHEMAS").is_some();
    let files = aoctl_api::crd::crds().expect("every kind converts to a structural schema");
    for dir in ["manifests/crds", "charts/aoctl/crds"] {
        let dir = root.join(dir);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
        }
        for (name, text) in &files {
            let path = dir.join(name);
            if update {
                std::fs::write(&path, text).unwrap();
                continue;
            }
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(committed == *text, "{} is stale: run `make schema` and commit the result", shown(&root, &path));
        }
        // A file no kind makes any more is a CRD nobody keeps.
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            assert!(files.iter().any(|(n, _)| *n == name), "{} is made by no kind: remove it", shown(&root, &path));
        }
    }
}

fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}
