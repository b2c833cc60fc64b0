//! A person's live view of a container's terminal: fed from the screen the attach connection keeps
//! (see [`crate::view`]), its keys typed on the same connection, its size the container TTY's
//! while it is the newest view.

use std::sync::Arc;

use bollard::Docker;

use super::stream::Agent;
use crate::runtime::{TerminalInput, TerminalView};
use crate::view;

/// Opens a view of `agent` at `cols` × `rows`, which the container's terminal takes at once, and
/// serves its input until both halves are dropped.
pub(super) async fn open(docker: Docker, agent: Arc<Agent>, cols: u16, rows: u16) -> TerminalView {
    let (view, output, mut watch) = view::open();
    let id = agent.sized(&docker, |screen| screen.add(output, cols, rows)).await;
    tokio::spawn(async move {
        let mut catch_up = tokio::time::interval(view::CATCH_UP);
        loop {
            tokio::select! {
                next = watch.next() => match next {
                    None => break,
                    Some(TerminalInput::Bytes(bytes)) => {
                        let _typing = agent.typing.lock().await;
                        // A connection that ended takes no keys; the view closes by itself.
                        let _ = agent.write("terminal", bytes);
                    }
                    Some(TerminalInput::Resize { cols, rows }) => {
                        agent.sized(&docker, |screen| ((), screen.resize(id, cols, rows))).await;
                    }
                },
                _ = catch_up.tick() => agent.catch_up(id),
            }
        }
        agent.sized(&docker, |screen| ((), screen.remove(id))).await;
    });
    view
}
