//! Simulated nodes: a snapshot made from a bundled profile, an hwloc XML export, or an NCCL
//! topology file (`simulate:` in cluster.yaml). No machine is touched. Each source is read
//! once per run, whatever the number of nodes made from it. In the `topo-tune` binary an hwloc
//! export that is not a bundled profile is imported by a child process: if the C library
//! crashes on a crafted file, that node fails and the others go on.

use super::{Failure, FailureKind};
use crate::config::{profile_xml, NodeSpec};
use crate::model::NodeSnapshot;
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Set by the command-line entry point: hwloc imports of operator files run in a child.
static ISOLATE: AtomicBool = AtomicBool::new(false);

/// Import hwloc exports given as files in a child process from now on (the CLI calls this;
/// a library user keeps imports in-process).
pub fn isolate_hwloc_imports() {
    ISOLATE.store(true, Ordering::SeqCst);
}

/// The longest an isolated import may take.
const IMPORT_TIMEOUT: Duration = Duration::from_secs(300);

type Cached = Result<Arc<NodeSnapshot>, Failure>;

/// One slot per source: concurrent requests for the same source wait for one reading.
fn slot(source: &str) -> Arc<OnceLock<Cached>> {
    static SOURCES: OnceLock<Mutex<HashMap<String, Arc<OnceLock<Cached>>>>> = OnceLock::new();
    let map = SOURCES.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    Arc::clone(map.entry(source.to_string()).or_default())
}

pub fn snapshot(node: &NodeSpec) -> Result<NodeSnapshot, Failure> {
    let source = node
        .simulate
        .as_deref()
        .ok_or_else(|| Failure::new(FailureKind::SimulationFailed, "no `simulate:` source"))?;
    from_source(source, &node.host)
}

/// A snapshot named `hostname` from a profile name or a topology file path.
pub fn from_source(source: &str, hostname: &str) -> Result<NodeSnapshot, Failure> {
    let cached = slot(source).get_or_init(|| read_source(source).map(Arc::new)).clone()?;
    let mut snap = (*cached).clone();
    snap.hostname = hostname.to_string();
    Ok(snap)
}

fn read_source(source: &str) -> Result<NodeSnapshot, Failure> {
    let failed = |m: String| Failure::new(FailureKind::SimulationFailed, m);
    if let Some(text) = profile_xml(source) {
        return crate::probe::snapshot_from_xml_text(text, &format!("profile:{source}"), Some("simulated"))
            .map_err(|e| failed(e.to_string()));
    }
    let path = std::path::Path::new(source);
    let text = crate::input::read_text(path, crate::input::TOPOLOGY_LIMIT, "topology file")
        .map_err(|e| failed(format!("simulate: {source}: {e}")))?;
    let hwloc = crate::probe::nccl_topo::kind_of(&text) == crate::probe::nccl_topo::XmlKind::Hwloc;
    if hwloc && ISOLATE.load(Ordering::SeqCst) {
        return import_in_child(path);
    }
    crate::probe::snapshot_from_xml_text(&text, source, Some("simulated")).map_err(|e| failed(e.to_string()))
}

/// `topo-tune --output json probe --from-hwloc-xml FILE` in a child: its envelope carries
/// the snapshot, read back through the snapshot's own checks.
fn import_in_child(path: &std::path::Path) -> Result<NodeSnapshot, Failure> {
    let failed = |m: String| {
        Failure::new(
            FailureKind::SimulationFailed,
            format!("simulate: {}: {m}", path.display()),
        )
    };
    let exe = std::env::current_exe().map_err(|e| failed(format!("finding topo-tune's own binary: {e}")))?;
    let child = Command::new(exe)
        .args(["--output", "json", "probe", "--from-hwloc-xml"])
        .arg(path)
        .env_remove("TOPO_TUNE_NVML_FIXTURE")
        .env_remove("TOPO_TUNE_FSROOT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(format!("starting the import: {e}")))?;
    // Read the answer while waiting (a full pipe would stall the child), within a limit.
    let pid = rustix::process::Pid::from_child(&child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(IMPORT_TIMEOUT) {
        Ok(r) => r.map_err(|e| failed(e.to_string()))?,
        Err(_) => {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            return Err(failed(format!(
                "the import ran past {} s: refused",
                IMPORT_TIMEOUT.as_secs()
            )));
        }
    };
    let status = out.status;
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
        return Err(failed(format!(
            "the hwloc import died (signal {signal}) on this file: refused; the other nodes go on"
        )));
    }
    if !status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err
            .lines()
            .next()
            .unwrap_or("the import failed")
            .trim_start_matches("error: ");
        return Err(failed(first.to_string()));
    }
    let text = String::from_utf8(out.stdout).map_err(|_| failed("the import's answer is not UTF-8".into()))?;
    NodeSnapshot::from_json(&text).map_err(|e| failed(e.to_string()))
}
