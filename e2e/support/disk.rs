//! A small filesystem of its own for the full-disk tests of the store and of the server: a tmpfs
//! mounted on a folder (root or CAP_SYS_ADMIN), filled by one file until the kernel answers ENOSPC.
//! Shared as a source file by `controller/store`'s tests and the end-to-end tests.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Mounts a tmpfs of `mib` MiB on `dir` (which must exist).
pub(crate) fn mount_tmpfs(dir: &Path, mib: u32) -> std::io::Result<()> {
    let target = CString::new(dir.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let opts = CString::new(format!("size={mib}m,mode=0700")).map_err(std::io::Error::other)?;
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let rc = unsafe { libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, opts.as_ptr().cast()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Unmounts what is mounted on `dir`, lazily (open files do not keep it busy).
pub(crate) fn unmount(dir: &Path) {
    if let Ok(target) = CString::new(dir.as_os_str().as_bytes()) {
        // SAFETY: a NUL-terminated path.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

/// Fills the filesystem of `dir` with one file until the kernel refuses more; returns the file.
pub(crate) fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("create the filler");
    for size in [1 << 20, 1 << 12, 1] {
        let chunk = vec![0x5a_u8; size];
        loop {
            match f.write(&chunk) {
                Ok(n) if n == chunk.len() => {}
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("fill {}: {e}", path.display()),
            }
        }
    }
    path
}
