//! `aoctl down`: stop the background server that `aoctl up` started. The runtimes it supervises
//! keep running; the next server adopts them again.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use aoctl_runtimes::daemon;

use super::emit;
use crate::args::Global;

/// How long the server gets to shut down after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_secs(10);

pub(crate) fn run(g: &Global) -> anyhow::Result<ExitCode> {
    let pid_file = g.data_dir()?.join(super::up::PID_FILE);
    let Some(pid) = daemon::read_pid(&pid_file)? else {
        bail!("no background server: {} does not exist", pid_file.display());
    };
    match daemon::stop(&pid_file, GRACE)? {
        Some(pid) => {
            emit(&format!("server stopped (pid {pid})\n"));
            Ok(ExitCode::SUCCESS)
        }
        None => bail!("the background server (pid {pid}) is not running; removed {}", pid_file.display()),
    }
}
