//! Rules of the code base that can be checked, checked over the whole workspace: every Rust file
//! opens with a `//!` line; only the `runtimes` crate starts processes (tests excepted); `api/`,
//! the wire contract, does no IO; the controller's machine side imports no reconciler.

use std::path::{Path, PathBuf};

/// The workspace's top folder.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace folder").to_path_buf()
}

/// Every `.rs` file below `dir`, build output and installed packages left out.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = vec![];
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if !matches!(name.as_ref(), "target" | "node_modules" | ".git" | ".scratch" | "out" | "corpus") {
                    todo.push(path);
                }
            } else if name.ends_with(".rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The crates' folders, each with its Rust files.
fn crates() -> Vec<(&'static str, Vec<PathBuf>)> {
    let root = root();
    ["api", "cli", "controller", "runtimes", "e2e", "fuzz"]
        .into_iter()
        .map(|c| (c, rust_files(&root.join(c))))
        .collect()
}

/// A file's text without its test code: files that are tests by their place or name go
/// entirely, others lose everything from their `#[cfg(test)]` module on (kept last by style).
fn product_code(path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root()).unwrap_or(path).to_string_lossy().into_owned();
    let name = path.file_name()?.to_string_lossy().into_owned();
    let is_test = rel.split('/').any(|part| matches!(part, "tests" | "benches" | "e2e" | "fuzz"))
        || name.starts_with("tests")
        || name.ends_with("_tests.rs")
        || name == "tests.rs";
    if is_test {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    Some(lines[..end].join("\n"))
}

/// The lines of product code in the crates `among` that contain one of `patterns`, as `path:line: text`.
fn offending(among: &[&str], patterns: &[&str]) -> Vec<String> {
    let root = root();
    let mut found = vec![];
    for (krate, files) in crates() {
        if !among.contains(&krate) {
            continue;
        }
        for path in files {
            let Some(code) = product_code(&path) else { continue };
            for (n, line) in code.lines().enumerate() {
                let code_part = line.split("//").next().unwrap_or_default();
                if patterns.iter().any(|p| code_part.contains(p)) {
                    let rel = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
                    found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    found
}

#[test]
fn every_rust_file_opens_with_a_module_doc_line() {
    let root = root();
    let missing: Vec<String> = crates()
        .into_iter()
        .flat_map(|(_, files)| files)
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            !text.lines().find(|l| !l.trim().is_empty()).is_some_and(|l| l.starts_with("//!"))
        })
        .map(|p| p.strip_prefix(&root).unwrap_or(&p).display().to_string())
        .collect();
    assert!(missing.is_empty(), "files whose first line is not a `//!` line:\n{}", missing.join("\n"));
    assert!(crates().iter().map(|(_, f)| f.len()).sum::<usize>() > 100, "the walk found the workspace's files");
}

#[test]
fn only_runtimes_starts_processes() {
    let spawning = [
        "Command::new(",
        "process::Command",
        "tokio::process",
        "portable_pty",
        "libc::fork",
        "libc::exec",
        "nix::unistd::fork",
    ];
    let found = offending(&["api", "cli", "controller"], &spawning);
    assert!(found.is_empty(), "processes are started only in runtimes/; found:\n{}", found.join("\n"));
    // The check sees what it looks for.
    assert!(!offending(&["runtimes"], &spawning).is_empty(), "runtimes/ starts processes, and the check sees them");
}

#[test]
fn api_does_no_io() {
    let io = ["std::fs", "tokio::", "std::net", "reqwest", "std::process", "std::env::var", "File::open", "sled::"];
    let found = offending(&["api"], &io);
    assert!(found.is_empty(), "api/ is the wire contract and does no IO; found:\n{}", found.join("\n"));
    assert!(!offending(&["controller"], &io).is_empty(), "the controller does IO, and the check sees it");
}

#[test]
fn the_machine_side_imports_no_reconciler() {
    let root = root();
    let mentions = |file: &str| -> Vec<String> {
        let code = product_code(&root.join(file)).unwrap_or_else(|| panic!("{file} is read"));
        code.lines()
            .filter(|l| l.split("//").next().unwrap_or_default().contains("reconcilers"))
            .map(String::from)
            .collect()
    };
    for file in ["controller/src/machine.rs", "controller/src/fleet.rs"] {
        let found = mentions(file);
        assert!(found.is_empty(), "{file} is below the reconcilers and names none:\n{}", found.join("\n"));
    }
    assert!(!mentions("controller/src/serve.rs").is_empty(), "serve.rs names the reconcilers, and the check sees it");
}
