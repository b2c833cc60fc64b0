//! The system endpoints: Prometheus metrics after a reconcile, the OpenAPI document, the
//! version, and the health probes.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{git_repo, project, Server, API};

/// The value of the sample with exactly this name and labels, if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_openapi_version_and_probes() {
    let server = Server::start().await;
    let repo = git_repo(server.tmp.path(), "metered", "main");
    server.create("projects", &project("metered", repo.to_str().expect("UTF-8 path"))).await;
    server
        .wait_for("projects", "metered", Duration::from_secs(10), |p| p["status"]["conditions"][0]["status"] == "True")
        .await;

    // As in controller-runtime, a reconcile that asks to run again later counts as
    // `requeue_after` rather than `success`; the project controller always does (it polls).
    let results = ["success", "requeue", "requeue_after", "error"]
        .map(|r| format!("aoctl_reconcile_total{{controller=\"project\",result=\"{r}\"}}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let r = server.get_path("/metrics").await;
        assert_eq!(r.code, 200, "{}", r.text());
        let text = r.text();
        let counted: Vec<Option<f64>> = results.iter().map(|s| sample(&text, s)).collect();
        assert!(counted.iter().all(Option::is_some), "missing reconcile series in:\n{text}");
        assert_eq!(counted[3], Some(0.0), "the project reconcile failed:\n{text}");
        if counted.iter().flatten().sum::<f64>() >= 1.0 {
            break text;
        }
        assert!(Instant::now() < deadline, "no project reconcile counted:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for want in [
        r#"aoctl_workqueue_depth{controller="project"}"#,
        r#"aoctl_workqueue_adds_total{controller="project"}"#,
        r#"aoctl_reconcile_duration_seconds_count{controller="project"}"#,
        r#"aoctl_sessions{phase="Pending",project="metered"}"#,
        "aoctl_watch_streams",
        "process_resident_memory_bytes",
    ] {
        assert!(sample(&metrics, want).is_some(), "no sample `{want}` in:\n{metrics}");
    }
    assert!(!metrics.contains("session=\""), "no per-session label by default");

    let doc = server.get_path("/openapi.json").await.expect(200);
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "{doc}");
    let paths = doc["paths"].as_object().expect("paths");
    for p in ["sessions", "sessions/{name}", "sessions/{name}/status", "projects", "projects/{name}"] {
        assert!(paths.contains_key(&format!("{API}/{p}")), "no {API}/{p} in {:?}", paths.keys().collect::<Vec<_>>());
    }
    assert!(paths[&format!("{API}/sessions")]["post"].is_object());

    let version = server.get_path("/version").await.expect(200);
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"), "{version}");
    assert_eq!(version["apiVersion"], "ao.dev/v1alpha1", "{version}");

    for probe in ["/healthz", "/readyz"] {
        let r = server.get_path(probe).await;
        assert_eq!((r.code, r.text().trim()), (200, "ok"), "{probe}");
    }
    let list = server.get_path(&format!("{API}/events")).await.expect(200);
    assert_eq!(list["kind"], "EventList");
    assert!(list["items"].as_array().is_some_and(|i| i.iter().any(|e| e["reason"] == "RepositoryReady")), "{list}");
    assert!(list["metadata"]["resourceVersion"].as_str().is_some_and(|v| v.parse::<u64>().is_ok()));
    let _: Value = list;
}
