//! What a session's container is made of: its name, labels, mounts, user, limits and hardening,
//! built from a `LaunchSpec` with no engine call, so all of it is unit-tested. Host paths in the
//! command and environment are rewritten by [`PathMap`] to where their folder is mounted.
//!
//! A sandboxed workspace (made by `aoctl_git::workspace`, see its `sandbox.rs`) adds its git
//! folder G at `/aoctl/git`, with G's `config`, `hooks/`, `info/` and `objects/info/` and the
//! gitfile `/workspace/.git` mounted read-only over themselves (a mount point can be neither
//! written, renamed nor unlinked), and the main repository's objects folder read-only at its own
//! path for G's alternates. The engine mounts parents before children (it sorts by the
//! destination's depth), whatever the order here.
//! Nothing else of the main repository is mounted.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use aoctl_api::session::DockerSpec;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};

use super::{start_failed, RUNTIME};
use crate::runtime::{LaunchSpec, RuntimeError};
use aoctl_git::workspace::{Sandbox, CONTAINER_GIT_DIR, GITFILE, READ_ONLY_PARTS};

/// Where the workspace is mounted in every container, and the agent's working directory.
pub(super) const WORKSPACE: &str = "/workspace";
/// Where the controller's folder for the session (prompt file, transcript) is mounted, read-only.
pub(super) const SESSION_DIR: &str = "/aoctl/session";

pub(super) const LABEL_SESSION: &str = "ao.dev/session";
pub(super) const LABEL_PROJECT: &str = "ao.dev/project";
pub(super) const LABEL_MANAGED_BY: &str = "ao.dev/managed-by";
pub(super) const MANAGED_BY: &str = "aoctl";
/// The controller the container belongs to: only it lists, adopts, probes and removes it.
pub(super) const LABEL_OWNER: &str = "ao.dev/owner";
/// The host path of the transcript, so a restarted controller resumes appending to it.
pub(super) const LABEL_TRANSCRIPT: &str = "ao.dev/transcript";
/// The transcript's length when the container was created: the bytes past it are this container's
/// output, which lets a re-attached log follower skip what the transcript already holds.
pub(super) const LABEL_OFFSET: &str = "ao.dev/transcript-offset";
/// The terminal size as `COLSxROWS`.
pub(super) const LABEL_SIZE: &str = "ao.dev/terminal-size";

/// The container of session `session` of controller `owner`: `aoctl-<owner hash>-<session>`,
/// deterministic, so a restarted controller finds it again and the engine itself refuses a second
/// one, and distinct per owner, so controllers sharing an engine never clash on a name.
pub(super) fn container_name(owner: &str, session: &str) -> String {
    format!("aoctl-{}-{session}", owner_hash(owner))
}

/// Eight hex digits naming `owner` in container names: its 32-bit FNV-1a hash, stable across
/// builds and platforms.
pub(super) fn owner_hash(owner: &str) -> String {
    let hash = owner.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    format!("{hash:08x}")
}

/// What the runtime needs to follow a container's output, recorded in its labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Meta {
    pub(crate) transcript: PathBuf,
    pub(crate) offset: u64,
    pub(crate) cols: u16,
    pub(crate) rows: u16,
}

impl Meta {
    /// Reads the labels written by [`create_body`]; `None` for a container aoctl did not create.
    pub(super) fn from_labels(labels: &HashMap<String, String>) -> Option<Meta> {
        if labels.get(LABEL_MANAGED_BY).map(String::as_str) != Some(MANAGED_BY) {
            return None;
        }
        let transcript = PathBuf::from(labels.get(LABEL_TRANSCRIPT).filter(|t| !t.is_empty())?);
        let offset = labels.get(LABEL_OFFSET).and_then(|o| o.parse().ok()).unwrap_or(0);
        let (cols, rows) = labels
            .get(LABEL_SIZE)
            .and_then(|s| s.split_once('x'))
            .and_then(|(c, r)| Some((c.parse().ok()?, r.parse().ok()?)))
            .unwrap_or((200, 50));
        Some(Meta { transcript, offset, cols, rows })
    }
}

/// The image a launch asks for, or the error that says where to set it.
pub(super) fn image_of(docker: Option<&DockerSpec>) -> Result<&str, RuntimeError> {
    docker
        .and_then(|d| d.image.as_deref())
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .ok_or_else(|| start_failed("spec.docker.image is required for runtime docker"))
}

/// The body of `POST /containers/create` for `spec` of the controller whose owner id is
/// `controller`, with output going past `meta.offset` of its transcript.
pub(super) fn create_body(
    spec: &LaunchSpec,
    meta: &Meta,
    controller: &str,
) -> Result<ContainerCreateBody, RuntimeError> {
    let docker = spec.container.as_ref();
    let image = image_of(docker)?;
    let (program, args) = spec.command.split_first().ok_or_else(|| start_failed("the command is empty"))?;
    let workdir = spec
        .workdir
        .canonicalize()
        .map_err(|e| start_failed(format!("working directory {} cannot be used: {e}", spec.workdir.display())))?;
    if !workdir.is_dir() {
        return Err(start_failed(format!("working directory {} is not a directory", workdir.display())));
    }
    let mut mounts = vec![bind(&workdir, Path::new(WORKSPACE), false)];
    let mut paths = PathMap::default();
    paths.add(&spec.workdir, WORKSPACE);
    paths.add(&workdir, WORKSPACE);
    if let Some(session_dir) = session_dir(&spec.session_dir)? {
        mounts.push(bind(&session_dir, Path::new(SESSION_DIR), true));
        paths.add(&spec.session_dir, SESSION_DIR);
        if let Ok(absolute) = std::path::absolute(&spec.session_dir) {
            paths.add(&absolute, SESSION_DIR);
        }
        paths.add(&session_dir, SESSION_DIR);
    }
    if let Some(sandbox) = &spec.sandbox {
        mounts.extend(sandbox_mounts(&workdir, sandbox)?);
    }
    let inside = |s: &str| paths.apply(s);
    let mut env: BTreeMap<String, String> = spec.env.iter().map(|(k, v)| (k.clone(), inside(v))).collect();
    env.entry("TERM".into()).or_insert_with(|| "xterm-256color".into());
    let limits = docker.cloned().unwrap_or_default();
    let nano_cpus = match limits.cpus {
        Some(c) if !(c.is_finite() && c > 0.0) => {
            return Err(start_failed(format!("spec.docker.cpus must be a positive number, not {c}")))
        }
        c => c.map(|c| (c * 1e9).round() as i64),
    };
    let memory = limits
        .memory
        .as_ref()
        .map(|m| i64::try_from(m.bytes()).map_err(|_| start_failed(format!("spec.docker.memory {m} is too large"))))
        .transpose()?;

    let labels = HashMap::from([
        (LABEL_SESSION.to_string(), spec.session.clone()),
        (LABEL_PROJECT.to_string(), spec.project.clone()),
        (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
        (LABEL_OWNER.to_string(), controller.to_string()),
        (LABEL_TRANSCRIPT.to_string(), meta.transcript.to_string_lossy().into_owned()),
        (LABEL_OFFSET.to_string(), meta.offset.to_string()),
        (LABEL_SIZE.to_string(), format!("{}x{}", meta.cols, meta.rows)),
    ]);
    Ok(ContainerCreateBody {
        image: Some(image.to_string()),
        // The command replaces whatever the image would run, entrypoint included.
        entrypoint: Some(vec![inside(program)]),
        cmd: Some(args.iter().map(|a| inside(a)).collect()),
        env: Some(env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()),
        working_dir: Some(WORKSPACE.into()),
        user: owner(&workdir),
        tty: Some(true),
        open_stdin: Some(true),
        stdin_once: Some(false),
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        labels: Some(labels),
        host_config: Some(HostConfig {
            mounts: Some(mounts),
            init: Some(true),
            security_opt: Some(vec!["no-new-privileges".into()]),
            cap_drop: Some(vec!["ALL".into()]),
            network_mode: Some(limits.network.filter(|n| !n.is_empty()).unwrap_or_else(|| "none".into())),
            nano_cpus,
            memory,
            pids_limit: limits.pids_limit,
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// A bind mount of host `source` at `target`.
fn bind(source: &Path, target: &Path, read_only: bool) -> Mount {
    Mount {
        source: Some(source.to_string_lossy().into_owned()),
        target: Some(target.to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        read_only: Some(read_only),
        ..Default::default()
    }
}

/// The session folder to mount, resolved; `None` when the launch names none. It must exist (the
/// runtime creates it before it builds the body).
fn session_dir(dir: &Path) -> Result<Option<PathBuf>, RuntimeError> {
    if dir.as_os_str().is_empty() {
        return Ok(None);
    }
    let resolved = dir
        .canonicalize()
        .map_err(|e| start_failed(format!("session folder {} cannot be used: {e}", dir.display())))?;
    if !resolved.is_dir() {
        return Err(start_failed(format!("session folder {} is not a directory", resolved.display())));
    }
    Ok(Some(resolved))
}

/// Host folders mounted in the container and where they appear inside, to rewrite the paths an
/// agent's arguments and environment name.
#[derive(Debug, Default)]
pub(super) struct PathMap {
    dirs: Vec<(String, &'static str)>,
}

impl PathMap {
    /// Host folder `host` (one spelling of it: as given, absolute, resolved) is `target` inside.
    pub(super) fn add(&mut self, host: &Path, target: &'static str) {
        let Some(host) = host.to_str().map(|d| d.trim_end_matches('/')).filter(|d| !d.is_empty()) else { return };
        if !self.dirs.iter().any(|(d, _)| d == host) {
            self.dirs.push((host.to_string(), target));
        }
    }

    /// `s` as the container sees it: a host path in a mounted folder becomes the same path under
    /// its mount point (the deepest folder wins); anything else is unchanged.
    pub(super) fn apply(&self, s: &str) -> String {
        let hit = self
            .dirs
            .iter()
            .filter(|(dir, _)| s == dir || s.strip_prefix(dir.as_str()).is_some_and(|r| r.starts_with('/')))
            .max_by_key(|(dir, _)| dir.len());
        match hit {
            Some((dir, target)) => format!("{target}{}", &s[dir.len()..]),
            None => s.to_string(),
        }
    }
}

/// The mounts of a sandboxed checkout whose work tree is `workdir` (resolved). Every source is
/// checked to be what the controller made (a folder, a file; never a symlink, which the engine
/// would follow on the host), and the gitfile to name the container's git folder.
pub(super) fn sandbox_mounts(workdir: &Path, sandbox: &Sandbox) -> Result<Vec<Mount>, RuntimeError> {
    let kind = |p: &Path, dir: bool| -> Result<(), RuntimeError> {
        match std::fs::symlink_metadata(p) {
            Ok(m) if (dir && m.is_dir()) || (!dir && m.is_file()) => Ok(()),
            Ok(_) => Err(start_failed(format!(
                "sandbox {} is not a {}",
                p.display(),
                if dir { "folder" } else { "regular file" }
            ))),
            Err(e) => Err(start_failed(format!("sandbox {} cannot be used: {e}", p.display()))),
        }
    };
    let git = sandbox
        .git_dir
        .canonicalize()
        .map_err(|e| start_failed(format!("sandbox {} cannot be used: {e}", sandbox.git_dir.display())))?;
    kind(&git, true)?;
    let gitfile = workdir.join(".git");
    kind(&gitfile, false)?;
    if std::fs::read(&gitfile).ok().as_deref() != Some(GITFILE.as_bytes()) {
        return Err(start_failed(format!("{} does not name {CONTAINER_GIT_DIR}", gitfile.display())));
    }
    let inside = Path::new(CONTAINER_GIT_DIR);
    let mut mounts = vec![bind(&git, inside, false)];
    for part in READ_ONLY_PARTS {
        let source = git.join(part);
        kind(&source, part != "config")?;
        mounts.push(bind(&source, &inside.join(part), true));
    }
    mounts.push(bind(&gitfile, &Path::new(WORKSPACE).join(".git"), true));
    if let Some(objects) = &sandbox.objects {
        kind(objects, true)?;
        mounts.push(bind(objects, objects, true));
    }
    Ok(mounts)
}

/// `uid:gid` owning `dir`, so files the agent writes belong to the host user.
#[cfg(unix)]
fn owner(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).ok()?;
    Some(format!("{}:{}", meta.uid(), meta.gid()))
}

#[cfg(not(unix))]
fn owner(_dir: &Path) -> Option<String> {
    None
}

/// The argument vector of `docker attach` for container `name` on `host` (the default engine when
/// `None`).
pub(super) fn attach_args(host: Option<&str>, name: &str) -> Vec<String> {
    let mut args = vec!["docker".to_string()];
    if let Some(host) = host {
        args.extend(["-H".to_string(), host.to_string()]);
    }
    args.extend(["attach".into(), "--sig-proxy=false".into(), name.into()]);
    args
}

/// A start error for a container of that name belonging to another controller (`None`: to none).
pub(super) fn foreign_error(name: &str, owner: Option<&str>) -> RuntimeError {
    let whose = match owner {
        Some(owner) => format!("belongs to another aoctl controller (ao.dev/owner={owner})"),
        None => format!("has no {LABEL_OWNER} label, so it belongs to no aoctl controller of this version"),
    };
    RuntimeError::Failed {
        runtime: RUNTIME,
        op: "start",
        message: format!("container {name} {whose}; it is not adopted, remove or rename it to start this session"),
    }
}

/// A start error naming the container.
pub(super) fn exists_error(name: &str, state: &str) -> RuntimeError {
    RuntimeError::Failed {
        runtime: RUNTIME,
        op: "start",
        message: format!("container {name} already exists and is {state}; stop the session before starting it again"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &Path, container: Option<DockerSpec>) -> LaunchSpec {
        LaunchSpec {
            session: "fix-login".into(),
            project: "demo".into(),
            workdir: dir.to_path_buf(),
            command: vec![dir.join("agent.sh").to_string_lossy().into_owned(), "--flag".into()],
            env: BTreeMap::from([("WS".to_string(), dir.to_string_lossy().into_owned())]),
            transcript: dir.join("t.log"),
            session_dir: dir.join("s"),
            cols: 100,
            rows: 30,
            container,
            sandbox: None,
        }
    }

    fn meta(dir: &Path) -> Meta {
        Meta { transcript: dir.join("t.log"), offset: 7, cols: 100, rows: 30 }
    }

    #[test]
    fn body_is_hardened_limited_and_labelled() {
        let dir = tempfile::tempdir().unwrap();
        let docker = DockerSpec {
            image: Some("img:tag".into()),
            cpus: Some(1.5),
            memory: Some("256Mi".parse().unwrap()),
            pids_limit: Some(128),
            ..Default::default()
        };
        let spec = spec(dir.path(), Some(docker));
        std::fs::create_dir_all(&spec.session_dir).unwrap();
        let body = create_body(&spec, &meta(dir.path()), "me").unwrap();
        let host = body.host_config.clone().unwrap();
        assert_eq!(host.nano_cpus, Some(1_500_000_000));
        assert_eq!(host.memory, Some(256 << 20));
        assert_eq!(host.pids_limit, Some(128));
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(host.security_opt, Some(vec!["no-new-privileges".to_string()]));
        assert_eq!(host.init, Some(true));
        assert_eq!(body.entrypoint, Some(vec!["/workspace/agent.sh".to_string()]));
        assert_eq!(body.cmd, Some(vec!["--flag".to_string()]));
        let env = body.env.unwrap();
        assert!(env.contains(&"WS=/workspace".to_string()) && env.contains(&"TERM=xterm-256color".to_string()));
        let labels = body.labels.unwrap();
        assert_eq!(labels[LABEL_SESSION], "fix-login");
        assert_eq!(labels[LABEL_PROJECT], "demo");
        assert_eq!(labels[LABEL_OWNER], "me");
        assert_eq!(Meta::from_labels(&labels), Some(meta(dir.path())));
    }

    #[test]
    fn image_is_required() {
        let dir = tempfile::tempdir().unwrap();
        let err = create_body(&spec(dir.path(), None), &meta(dir.path()), "me").unwrap_err();
        assert_eq!(err.to_string(), "docker: start failed: spec.docker.image is required for runtime docker");
        let blank = DockerSpec { image: Some(" ".into()), ..Default::default() };
        assert!(create_body(&spec(dir.path(), Some(blank)), &meta(dir.path()), "me").is_err());
    }

    #[test]
    fn workspace_paths_are_translated_at_path_boundaries_only() {
        let mut paths = PathMap::default();
        paths.add(Path::new("/srv/ws/a"), WORKSPACE);
        paths.add(Path::new("/real/ws/a/"), WORKSPACE);
        assert_eq!(paths.apply("/srv/ws/a"), "/workspace");
        assert_eq!(paths.apply("/srv/ws/a/src/x.rs"), "/workspace/src/x.rs");
        assert_eq!(paths.apply("/real/ws/a/b"), "/workspace/b");
        assert_eq!(paths.apply("/srv/ws/ab"), "/srv/ws/ab");
        assert_eq!(paths.apply("claude"), "claude");
    }

    #[test]
    fn the_deepest_mounted_folder_wins() {
        let mut paths = PathMap::default();
        paths.add(Path::new("/data"), WORKSPACE);
        paths.add(Path::new("/data/sessions/x"), SESSION_DIR);
        assert_eq!(paths.apply("/data/sessions/x/prompt.md"), "/aoctl/session/prompt.md");
        assert_eq!(paths.apply("/data/sessions/x"), "/aoctl/session");
        assert_eq!(paths.apply("/data/sessions/xy"), "/workspace/sessions/xy");
    }

    #[test]
    fn session_folder_is_mounted_read_only_and_its_paths_translated() {
        let dir = tempfile::tempdir().unwrap();
        let docker = DockerSpec { image: Some("img:tag".into()), ..Default::default() };
        let mut spec = spec(dir.path(), Some(docker));
        std::fs::create_dir_all(&spec.session_dir).unwrap();
        let prompt = spec.session_dir.join("prompt.md").to_string_lossy().into_owned();
        spec.command = vec!["sh".into(), "./scripts/agent".into(), prompt.clone(), format!("{prompt}x/../y")];
        spec.env.insert("PROMPT".into(), prompt);
        spec.env.insert("DIR".into(), spec.session_dir.to_string_lossy().into_owned());
        let body = create_body(&spec, &meta(dir.path()), "me").unwrap();
        assert_eq!(body.entrypoint, Some(vec!["sh".to_string()]));
        let args = ["./scripts/agent", "/aoctl/session/prompt.md", "/aoctl/session/prompt.mdx/../y"];
        assert_eq!(body.cmd, Some(args.map(String::from).to_vec()));
        let env = body.env.unwrap();
        assert!(env.contains(&"PROMPT=/aoctl/session/prompt.md".to_string()), "{env:?}");
        assert!(env.contains(&"DIR=/aoctl/session".to_string()), "{env:?}");
        let mounts = body.host_config.unwrap().mounts.unwrap();
        let session = mounts.iter().find(|m| m.target.as_deref() == Some(SESSION_DIR)).expect("a session mount");
        let source = spec.session_dir.canonicalize().unwrap();
        assert_eq!(session.source.as_deref(), source.to_str());
        assert_eq!((session.typ, session.read_only), (Some(MountType::BIND), Some(true)));
        let workspace = mounts.iter().find(|m| m.target.as_deref() == Some(WORKSPACE)).expect("a workspace mount");
        assert_eq!(workspace.read_only, Some(false));
    }

    #[test]
    fn a_missing_session_folder_is_an_error_and_none_is_no_mount() {
        let dir = tempfile::tempdir().unwrap();
        let docker = DockerSpec { image: Some("img:tag".into()), ..Default::default() };
        let mut spec = spec(dir.path(), Some(docker));
        let err = create_body(&spec, &meta(dir.path()), "me").unwrap_err().to_string();
        assert!(err.contains("session folder") && err.contains("cannot be used"), "{err}");
        spec.session_dir = PathBuf::new();
        let mounts = create_body(&spec, &meta(dir.path()), "me").unwrap().host_config.unwrap().mounts.unwrap();
        assert_eq!(mounts.len(), 1, "{mounts:?}");
    }

    #[test]
    fn names_and_attach_arguments() {
        assert_eq!(owner_hash(""), "811c9dc5");
        assert_eq!(owner_hash("a"), "e40c292c");
        assert_eq!(container_name("a", "fix-login"), "aoctl-e40c292c-fix-login");
        assert_ne!(container_name("b", "fix-login"), container_name("a", "fix-login"));
        assert_eq!(attach_args(None, "aoctl-x"), ["docker", "attach", "--sig-proxy=false", "aoctl-x"]);
        assert_eq!(
            attach_args(Some("ssh://me@box"), "aoctl-x"),
            ["docker", "-H", "ssh://me@box", "attach", "--sig-proxy=false", "aoctl-x"]
        );
    }

    /// A sandboxed checkout laid out as `aoctl_git::workspace` makes it: W, G and the main objects.
    fn sandbox_layout(dir: &Path) -> (PathBuf, Sandbox) {
        let work = dir.join("ws/demo/fix-login");
        let git = dir.join("ws/demo/fix-login.git");
        let objects = dir.join("main/.git/objects");
        for d in [work.join("s"), git.join("hooks"), git.join("info"), git.join("objects/info"), objects.clone()] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(work.join(".git"), GITFILE).unwrap();
        std::fs::write(git.join("config"), "[core]\n").unwrap();
        let sandbox = Sandbox { git_dir: git, objects: Some(objects), repo: dir.join("main") };
        (work, sandbox)
    }

    fn mounts_of(body: &ContainerCreateBody) -> Vec<(String, String, bool)> {
        let mounts = body.host_config.as_ref().and_then(|h| h.mounts.clone()).unwrap_or_default();
        mounts
            .into_iter()
            .map(|m| (m.source.unwrap_or_default(), m.target.unwrap_or_default(), m.read_only.unwrap_or(false)))
            .collect()
    }

    #[test]
    fn a_sandbox_mounts_its_git_folder_with_config_hooks_info_and_gitfile_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let (work, sandbox) = sandbox_layout(dir.path());
        let docker = DockerSpec { image: Some("img:tag".into()), ..Default::default() };
        let mut spec = spec(&work, Some(docker));
        spec.sandbox = Some(sandbox.clone());
        let body = create_body(&spec, &meta(&work), "me").unwrap();
        let (w, g) = (work.canonicalize().unwrap(), sandbox.git_dir.canonicalize().unwrap());
        let objects = sandbox.objects.clone().unwrap();
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let t = |p: &str| p.to_string();
        assert_eq!(
            mounts_of(&body),
            vec![
                (s(&w), t("/workspace"), false),
                (s(&w.join("s")), t("/aoctl/session"), true),
                (s(&g), t("/aoctl/git"), false),
                (s(&g.join("config")), t("/aoctl/git/config"), true),
                (s(&g.join("hooks")), t("/aoctl/git/hooks"), true),
                (s(&g.join("info")), t("/aoctl/git/info"), true),
                (s(&g.join("objects/info")), t("/aoctl/git/objects/info"), true),
                (s(&w.join(".git")), t("/workspace/.git"), true),
                (s(&objects), s(&objects), true),
            ]
        );
        // The only writable mounts are the work tree and G, and nothing of the main repository
        // but its objects (read-only) is in the container.
        let main = dir.path().join("main");
        for (source, target, ro) in mounts_of(&body) {
            assert!(ro || target == "/workspace" || target == "/aoctl/git", "{target} is writable");
            assert!(!source.starts_with(main.to_str().unwrap()) || (ro && source == s(&objects)), "{source}");
        }

        // Copied objects (`workspace: clone`): no main repository at all.
        spec.sandbox = Some(Sandbox { objects: None, ..sandbox });
        let mounts = mounts_of(&create_body(&spec, &meta(&work), "me").unwrap());
        assert!(mounts.iter().all(|(source, _, _)| !source.starts_with(main.to_str().unwrap())), "{mounts:?}");
        assert_eq!(mounts.len(), 8);
    }

    #[test]
    #[cfg(unix)]
    fn a_sandbox_that_is_not_what_the_controller_made_is_not_started() {
        let dir = tempfile::tempdir().unwrap();
        let (work, sandbox) = sandbox_layout(dir.path());
        let docker = DockerSpec { image: Some("img:tag".into()), ..Default::default() };
        let mut spec = spec(&work, Some(docker));
        spec.sandbox = Some(sandbox.clone());
        let err = |spec: &LaunchSpec| create_body(spec, &meta(&work), "me").unwrap_err().to_string();

        std::fs::write(work.join(".git"), "gitdir: /elsewhere\n").unwrap();
        assert!(err(&spec).contains("does not name /aoctl/git"), "{}", err(&spec));
        std::fs::remove_file(work.join(".git")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("x"), work.join(".git")).unwrap();
        assert!(err(&spec).contains("is not a regular file"), "{}", err(&spec));
        std::fs::remove_file(work.join(".git")).unwrap();
        std::fs::write(work.join(".git"), GITFILE).unwrap();

        let config = sandbox.git_dir.join("config");
        std::fs::remove_file(&config).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &config).unwrap();
        assert!(err(&spec).contains("config is not a regular file"), "{}", err(&spec));
    }

    #[test]
    fn foreign_containers_have_no_meta() {
        let labels = HashMap::from([(LABEL_TRANSCRIPT.to_string(), "/t".to_string())]);
        assert_eq!(Meta::from_labels(&labels), None);
    }
}
