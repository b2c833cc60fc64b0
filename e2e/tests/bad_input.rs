//! The bad-input corpus: malformed manifests (through `aoctl apply`) and malformed API requests
//! are rejected with an error that names the file, line or field, and the store stays byte for
//! byte what it was.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::harness::{project, Out, Resp, Server, API, NO_REPO};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/corpus")
}

/// One malformed manifest and what its error must say.
struct ManifestCase {
    path: PathBuf,
    text: String,
    expect: String,
    line: Option<usize>,
}

impl ManifestCase {
    /// Reads the `# expect:` and `# line:` header of a corpus file.
    fn load(path: &Path) -> ManifestCase {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let header = |key: &str| {
            text.lines()
                .take_while(|l| l.starts_with('#'))
                .find_map(|l| l.strip_prefix(&format!("# {key}:")).map(|v| v.trim().to_string()))
        };
        let expect = header("expect").unwrap_or_else(|| panic!("{}: no `# expect:` line", path.display()));
        let line = header("line").map(|l| l.parse().expect("`# line:` is a number"));
        ManifestCase { path: path.to_path_buf(), text, expect, line }
    }

    /// Checks one rejection; `source` is how the error must name the input (`-` for stdin).
    fn check(&self, how: &str, source: &str, out: &Out) -> Result<(), String> {
        let fail = |why: String| Err(format!("{} ({how}): {why}:\n{out}", self.path.display()));
        // `diff` exits 1 for differences, so it reports a failure with 2.
        let want = if how.starts_with("diff") { 2 } else { 1 };
        if out.code != want {
            return fail(format!("expected exit status {want} (a failure, not success nor a usage error)"));
        }
        if !out.stderr.starts_with("error: ") || !out.stderr.contains(&self.expect) {
            return fail(format!("expected `error: …{}…`", self.expect));
        }
        if !out.stderr.contains(source) {
            return fail(format!("the error does not name `{source}`"));
        }
        if let Some(line) = self.line {
            let at = format!("{source}:{line}:");
            if !out.stderr.contains(&at) {
                return fail(format!("expected the location `{at}`"));
            }
        }
        if out.stdout.contains("created") || out.stdout.contains("configured") {
            return fail("something was applied".into());
        }
        Ok(())
    }
}

fn manifest_cases() -> Vec<ManifestCase> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(corpus().join("manifests"))
        .expect("e2e/corpus/manifests")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths.iter().map(|p| ManifestCase::load(p)).collect()
}

/// A store with something in it, quiet: one Project no controller will touch again, relabelled
/// once so that resourceVersion "1" is stale for it.
async fn seeded_server() -> (Server, Vec<u8>) {
    let server = Server::start().await;
    server.create("projects", &project("existing", NO_REPO)).await;
    let patch = serde_json::json!({"metadata": {"labels": {"team": "web"}}});
    server.json("PATCH", &format!("{API}/projects/existing"), &patch).await.expect(200);
    let baseline = server.settle().await;
    (server, baseline)
}

/// Fails with every problem found, not just the first.
#[track_caller]
fn report(problems: &[String]) {
    assert!(problems.is_empty(), "{} problems:\n\n{}", problems.len(), problems.join("\n\n"));
}

fn unchanged(case: &str, before: &[u8], after: &[u8]) -> Result<(), String> {
    if before == after {
        return Ok(());
    }
    let (before, after) = (String::from_utf8_lossy(before), String::from_utf8_lossy(after));
    Err(format!("{case} changed the store:\n--- before\n{before}\n--- after\n{after}"))
}

/// The list resourceVersions inside a dump.
fn list_rvs(dump: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(dump)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_manifests_are_rejected_and_change_nothing() {
    let cases = manifest_cases();
    assert!(cases.len() >= 20, "the manifest corpus has only {} cases", cases.len());
    let (server, baseline) = seeded_server().await;
    let rvs = list_rvs(&baseline);
    assert_eq!(rvs.len(), 5, "a list of each kind in the dump");

    let mut problems = vec![];
    for case in &cases {
        let file = case.path.display().to_string();
        let out = server.aoctl(&["apply", "-f", &file]);
        problems.extend(case.check("apply -f FILE", &file, &out).err());
        problems.extend(unchanged(&file, &baseline, &server.dump().await).err());

        let out = server.aoctl_stdin(&["apply", "-f", "-"], &case.text);
        problems.extend(case.check("apply -f -", "-", &out).err());
        let after = server.dump().await;
        problems.extend(unchanged(&format!("{file} on stdin"), &baseline, &after).err());
        if list_rvs(&after) != rvs {
            problems.push(format!("{file}: the list resourceVersion moved"));
        }
    }

    // A directory with a good file before a bad one: nothing from it is applied.
    let dir = corpus().join("mixed-dir");
    let bad = ManifestCase::load(&dir.join("b-bad.yaml"));
    let shown = dir.display().to_string();
    let good = format!("{shown}/a-good.yaml");
    let bad_file = format!("{shown}/b-bad.yaml");
    let runs: [Vec<&str>; 4] = [
        vec!["apply", "-f", &shown],
        vec!["apply", "-R", "-f", &shown],
        vec!["apply", "-f", &good, "-f", &bad_file],
        vec!["diff", "-f", &shown],
    ];
    for args in runs {
        let out = server.aoctl(&args);
        problems.extend(bad.check(&args.join(" "), &bad_file, &out).err());
        problems.extend(unchanged(&args.join(" "), &baseline, &server.dump().await).err());
    }
    report(&problems);
    assert!(server.object("projects", "mixed-good").await.is_none(), "the good file of the directory was applied");
    assert!(server.object("projects", "first-document").await.is_none());
}

/// One malformed request.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApiCase {
    name: String,
    method: String,
    path: String,
    #[serde(default)]
    content_type: Option<String>,
    #[serde(default)]
    body: Option<Value>,
    code: u16,
    reason: String,
    expect: String,
    #[serde(default)]
    cause: Option<Cause>,
    /// Pads the body with trailing spaces (still valid JSON) to this many bytes.
    #[serde(default)]
    pad_to: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cause {
    #[serde(default)]
    field: Option<String>,
    #[serde(default)]
    line: Option<u64>,
}

impl ApiCase {
    fn body(&self) -> Vec<u8> {
        let mut body = match &self.body {
            None => vec![],
            Some(Value::String(s)) => s.clone().into_bytes(),
            Some(v) => serde_json::to_vec(v).expect("JSON"),
        };
        if let Some(n) = self.pad_to {
            body.resize(n.max(body.len()), b' ');
        }
        body
    }

    /// Checks the response: a Status of the expected code, reason, message and cause.
    fn check(&self, resp: &Resp) -> Result<(), String> {
        let status = resp.json();
        if resp.code != self.code {
            return Err(format!("code {} instead of {}", resp.code, self.code));
        }
        let shape = [("kind", "Status"), ("apiVersion", "v1"), ("status", "Failure"), ("reason", &self.reason)];
        for (key, want) in shape {
            if status[key] != want {
                return Err(format!("`{key}` should be `{want}`"));
            }
        }
        if status["code"] != self.code {
            return Err("the Status code differs from the HTTP code".into());
        }
        if !status["message"].as_str().is_some_and(|m| !m.is_empty() && m.contains(&self.expect)) {
            return Err(format!("expected `{}` in the message", self.expect));
        }
        if let Some(cause) = &self.cause {
            let causes = status.pointer("/details/causes").and_then(Value::as_array).cloned().unwrap_or_default();
            let found = causes.iter().any(|c| {
                cause.field.as_deref().is_none_or(|f| c["field"] == f)
                    && cause.line.is_none_or(|l| c["line"].as_u64() == Some(l))
            });
            if !found {
                return Err(format!("no cause {cause:?}"));
            }
        }
        Ok(())
    }

    fn content_type(&self) -> Option<&str> {
        match (&self.content_type, &self.body) {
            (Some(ct), _) => Some(ct),
            (None, None) => None,
            (None, Some(_)) if self.method == "PATCH" => Some("application/merge-patch+json"),
            (None, Some(_)) => Some("application/json"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_a_status_and_change_nothing() {
    let text = std::fs::read_to_string(corpus().join("api.yaml")).expect("e2e/corpus/api.yaml");
    let cases: Vec<ApiCase> = serde_yaml_ng::from_str(&text).expect("api.yaml decodes");
    assert!(cases.len() >= 10, "the API corpus has only {} cases", cases.len());
    let (server, baseline) = seeded_server().await;
    let rvs = list_rvs(&baseline);

    let mut problems = vec![];
    for case in &cases {
        let resp = if case.name == "body-too-large" {
            server.send_oversized(&case.method, &case.path, case.content_type(), case.body()).await
        } else {
            server.send(&case.method, &case.path, case.content_type(), case.body()).await
        };
        let what = format!("{} ({} {})", case.name, case.method, case.path);
        problems.extend(case.check(&resp).map_err(|why| format!("{what}: {why}: {}", resp.text())).err());
        let after = server.dump().await;
        problems.extend(unchanged(&what, &baseline, &after).err());
        if list_rvs(&after) != rvs {
            problems.push(format!("{what}: the list resourceVersion moved"));
        }
    }
    report(&problems);
}
