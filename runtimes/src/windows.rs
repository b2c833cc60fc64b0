//! The Windows calls aoctl needs where Unix has signals and process groups: process handles by
//! id, Job Objects that hold an agent's whole process tree, and the named event a background
//! server is asked to stop by.

use std::ffi::OsStr;
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};

use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE, STILL_ACTIVE, WAIT_OBJECT_0};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, PROCESSENTRY32W, TH32CS_SNAPPROCESS,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectExtendedLimitInformation, SetInformationJobObject,
    TerminateJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::Threading::{
    CreateEventW, GetExitCodeProcess, OpenEventW, OpenProcess, SetEvent, TerminateProcess, WaitForSingleObject,
    EVENT_MODIFY_STATE, INFINITE, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SET_QUOTA, PROCESS_TERMINATE,
};

/// The exit code given to processes aoctl terminates.
const TERMINATED: u32 = 1;

fn owned(raw: HANDLE) -> io::Result<OwnedHandle> {
    if raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a handle just returned to this process, owned by no one else.
    Ok(unsafe { OwnedHandle::from_raw_handle(raw) })
}

fn wide(text: &str) -> Vec<u16> {
    OsStr::new(text).encode_wide().chain([0]).collect()
}

/// Opens process `pid` with `access`.
fn open_process(pid: u32, access: u32) -> io::Result<OwnedHandle> {
    // SAFETY: OpenProcess has no memory-safety preconditions.
    owned(unsafe { OpenProcess(access, 0, pid) })
}

/// Whether process `pid` exists and has not exited.
pub(crate) fn is_alive(pid: u32) -> bool {
    let Ok(process) = open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION) else { return false };
    let mut code = 0u32;
    // SAFETY: the handle is open for querying and `code` is a valid out pointer.
    let ok = unsafe { GetExitCodeProcess(process.as_raw_handle(), &mut code) } != 0;
    ok && code == STILL_ACTIVE as u32
}

/// Ends process `pid` at once; a process that is already gone is no error.
pub(crate) fn terminate(pid: u32) -> io::Result<()> {
    let process = match open_process(pid, PROCESS_TERMINATE) {
        Ok(p) => p,
        Err(_) if !is_alive(pid) => return Ok(()),
        Err(e) => return Err(e),
    };
    // SAFETY: the handle is open with PROCESS_TERMINATE.
    if unsafe { TerminateProcess(process.as_raw_handle(), TERMINATED) } == 0 && is_alive(pid) {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Process `root` and every process descending from it by parent links, as they are now: root
/// first. A process whose parent has already exited is no longer found this way.
pub(crate) fn tree(root: u32) -> Vec<u32> {
    // SAFETY: a snapshot of all processes; the flags need no process id.
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) };
    if raw == INVALID_HANDLE_VALUE {
        return vec![root];
    }
    let Ok(snapshot) = owned(raw) else { return vec![root] };
    // SAFETY: an all-zero entry is valid once its size is set, as the calls require.
    let mut entry: PROCESSENTRY32W = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<PROCESSENTRY32W>() as u32;
    let mut links = Vec::new();
    // SAFETY: the snapshot handle is open and `entry` has its size set.
    let mut more = unsafe { Process32FirstW(snapshot.as_raw_handle(), &mut entry) } != 0;
    while more {
        links.push((entry.th32ParentProcessID, entry.th32ProcessID));
        // SAFETY: as above.
        more = unsafe { Process32NextW(snapshot.as_raw_handle(), &mut entry) } != 0;
    }
    let mut found = vec![root];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        for &(p, child) in &links {
            // Process 0 is its own parent in the snapshot; no process is its own child.
            if p == parent && child != parent && !found.contains(&child) {
                found.push(child);
            }
        }
        next += 1;
    }
    found
}

/// A Job Object holding an agent and every process it starts. Closing the last handle ends them
/// all (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`), so an agent never outlives the controller that
/// started it.
pub(crate) struct Job(OwnedHandle);

impl Job {
    /// A new job with process `pid` in it. Processes `pid` starts from then on are in it too.
    pub(crate) fn holding(pid: u32) -> io::Result<Job> {
        // SAFETY: no security attributes and no name: both may be null.
        let job = owned(unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) })?;
        // SAFETY: an all-zero limit structure is valid; only the flag below is then set.
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: `limits` is the structure this information class takes, with its size.
        let set = unsafe {
            SetInformationJobObject(
                job.as_raw_handle(),
                JobObjectExtendedLimitInformation,
                std::ptr::from_ref(&limits).cast(),
                std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        if set == 0 {
            return Err(io::Error::last_os_error());
        }
        let process = open_process(pid, PROCESS_SET_QUOTA | PROCESS_TERMINATE)?;
        // SAFETY: both handles are open with the rights the call needs.
        if unsafe { AssignProcessToJobObject(job.as_raw_handle(), process.as_raw_handle()) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Job(job))
    }

    /// Ends every process in the job.
    pub(crate) fn terminate(&self) -> io::Result<()> {
        // SAFETY: the job handle is open; TerminateJobObject needs JOB_OBJECT_TERMINATE, which the
        // creator holds.
        if unsafe { TerminateJobObject(self.0.as_raw_handle(), TERMINATED) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The name of the event that asks the background server of process `pid` to stop.
fn stop_event_name(pid: u32) -> String {
    format!("Local\\aoctl-stop-{pid}")
}

/// Creates this process's stop event and blocks until another process sets it.
pub(crate) fn wait_for_stop_request() -> io::Result<()> {
    let name = wide(&stop_event_name(std::process::id()));
    // SAFETY: default security, a manual-reset event, initially unset, with a NUL-terminated name.
    let event = owned(unsafe { CreateEventW(std::ptr::null(), 1, 0, name.as_ptr()) })?;
    // SAFETY: the event handle is open with SYNCHRONIZE, as CreateEventW gives it.
    match unsafe { WaitForSingleObject(event.as_raw_handle(), INFINITE) } {
        WAIT_OBJECT_0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Asks the background server of process `pid` to stop. `Ok(false)` when it has no stop event
/// (it is not an aoctl server, or not yet listening).
pub(crate) fn request_stop(pid: u32) -> io::Result<bool> {
    let name = wide(&stop_event_name(pid));
    // SAFETY: OpenEventW takes a NUL-terminated name and has no other preconditions.
    let Ok(event) = owned(unsafe { OpenEventW(EVENT_MODIFY_STATE, 0, name.as_ptr()) }) else { return Ok(false) };
    // SAFETY: the event handle is open with EVENT_MODIFY_STATE.
    if unsafe { SetEvent(event.as_raw_handle()) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(true)
}
