//! Live views of an agent's terminal ([`Runtime::terminal`](crate::Runtime::terminal)): what the
//! runtimes share.
//!
//! [`Watch`] is a runtime's end of a view's input: the person's keys and resizes, until both halves
//! of the view are dropped. [`Emulator`] is the screen of the runtimes that emulate one (the
//! process runtime's PTY, the docker runtime's attach stream) together with the views of it:
//! a view starts with the screen as it is and then gets every byte the agent writes, both under
//! one lock, so nothing is lost or shown twice in between. Output is handed to each view without
//! ever waiting for it: a view whose queue is full drops what it has not taken yet and is
//! redrawn from the screen once it has room again. The agent's terminal takes the size of the
//! view that opened or resized last, and goes back to the size it was started at when its last
//! view closes. [`TypingLocks`] keeps a person's keys out of the middle of a message the runtime
//! types.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::runtime::{TerminalInput, TerminalView};
use crate::terminal::Replies;

/// Chunks of output a view may hold before it counts as lagging.
pub(crate) const QUEUE: usize = 256;

/// Keys and resizes a view may have waiting.
const INPUT_QUEUE: usize = 64;

/// How often a runtime offers a view that dropped output a redraw ([`Emulator::catch_up`]).
pub(crate) const CATCH_UP: Duration = Duration::from_millis(100);

/// CAN: ends any escape sequence a dropped chunk left open, before a redraw.
const CANCEL: u8 = 0x18;

/// How often a view whose input was dropped looks whether its output is done too.
const OUTPUT_POLL: Duration = Duration::from_millis(100);

/// A new view, and the runtime's ends of it: where its output goes and where its input comes from.
pub(crate) fn open() -> (TerminalView, mpsc::Sender<Vec<u8>>, Watch) {
    let (output_tx, output) = mpsc::channel(QUEUE);
    let (input, input_rx) = mpsc::channel(INPUT_QUEUE);
    let watch = Watch { input: Some(input_rx), output: output_tx.downgrade() };
    (TerminalView { output, input }, output_tx, watch)
}

/// A runtime's end of a view's input.
pub(crate) struct Watch {
    /// `None` once the person's sender is dropped.
    input: Option<mpsc::Receiver<TerminalInput>>,
    /// The output, held weakly so that it closes when the runtime's senders are gone.
    output: mpsc::WeakSender<Vec<u8>>,
}

impl Watch {
    /// The next key or resize; `None` once the person has dropped the input and the output is
    /// done: dropped by the person, or closed by the runtime (the agent ended). Cancel-safe.
    pub(crate) async fn next(&mut self) -> Option<TerminalInput> {
        if let Some(rx) = self.input.as_mut() {
            match rx.recv().await {
                Some(got) => return Some(got),
                None => self.input = None,
            }
        }
        while self.output.upgrade().is_some_and(|tx| !tx.is_closed()) {
            tokio::time::sleep(OUTPUT_POLL).await;
        }
        None
    }
}

/// One view of an [`Emulator`].
struct Viewer {
    id: u64,
    output: mpsc::Sender<Vec<u8>>,
    /// Output was dropped: the view is redrawn from the screen once it has room.
    lagging: bool,
    /// Its size, as (cols, rows).
    size: (u16, u16),
    /// When it last set the size (a counter): the newest one wins.
    since: u64,
}

/// An agent's screen, the views of it, and the sizes its terminal takes.
pub(crate) struct Emulator {
    parser: vt100::Parser<Replies>,
    views: Vec<Viewer>,
    /// The size the agent was started at, as (cols, rows).
    home: (u16, u16),
    /// The agent's output ended: a view opened now gets the last screen and closes.
    ended: bool,
    counter: u64,
}

impl Emulator {
    /// A blank screen of `cols` × `rows`, the agent's size when no view is open.
    pub(crate) fn new(cols: u16, rows: u16) -> Emulator {
        let (cols, rows) = (cols.max(1), rows.max(1));
        Emulator {
            parser: vt100::Parser::new_with_callbacks(rows, cols, 0, Replies::default()),
            views: Vec::new(),
            home: (cols, rows),
            ended: false,
            counter: 0,
        }
    }

    pub(crate) fn screen(&self) -> &vt100::Screen {
        self.parser.screen()
    }

    /// Parses output written before the runtime followed the agent (an adopted container's
    /// transcript): the screen only, no view, no answers to its queries.
    pub(crate) fn replay(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
        self.parser.callbacks_mut().0.clear();
    }

    /// Parses what the agent wrote and hands it to every view; returns the answers to the terminal
    /// queries it held, for the agent's input. Never waits for a view.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.parser.process(bytes);
        let screen = self.parser.screen();
        self.views.retain_mut(|view| {
            if view.lagging {
                // A redraw shows these bytes too.
                return redraw(view, screen) || !view.output.is_closed();
            }
            match view.output.try_send(bytes.to_vec()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    view.lagging = true;
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        std::mem::take(&mut self.parser.callbacks_mut().0)
    }

    /// The agent's output ended (or its stream did, to be opened again with [`Emulator::resume`]):
    /// every view closes once it has taken what it holds.
    pub(crate) fn end(&mut self) {
        self.ended = true;
        self.views.clear();
    }

    /// The agent's output flows again (a new attach connection).
    pub(crate) fn resume(&mut self) {
        self.ended = false;
    }

    /// Adds a view of `cols` × `rows` whose output starts with the screen, drawn at that size.
    /// Returns its id, and the size the agent's terminal must take when it changes.
    pub(crate) fn add(&mut self, output: mpsc::Sender<Vec<u8>>, cols: u16, rows: u16) -> (u64, Option<(u16, u16)>) {
        let size = (cols.max(1), rows.max(1));
        self.counter += 1;
        let id = self.counter;
        if self.ended {
            let _ = output.try_send(state(self.parser.screen()));
            return (id, None);
        }
        let resized = self.take_size(size);
        let mut view = Viewer { id, output, lagging: true, size, since: self.counter };
        redraw(&mut view, self.parser.screen());
        self.views.push(view);
        (id, resized)
    }

    /// View `id` changed size; returns the size the agent's terminal must take when it changes.
    pub(crate) fn resize(&mut self, id: u64, cols: u16, rows: u16) -> Option<(u16, u16)> {
        let size = (cols.max(1), rows.max(1));
        self.counter += 1;
        let since = self.counter;
        let view = self.views.iter_mut().find(|v| v.id == id)?;
        (view.size, view.since) = (size, since);
        self.take_size(size)
    }

    /// View `id` closed: the agent takes the size of the newest view left, or its own when none
    /// is. Returns that size when it changes.
    pub(crate) fn remove(&mut self, id: u64) -> Option<(u16, u16)> {
        self.views.retain(|v| v.id != id);
        if self.ended {
            return None;
        }
        let size = self.views.iter().max_by_key(|v| v.since).map_or(self.home, |v| v.size);
        self.take_size(size)
    }

    /// Redraws view `id` if it dropped output and has room again; whether it is still open.
    pub(crate) fn catch_up(&mut self, id: u64) -> bool {
        let screen = self.parser.screen();
        match self.views.iter_mut().find(|v| v.id == id) {
            Some(view) => {
                if view.lagging {
                    redraw(view, screen);
                }
                true
            }
            None => false,
        }
    }

    /// The screen takes `size`; returned when that is a change. A screen losing rows below the
    /// cursor scrolls up first, as terminals do, so the cursor's line stays on it.
    fn take_size(&mut self, (cols, rows): (u16, u16)) -> Option<(u16, u16)> {
        let screen = self.parser.screen();
        if screen.size() == (rows, cols) {
            return None;
        }
        let (row, _) = screen.cursor_position();
        if row >= rows {
            let over = row + 1 - rows;
            self.parser.process(format!("\x1b[{over}S\x1b[{over}A").as_bytes());
        }
        self.parser.screen_mut().set_size(rows, cols);
        Some((cols, rows))
    }
}

/// Everything needed to draw `screen` on a fresh terminal of its size: its contents, cursor and
/// input modes, and the alternate screen when the agent is on it.
fn state(screen: &vt100::Screen) -> Vec<u8> {
    let mut bytes = Vec::new();
    if screen.alternate_screen() {
        bytes.extend_from_slice(b"\x1b[?1049h");
    }
    bytes.extend(screen.state_formatted());
    bytes
}

/// Sends `view` the whole screen, after a byte ending any sequence its dropped output left open;
/// whether it had room.
fn redraw(view: &mut Viewer, screen: &vt100::Screen) -> bool {
    let Ok(permit) = view.output.try_reserve() else { return false };
    let mut bytes = vec![CANCEL];
    bytes.extend(state(screen));
    permit.send(bytes);
    view.lagging = false;
    true
}

/// A lock per agent, held while the runtime types a message, so that a person's keys wait for it
/// to be submitted instead of landing inside it.
#[derive(Debug, Default)]
pub(crate) struct TypingLocks(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl TypingLocks {
    /// The lock of agent `name`.
    pub(crate) fn of(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.0.lock().entry(name.to_string()).or_default().clone()
    }

    /// Forgets the lock of an agent that was stopped.
    pub(crate) fn forget(&self, name: &str) {
        self.0.lock().remove(name);
    }
}

/// A change to an emulator and its views; the size the agent's terminal takes next, if any.
pub(crate) type Change = Box<dyn FnOnce(&mut Emulator) -> Option<(u16, u16)> + Send + 'static>;

/// What [`serve`] needs of a runtime that keeps an [`Emulator`]: its typing lock, a way to write
/// keys, and a way to change the emulator and give the agent's terminal the size it then asks for.
#[async_trait::async_trait]
pub(crate) trait Viewed: Send + Sync + 'static {
    /// Held while a person's keys are written, so they never land inside a typed message.
    fn typing(&self) -> &tokio::sync::Mutex<()>;
    /// Writes keys; an agent that ended takes none, and its view closes by itself.
    fn keys(&self, bytes: Vec<u8>);
    /// Runs `change` on the emulator, then resizes the agent's terminal to the size it returns.
    async fn change(&self, change: Change);
    /// Redraws view `id` if it dropped output and has room again.
    fn catch_up(&self, id: u64);
}

/// Serves view `id` of `agent`: its keys and resizes until both halves are dropped, redraws when
/// it fell behind, and its removal at the end (which gives the agent its own size back when it
/// was the last view).
pub(crate) async fn serve<A: Viewed>(mut watch: Watch, agent: Arc<A>, id: u64) {
    let mut catch_up = tokio::time::interval(CATCH_UP);
    loop {
        tokio::select! {
            next = watch.next() => match next {
                None => break,
                Some(TerminalInput::Bytes(bytes)) => {
                    let _typing = agent.typing().lock().await;
                    agent.keys(bytes);
                }
                Some(TerminalInput::Resize { cols, rows }) => {
                    agent.change(Box::new(move |screen| screen.resize(id, cols, rows))).await;
                }
            },
            _ = catch_up.tick() => agent.catch_up(id),
        }
    }
    agent.change(Box::new(move |screen| screen.remove(id))).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything waiting on `rx`, drawn on a fresh terminal of `cols` × `rows`.
    fn drawn(rx: &mut mpsc::Receiver<Vec<u8>>, cols: u16, rows: u16) -> vt100::Parser {
        let mut term = vt100::Parser::new(rows, cols, 0);
        while let Ok(bytes) = rx.try_recv() {
            term.process(&bytes);
        }
        term
    }

    #[test]
    fn a_view_starts_with_the_screen_then_gets_every_byte() {
        let mut emu = Emulator::new(40, 10);
        emu.feed(b"\x1b[1;31mbefore\x1b[m\r\n$ ");
        let (tx, mut rx) = mpsc::channel(QUEUE);
        assert_eq!(emu.add(tx, 40, 10), (1, None));
        emu.feed(b"after");
        let term = drawn(&mut rx, 40, 10);
        assert_eq!(term.screen().contents(), "before\n$ after");
        assert_eq!(term.screen().cursor_position(), (1, 7));
        assert_eq!(term.screen().cell(0, 0).unwrap().fgcolor(), vt100::Color::Idx(1));
    }

    #[test]
    fn a_full_view_drops_output_and_is_redrawn_without_blocking() {
        let mut emu = Emulator::new(20, 5);
        let (tx, mut rx) = mpsc::channel(3);
        let (slow_tx, mut slow) = mpsc::channel(3);
        emu.add(tx, 20, 5);
        emu.add(slow_tx, 20, 5);
        let mut term = vt100::Parser::new(5, 20, 0);
        emu.feed(b"one\r\n");
        // A chunk that stops inside an escape sequence fills the queue; the rest is dropped.
        emu.feed(b"\x1b[3");
        for i in 0..50 {
            emu.feed(format!("1mred {i}\x1b[m\r\n").as_bytes());
            while rx.try_recv().is_ok() {}
        }
        while let Ok(bytes) = slow.try_recv() {
            term.process(&bytes);
        }
        assert_eq!(term.screen().contents(), "one");
        // Room again: a catch-up (or the next output) redraws the whole screen.
        assert!(emu.catch_up(2));
        while let Ok(bytes) = slow.try_recv() {
            term.process(&bytes);
        }
        assert!(emu.screen().contents().contains("red 49"), "{}", emu.screen().contents());
        assert_eq!(term.screen().contents_formatted(), emu.screen().contents_formatted());
        // A view that is gone is forgotten at the next output.
        drop(slow);
        emu.feed(b"!");
        assert!(!emu.catch_up(2));
        assert!(emu.catch_up(1));
    }

    #[test]
    fn the_newest_view_sets_the_size_and_the_last_to_close_restores_it() {
        let mut emu = Emulator::new(200, 50);
        let (a, _ra) = mpsc::channel(QUEUE);
        let (b, _rb) = mpsc::channel(QUEUE);
        let (a, resized) = emu.add(a, 80, 24);
        assert_eq!(resized, Some((80, 24)));
        assert_eq!(emu.screen().size(), (24, 80));
        let (b, resized) = emu.add(b, 90, 30);
        assert_eq!(resized, Some((90, 30)));
        assert_eq!(emu.resize(a, 100, 40), Some((100, 40)));
        assert_eq!(emu.resize(a, 100, 40), None);
        assert_eq!(emu.remove(b), None, "a set the size last");
        assert_eq!(emu.remove(a), Some((200, 50)));
        assert_eq!(emu.screen().size(), (50, 200));
    }

    #[test]
    fn a_screen_that_loses_rows_keeps_the_cursor_line() {
        let mut emu = Emulator::new(20, 10);
        for i in 0..9 {
            emu.feed(format!("line {i}\r\n").as_bytes());
        }
        emu.feed(b"$ typed");
        let (tx, _rx) = mpsc::channel(QUEUE);
        emu.add(tx, 20, 4);
        assert_eq!(emu.screen().contents(), "line 6\nline 7\nline 8\n$ typed");
        assert_eq!(emu.screen().cursor_position(), (3, 7));
    }

    #[test]
    fn a_view_of_an_ended_agent_gets_the_last_screen_and_closes() {
        let mut emu = Emulator::new(20, 5);
        emu.feed(b"bye");
        emu.end();
        let (tx, mut rx) = mpsc::channel(QUEUE);
        assert_eq!(emu.add(tx, 10, 3), (1, None));
        assert_eq!(drawn(&mut rx, 20, 5).screen().contents(), "bye");
        assert!(rx.try_recv().is_err() && rx.is_closed());
    }

    #[tokio::test]
    async fn a_watch_ends_when_both_halves_are_dropped() {
        let (view, output, mut watch) = open();
        view.input.send(TerminalInput::Bytes(b"x".to_vec())).await.unwrap();
        assert_eq!(watch.next().await, Some(TerminalInput::Bytes(b"x".to_vec())));
        let TerminalView { output: out, input } = view;
        drop(input);
        // The output is still held: the watch waits.
        let waited = tokio::time::timeout(Duration::from_millis(300), watch.next()).await;
        assert!(waited.is_err());
        drop(out);
        assert_eq!(watch.next().await, None);
        assert!(output.is_closed());

        // The watch does not keep the output open: the runtime's senders close it.
        let (view, output, mut watch) = open();
        let TerminalView { output: mut out, input } = view;
        drop(output);
        assert_eq!(out.recv().await, None);
        drop(input);
        assert_eq!(watch.next().await, None);
    }
}
