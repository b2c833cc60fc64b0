//! The agents in miniature the runtime tests drive: small programs that echo, paste, lose an
//! Enter, stay silent, ask where the cursor is, report their terminal's size or leave processes
//! behind, and the helpers that start and watch them.
//!
//! On Unix they are shell and Python scripts. On Windows they are the modes of one console
//! program of the Windows test support (`e2e/windows/`, docs/windows.md), named by
//! `AOCTL_TEST_AGENT` and started through the launcher named by `AOCTL_TEST_CONSOLE` when that
//! is set (Wine gives a pseudo console's child no standard handles of its own).

use std::collections::BTreeMap;
use std::path::Path;
#[cfg(unix)]
use std::path::PathBuf;
#[cfg(unix)]
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use aoctl_agents::InputStyle;

use crate::runtime::{Handle, LaunchSpec, Probe, Runtime};

/// How long a test waits for an agent to show something; Windows programs under Wine start slowly.
const WAIT: Duration = Duration::from_secs(if cfg!(windows) { 30 } else { 10 });

/// One of the agents in miniature.
#[derive(Clone, Copy, Debug)]
#[cfg_attr(windows, allow(dead_code))]
pub(crate) enum Agent {
    /// Says `ready in <dir> with <$AOCTL_TEST>`, answers each line with `got: <line>`; `quit`
    /// exits with status 3.
    Reader,
    /// Like `Reader`, with terminal echo off: typed text never shows, only the answers do.
    NoEcho,
    /// No echo and no answers: nothing on screen ever changes after start.
    Silent,
    /// Starts two long-lived processes that try to outlive it, prints `orphan: <pid>` and
    /// `stubborn: <pid>`, then waits.
    Spawner,
    /// Raw mode with bracketed paste on: echoes what it gets and, on Enter outside a paste,
    /// reports `blocks=<n> lines=<n>`.
    Paste,
    /// Raw mode; loses the first Enter it is sent, as agents do while still starting.
    LosesFirstEnter,
    /// Asks for the cursor position before drawing anything, then prints `ready <answer>`.
    Query,
    /// Says `ready`, then on every line `size <cols>x<rows>` of its terminal.
    Size,
}

impl Agent {
    /// The mode of the Windows agent program, and the script's file name on Unix.
    fn name(self) -> &'static str {
        match self {
            Agent::Reader => "reader",
            Agent::NoEcho => "no-echo",
            Agent::Silent => "silent",
            Agent::Spawner => "spawner",
            Agent::Paste => "paste",
            Agent::LosesFirstEnter => "loses-first-enter",
            Agent::Query => "query",
            Agent::Size => "size",
        }
    }
}

/// The command that runs `agent`, its script (on Unix) written into `dir`.
#[cfg(unix)]
pub(crate) fn agent(dir: &Path, agent: Agent) -> Vec<String> {
    let name = agent.name();
    match agent {
        Agent::Reader => sh_agent(dir, &format!("{name}.sh"), READER),
        Agent::NoEcho => sh_agent(dir, &format!("{name}.sh"), NO_ECHO),
        Agent::Silent => sh_agent(dir, &format!("{name}.sh"), SILENT),
        Agent::Spawner => sh_agent(dir, &format!("{name}.sh"), SPAWNER),
        Agent::Paste => py_agent(dir, &format!("{name}.py"), PASTE),
        Agent::LosesFirstEnter => py_agent(dir, &format!("{name}.py"), LOSES_FIRST_ENTER),
        Agent::Query => py_agent(dir, &format!("{name}.py"), QUERY),
        Agent::Size => py_agent(dir, &format!("{name}.py"), SIZE),
    }
}

/// The command that runs `agent`: the Windows agent program in that mode, through the console
/// launcher when one is named.
#[cfg(windows)]
pub(crate) fn agent(_dir: &Path, agent: Agent) -> Vec<String> {
    let program = std::env::var("AOCTL_TEST_AGENT")
        .ok()
        .filter(|p| !p.is_empty())
        .expect("AOCTL_TEST_AGENT names the Windows test agent (e2e/windows/wine.sh prefix prints it)");
    let launcher = std::env::var("AOCTL_TEST_CONSOLE").ok().filter(|p| !p.is_empty());
    launcher.into_iter().chain([program, agent.name().to_string()]).collect()
}

/// Reads lines and answers each; `quit` exits with status 3.
#[cfg(unix)]
pub(crate) const READER: &str = r#"#!/bin/sh
echo "ready in $(pwd) with $AOCTL_TEST"
while read -r line; do
  [ "$line" = quit ] && exit 3
  echo "got: $line"
done
"#;

/// Like READER, with terminal echo off: typed text never shows, only the answers do.
#[cfg(unix)]
pub(crate) const NO_ECHO: &str = r#"#!/bin/sh
stty -echo
echo ready
while read -r line; do echo "got: $line"; done
"#;

/// No echo and no answers: nothing on screen ever changes after start.
#[cfg(unix)]
pub(crate) const SILENT: &str = r#"#!/bin/sh
stty -echo
echo ready
while read -r line; do :; done
"#;

/// Starts a grandchild in its own session (out of reach of tmux's SIGHUP) and one that ignores
/// SIGHUP and SIGTERM, prints their pids, then waits.
#[cfg(unix)]
pub(crate) const SPAWNER: &str = r#"#!/bin/sh
setsid sleep 1000 &
echo "orphan: $!"
(trap '' HUP TERM; exec sleep 1001) &
echo "stubborn: $!"
echo ready
wait
"#;

/// A raw-mode agent with bracketed paste on: echoes what it gets and, on Enter outside a paste,
/// reports how many paste blocks and lines the message had.
#[cfg(unix)]
pub(crate) const PASTE: &str = r#"import os, tty
tty.setraw(0)
os.write(1, b"\x1b[?2004hready\r\n> ")
blocks, lines, inside = 0, 1, False
while True:
    c = os.read(0, 1)
    if not c:
        break
    if c == b"\x1b":
        seq = c
        while not (seq[-1:].isalpha() or seq[-1:] == b"~"):
            seq += os.read(0, 1)
        if seq == b"\x1b[200~":
            blocks, inside = blocks + 1, True
        elif seq == b"\x1b[201~":
            inside = False
        continue
    if c in (b"\r", b"\n"):
        if inside:
            lines += 1
            os.write(1, b"\r\n")
            continue
        os.write(1, b"\r\nblocks=%d lines=%d\r\n> " % (blocks, lines))
        blocks, lines = 0, 1
        continue
    os.write(1, c)
"#;

/// A raw-mode agent that loses the first Enter it is sent, as agents do while still starting.
#[cfg(unix)]
pub(crate) const LOSES_FIRST_ENTER: &str = r#"import os, tty
tty.setraw(0)
os.write(1, b"ready\r\n> ")
line, lost = b"", False
while True:
    c = os.read(0, 1)
    if not c:
        break
    if c == b"\r":
        if not lost:
            lost = True
            continue
        os.write(1, b"\r\ngot: " + line + b"\r\n> ")
        line = b""
        continue
    line += c
    os.write(1, c)
"#;

/// Asks for the cursor position before drawing anything, then prints the answer.
#[cfg(unix)]
pub(crate) const QUERY: &str = r#"import os, tty
tty.setraw(0)
os.write(1, b"\r\n\r\nabc\x1b[6n")
answer = b""
while not answer.endswith(b"R"):
    answer += os.read(0, 1)
os.write(1, b"\r\nready " + answer[1:] + b"\r\n")
"#;

/// Says `ready`, then on every line the size of its terminal as `size COLSxROWS`.
#[cfg(unix)]
pub(crate) const SIZE: &str = r#"import os, sys
print("ready", flush=True)
for line in sys.stdin:
    cols, rows = os.get_terminal_size(0)
    print("size %dx%d" % (cols, rows), flush=True)
"#;

/// Writes an executable file.
#[cfg(unix)]
pub(crate) fn write_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The real python3 interpreter (not a version-manager shim).
#[cfg(unix)]
pub(crate) fn python() -> String {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let out = std::process::Command::new("python3")
                .args(["-c", "import sys; print(sys.executable)"])
                .output()
                .expect("python3 runs");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        })
        .clone()
}

/// A command running the shell script `body`, written into `dir`.
#[cfg(unix)]
pub(crate) fn sh_agent(dir: &Path, name: &str, body: &str) -> Vec<String> {
    vec![write_script(dir, name, body).to_string_lossy().into_owned()]
}

/// A command running the python program `body`, written into `dir`.
#[cfg(unix)]
pub(crate) fn py_agent(dir: &Path, name: &str, body: &str) -> Vec<String> {
    vec![python(), write_script(dir, name, body).to_string_lossy().into_owned()]
}

/// A launch of `command` for session `session`, working in `dir/work`, transcript in `dir/logs`,
/// with the environment the controller would give it (`AOCTL_TEST` set on purpose).
pub(crate) fn spec(dir: &Path, session: &str, command: Vec<String>) -> LaunchSpec {
    let workdir = dir.join("work");
    std::fs::create_dir_all(&workdir).unwrap();
    let set = BTreeMap::from([("AOCTL_TEST".to_string(), format!("[{session}]"))]);
    let secrets = std::collections::BTreeSet::new();
    let rules = crate::agent_env::Rules { inherit: true, keys: &[], secrets: &secrets };
    LaunchSpec {
        session: session.into(),
        project: "demo".into(),
        workdir,
        command,
        env: crate::agent_env::agent_env(std::env::vars_os(), &rules, &set),
        transcript: dir.join("logs").join(format!("{session}.log")),
        session_dir: dir.join("sessions").join(session),
        cols: 100,
        rows: 30,
        container: None,
        sandbox: None,
    }
}

/// Quick input settings for tests.
pub(crate) fn style(retries: u32) -> InputStyle {
    InputStyle {
        bracketed_paste: true,
        submit_delay: Duration::from_millis(50),
        submit_key: "Enter".into(),
        verify_timeout: Duration::from_millis(800),
        retries,
    }
}

/// Waits up to [`WAIT`] for `f` to hold.
pub(crate) async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The text of the file at `path`; on Windows with the console host's drawing taken out.
pub(crate) fn read(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    if cfg!(windows) {
        plain(&text)
    } else {
        text
    }
}

/// `text` without its escape sequences, cursor moves forward (`CSI n C`) turned into the spaces
/// they stand for. A pseudo console's host redraws what the agent wrote: Wine's, for one, draws
/// a space it has not yet seen followed by anything as a cursor move.
#[cfg_attr(unix, allow(dead_code))]
pub(crate) fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                let mut params = String::new();
                while let Some(&p) = chars.peek() {
                    chars.next();
                    if ('\x40'..='\x7e').contains(&p) {
                        if p == 'C' {
                            let n = params.parse::<usize>().unwrap_or(1);
                            out.extend(std::iter::repeat_n(' ', n));
                        }
                        break;
                    }
                    params.push(p);
                }
            }
            // OSC (a window title): up to BEL or ST.
            Some(']') => {
                while let Some(p) = chars.next() {
                    if p == '\x07' || (p == '\x1b' && chars.next_if_eq(&'\\').is_some()) {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Waits until the transcript of `spec` contains `needle`.
pub(crate) async fn transcript_has(spec: &LaunchSpec, needle: &str) {
    wait_for(&format!("{needle:?} in the transcript"), || read(&spec.transcript).contains(needle)).await;
}

/// The number after `label` in the transcript of `spec`.
pub(crate) fn pid_after(spec: &LaunchSpec, label: &str) -> u32 {
    let text = read(&spec.transcript);
    let rest = &text[text.find(label).unwrap_or_else(|| panic!("{label} in {text:?}")) + label.len()..];
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// The environment process `pid` was started with, as Linux shows it.
#[cfg(target_os = "linux")]
pub(crate) fn environ(pid: u32) -> BTreeMap<String, String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    raw.split(|b| *b == 0)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (k, v) = entry.split_once('=').unwrap_or((&entry, ""));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// An agent that says `ready` and then only waits, without `exec`, so its process keeps the
/// environment it was started with.
#[cfg(unix)]
pub(crate) const WAITER: &str = "#!/bin/sh\necho ready\nsleep 30\n";

/// What a session sets on purpose in the environment tests: a value that tmux would take for a
/// separator or a format on a command line, and nothing of the controller's environment.
#[cfg(unix)]
pub(crate) fn set_on_purpose(session: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("AOCTL_TEST".to_string(), format!("[{session}]")),
        ("GIVEN".to_string(), "kept; as #{session_name} is, with spaces".to_string()),
    ])
}

/// Waits until `runtime` probes `handle` as `want`.
pub(crate) async fn probe_becomes(runtime: &dyn Runtime, handle: &Handle, want: Probe) {
    let deadline = Instant::now() + WAIT;
    loop {
        let got = runtime.probe(handle).await.unwrap();
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "probe stayed {got:?}, wanted {want:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn plain_text_keeps_the_spaces_cursor_moves_stand_for() {
    let drawn = "\x1b]0;title\x07\x1b[?25lgot:\x1b[K\x1b[1Cab\x1b[3Cc\r\n\x1b[?25h";
    assert_eq!(plain(drawn), "got: ab   c\r\n");
    assert_eq!(plain("\x1b]0;t\x1b\\x\x1b[Cy"), "x y");
}
