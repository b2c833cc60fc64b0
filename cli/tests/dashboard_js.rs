//! The dashboard's own logic (its groups and title, label selectors, the diff parser, the stream's
//! hub and the watches and transcript follows over it, how values
//! read, the colours of phases and conditions, the Session its form posts, a project's
//! orchestrator and its workers) is plain JavaScript
//! tested with `node:test` in controller/dashboard/test/; this runs those tests with the `node` on
//! `PATH` and fails when any of them fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The dashboard's folder.
fn dashboard() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace folder").join("controller/dashboard")
}

/// The test files, sorted.
fn test_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dashboard().join("test"))
        .expect("controller/dashboard/test is read")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".test.mjs"))
        .collect();
    files.sort();
    files
}

#[test]
fn the_dashboards_javascript_tests_pass() {
    let files = test_files();
    assert!(files.len() >= 4, "the dashboard's test files are found: {files:?}");
    let out_path = std::env::temp_dir().join(format!("aoctl-dashboard-js-{}.log", std::process::id()));
    let out = std::fs::File::create(&out_path).expect("a log file");
    let mut child = Command::new("node")
        .arg("--test")
        .args(&files)
        .current_dir(dashboard())
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log file"))
        .stderr(out)
        .spawn()
        .expect("node runs (make test installs it)");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for node") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    let Some(status) = status else { panic!("node --test did not finish in 120 s:\n{log}") };
    assert!(status.success(), "node --test failed ({status}):\n{log}");
    // Every file ran: node prints one summary with the number of tests it ran.
    let ran: usize = log
        .lines()
        .find_map(|l| l.strip_prefix("# tests ").or_else(|| l.strip_prefix("ℹ tests ")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(ran >= 20, "node ran the dashboard's tests ({ran} of them):\n{log}");
}
