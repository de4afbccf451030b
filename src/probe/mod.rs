//! Reads one machine: hwloc for CPUs/NUMA/PCI, sysfs for links/NICs/IRQs, procfs for IRQ
//! names, NVML for GPUs — and assembles the NodeSnapshot.

pub(crate) mod assemble;
pub(crate) mod fsroot;
pub(crate) mod hwloc;
pub(crate) mod nvml;
pub(crate) mod procfs;
pub(crate) mod sysfs;
pub(crate) mod xml;

use crate::model::snapshot::{NodeSnapshot, SnapshotSource, SourceKind};
use crate::model::Refusal;
use assemble::{Gathered, SysView};
use fsroot::FsRoot;
use nvml::GpuDriver;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What to probe.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// This machine (`fsroot = None`) or a `/sys` + `/proc` tree under a directory.
    Machine { fsroot: Option<PathBuf> },
    /// An hwloc XML export (an NCCL topology file is recognised and read too).
    HwlocXml(PathBuf),
    /// An NCCL topology file (`NCCL_TOPO_FILE` format) and nothing else.
    NcclTopo(PathBuf),
}

#[derive(Debug, Clone)]
pub(crate) struct ProbeRequest {
    pub(crate) target: Target,
    /// Recorded NVML answers to use instead of the driver (tests, replays).
    pub(crate) nvml_fixture: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    #[error("--fsroot {0}: no such directory")]
    FsrootMissing(String),
    #[error("--fsroot {path}: not a sysfs/procfs tree ({missing} is missing)")]
    FsrootNotSysfs { path: String, missing: String },
    #[error("{0}: no such file")]
    InputMissing(String),
    #[error(transparent)]
    Hwloc(#[from] hwloc::HwlocError),
    #[error(transparent)]
    Driver(#[from] nvml::DriverError),
    #[error(transparent)]
    NcclTopo(#[from] nccl_topo::NcclTopoError),
    #[error("{path}: {reason}")]
    NotATopology { path: String, reason: String },
    /// The file is there but is not one topo-tune reads (a FIFO, too large, not UTF-8).
    #[error("{path}: {reason}")]
    Unreadable { path: String, reason: String },
}

impl crate::exit::Classify for ProbeError {
    fn classify(&self) -> crate::exit::Class {
        use crate::exit::{self, Class};
        use hwloc::HwlocError;
        use nvml::DriverError;
        let code = match self {
            ProbeError::FsrootMissing(_) | ProbeError::InputMissing(_) => exit::NO_INPUT,
            ProbeError::Hwloc(HwlocError::Discovery(_)) => exit::UNAVAILABLE,
            ProbeError::Driver(DriverError::Fixture { .. }) => exit::DATA_ERROR,
            ProbeError::Driver(_) => exit::UNAVAILABLE,
            ProbeError::FsrootNotSysfs { .. }
            | ProbeError::Hwloc(HwlocError::BadXml { .. })
            | ProbeError::NcclTopo(_)
            | ProbeError::NotATopology { .. }
            | ProbeError::Unreadable { .. } => exit::DATA_ERROR,
        };
        let hint = match self {
            ProbeError::FsrootNotSysfs { .. } => {
                Some("--fsroot takes a directory holding sys/ and proc/ laid out like / (see docs/probe.md)")
            }
            ProbeError::Hwloc(HwlocError::BadXml { .. }) => {
                Some("make the file with hwloc 2.x: `lstopo --whole-io --of xml node.xml`")
            }
            ProbeError::Hwloc(HwlocError::Discovery(_)) => {
                Some("topo-tune needs libhwloc 2.x (Debian/Ubuntu: libhwloc15; RHEL: hwloc-libs)")
            }
            ProbeError::NotATopology { .. } => Some(
                "give an hwloc export (`lstopo --whole-io --of xml node.xml`) or an NCCL topology file (`NCCL_TOPO_DUMP_FILE=node.xml`)",
            ),
            ProbeError::NcclTopo(_) => Some("see docs/probe.md for what topo-tune reads from an NCCL topology file"),
            _ => None,
        };
        Class {
            code,
            kind: "probe",
            hint: hint.map(str::to_string),
        }
    }
}

pub(crate) fn probe(req: &ProbeRequest) -> Result<NodeSnapshot, ProbeError> {
    match &req.target {
        Target::HwlocXml(path) => probe_xml(path, req.nvml_fixture.as_deref()),
        Target::NcclTopo(path) => probe_nccl_topo(path),
        Target::Machine { fsroot } => probe_machine(fsroot.as_deref(), req.nvml_fixture.as_deref()),
    }
}

/// A topology file from an artifact (a plan's class, a rollout record's candidate), before it
/// is written as `NCCL_TOPO_FILE`: an NCCL topology (`<system>`) topo-tune reads back, no
/// larger than the most it reads of one of its files.
pub(crate) fn check_topology_artifact(xml: &str, origin: &str) -> Result<(), Refusal> {
    let limit = crate::model::files::FILE_LIMIT;
    if xml.len() as u64 > limit {
        return Err(Refusal(format!(
            "{origin} is {} bytes, larger than the {} MiB topo-tune reads back of a file it writes",
            xml.len(),
            limit >> 20
        )));
    }
    if xml::kind_of(xml) != xml::XmlKind::NcclTopology {
        return Err(Refusal(format!("{origin} is not an NCCL topology (<system>)")));
    }
    snapshot_from_xml_text(xml, origin, Some("plan")).map_err(|e| Refusal(format!("{origin}: {e}")))?;
    Ok(())
}

/// A machine described by a file: an hwloc export or an NCCL topology file, told apart by
/// the root element (`hostname`: the name to give it; the file's own, or its stem, if none).
pub(crate) fn snapshot_from_xml_text(
    text: &str,
    origin: &str,
    hostname: Option<&str>,
) -> Result<NodeSnapshot, ProbeError> {
    use xml::XmlKind;
    let stem = || {
        Path::new(origin)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("unknown")
            .to_string()
    };
    let snap = match xml::kind_of(text) {
        XmlKind::NcclTopology | XmlKind::NcclGraph => {
            let name = hostname.map_or_else(stem, str::to_string);
            nccl_topo::snapshot_from_text(text, Path::new(origin), &name)?
        }
        XmlKind::Hwloc => {
            let view = hwloc::from_xml_text(text, origin)?;
            let mut snap = snapshot_from_hwloc_view(view, origin);
            if let Some(h) = hostname {
                snap.hostname = h.to_string();
            }
            snap
        }
        XmlKind::Other(root) => Err(ProbeError::NotATopology {
            path: origin.to_string(),
            reason: if root.is_empty() {
                "no XML element in it: not an hwloc XML export (<topology>) nor an NCCL topology file (<system>)".into()
            } else {
                format!(
                    "root element <{root}>: not an hwloc XML export (<topology>) nor an NCCL topology file (<system>)"
                )
            },
        })?,
    };
    checked(snap, origin)
}

fn read_input(path: &Path) -> Result<String, ProbeError> {
    if !path.exists() {
        return Err(ProbeError::InputMissing(path.display().to_string()));
    }
    crate::input::read_text(path, crate::input::TOPOLOGY_LIMIT, "topology file").map_err(|e| ProbeError::Unreadable {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn probe_nccl_topo(path: &Path) -> Result<NodeSnapshot, ProbeError> {
    let text = read_input(path)?;
    let origin = path.display().to_string();
    match xml::kind_of(&text) {
        xml::XmlKind::Hwloc => Err(ProbeError::NotATopology {
            path: origin,
            reason: "this is an hwloc export (<topology> root), not an NCCL topology file: use --from-hwloc-xml".into(),
        }),
        _ => snapshot_from_xml_text(&text, &origin, None),
    }
}

/// Set by the command-line entry point: hwloc imports of files run in a child process.
static ISOLATE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Marks the child that does the import (it must not isolate again).
const IMPORT_CHILD: &str = "TOPO_TUNE_IMPORT_CHILD";
/// The longest an isolated import may take.
const IMPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// From now on, import hwloc exports given as files in a child process: if hwloc's C code
/// crashes on a crafted file, the child dies, not topo-tune (the CLI calls this; a library
/// user keeps imports in-process).
pub(crate) fn isolate_imports() {
    ISOLATE.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// A machine described by a file: an hwloc export (isolated, see [`isolate_imports`]) or an
/// NCCL topology file.
pub(crate) fn snapshot_of_file(path: &Path) -> Result<NodeSnapshot, ProbeError> {
    probe_xml(path, None)
}

fn probe_xml(path: &Path, fixture: Option<&Path>) -> Result<NodeSnapshot, ProbeError> {
    let text = read_input(path)?;
    if xml::kind_of(&text) != xml::XmlKind::Hwloc {
        // An NCCL topology file (or something else): no driver answers apply to it.
        return snapshot_from_xml_text(&text, &path.display().to_string(), None);
    }
    if ISOLATE.load(std::sync::atomic::Ordering::SeqCst) && std::env::var_os(IMPORT_CHILD).is_none() {
        // /proc/self/exe names this very binary even when its file was replaced or removed
        // since it started (a shared deploy directory); its path would not.
        let proc_exe = Path::new("/proc/self/exe");
        let exe = if proc_exe.exists() {
            proc_exe.to_path_buf()
        } else {
            std::env::current_exe().map_err(|e| ProbeError::NotATopology {
                path: path.display().to_string(),
                reason: format!("finding topo-tune's own binary for the import: {e}"),
            })?
        };
        return import_in_child(&exe, path, fixture);
    }
    crash_for_tests(path);
    let view = hwloc::from_xml_text(&text, &path.display().to_string())?;
    let driver = nvml::driver_for(fixture, false).report();
    // A broken fixture is the operator's input: report it rather than quietly ignoring it.
    if let Err(e @ nvml::DriverError::Fixture { .. }) = &driver {
        return Err(e.clone().into());
    }
    let snap = assemble_xml(view, &path.display().to_string(), driver, fixture.is_some());
    checked(snap, &path.display().to_string())
}

/// A snapshot made from a file is input from outside: its names and counts meet the
/// snapshot's grammar (`model::snapshot_check`) or it is refused with the field named.
fn checked(snap: NodeSnapshot, origin: &str) -> Result<NodeSnapshot, ProbeError> {
    crate::model::snapshot_check::check(&snap).map_err(|e| ProbeError::NotATopology {
        path: origin.to_string(),
        reason: format!("refused: {e}"),
    })?;
    Ok(snap)
}

/// `BIN --output json probe --from-hwloc-xml FILE` in a child marked as the importer: its
/// envelope carries the snapshot, read back through the snapshot's own checks. A child that
/// dies on a signal (hwloc crashed) or runs too long is a refusal of that file, not a crash.
pub(crate) fn import_in_child(exe: &Path, path: &Path, fixture: Option<&Path>) -> Result<NodeSnapshot, ProbeError> {
    use std::process::{Command, Stdio};
    let refused = |reason: String| ProbeError::NotATopology {
        path: path.display().to_string(),
        reason,
    };
    let mut cmd = Command::new(exe);
    cmd.args(["--output", "json", "probe", "--from-hwloc-xml"]).arg(path);
    if let Some(f) = fixture {
        cmd.arg("--nvml-fixture").arg(f);
    }
    let child = cmd
        .env(IMPORT_CHILD, "1")
        .env_remove("TOPO_TUNE_FSROOT")
        .env_remove("TOPO_TUNE_NVML_FIXTURE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| refused(format!("starting the import: {e}")))?;
    // Read the answer while waiting (a full pipe would stall the child), within a limit.
    let pid = rustix::process::Pid::from_child(&child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(IMPORT_TIMEOUT) {
        Ok(r) => r.map_err(|e| refused(e.to_string()))?,
        Err(_) => {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            return Err(refused(format!(
                "the import ran past {} s: refused",
                IMPORT_TIMEOUT.as_secs()
            )));
        }
    };
    if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&out.status) {
        return Err(refused(format!(
            "hwloc's import died (signal {signal}) on this file: refused"
        )));
    }
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let shown = format!("{}: ", path.display());
        let first = err
            .lines()
            .next()
            .unwrap_or("the import failed")
            .trim_start_matches("error: ");
        // The child names the file already, and may name the reader too.
        let first = first.trim_start_matches(shown.as_str());
        let first = first
            .strip_prefix("hwloc could not read ")
            .map_or(first, |r| r.trim_start_matches(shown.as_str()));
        return Err(refused(first.to_string()));
    }
    let text = String::from_utf8(out.stdout).map_err(|_| refused("the import's answer is not UTF-8".into()))?;
    NodeSnapshot::from_json(&text).map_err(|e| refused(e.to_string()))
}

/// Tests of crash isolation (built with `--features fault-injection` only): die as a crash
/// in the C library would, on a file whose path holds `TOPO_TUNE_FAULT_CRASH_ON`.
#[cfg(feature = "fault-injection")]
fn crash_for_tests(path: &Path) {
    if let Ok(marker) = std::env::var("TOPO_TUNE_FAULT_CRASH_ON") {
        if path.display().to_string().contains(&marker) {
            std::process::abort();
        }
    }
}

#[cfg(not(feature = "fault-injection"))]
fn crash_for_tests(_path: &Path) {}

/// A snapshot from an hwloc XML view with no driver answers (simulated nodes).
pub(crate) fn snapshot_from_hwloc_view(view: hwloc::HwlocView, origin: &str) -> NodeSnapshot {
    assemble_xml(view, origin, nvml::NoDriver.report(), false)
}

fn assemble_xml(
    view: hwloc::HwlocView,
    origin: &str,
    driver: Result<nvml::DriverReport, nvml::DriverError>,
    driver_queried: bool,
) -> NodeSnapshot {
    let hostname = view.hostname.clone().unwrap_or_else(|| {
        Path::new(origin)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("unknown")
            .to_string()
    });
    let kernel = view.kernel.clone();
    assemble::assemble(Gathered {
        view,
        sys: None,
        driver,
        driver_queried,
        source: SnapshotSource {
            kind: SourceKind::HwlocXml,
            path: Some(origin.to_string()),
        },
        hostname,
        kernel,
    })
}

/// The tree a probe reads: this machine's, or a directory that holds a `/sys` tree.
fn fs_root(fsroot: Option<&Path>) -> Result<FsRoot, ProbeError> {
    let Some(root) = fsroot else {
        return Ok(FsRoot::live());
    };
    if !root.is_dir() {
        return Err(ProbeError::FsrootMissing(root.display().to_string()));
    }
    let fs = FsRoot::new(root);
    for required in ["/sys/devices/system/cpu", "/sys/bus/pci/devices"] {
        if !fs.exists(required) {
            return Err(ProbeError::FsrootNotSysfs {
                path: root.display().to_string(),
                missing: required.trim_start_matches('/').to_string(),
            });
        }
    }
    Ok(fs)
}

/// What sysfs and procfs say of the devices hwloc found: PCI facts, RDMA devices, netdevs,
/// interrupts and their affinities.
fn sys_view(fs: &FsRoot, view: &hwloc::HwlocView) -> SysView {
    let mut pci = HashMap::new();
    for bdf in view
        .bridges
        .iter()
        .map(|b| b.bdf)
        .chain(view.devices.iter().map(|d| d.bdf))
    {
        pci.insert(bdf, sysfs::pci_facts(fs, bdf));
    }
    let interrupts = fs
        .read_required("/proc/interrupts")
        .map_err(|e| crate::model::Refusal(format!("/proc/interrupts: {e}")))
        .and_then(|text| {
            procfs::Interrupts::parse(&text).map_err(|e| crate::model::Refusal(format!("/proc/interrupts:{e}")))
        });
    let mut irq_affinity = HashMap::new();
    for facts in pci.values() {
        for &irq in &facts.msi_irqs {
            irq_affinity.insert(irq, sysfs::irq_facts(fs, irq));
        }
    }
    SysView {
        pci,
        rdma: sysfs::rdma_devices(fs),
        netdevs: sysfs::pci_netdevs(fs),
        interrupts: Some(interrupts),
        irq_affinity,
    }
}

fn probe_machine(fsroot: Option<&Path>, fixture: Option<&Path>) -> Result<NodeSnapshot, ProbeError> {
    let fs = fs_root(fsroot)?;
    let view = hwloc::discover(fsroot)?;
    let sys = sys_view(&fs, &view);
    let is_live = fsroot.is_none();
    let driver = nvml::driver_for(fixture, is_live).report();
    if let Err(e @ nvml::DriverError::Fixture { .. }) = &driver {
        return Err(e.clone().into());
    }
    // hwloc's HostName/OSRelease come from uname() of the machine running us: only true live.
    let hostname = fs
        .read_trimmed("/proc/sys/kernel/hostname")
        .or_else(|| if is_live { view.hostname.clone() } else { None })
        .unwrap_or_else(|| "localhost".to_string());
    let kernel =
        fs.read_trimmed("/proc/sys/kernel/osrelease")
            .or_else(|| if is_live { view.kernel.clone() } else { None });
    let source = match fsroot {
        Some(root) => SnapshotSource {
            kind: SourceKind::Fsroot,
            path: Some(root.display().to_string()),
        },
        None => SnapshotSource {
            kind: SourceKind::Live,
            path: None,
        },
    };
    let mut snap = assemble::assemble(Gathered {
        view,
        sys: Some(sys),
        driver,
        driver_queried: is_live || fixture.is_some(),
        source,
        hostname,
        kernel,
    });
    // Only this machine's loader knows its NCCL; a described machine keeps it unknown.
    if is_live {
        snap.nccl_version = nccl_lib::installed_version();
    }
    Ok(snap)
}
pub(crate) mod nccl_lib;
pub(crate) mod nccl_topo;
