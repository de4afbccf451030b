//! hwloc's C code in a child process: an hwloc export given as a file, and a `--fsroot` tree,
//! are read by `topo-tune probe` run again as a marked child, under a time limit and a memory
//! limit. A crash, a hang or a runaway allocation inside hwloc on crafted input ends the
//! child, and the parent reports a refusal of that input instead of dying or waiting for good.

use super::ProbeError;
use crate::model::snapshot::NodeSnapshot;
use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set by the command-line entry point: hwloc reads of files and trees run in a child.
static ISOLATE: AtomicBool = AtomicBool::new(false);
/// Marks the child that does the reading (it must not isolate again).
const CHILD_MARK: &str = "TOPO_TUNE_IMPORT_CHILD";
/// The longest an hwloc export's import may take (a 32 MiB export takes a few seconds).
pub(crate) const IMPORT_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest reading a `--fsroot` tree may take (a 512-CPU capture takes well under one).
pub(crate) const TREE_TIMEOUT: Duration = Duration::from_secs(60);
/// The child's address space: ample for the largest export topo-tune reads (32 MiB), and a
/// bound on what crafted content makes hwloc allocate (a `cpu/online` of `/dev/zero` once
/// took 4.2 GB).
pub(crate) const CHILD_MEMORY_BYTES: u64 = 2 << 30;

/// From now on, hwloc reads of files and trees run in a child process (the CLI calls this; a
/// library user keeps them in-process).
pub(crate) fn isolate() {
    ISOLATE.store(true, Ordering::SeqCst);
}

/// Whether this process should hand hwloc's work to a child: isolating, and not the child.
pub(crate) fn wanted() -> bool {
    ISOLATE.load(Ordering::SeqCst) && !is_child()
}

/// Whether this process is the child a parent spawned for an import or a tree (which the
/// parent has already checked).
pub(crate) fn is_child() -> bool {
    std::env::var_os(CHILD_MARK).is_some()
}

/// In the child, bound its own memory before hwloc runs (the parent cannot, without
/// `unsafe` code between fork and exec). Called first thing by the entry point.
pub(crate) fn limit_if_child() {
    if is_child() {
        let limit = rustix::process::Rlimit {
            current: Some(CHILD_MEMORY_BYTES),
            maximum: Some(CHILD_MEMORY_BYTES),
        };
        let _ = rustix::process::setrlimit(rustix::process::Resource::As, limit);
    }
}

/// This very binary: `/proc/self/exe` names it even when its file was replaced or removed
/// since it started (a shared deploy directory); its path would not.
pub(crate) fn own_binary() -> std::io::Result<std::path::PathBuf> {
    let proc_exe = Path::new("/proc/self/exe");
    if proc_exe.exists() {
        return Ok(proc_exe.to_path_buf());
    }
    std::env::current_exe()
}

/// Run `exe --output json probe ARGS…` as the marked child, and read its snapshot back
/// through the snapshot's own checks. `refused` makes the error for what it says is wrong
/// with the input; `shown` is the input's name, stripped from the child's own message.
pub(crate) fn probe_in_child(
    exe: &Path,
    args: &[OsString],
    timeout: Duration,
    shown: &str,
    refused: &dyn Fn(String) -> ProbeError,
) -> Result<NodeSnapshot, ProbeError> {
    use std::process::{Command, Stdio};
    let child = Command::new(exe)
        .args(["--output", "json", "probe"])
        .args(args)
        .env(CHILD_MARK, "1")
        .env_remove("TOPO_TUNE_FSROOT")
        .env_remove("TOPO_TUNE_FROM_HWLOC_XML")
        .env_remove("TOPO_TUNE_NVML_FIXTURE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| refused(format!("starting hwloc's reader: {e}")))?;
    // Read the answer while waiting (a full pipe would stall the child), within a limit.
    let pid = rustix::process::Pid::from_child(&child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let timeout = fault_timeout().unwrap_or(timeout);
    let out = match rx.recv_timeout(timeout) {
        Ok(r) => r.map_err(|e| refused(e.to_string()))?,
        Err(_) => {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            return Err(refused(format!(
                "hwloc's reader ran past {} s: stopped, refused",
                timeout.as_secs_f64()
            )));
        }
    };
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&out.status) {
        return Err(refused(format!(
            "hwloc's reader died (signal {signal}) on this input, within its limit of {} GiB of memory: refused",
            CHILD_MEMORY_BYTES >> 30
        )));
    }
    if !out.status.success() {
        return Err(refused(first_error_line(&out.stderr, shown)));
    }
    let text = String::from_utf8(out.stdout).map_err(|_| refused("the reader's answer is not UTF-8".into()))?;
    NodeSnapshot::from_json(&text).map_err(|e| refused(e.to_string()))
}

/// The child's first error line, without what the parent's message says already (the input's
/// name, the reader's).
fn first_error_line(stderr: &[u8], shown: &str) -> String {
    let err = String::from_utf8_lossy(stderr);
    let prefix = format!("{shown}: ");
    let first = err
        .lines()
        .next()
        .unwrap_or("hwloc's reader failed")
        .trim_start_matches("error: ");
    let first = first.trim_start_matches(prefix.as_str());
    let first = first.trim_start_matches(&format!("--fsroot {prefix}"));
    first
        .strip_prefix("hwloc could not read ")
        .map_or(first, |r| r.trim_start_matches(prefix.as_str()))
        .to_string()
}

/// Tests of the containment (built with `--features fault-injection` only): in the child,
/// misbehave as hwloc's C code could, on an input whose name holds the marker —
/// `TOPO_TUNE_FAULT_CRASH_ON` (abort), `TOPO_TUNE_FAULT_HANG_ON` (never return),
/// `TOPO_TUNE_FAULT_HOG_ON` (allocate without end).
#[cfg(feature = "fault-injection")]
pub(crate) fn misbehave_for_tests(input: &Path) {
    let marked = |var: &str| std::env::var(var).is_ok_and(|m| input.display().to_string().contains(&m));
    if marked("TOPO_TUNE_FAULT_CRASH_ON") {
        std::process::abort();
    }
    if marked("TOPO_TUNE_FAULT_HANG_ON") {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    if marked("TOPO_TUNE_FAULT_HOG_ON") {
        let mut held: Vec<Vec<u8>> = Vec::new();
        loop {
            held.push(std::hint::black_box(vec![0u8; 64 << 20]));
        }
    }
}

#[cfg(not(feature = "fault-injection"))]
pub(crate) fn misbehave_for_tests(_input: &Path) {}

/// `TOPO_TUNE_FAULT_CHILD_TIMEOUT_MS`: a shorter limit, for tests of the kill (fault-injection
/// builds only).
#[cfg(feature = "fault-injection")]
fn fault_timeout() -> Option<Duration> {
    std::env::var("TOPO_TUNE_FAULT_CHILD_TIMEOUT_MS")
        .ok()?
        .parse()
        .ok()
        .map(Duration::from_millis)
}

#[cfg(not(feature = "fault-injection"))]
fn fault_timeout() -> Option<Duration> {
    None
}
