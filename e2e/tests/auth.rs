//! Authentication: a non-loopback listener needs a token file; every request but `/healthz`,
//! `/readyz` and `/version` needs the bearer token, and the CLI passes it with `--token` or
//! `AOCTL_TOKEN` (or, for a server on this machine, finds it in the data dir: security.rs).

use crate::harness::{command, free_port, project, run, Options, Server, API, NO_REPO};

const TOKEN: &str = "e2e-s3cret-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_loopback_listen_needs_a_token_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cmd = command(tmp.path());
    cmd.args(["serve", "--listen", &format!("0.0.0.0:{}", free_port()), "--data-dir"]);
    cmd.arg(tmp.path().join("data"));
    let out = run(cmd, None);
    assert_ne!(out.code, 0, "serve on 0.0.0.0 without --token-file started:\n{out}");
    assert!(out.stderr.contains("--token-file"), "the error should say what is missing:\n{out}");
    assert!(out.stderr.contains("0.0.0.0"), "the error should name the address:\n{out}");

    // An empty token file is no better than none.
    let empty = tmp.path().join("empty-token");
    std::fs::write(&empty, "\n").expect("write token file");
    let mut cmd = command(tmp.path());
    cmd.args(["serve", "--listen", &format!("0.0.0.0:{}", free_port()), "--token-file"]);
    cmd.arg(&empty).arg("--data-dir").arg(tmp.path().join("data"));
    let out = run(cmd, None);
    assert_ne!(out.code, 0, "serve with an empty token file started:\n{out}");
    assert!(out.stderr.contains("empty"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_need_the_bearer_token() {
    let server =
        Server::start_with(Options { host: "0.0.0.0".into(), token: Some(TOKEN.into()), ..Options::default() }).await;
    let with = |auth: Option<&str>, path: &str| {
        let mut r = server.http.get(server.url(path));
        if let Some(a) = auth {
            r = r.header(reqwest::header::AUTHORIZATION, a);
        }
        r.send()
    };
    let projects = format!("{API}/projects");
    let basic = format!("Basic {TOKEN}");
    for path in [projects.as_str(), "/metrics", "/openapi.json", "/no/such/path"] {
        for auth in [None, Some("Bearer wrong-token"), Some(basic.as_str()), Some("Bearer ")] {
            let resp = with(auth, path).await.expect("request");
            let code = resp.status().as_u16();
            let body: serde_json::Value = resp.json().await.unwrap_or_default();
            assert_eq!(code, 401, "{path} with {auth:?}: {body}");
            assert_eq!(body["kind"], "Status", "{path} with {auth:?}: {body}");
            assert_eq!(body["code"], 401, "{body}");
            assert_eq!(body["reason"], "Unauthorized", "{body}");
        }
    }
    for open in ["/healthz", "/readyz", "/version"] {
        let resp = with(None, open).await.expect("request");
        assert_eq!(resp.status().as_u16(), 200, "{open} needs no token");
    }
    let ok = with(Some(&format!("Bearer {TOKEN}")), &projects).await.expect("request");
    assert_eq!(ok.status().as_u16(), 200);

    // A write without the token changes nothing.
    let before = server.dump().await;
    let resp = server.http.post(server.url(&projects)).json(&project("sneaky", NO_REPO)).send().await.expect("POST");
    assert_eq!(resp.status().as_u16(), 401);
    assert_eq!(server.dump().await, before, "an unauthorized write changed the store");

    let out = server.aoctl(&["get", "projects"]);
    assert_eq!(out.code, 1, "{out}");
    assert!(out.stderr.contains("Unauthorized"), "{out}");
    let out = server.aoctl(&["--token", "wrong", "get", "projects"]);
    assert_eq!(out.code, 1, "{out}");

    let out = server.aoctl_stdin(
        &["--token", TOKEN, "apply", "-f", "-"],
        &format!(
            "apiVersion: ao.dev/v1alpha1\nkind: Project\nmetadata: {{name: tokened}}\nspec: {{path: {NO_REPO}}}\n"
        ),
    );
    out.ok();
    assert!(out.stdout.contains("project/tokened created"), "{out}");
    let mut cmd = server.cli();
    cmd.env("AOCTL_TOKEN", TOKEN).args(["get", "projects", "-o", "name"]);
    let out = run(cmd, None);
    out.ok();
    assert_eq!(out.stdout, "project/tokened\n", "{out}");
}
