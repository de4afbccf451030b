//! Reads one machine: hwloc for CPUs/NUMA/PCI, sysfs for links/NICs/IRQs, procfs for IRQ
//! names, NVML for GPUs — and assembles the NodeSnapshot.

pub(crate) mod assemble;
pub(crate) mod child;
pub(crate) mod fsroot;
pub(crate) mod hwloc;
pub(crate) mod nvml;
pub(crate) mod procfs;
pub(crate) mod sysfs;
pub(crate) mod tree;
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
    /// The tree holds what hwloc must not be given (a FIFO, a device, a link out of it, a file
    /// over the limit), or hwloc's reader of it failed, crashed or ran too long.
    #[error("--fsroot {path}: {reason}")]
    FsrootRefused { path: String, reason: String },
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
            | ProbeError::FsrootRefused { .. }
            | ProbeError::Hwloc(HwlocError::BadXml { .. })
            | ProbeError::NcclTopo(_)
            | ProbeError::NotATopology { .. }
            | ProbeError::Unreadable { .. } => exit::DATA_ERROR,
        };
        let hint = match self {
            ProbeError::FsrootNotSysfs { .. } => {
                Some("--fsroot takes a directory holding sys/ and proc/ laid out like / (see docs/probe.md)")
            }
            ProbeError::FsrootRefused { .. } => Some(
                "a --fsroot tree holds directories, regular files of at most 16 MiB and links that stay inside it, as a copy of /sys and /proc does (see docs/probe.md)",
            ),
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
        Target::Machine { fsroot: Some(root) } if child::wanted() => tree_in_child(root, req.nvml_fixture.as_deref()),
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

/// From now on, hwloc reads of files and `--fsroot` trees run in a child process: if hwloc's
/// C code crashes, hangs or runs away on crafted input, the child ends, not topo-tune (the CLI
/// calls this; a library user keeps them in-process).
pub(crate) fn isolate_imports() {
    child::isolate();
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
    if child::wanted() {
        let exe = child::own_binary().map_err(|e| ProbeError::NotATopology {
            path: path.display().to_string(),
            reason: format!("finding topo-tune's own binary for the import: {e}"),
        })?;
        return import_in_child(&exe, path, fixture);
    }
    child::misbehave_for_tests(path);
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

/// `BIN --output json probe --from-hwloc-xml FILE` in the marked child (see [`child`]).
pub(crate) fn import_in_child(exe: &Path, path: &Path, fixture: Option<&Path>) -> Result<NodeSnapshot, ProbeError> {
    let shown = path.display().to_string();
    let refused = |reason: String| ProbeError::NotATopology {
        path: shown.clone(),
        reason,
    };
    let mut args: Vec<std::ffi::OsString> = vec!["--from-hwloc-xml".into(), path.into()];
    if let Some(f) = fixture {
        args.extend(["--nvml-fixture".into(), f.into()]);
    }
    child::probe_in_child(exe, &args, child::IMPORT_TIMEOUT, &shown, &refused)
}

/// `BIN --output json probe --fsroot DIR` in the marked child, once the tree has passed
/// [`tree::check`] here (so a refusal names its file without starting anything).
fn tree_in_child(root: &Path, fixture: Option<&Path>) -> Result<NodeSnapshot, ProbeError> {
    fs_root(Some(root))?;
    checked_tree(root)?;
    let shown = root.display().to_string();
    let refused = |reason: String| ProbeError::FsrootRefused {
        path: shown.clone(),
        reason,
    };
    let exe = child::own_binary().map_err(|e| refused(format!("finding topo-tune's own binary: {e}")))?;
    let mut args: Vec<std::ffi::OsString> = vec!["--fsroot".into(), root.into()];
    if let Some(f) = fixture {
        args.extend(["--nvml-fixture".into(), f.into()]);
    }
    child::probe_in_child(&exe, &args, child::TREE_TIMEOUT, &shown, &refused)
}

fn checked_tree(root: &Path) -> Result<(), ProbeError> {
    tree::check(root).map_err(|e| ProbeError::FsrootRefused {
        path: root.display().to_string(),
        reason: e.to_string(),
    })
}

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
    if let Some(root) = fsroot {
        // The parent walked the tree before it spawned this child: walk it once.
        if !child::is_child() {
            checked_tree(root)?;
        }
        child::misbehave_for_tests(root);
    }
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
