//! Fails when manifests/schema/ no longer matches the types; `make schema` regenerates it.

use std::path::PathBuf;

#[test]
fn committed_schemas_are_fresh() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../manifests/schema");
    let update = std::env::var_os("UPDATE_SCHEMAS").is_some();
    for (name, text) in aoctl_api::schema::schemas() {
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(committed == text, "manifests/schema/{name} is stale: run `make schema` and commit the result");
    }
}
