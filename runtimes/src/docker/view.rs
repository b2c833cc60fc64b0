//! A person's live view of a container's terminal: fed from the screen the attach connection keeps
//! (see [`crate::view`]), its keys typed on the same connection, its size the container TTY's
//! while it is the newest view.

use std::sync::Arc;

use bollard::Docker;

use super::stream::Agent;
use crate::runtime::TerminalView;
use crate::view;

/// Opens a view of `agent` at `cols` × `rows`, which the container's terminal takes at once, and
/// serves its input until both halves are dropped.
pub(super) async fn open(docker: Docker, agent: Arc<Agent>, cols: u16, rows: u16) -> TerminalView {
    let (view, output, watch) = view::open();
    let id = agent.sized(&docker, |screen| screen.add(output, cols, rows)).await;
    tokio::spawn(view::serve(watch, Arc::new(Container { docker, agent }), id));
    view
}

/// A container's agent with the engine that resizes its terminal.
struct Container {
    docker: Docker,
    agent: Arc<Agent>,
}

#[async_trait::async_trait]
impl view::Viewed for Container {
    fn typing(&self) -> &tokio::sync::Mutex<()> {
        &self.agent.typing
    }

    fn keys(&self, bytes: Vec<u8>) {
        // A connection that ended takes no keys; the view closes by itself.
        let _ = self.agent.write("terminal", bytes);
    }

    async fn change(&self, change: view::Change) {
        self.agent.sized(&self.docker, |screen| ((), change(screen))).await;
    }

    fn catch_up(&self, id: u64) {
        self.agent.catch_up(id);
    }
}
