//! `aoctl backup -o FILE`: the server's snapshot of every object, written to FILE.partial as it
//! arrives, checked whole (the header's count of objects, each line as `aoctl restore` reads it),
//! flushed to disk, then renamed over FILE, so that a backup cut short by a kill, a full disk or a
//! lost connection leaves the FILE of an earlier backup as it was.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use crate::args::BackupArgs;
use crate::client::Client;

pub(crate) async fn run(client: &Client, a: BackupArgs) -> anyhow::Result<ExitCode> {
    let partial = partial_path(&a.output);
    let written = write_partial(client, &partial).await;
    let header = match written.and_then(|()| check(&partial)) {
        Ok(header) => header,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e.context(format!("no backup was written; {} is as it was", a.output.display())));
        }
    };
    std::fs::rename(&partial, &a.output)
        .with_context(|| format!("cannot rename {} to {}", partial.display(), a.output.display()))?;
    sync_folder(&a.output);
    crate::cmd::emit(&format!(
        "backup of {} objects at resourceVersion {} ({}) written to {}\n",
        header.objects,
        header.resource_version,
        header.backend,
        a.output.display()
    ));
    Ok(ExitCode::SUCCESS)
}

/// `FILE.partial`, beside FILE.
fn partial_path(output: &Path) -> PathBuf {
    let mut name = output.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| "backup".into());
    name.push(".partial");
    output.with_file_name(name)
}

/// Streams the server's backup into `partial`, then flushes it to disk.
async fn write_partial(client: &Client, partial: &Path) -> anyhow::Result<()> {
    let mut stream = client.backup().await?;
    let mut file = File::create(partial).with_context(|| format!("cannot create {}", partial.display()))?;
    while let Some(chunk) = stream.next().await? {
        file.write_all(&chunk).with_context(|| format!("cannot write {}", partial.display()))?;
    }
    file.sync_all().with_context(|| format!("cannot flush {} to disk", partial.display()))?;
    Ok(())
}

/// Reads the file back as a restore would: a cut or garbled backup is never put in place.
fn check(partial: &Path) -> anyhow::Result<aoctl_api::backup::Header> {
    let text = std::fs::read_to_string(partial).with_context(|| format!("cannot read {}", partial.display()))?;
    let backup = aoctl_api::backup::parse(&partial.display().to_string(), &text)
        .context("the server's backup did not arrive whole")?;
    Ok(backup.header)
}

/// Flushes the folder that holds `file`, so that the rename survives a crash too.
fn sync_folder(file: &Path) {
    #[cfg(unix)]
    {
        let folder = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if let Err(e) = File::open(folder).and_then(|d| d.sync_all()) {
            tracing::warn!(error = %e, folder = %folder.display(), "cannot flush the folder of the backup");
        }
    }
    #[cfg(not(unix))]
    let _ = file;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partial_file_is_beside_the_backup() {
        assert_eq!(partial_path(Path::new("/b/x.jsonl")), PathBuf::from("/b/x.jsonl.partial"));
        assert_eq!(partial_path(Path::new("x")), PathBuf::from("x.partial"));
    }

    #[test]
    fn a_cut_backup_does_not_pass() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b.partial");
        let header = aoctl_api::backup::Header::new("sled", 4, aoctl_api::Time::from_unix(0), 1, "0");
        std::fs::write(&file, header.to_line()).unwrap();
        let e = format!("{:#}", check(&file).unwrap_err());
        assert!(e.contains("did not arrive whole") && e.contains("announces 1 objects"), "{e}");
    }
}
