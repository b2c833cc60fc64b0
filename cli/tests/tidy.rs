//! Rules of the code base that can be checked, checked over the whole workspace: every Rust file
//! opens with a `//!` line; only the crates in `runtimes/` start processes (tests excepted); `api/`,
//! the wire contract, does no IO and reads the clock only through `Time::now`;
//! `runtimes/structured/`, the fold of the agents' protocols, does no IO and reads no clock; the controller
//! does no file, process or git IO of its own (it goes through the machine side) and reads only
//! configuration variables; the controller's machine side and HTTP handlers import no reconciler;
//! reconcilers write no spec but the sources' writes of the objects they own, and list no Session
//! kind whole; the modules of no crate form an import circle; every crate takes the workspace's
//! lints, so `unreachable_pub` shows what nobody outside a crate uses; synchronous locks are
//! parking_lot's.

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
/// entirely, others lose everything from their inline `#[cfg(test)]` module on (kept last by style).
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
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod ") && w[1].contains('{'))
        .unwrap_or(lines.len());
    Some(lines[..end].join("\n"))
}

/// The lines of product code in the folders `among` (a crate's, as `api`, or one inside it, as
/// `runtimes/structured`) that contain one of `patterns`, as `path:line: text`.
fn offending(among: &[&str], patterns: &[&str]) -> Vec<String> {
    let root = root();
    let mut found = vec![];
    for (_, files) in crates() {
        for path in files {
            let rel = path.strip_prefix(&root).unwrap_or(&path).to_string_lossy().into_owned();
            if !among.iter().any(|folder| rel.starts_with(&format!("{folder}/"))) {
                continue;
            }
            let Some(code) = product_code(&path) else { continue };
            for (n, line) in code.lines().enumerate() {
                let code_part = line.split("//").next().unwrap_or_default();
                if patterns.iter().any(|p| code_part.contains(p)) {
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

/// The folders whose code does no IO: `api/`, the wire contract, and `runtimes/structured/`, the
/// fold of the agents' protocols (records and times come in as arguments).
const NO_IO: [&str; 2] = ["api", "runtimes/structured"];

#[test]
fn api_and_the_protocol_fold_do_no_io() {
    let io = ["std::fs", "tokio::", "std::net", "reqwest", "std::process", "std::env::var", "File::open", "sled::"];
    let found = offending(&NO_IO, &io);
    assert!(
        found.is_empty(),
        "api/ (the wire contract) and runtimes/structured/ (the protocols' fold) do no IO; found:\n{}",
        found.join("\n")
    );
    // The fold reads no clock either: `now` is an argument, `since` a record's time.
    let clock = ["SystemTime::now", "Instant::now", "Utc::now", "Local::now"];
    let found = offending(&["runtimes/structured"], &clock);
    assert!(found.is_empty(), "runtimes/structured/ reads no clock; pass the time in:\n{}", found.join("\n"));
    // The check sees what it looks for, and sees the fold's files.
    assert!(!offending(&["controller"], &io).is_empty(), "the controller does IO, and the check sees it");
    assert!(!offending(&["runtimes/structured"], &["serde_json::"]).is_empty(), "the check sees runtimes/structured/");
}

/// What touches the machine's files, processes or git repositories directly.
const MACHINE_IO: [&str; 12] = [
    "std::fs",
    "tokio::fs",
    "fs::read",
    "fs::write",
    "fs::remove",
    "fs::create",
    "File::open",
    "File::create",
    "OpenOptions",
    "Command::new(",
    "process::Command",
    "git2::",
];

#[test]
fn the_controller_does_no_machine_io() {
    // Each file left, with why its reads stay in the controller.
    let allowed = [
        // `aoctl restore` reads the backup file named on its command line before any store or
        // machine exists: the process's configuration edge, like a flag.
        "controller/src/restore.rs",
    ];
    let found: Vec<String> = offending(&["controller"], &MACHINE_IO)
        .into_iter()
        .filter(|f| !allowed.iter().any(|a| f.starts_with(&format!("{a}:"))))
        .collect();
    assert!(
        found.is_empty(),
        "the controller decides and runtimes/ does the IO: go through the Machine, WorkspaceStore, \
         SessionFiles or another runtimes/ type; found:\n{}",
        found.join("\n")
    );
    for file in allowed {
        let left = offending(&["controller"], &MACHINE_IO).into_iter().filter(|f| f.starts_with(&format!("{file}:")));
        assert!(left.count() > 0, "{file} no longer does machine IO: take it off the allow-list");
    }
    // The check sees what it looks for.
    assert!(!offending(&["runtimes"], &MACHINE_IO).is_empty(), "runtimes/ does machine IO, and the check sees it");
}

#[test]
fn the_controller_reads_only_configuration_variables() {
    // Each file that reads the controller's environment, and the configuration it reads: a
    // variable a resource names, read when it is used so that a rotated secret needs no restart.
    let allowed = [
        // A Project's forge and tracker tokens and webhook secrets: its `tokenEnv`,
        // `webhookSecretEnv` and `webhookTokenEnv`, else the defaults.
        "controller/src/forges/mod.rs",
        // A GitSource's push webhook secret, its `webhookSecretEnv`.
        "controller/src/http/webhooks.rs",
        // A GitSource's fetch token, its `tokenEnv`.
        "controller/src/reconcilers/gitsource/mod.rs",
    ];
    let reads = ["env::var", "var_os(", "vars_os("];
    let found = offending(&["controller"], &reads);
    let other: Vec<&String> =
        found.iter().filter(|f| !allowed.iter().any(|a| f.starts_with(&format!("{a}:")))).collect();
    assert!(
        other.is_empty(),
        "the controller reads no environment but the configuration variables of docs/ARCHITECTURE.md; an \
         agent's environment and home are found in runtimes/; found:\n{}",
        other.iter().map(|f| f.as_str()).collect::<Vec<_>>().join("\n")
    );
    for file in allowed {
        assert!(
            found.iter().any(|f| f.starts_with(&format!("{file}:"))),
            "{file} reads no variable: take it off the list"
        );
    }
}

#[test]
fn the_machine_side_and_the_http_handlers_import_no_reconciler() {
    let root = root();
    let mentions = |file: &str| -> Vec<String> {
        let code = product_code(&root.join(file)).unwrap_or_else(|| panic!("{file} is read"));
        code.lines()
            .filter(|l| l.split("//").next().unwrap_or_default().contains("reconcilers"))
            .map(String::from)
            .collect()
    };
    let http = rust_files(&root.join("controller/src/http"));
    let http: Vec<String> =
        http.iter().map(|p| p.strip_prefix(&root).unwrap_or(p).to_string_lossy().replace('\\', "/")).collect();
    let below = ["controller/src/machine.rs", "controller/src/fleet.rs", "controller/src/wakeups.rs"];
    for file in below.iter().copied().chain(http.iter().map(String::as_str)) {
        if product_code(&root.join(file)).is_none() {
            continue;
        }
        // A code path, not a word of prose: `reconcilers::` or `crate::reconcilers`.
        let found: Vec<String> = mentions(file).into_iter().filter(|l| l.contains("reconcilers::")).collect();
        assert!(found.is_empty(), "{file} is below the reconcilers and names none:\n{}", found.join("\n"));
    }
    assert!(
        !mentions("controller/src/serve/mod.rs").is_empty(),
        "serve/mod.rs names the reconcilers, and the check sees it"
    );
}

/// The module of each Rust file of a crate's `src/`, as a path from the crate root
/// (`reconcilers::session::pr`; the root is empty).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("a file of the crate");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "lib" | "main" | "mod") {
        parts.push(stem.to_string());
    }
    parts
}

/// The modules of its own crate that `code` (in module `me`) names, through `crate::` and
/// `super::` paths and its children's names, its ancestors left out: a child naming what its parent holds is how shared
/// items are reached, not a circle.
fn named_modules(code: &str, me: &[String], known: &std::collections::BTreeSet<Vec<String>>) -> Vec<Vec<String>> {
    let re = regex::Regex::new(r"\b(crate|super)((?:::[a-z_][a-z0-9_]*)+)?(?:::\{([^}]*)\})?").expect("a regex");
    let mut found = std::collections::BTreeSet::new();
    for c in re.captures_iter(code) {
        let mut base: Vec<String> = if &c[1] == "crate" { vec![] } else { me[..me.len().saturating_sub(1)].to_vec() };
        let path: Vec<String> =
            c.get(2).map_or(vec![], |m| m.as_str().split("::").filter(|p| !p.is_empty()).map(String::from).collect());
        let mut rest = path.as_slice();
        // `super::super::…`
        while rest.first().is_some_and(|p| p == "super") {
            base.pop();
            rest = &rest[1..];
        }
        let mut candidates = vec![];
        let mut longest = base.clone();
        for p in rest {
            let mut next = longest.clone();
            next.push(p.clone());
            if !known.contains(&next) {
                break;
            }
            longest = next;
        }
        candidates.push(longest.clone());
        if let Some(items) = c.get(3).filter(|_| longest.len() == base.len() + rest.len()) {
            for item in items.as_str().split(',').map(|i| i.trim().split("::").next().unwrap_or("").trim()) {
                let mut m = longest.clone();
                m.push(item.to_string());
                if known.contains(&m) {
                    candidates.push(m);
                }
            }
        }
        for m in candidates {
            if !me.starts_with(&m) && m.as_slice() != me {
                found.insert(m);
            }
        }
    }
    // A module names its own children without a prefix (`reactions::react`).
    let child = regex::Regex::new(r"(?:^|[^:\w])(?:self::)?([a-z_][a-z0-9_]*)::").expect("a regex");
    for c in child.captures_iter(code) {
        let mut m = me.to_vec();
        m.push(c[1].to_string());
        if known.contains(&m) {
            found.insert(m);
        }
    }
    found.into_iter().collect()
}

/// The workspace's member crates (`[workspace] members` of the top `Cargo.toml`), as folders.
fn workspace_members() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("the workspace's Cargo.toml");
    let line = manifest.lines().find(|l| l.trim_start().starts_with("members")).expect("a members line");
    let members: Vec<String> = line.split('"').skip(1).step_by(2).map(String::from).collect();
    assert!(members.len() > 5, "the members are read from {line}");
    members
}

/// The modules of one crate (its `src/` folder) and the modules of the same crate each names.
type Imports = std::collections::BTreeMap<Vec<String>, Vec<Vec<String>>>;

/// What each product module of the crate in `src` names of its own crate.
fn imports(src: &Path) -> Imports {
    let files: Vec<PathBuf> = rust_files(src);
    let known: std::collections::BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let mut edges = Imports::new();
    for f in &files {
        let Some(code) = product_code(f) else { continue };
        // Comments name modules too (doc links); only code counts.
        let code: String =
            code.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
        let me = module_of(src, f);
        edges.insert(me.clone(), named_modules(&code, &me, &known));
    }
    edges
}

/// Every circle of `edges`, each as `crate::a -> crate::b -> crate::a`.
fn circles(edges: &Imports) -> Vec<String> {
    // Depth-first search; a module met again while it is still open closes a circle.
    fn visit(
        m: &Vec<String>,
        edges: &Imports,
        open: &mut Vec<Vec<String>>,
        done: &mut std::collections::BTreeSet<Vec<String>>,
        circles: &mut Vec<String>,
    ) {
        if done.contains(m) {
            return;
        }
        if let Some(at) = open.iter().position(|o| o == m) {
            let names: Vec<String> = open[at..].iter().chain([m]).map(|p| format!("crate::{}", p.join("::"))).collect();
            circles.push(names.join(" -> "));
            return;
        }
        open.push(m.clone());
        for n in edges.get(m).into_iter().flatten() {
            visit(n, edges, open, done, circles);
        }
        open.pop();
        done.insert(m.clone());
    }
    let (mut open, mut done, mut found) = (vec![], Default::default(), vec![]);
    for m in edges.keys() {
        visit(m, edges, &mut open, &mut done, &mut found);
    }
    found
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut found = vec![];
    for member in workspace_members() {
        let edges = imports(&root().join(&member).join("src"));
        found.extend(circles(&edges).into_iter().map(|c| format!("{member}: {c}")));
    }
    assert!(found.is_empty(), "modules of one crate that import each other:\n{}", found.join("\n"));
    // The check sees imports: the session reconciler names other modules of the controller.
    let edges = imports(&root().join("controller/src"));
    let session = edges.get(&vec!["reconcilers".to_string(), "session".to_string()]).expect("the session reconciler");
    assert!(!session.is_empty(), "the session reconciler imports modules of the controller");
}

/// No reconciler lists every Session: each asks the session index (`SessionIndex`) for the
/// sessions it needs, so a reconcile costs the same with ten sessions or ten thousand. A list of
/// the Session kind (`list_typed::<Session>`, `list_stored(Kind::Session, …)`,
/// `list(Kind::Session, …)`) whose selector is everything (`Selector::everything()`, or a name
/// bound to it) is caught, statement by statement. The index lists them to build itself; the
/// GitSource reconciler's plan lists every object of each kind it may declare, by a kind this
/// check does not see.
#[test]
fn no_reconciler_lists_every_session() {
    /// The statements of `code` (cut at each `;`, `{` and `}`, spaces dropped) that list every Session.
    fn lists_every_session(code: &str) -> Vec<String> {
        let code: Vec<&str> = code.lines().map(|l| l.split("//").next().unwrap_or_default()).collect();
        let squeezed: String = code.join(" ").split_whitespace().collect();
        // Names bound to everything: `let everything = Selector::everything();`.
        let everything: Vec<&str> = squeezed
            .split(';')
            .filter_map(|s| {
                let (lhs, rhs) = s.split_once('=')?;
                let name = lhs.rsplit("let").next()?.trim_start_matches("mut");
                let plain = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
                (plain && rhs.ends_with("Selector::everything()")).then_some(name)
            })
            .collect();
        let calls = [
            "list_typed::<Session>(",
            "list_typed::<aoctl_api::Session>(",
            "list_stored(Kind::Session,",
            "list_stored(aoctl_api::Kind::Session,",
            "list(Kind::Session,",
            "list(aoctl_api::Kind::Session,",
        ];
        squeezed
            .split([';', '{', '}'])
            .filter(|s| calls.iter().any(|c| s.contains(c)))
            .filter(|s| {
                s.contains("Selector::everything()") || everything.iter().any(|n| s.contains(&format!("&{n})")))
            })
            .map(str::to_string)
            .collect()
    }

    let dir = root().join("controller/src/reconcilers");
    let allowed = [
        // The index the others read instead: it lists them to build itself, and again when its
        // watch ends.
        "session/index.rs",
    ];
    let mut found = vec![];
    for path in rust_files(&dir) {
        let rel = path.strip_prefix(&dir).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        let Some(code) = product_code(&path).filter(|_| !allowed.contains(&rel.as_str())) else { continue };
        found.extend(lists_every_session(&code).into_iter().map(|s| format!("{rel}: {s}")));
    }
    assert!(found.is_empty(), "reconcilers that list every Session (ask the session index):\n{}", found.join("\n"));

    // The forms the rule is about are caught, and only they.
    let caught = [
        "let (all, _) = ctx.store.list_typed::<Session>(&Selector::everything()).await?;",
        "let (all, _) = store\n    .list_stored(Kind::Session, &Selector::everything())\n    .await?;",
        "let everything = aoctl_store::Selector::everything();\nlet s = store.list(Kind::Session, &everything).await;",
    ];
    for code in caught {
        assert_eq!(lists_every_session(code).len(), 1, "not caught: {code}");
    }
    let fine = [
        "let (p, _) = store.list_typed::<Project>(&Selector::everything()).await?;",
        "let (s, _) = store.list_typed::<Session>(&handed_off).await?;",
        "// store.list_typed::<Session>(&Selector::everything())",
    ];
    for code in fine {
        assert!(lists_every_session(code).is_empty(), "caught wrongly: {code}");
    }
}

#[test]
fn api_reads_the_clock_only_through_time_now() {
    let clock = regex::Regex::new(r"\b(?:SystemTime|Instant|Utc|Local|OffsetDateTime|Zoned|Timestamp)\s*::\s*now\b")
        .expect("a regex");
    let root = root();
    let (mut found, mut through_time_now) = (vec![], 0);
    for path in rust_files(&root.join("api")) {
        let Some(code) = product_code(&path) else { continue };
        let rel = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
        // The function each line is in, as its header line.
        let mut function = String::new();
        for (n, line) in code.lines().enumerate() {
            let code_part = line.split("//").next().unwrap_or_default();
            if code_part.trim_start().starts_with("pub fn ") || code_part.trim_start().starts_with("fn ") {
                function = code_part.trim().to_string();
            }
            if clock.is_match(code_part) {
                if rel == "api/src/meta.rs" && function == "pub fn now() -> Time {" {
                    through_time_now += 1;
                } else {
                    found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "api/ reads the clock only in `Time::now` (api/src/meta.rs); pass the time in instead:\n{}",
        found.join("\n")
    );
    assert_eq!(through_time_now, 1, "the check sees the one clock read, in Time::now");
}

/// The files under `controller/src/reconcilers/` that may write an object's spec (`Store::update`,
/// `update_typed`, `Write::Update`): the sources, which write the objects they own — an
/// IssueSource its sessions' `stopped`, a GitSource what its repository declares, never itself.
const SPEC_WRITERS: &[&str] = &[
    "controller/src/reconcilers/issuesource/mod.rs",
    "controller/src/reconcilers/gitsource/plan.rs",
    "controller/src/reconcilers/orchestrator.rs",
];

#[test]
fn reconcilers_write_no_spec_but_the_sources_of_what_they_own() {
    let spec_write =
        regex::Regex::new(r"\bstore(?:\(\))?\s*\.\s*update(?:_typed)?\s*\(|\bWrite::Update\s*\{").expect("a regex");
    let root = root();
    let (mut found, mut allowed) = (vec![], 0);
    for path in rust_files(&root.join("controller/src/reconcilers")) {
        let Some(code) = product_code(&path) else { continue };
        let code: String =
            code.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
        let rel = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
        for m in spec_write.find_iter(&code) {
            if SPEC_WRITERS.contains(&rel.as_str()) {
                allowed += 1;
            } else {
                let line = code[..m.start()].lines().count().max(1);
                found.push(format!("{rel}:{line}: {}", m.as_str().split_whitespace().collect::<String>()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "reconcilers write status and finalizers, not spec (only the sources and the project's orchestrator step write the objects they own):\n{}",
        found.join("\n")
    );
    assert!(allowed >= SPEC_WRITERS.len(), "the check sees the sources' spec writes");
}

/// Whether a crate's manifest opts into the workspace's lints (`[lints]` with `workspace = true`).
fn uses_workspace_lints(manifest: &str) -> bool {
    let mut in_lints = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_lints = line == "[lints]";
        } else if in_lints && line.replace(' ', "") == "workspace=true" {
            return true;
        }
    }
    false
}

#[test]
fn every_crate_takes_the_workspace_lints() {
    let root = root();
    let missing: Vec<String> = workspace_members()
        .into_iter()
        .filter(|m| {
            let manifest = std::fs::read_to_string(root.join(m).join("Cargo.toml")).expect("a member's Cargo.toml");
            !uses_workspace_lints(&manifest)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "these crates leave out `[lints] workspace = true`, so `unreachable_pub` cannot show their dead code: {}",
        missing.join(", ")
    );
    assert!(!uses_workspace_lints("[package]\nname = \"x\"\n\n[dependencies]\nworkspace = true\n"));
    assert!(uses_workspace_lints("[dependencies]\n[lints]\nworkspace = true\n"));
}

#[test]
fn synchronous_locks_are_parking_lots() {
    let std_lock =
        regex::Regex::new(r"std::sync::(\{[^}]*\b(Mutex|RwLock)\b[^}]*\}|(Mutex|RwLock)\b)").expect("a regex");
    let root = root();
    let mut found = vec![];
    for (_, files) in crates() {
        // This file names what it looks for.
        for path in files.into_iter().filter(|p| !p.ends_with("cli/tests/tidy.rs")) {
            let Ok(code) = std::fs::read_to_string(&path) else { continue };
            for (i, line) in code.lines().enumerate() {
                if std_lock.is_match(line.split("//").next().unwrap_or_default()) {
                    found.push(format!(
                        "{}:{}: {}",
                        path.strip_prefix(&root).unwrap_or(&path).display(),
                        i + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "synchronous locks are parking_lot's (tokio's where a guard is held across an await):\n{}",
        found.join("\n")
    );
    assert!(std_lock.is_match("use std::sync::{Arc, Mutex};") && std_lock.is_match("std::sync::RwLock<u8>"));
    assert!(!std_lock.is_match("use std::sync::Arc;") && !std_lock.is_match("use parking_lot::Mutex;"));
}
