//! The CLI against a real server: apply (created, unchanged, configured, dry run, prune), get in
//! every output format, describe, diff, delete with --wait and cascading, version, completion.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{git_repo, Out, Server, API, NO_REPO};

fn project_yaml(name: &str, path: &str, labels: &str) -> String {
    format!(
        "apiVersion: ao.dev/v1alpha1\nkind: Project\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\n\
         spec:\n  path: {path}\n  repo: acme/{name}\n"
    )
}

fn session_yaml(name: &str, project: &str, labels: &str, prompt: &str) -> String {
    // Stopped sessions get a workspace but no agent, so nothing keeps changing them.
    format!(
        "apiVersion: ao.dev/v1alpha1\nkind: Session\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\n\
         spec:\n  project: {project}\n  agent: aider\n  prompt: \"{prompt}\"\n  stopped: true\n"
    )
}

fn write(dir: &Path, file: &str, docs: &[String]) {
    std::fs::create_dir_all(dir).expect("manifest folder");
    std::fs::write(dir.join(file), docs.join("---\n")).expect("write manifest");
}

/// The rows of a table printed by `aoctl get`, split on whitespace, header first.
fn rows(out: &Out) -> Vec<Vec<String>> {
    out.stdout.lines().map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
}

/// Runs `aoctl` until `pred` holds for its output.
fn poll(server: &Server, args: &[&str], pred: impl Fn(&Out) -> bool) -> Out {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = server.aoctl(args);
        if out.code == 0 && pred(&out) {
            return out;
        }
        assert!(Instant::now() < deadline, "aoctl {args:?} never showed what was expected:\n{out}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[track_caller]
fn has_lines(out: &Out, lines: &[&str]) {
    for l in lines {
        assert!(out.stdout.lines().any(|x| x == *l), "expected the line `{l}`:\n{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_get_describe_diff_delete() {
    let server = Server::start().await;
    let repo = git_repo(server.tmp.path(), "webapp", "main");
    let repo = repo.to_str().expect("UTF-8 path");
    let dir = server.tmp.path().join("examples");
    let dir_arg = dir.to_str().expect("UTF-8 path");
    let sessions = |prompt: &str| {
        write(
            &dir,
            "sessions.yaml",
            &[
                session_yaml("fix-login", "web", "team: web, app: demo", prompt),
                session_yaml("add-healthcheck", "web", "team: api, app: demo", "Add a /healthz endpoint"),
            ],
        )
    };
    write(&dir, "project.yaml", &[project_yaml("web", repo, "app: demo")]);
    sessions("Fix the login redirect loop");

    let out = server.aoctl(&["apply", "-f", dir_arg]);
    out.ok();
    assert_eq!(
        out.stdout, "project/web created\nsession/fix-login created\nsession/add-healthcheck created\n",
        "projects first, then sessions in file order:\n{out}"
    );

    let out =
        poll(&server, &["get", "projects"], |o| rows(o).get(1).is_some_and(|r| r.get(3).is_some_and(|c| c == "True")));
    let table = rows(&out);
    assert_eq!(table[0], ["NAME", "PATH", "BRANCH", "READY", "AGE"], "{out}");
    assert_eq!(table[1][..4], ["web", repo, "main", "True"], "{out}");

    // Applying the same manifests again writes nothing.
    let settled = server.settle().await;
    let out = server.aoctl(&["apply", "-f", dir_arg]);
    has_lines(out.ok(), &["project/web unchanged", "session/fix-login unchanged", "session/add-healthcheck unchanged"]);
    assert_eq!(server.dump().await, settled, "an unchanged apply wrote to the store");

    let out = server.aoctl(&["apply", "-f", dir_arg, "--wait=20s"]);
    has_lines(out.ok(), &["project/web unchanged", "project/web ready"]);
    assert_eq!(out.stdout.lines().filter(|l| l.starts_with("session/fix-login ")).count(), 2, "{out}");

    // diff: nothing to show, exit 0.
    let out = server.aoctl(&["diff", "-f", dir_arg]);
    assert_eq!((out.code, out.stdout.as_str()), (0, ""), "{out}");

    sessions("Fix the login redirect loop for good");
    let out = server.aoctl(&["diff", "-f", dir_arg]);
    out.code(1);
    assert!(out.stdout.starts_with("--- live/session/fix-login\n+++ merged/session/fix-login\n"), "{out}");
    has_lines(&out, &["-  prompt: Fix the login redirect loop", "+  prompt: Fix the login redirect loop for good"]);
    assert!(!out.stdout.contains("add-healthcheck"), "{out}");
    assert!(!out.stdout.contains("resourceVersion"), "{out}");

    // --dry-run reports what would happen and changes nothing.
    let out = server.aoctl(&["apply", "--dry-run", "-f", dir_arg]);
    has_lines(out.ok(), &["session/fix-login configured (dry run)", "project/web unchanged (dry run)"]);
    assert_eq!(server.dump().await, settled, "apply --dry-run wrote to the store");
    write(&dir, "extra.yaml", &[session_yaml("brand-new", "web", "app: demo", "Not yet")]);
    let out = server.aoctl(&["apply", "--dry-run", "-f", &format!("{dir_arg}/extra.yaml")]);
    has_lines(out.ok(), &["session/brand-new created (dry run)"]);
    assert_eq!(server.dump().await, settled, "a dry-run create wrote to the store");
    std::fs::remove_file(dir.join("extra.yaml")).expect("remove extra.yaml");
    // A new Project with its Sessions: the dry run and diff get past the Project's absence, and
    // a Session of a project that exists nowhere is still refused (diff: exit 2).
    let fresh = server.tmp.path().join("fresh");
    let both = [project_yaml("fresh", repo, "app: fresh"), session_yaml("s1", "fresh", "app: fresh", "Go")];
    write(&fresh, "all.yaml", &both);
    let fresh_arg = fresh.to_str().expect("UTF-8 path");
    let out = server.aoctl(&["apply", "--dry-run", "-f", fresh_arg]);
    has_lines(out.ok(), &["project/fresh created (dry run)", "session/s1 created (dry run)"]);
    let out = server.aoctl(&["diff", "-f", fresh_arg]);
    out.code(1);
    has_lines(&out, &["+++ merged/project/fresh", "+++ merged/session/s1", "+  project: fresh"]);
    write(&fresh, "all.yaml", &[session_yaml("s2", "nowhere", "app: fresh", "Go")]);
    let out = server.aoctl(&["apply", "--dry-run", "-f", fresh_arg]);
    out.code(1);
    assert!(out.stderr.contains("spec.project: project \"nowhere\" not found"), "{out}");
    server.aoctl(&["diff", "-f", fresh_arg]).code(2);
    assert_eq!(server.dump().await, settled, "a dry run of new objects wrote to the store");

    let out = server.aoctl(&["apply", "-f", dir_arg]);
    has_lines(
        out.ok(),
        &["project/web unchanged", "session/fix-login configured", "session/add-healthcheck unchanged"],
    );
    let live = server.object("sessions", "fix-login").await.expect("fix-login");
    assert_eq!(live["spec"]["prompt"], "Fix the login redirect loop for good");
    assert_eq!(live["metadata"]["generation"], 2, "{live}");

    // Output formats and selectors.
    let out = server.aoctl(&["get", "projects", "-o", "yaml"]);
    let list: Value = serde_yaml_ng::from_str(&out.ok().stdout).expect("-o yaml is YAML");
    assert_eq!(list["items"][0]["metadata"]["name"], "web", "{out}");
    let out = server.aoctl(&["get", "sessions", "-o", "json"]);
    let list: Value = serde_json::from_str(&out.ok().stdout).expect("-o json is JSON");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2), "{out}");
    let out = server.aoctl(&["get", "sessions", "fix-login", "-o", "json"]);
    let one: Value = serde_json::from_str(&out.ok().stdout).expect("-o json is JSON");
    assert_eq!(one["spec"]["project"], "web");
    let out = server.aoctl(&["get", "sessions", "-o", "name"]);
    assert_eq!(out.ok().stdout, "session/add-healthcheck\nsession/fix-login\n", "{out}");
    let out = server.aoctl(&["get", "projects", "-o", "wide"]);
    let table = rows(out.ok());
    assert_eq!(table[0], ["NAME", "PATH", "BRANCH", "READY", "AGE", "REPO", "REASON"], "{out}");
    assert_eq!(table[1][5..], ["acme/web", "RepositoryReady"], "{out}");
    let out = server.aoctl(&["get", "sessions", "-l", "team=web"]);
    let names: Vec<String> = rows(out.ok()).iter().skip(1).map(|r| r[0].clone()).collect();
    assert_eq!(names, ["fix-login"], "{out}");
    let out = server.aoctl(&["get", "sessions", "-l", "team in (web,api),app=demo", "-o", "name"]);
    assert_eq!(out.ok().stdout.lines().count(), 2, "{out}");
    let out = server.aoctl(&["get", "sessions", "nope"]);
    assert_eq!(out.code, 1, "{out}");
    assert!(out.stderr.contains("nope"), "{out}");

    let out = server.aoctl(&["get", "projects,sessions"]);
    assert!(out.ok().stdout.contains("\nproject/web ") && out.stdout.contains("\nsession/fix-login "), "{out}");
    let out = server.aoctl(&["get", "events"]);
    assert!(out.ok().stdout.lines().any(|l| l.contains("RepositoryReady") && l.contains("project/web")), "{out}");

    let out = server.aoctl(&["describe", "project", "web"]);
    let text = &out.ok().stdout;
    assert!(text.starts_with("Name:         web\n"), "{out}");
    let conditions = text.split("Conditions:\n").nth(1).expect("a Conditions section");
    assert!(
        conditions.lines().any(|l| l.contains("Ready") && l.contains("True") && l.contains("RepositoryReady")),
        "{out}"
    );
    let events = text.split("Events:\n").nth(1).expect("an Events section");
    assert!(events.contains("Normal") && events.contains("RepositoryReady"), "{out}");
    let out = server.aoctl(&["describe", "session", "fix-login"]);
    assert!(out.ok().stdout.contains("prompt: Fix the login redirect loop for good"), "{out}");

    let out = server.aoctl(&["delete", "session", "add-healthcheck", "--wait=30s"]);
    has_lines(out.ok(), &["session \"add-healthcheck\" deleted"]);
    assert!(server.object("sessions", "add-healthcheck").await.is_none(), "still there after delete --wait");

    // Deleting the project deletes its sessions.
    let out = server.aoctl(&["delete", "project", "web"]);
    out.ok();
    server.wait_for("sessions", "fix-login", Duration::from_secs(15), Value::is_null).await;
    assert!(server.object("projects", "web").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_deletes_only_what_apply_created() {
    let server = Server::start().await;
    let dir = server.tmp.path().join("shop");
    let dir_arg = dir.to_str().expect("UTF-8 path");
    let project = project_yaml("shop", NO_REPO, "app: demo");
    let session = |name: &str, app: &str| session_yaml(name, "shop", &format!("app: {app}"), "Work");
    write(
        &dir,
        "all.yaml",
        &[project.clone(), session("kept", "demo"), session("dropped", "demo"), session("other", "other")],
    );
    server.aoctl(&["apply", "-f", dir_arg]).ok();

    // Made without apply: it matches the selector but apply never managed it.
    let mut manual = crate::harness::session("manual", "shop", "Made by hand");
    manual["metadata"]["labels"] = json!({"app": "demo"});
    server.create("sessions", &manual).await;

    write(&dir, "all.yaml", &[project, session("kept", "demo"), session("other", "other")]);
    let settled = server.settle().await;
    let out = server.aoctl(&["apply", "--dry-run", "--prune", "-l", "app=demo", "-f", dir_arg]);
    has_lines(out.ok(), &["session/dropped pruned (dry run)"]);
    assert_eq!(out.stdout.matches("pruned").count(), 1, "{out}");
    assert_eq!(server.dump().await, settled, "apply --prune --dry-run wrote to the store");

    let out = server.aoctl(&["apply", "--prune", "-l", "app=demo", "-f", dir_arg]);
    out.ok();
    has_lines(
        &out,
        &["project/shop unchanged", "session/kept unchanged", "session/other unchanged", "session/dropped pruned"],
    );
    assert_eq!(out.stdout.matches("pruned").count(), 1, "{out}");
    server.wait_for("sessions", "dropped", Duration::from_secs(15), Value::is_null).await;
    for name in ["kept", "other", "manual"] {
        let s = server.object("sessions", name).await.unwrap_or_else(|| panic!("prune deleted {name}"));
        assert!(s["metadata"]["deletionTimestamp"].is_null(), "prune deleted {name}: {s}");
    }
    assert!(server.object("projects", "shop").await.is_some());

    // delete -f removes what the manifests name.
    let out = server.aoctl(&["delete", "-f", dir_arg, "--wait=30s"]);
    has_lines(out.ok(), &["session \"kept\" deleted", "session \"other\" deleted", "project \"shop\" deleted"]);
    let out = server.aoctl(&["get", "projects,sessions", "-o", "name"]);
    assert_eq!(out.ok().stdout, "", "only `manual` was left, and it went with its project:\n{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_folder_version_completion_and_usage() {
    let server = Server::start().await;
    let plain = server.tmp.path().join("not-a-repo");
    std::fs::create_dir_all(&plain).expect("plain folder");
    let manifest = project_yaml("plain", plain.to_str().expect("UTF-8 path"), "app: plain");
    let out = server.aoctl_stdin(&["apply", "-f", "-"], &manifest);
    has_lines(out.ok(), &["project/plain created"]);
    let p = server
        .wait_for("projects", "plain", Duration::from_secs(10), |p| !p["status"]["conditions"][0].is_null())
        .await;
    let ready = &p["status"]["conditions"][0];
    assert_eq!((ready["type"].as_str(), ready["status"].as_str()), (Some("Ready"), Some("False")), "{p}");
    assert_eq!(ready["reason"], "NotAGitRepository", "{p}");
    let out = server.aoctl_stdin(&["apply", "-f", "-", "--wait=2s"], &manifest);
    assert_eq!(out.code, 1, "{out}");
    assert!(out.stderr.contains("timed out after 2s") && out.stderr.contains("NotAGitRepository"), "{out}");
    let out = server.aoctl(&["get", "projects", "-o", "wide"]);
    assert_eq!(rows(out.ok())[1][3..4], ["False"], "{out}");
    assert!(out.stdout.contains("NotAGitRepository"), "{out}");
    let events = server.get_path(&format!("{API}/events")).await.expect(200);
    let warned = events["items"].as_array().expect("items").iter().any(|e| {
        e["type"] == "Warning" && e["reason"] == "NotAGitRepository" && e["involvedObject"]["name"] == "plain"
    });
    assert!(warned, "no Warning event for the plain folder: {events}");

    let version = env!("CARGO_PKG_VERSION");
    let out = server.aoctl(&["version"]);
    has_lines(
        out.ok(),
        &[&format!("client: {version} (ao.dev/v1alpha1)"), &format!("server: {version} (ao.dev/v1alpha1)")],
    );
    for shell in ["bash", "zsh", "fish"] {
        let out = server.aoctl(&["completion", shell]);
        assert!(out.ok().stdout.len() > 100 && out.stdout.contains("aoctl"), "completion {shell}:\n{out}");
    }

    // Usage errors exit 2; failures exit 1 with `error: `.
    for args in [&["get", "pods"][..], &["apply"], &["delete", "session"], &["frobnicate"]] {
        assert_eq!(server.aoctl(args).code, 2, "aoctl {args:?} is a usage error");
    }
    let mut cmd = server.cli();
    cmd.env("AOCTL_SERVER", format!("http://127.0.0.1:{}", crate::harness::free_port()));
    cmd.args(["get", "projects"]);
    let out = crate::harness::run(cmd, None);
    assert_eq!(out.code, 1, "{out}");
    assert!(out.stderr.starts_with("error: ") && out.stderr.contains("cannot reach the server"), "{out}");
}

/// A `GET` of `path` asking for `accept`: the status, the `Content-Type` and the body.
async fn get_accepting(server: &Server, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let resp = server
        .request(reqwest::Method::GET, path)
        .header(reqwest::header::ACCEPT, accept)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let code = resp.status().as_u16();
    let ct = resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    (code, ct, resp.bytes().await.expect("response body").to_vec())
}

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

/// Lists answer with the objects' stored bytes spliced in: the body is compact JSON in the list's
/// shape, each item byte for byte what a GET of the object returns; selectors still filter.
/// With `Accept: …;as=Table;…` the server answers with the table `aoctl get` prints, and the CLI's
/// tables, wide tables and names match the objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_are_stored_bytes_and_tables_are_what_get_prints() {
    let server = Server::start().await;
    let repo = git_repo(server.tmp.path(), "shop", "main");
    let dir = server.tmp.path().join("manifests");
    write(
        &dir,
        "all.yaml",
        &[
            project_yaml("shop", repo.to_str().expect("UTF-8 path"), "app: shop"),
            session_yaml("cart", "shop", "team: web", "Fix the cart"),
            session_yaml("api-docs", "shop", "team: api", "Document the API"),
            session_yaml("zz-last", "shop", "team: web", "Tidy up \\\"quotes\\\" and é"),
        ],
    );
    server.aoctl(&["apply", "-f", dir.to_str().expect("UTF-8 path")]).ok();
    for name in ["cart", "api-docs", "zz-last"] {
        server.wait_for("sessions", name, Duration::from_secs(20), |s| s["status"]["phase"] == "Stopped").await;
    }
    server.settle().await;
    let base = format!("{API}/sessions");

    // The list: compact JSON with apiVersion, kind, metadata.resourceVersion and items, in that order.
    let bytes = server.list_bytes("sessions").await;
    let list: Value = serde_json::from_slice(&bytes).expect("the list is JSON");
    assert_eq!(serde_json::to_vec(&list).unwrap(), bytes, "not compact JSON in the usual order");
    let keys: Vec<&String> = list.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["apiVersion", "kind", "metadata", "items"]);
    assert_eq!((list["apiVersion"].as_str(), list["kind"].as_str()), (Some("ao.dev/v1alpha1"), Some("SessionList")));
    let rv = list["metadata"]["resourceVersion"].as_str().expect("resourceVersion").to_string();
    let items = list["items"].as_array().expect("items");
    let names: Vec<&str> = items.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["api-docs", "cart", "zz-last"]);
    for item in items {
        let one = server.get_path(&format!("{base}/{}", item["metadata"]["name"].as_str().unwrap())).await;
        assert_eq!(one.body, serde_json::to_vec(item).unwrap(), "GET and list disagree");
    }
    let picked = server.get_path(&format!("{base}?labelSelector=team%3Dweb")).await.expect(200);
    let picked: Vec<&str> =
        picked["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(picked, ["cart", "zz-last"]);
    let picked = server.get_path(&format!("{base}?fieldSelector=metadata.name%3Dcart")).await.expect(200);
    assert_eq!(picked["items"].as_array().map(Vec::len), Some(1));
    let (code, ct, plain) = get_accepting(&server, &base, "application/json").await;
    assert_eq!((code, ct.as_str(), &plain), (200, "application/json", &bytes));

    // The table.
    let (code, ct, body) = get_accepting(&server, &base, &format!("{TABLE},application/json")).await;
    assert_eq!((code, ct.as_str()), (200, TABLE), "{}", String::from_utf8_lossy(&body));
    let table: Value = serde_json::from_slice(&body).expect("the table is JSON");
    assert_eq!((table["kind"].as_str(), table["apiVersion"].as_str()), (Some("Table"), Some("meta.k8s.io/v1")));
    assert_eq!(table["metadata"]["resourceVersion"], rv.as_str());
    let columns: Vec<(&str, i64)> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["priority"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Name", 0),
            ("Project", 0),
            ("Agent", 0),
            ("Phase", 0),
            ("Branch", 0),
            ("Age", 0),
            ("Runtime", 1),
            ("Activity", 1),
            ("Restarts", 1),
            ("PR", 1),
            ("Overlaps", 1)
        ]
    );
    let table_rows = table["rows"].as_array().expect("rows");
    assert_eq!(table_rows.len(), 3);
    for (row, item) in table_rows.iter().zip(items) {
        let cells = row["cells"].as_array().expect("cells");
        let name = item["metadata"]["name"].as_str().unwrap();
        let branch = item["status"]["workspace"]["branch"].as_str().expect("a workspace branch");
        assert_eq!(cells[..5], [json!(name), json!("shop"), json!("aider"), json!("Stopped"), json!(branch)]);
        assert!(cells[5].as_str().is_some_and(|a| a.ends_with('s') || a.ends_with('m')), "age: {row}");
        assert_eq!(cells[6..], [json!("<none>"), json!("<none>"), json!(0), json!("<none>"), json!("<none>")], "{row}");
        // Kubernetes' default: each row carries the object's metadata.
        assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(row["object"]["metadata"], item["metadata"]);
    }
    let (_, _, body) =
        get_accepting(&server, &format!("{base}?includeObject=None&labelSelector=team%3Dapi"), TABLE).await;
    let small: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(small["rows"].as_array().map(Vec::len), Some(1));
    assert!(small["rows"][0].get("object").is_none(), "{small}");
    let (_, _, body) = get_accepting(&server, &format!("{base}?includeObject=Object"), TABLE).await;
    let whole: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(&whole["rows"][1]["object"], &items[1]);
    let (code, _, body) = get_accepting(&server, &format!("{base}?includeObject=Everything"), TABLE).await;
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    let (code, ct, body) = get_accepting(&server, &format!("{base}/cart"), TABLE).await;
    assert_eq!((code, ct.as_str()), (200, TABLE));
    let one: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(one["rows"][0]["cells"][0], "cart");
    // Tables are asked for only in the form Kubernetes clients use.
    let (_, ct, _) =
        get_accepting(&server, &base, "application/json, application/json;as=Table;v=v1;g=meta.k8s.io").await;
    assert_eq!(ct, "application/json");
    let (_, ct, _) = get_accepting(&server, &base, "application/json;as=Table;v=v1beta1;g=meta.k8s.io").await;
    assert_eq!(ct, "application/json");

    // The CLI prints the server's tables.
    let out = server.aoctl(&["get", "sessions"]);
    let printed = rows(out.ok());
    assert_eq!(printed[0], ["NAME", "PROJECT", "AGENT", "PHASE", "BRANCH", "AGE"], "{out}");
    assert_eq!(printed.len(), 4, "{out}");
    for (line, item) in printed[1..].iter().zip(items) {
        let branch = item["status"]["workspace"]["branch"].as_str().unwrap();
        assert_eq!(
            line[..5],
            [item["metadata"]["name"].as_str().unwrap(), "shop", "aider", "Stopped", branch],
            "{out}"
        );
    }
    let out = server.aoctl(&["get", "sessions", "-o", "wide", "-l", "team=web"]);
    let printed = rows(out.ok());
    assert_eq!(printed[0][6..], ["RUNTIME", "ACTIVITY", "RESTARTS", "PR", "OVERLAPS"], "{out}");
    assert_eq!(printed.iter().skip(1).map(|r| r[0].as_str()).collect::<Vec<_>>(), ["cart", "zz-last"], "{out}");
    assert_eq!(printed[1][6..], ["<none>", "<none>", "0", "<none>", "<none>"], "{out}");
    let out = server.aoctl(&["get", "projects,sessions", "-o", "name", "-l", "team!=web"]);
    assert_eq!(out.ok().stdout, "project/shop\nsession/api-docs\n", "{out}");
    let out = server.aoctl(&["get", "sessions", "-l", "team=nobody"]);
    assert_eq!((out.ok().stdout.as_str(), out.stderr.trim()), ("", "No resources found."), "{out}");
    let out = server.aoctl(&["get", "sessions", "-o", "json"]);
    let listed: Value = serde_json::from_str(&out.ok().stdout).expect("-o json is JSON");
    assert_eq!(listed["items"].as_array(), Some(items), "{out}");
}
