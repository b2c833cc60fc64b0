//! The terminal view contract every runtime keeps (tmux, process, docker), as one test body each
//! runtime's tests run on its own runtime with an interactive shell as the agent: the current
//! screen comes first, typed keys reach the shell and its echo comes back, the view's size reaches
//! the agent at once and on resize, keys wait for a message the runtime types, two views share one
//! agent, a view that never reads blocks
//! nothing, closing the views puts the agent back to its own size, and a view closes when the
//! agent ends.

use std::time::{Duration, Instant};

use aoctl_agents::InputStyle;
use tokio::sync::mpsc;

use crate::runtime::{Handle, Probe, Runtime, RuntimeError, TerminalInput, TERMINAL_COLS, TERMINAL_ROWS};
use crate::test_agents::style;

/// An interactive shell as the agent: it says `ready`, then reads commands at a `$ ` prompt.
pub(crate) const SHELL: &str = "#!/bin/sh\necho \"ready $AOCTL_TEST\"\nPS1='$ ' exec sh -i\n";

/// How long a view may take to show something (a loaded machine, a container).
const WAIT: Duration = Duration::from_secs(30);

/// A person's terminal in miniature: a view and the screen its output draws.
pub(crate) struct Viewer {
    output: mpsc::Receiver<Vec<u8>>,
    input: mpsc::Sender<TerminalInput>,
    screen: vt100::Parser,
    what: String,
}

impl Viewer {
    /// Opens a view of `handle` at `cols` × `rows`.
    pub(crate) async fn open(rt: &dyn Runtime, handle: &Handle, cols: u16, rows: u16, what: &str) -> Viewer {
        let view = rt.terminal(handle, cols, rows).await.unwrap_or_else(|e| panic!("{what}: {e}"));
        Viewer { output: view.output, input: view.input, screen: vt100::Parser::new(rows, cols, 0), what: what.into() }
    }

    /// The screen as text.
    pub(crate) fn contents(&self) -> String {
        self.screen.screen().contents()
    }

    /// Draws output until the screen shows `needle` or `until` passes; whether it did.
    async fn shows_by(&mut self, needle: &str, until: Instant) -> bool {
        while !self.contents().contains(needle) {
            let left = until.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.output.recv()).await {
                Ok(Some(bytes)) => self.screen.process(&bytes),
                Ok(None) => panic!("{}: the view closed before showing {needle:?}:\n{}", self.what, self.contents()),
                Err(_) => return false,
            }
        }
        true
    }

    /// Waits until the screen shows `needle`.
    pub(crate) async fn shows(&mut self, needle: &str) {
        if !self.shows_by(needle, Instant::now() + WAIT).await {
            panic!("{}: timed out waiting for {needle:?} on the screen:\n{}", self.what, self.contents());
        }
    }

    /// Types `text` as a person would.
    pub(crate) async fn types(&self, text: &str) {
        self.input.send(TerminalInput::Bytes(text.as_bytes().to_vec())).await.expect("the view takes keys");
    }

    /// Types the command `line` until the screen shows `needle` (the agent may hear of a resize a
    /// moment after the keys that follow it).
    pub(crate) async fn asks(&mut self, line: &str, needle: &str) {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            self.types(&format!("{line}\r")).await;
            if self.shows_by(needle, (Instant::now() + Duration::from_secs(5)).min(deadline)).await {
                return;
            }
        }
        panic!("{}: `{line}` never showed {needle:?}:\n{}", self.what, self.contents());
    }

    /// Resizes the view (and this terminal).
    pub(crate) async fn resize(&mut self, cols: u16, rows: u16) {
        self.screen.screen_mut().set_size(rows, cols);
        self.input.send(TerminalInput::Resize { cols, rows }).await.expect("the view takes resizes");
    }

    /// Waits until the view's output ends.
    pub(crate) async fn closes(&mut self) {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.output.recv()).await {
                Ok(Some(bytes)) => self.screen.process(&bytes),
                Ok(None) => return,
                Err(_) => panic!("{}: the view did not close:\n{}", self.what, self.contents()),
            }
        }
    }
}

/// Waits until the agent, asked through the runtime, reports its own size again.
async fn back_home(rt: &dyn Runtime, handle: &Handle) {
    let needle = format!("home={TERMINAL_ROWS} {TERMINAL_COLS}");
    let deadline = Instant::now() + WAIT;
    loop {
        rt.send(handle, "echo home=$(stty size)", &style(3)).await.unwrap();
        let seen = Instant::now() + Duration::from_secs(3);
        while Instant::now() < seen {
            if rt.capture(handle).await.unwrap().contains(&needle) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let screen = rt.capture(handle).await.unwrap();
        assert!(Instant::now() < deadline, "the agent is not back at its own size:\n{screen}");
    }
}

/// The contract, on `handle`: a running [`SHELL`] started at `TERMINAL_COLS` × `TERMINAL_ROWS`.
/// `status` is how many rows the runtime itself draws on in a view (tmux's status line).
pub(crate) async fn terminal_view_contract(rt: &dyn Runtime, handle: &Handle, status: u16) {
    let missing = rt.terminal(&Handle("aoctl-no-such-agent".into()), 80, 24).await.unwrap_err();
    assert!(matches!(missing, RuntimeError::NotFound { .. }), "{missing}");

    // What the agent printed before the view opened is drawn first; the view's size applies at once.
    let mut a = Viewer::open(rt, handle, 80, 24, "view a").await;
    a.shows("ready").await;
    a.types("echo hel''lo\r").await;
    a.shows("hello").await;
    a.asks("echo size=$(stty size)", &format!("size={} 80", 24 - status)).await;

    // A message the runtime types is not broken into by keys typed meanwhile: they wait for it.
    let slow_submit = InputStyle { submit_delay: Duration::from_millis(600), ..style(3) };
    let typed_meanwhile = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        a.types("echo typed-$((1 + 2))\r").await;
    };
    let (sent, ()) = tokio::join!(rt.send(handle, "echo sent-$((1 + 1))", &slow_submit), typed_meanwhile);
    sent.unwrap();
    a.shows("typed-3").await;
    assert!(
        a.contents().lines().any(|l| l.trim_end() == "sent-2"),
        "keys landed inside the message:\n{}",
        a.contents()
    );

    a.resize(100, 30).await;
    a.asks("echo size=$(stty size)", &format!("size={} 100", 30 - status)).await;

    // A second view shows the same agent, and takes the size while it is the newest.
    let mut b = Viewer::open(rt, handle, 90, 28, "view b").await;
    b.shows("hello").await;
    let two = format!("two={} 90", 28 - status);
    b.asks("echo two=$(stty size)", &two).await;
    a.shows(&two).await;

    // A view that never reads holds up neither the agent, nor the other views, nor the
    // controller's reading of the screen; once it reads again it catches up.
    let mut slow = Viewer::open(rt, handle, 90, 28, "the view that does not read").await;
    b.types("seq 1 250000; echo done-$((6 * 7))\r").await;
    b.shows("done-42").await;
    a.shows("done-42").await;
    assert!(rt.capture(handle).await.unwrap().contains("done-42"));
    slow.shows("done-42").await;
    drop(slow);

    // Closing the newest view gives the size back to the one left, closing that one to the agent.
    drop(b);
    a.asks("echo back=$(stty size)", &format!("back={} 100", 30 - status)).await;
    drop(a);
    back_home(rt, handle).await;
    assert_eq!(rt.probe(handle).await.unwrap(), Probe::Alive, "closing the views leaves the agent running");
}

/// The end of the contract: a view closes when the agent ends, and an ended agent has none.
pub(crate) async fn view_closes_when_the_agent_ends(rt: &dyn Runtime, handle: &Handle) {
    let mut view = Viewer::open(rt, handle, 80, 24, "the last view").await;
    view.shows("home=").await;
    view.types("exit 5\r").await;
    view.closes().await;
    let deadline = Instant::now() + WAIT;
    while rt.probe(handle).await.unwrap() == Probe::Alive {
        assert!(Instant::now() < deadline, "the agent did not end");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ended = rt.terminal(handle, 80, 24).await.unwrap_err();
    assert!(matches!(ended, RuntimeError::Failed { op: "terminal", .. }), "{ended}");
}
