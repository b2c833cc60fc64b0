//! JSON Schemas of the kinds users write, as committed under manifests/schema/.

use crate::gitsource::GitSource;
use crate::issuesource::IssueSource;
use crate::project::Project;
use crate::session::Session;

/// `(file name, pretty JSON)` for every published schema.
pub fn schemas() -> Vec<(&'static str, String)> {
    let render = |s: schemars::Schema| serde_json::to_string_pretty(&s).expect("schemas serialise") + "\n";
    vec![
        ("project.json", render(schemars::schema_for!(Project))),
        ("session.json", render(schemars::schema_for!(Session))),
        ("gitsource.json", render(schemars::schema_for!(GitSource))),
        ("issuesource.json", render(schemars::schema_for!(IssueSource))),
    ]
}
