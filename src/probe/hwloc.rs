//! hwloc: CPUs, NUMA nodes and the PCI tree (I/O discovery on), from the live machine, a
//! fake `/sys` tree (`HWLOC_FSROOT`), or an hwloc XML export.

use crate::model::pci::Bdf;
use crate::model::snapshot::{NumaNode, PciParent};
use crate::model::CpuList;
use hwlocality::object::attributes::{DownstreamAttributes, ObjectAttributes, UpstreamAttributes};
use hwlocality::object::types::{BridgeType, OSDeviceType, ObjectType};
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::{BuildFlags, TypeFilter};
use hwlocality::Topology;
use std::path::Path;
use std::sync::Mutex;

/// One hwloc import at a time: libxml2's global state is not ours to race on.
static HWLOC_IMPORT: Mutex<()> = Mutex::new(());

#[derive(Debug, thiserror::Error)]
pub(crate) enum HwlocError {
    #[error("hwloc could not read {path}: {reason}")]
    BadXml { path: String, reason: String },
    #[error("hwloc could not discover the topology: {0}")]
    Discovery(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HwlocView {
    pub(crate) hostname: Option<String>,
    pub(crate) product: Option<String>,
    pub(crate) architecture: Option<String>,
    pub(crate) kernel: Option<String>,
    pub(crate) cpu_model: Option<String>,
    pub(crate) packages: u32,
    pub(crate) cores: u32,
    pub(crate) pus: u32,
    pub(crate) cpus: CpuList,
    pub(crate) numa_nodes: Vec<NumaNode>,
    pub(crate) host_bridges: Vec<HwHostBridge>,
    pub(crate) bridges: Vec<HwBridge>,
    pub(crate) devices: Vec<HwPciDevice>,
    /// hwloc's `NVLinkBandwidth` matrix (its NVML backend), when the export has one.
    pub(crate) nvlink_matrix: Option<HwNvlinkMatrix>,
}

/// hwloc's `NVLinkBandwidth` matrix: the GPUs it covers and its non-zero off-diagonal cells.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct HwNvlinkMatrix {
    pub(crate) gpus: Vec<Bdf>,
    pub(crate) cells: Vec<HwNvlinkBandwidth>,
}

impl HwNvlinkMatrix {
    /// The first GPU pair whose two cells differ: an NVLink carries the same in both
    /// directions, and hwloc's NVML backend writes both cells from one link count, so an
    /// asymmetric matrix was edited — and would turn the ring toward the larger cell.
    pub(crate) fn asymmetry(&self) -> Option<String> {
        let cell = |a: Bdf, b: Bdf| {
            self.cells
                .iter()
                .find(|c| c.gpu == a && c.peer == NvlinkPeerEnd::Gpu(b))
                .map_or(0, |c| c.mbps)
        };
        self.cells.iter().find_map(|c| {
            let NvlinkPeerEnd::Gpu(peer) = c.peer else { return None };
            let back = cell(peer, c.gpu);
            (back != c.mbps).then(|| {
                format!(
                    "NVLinkBandwidth: {} to {} is {} MB/s but {} to {} is {back}: an NVLink carries the same both ways",
                    c.gpu, peer, c.mbps, peer, c.gpu
                )
            })
        })
    }
}

/// One off-diagonal cell of hwloc's `NVLinkBandwidth` matrix: MB/s from a GPU to a peer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HwNvlinkBandwidth {
    /// The GPU's PCI function (the NVML OS device's parent).
    pub(crate) gpu: Bdf,
    pub(crate) peer: NvlinkPeerEnd,
    /// Unidirectional MB/s: hwloc's 20,000 (NVLink 1), 25,000 (NVLink 2–4) or 50,000
    /// (NVLink 5) per link, summed over the links between the two.
    pub(crate) mbps: u64,
}

/// What is at the other end of a GPU's NVLinks in hwloc's matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NvlinkPeerEnd {
    Gpu(Bdf),
    /// A PCI object hwloc marks as an NVSwitch.
    Switch(Bdf),
    /// A CPU-side object (an IBM NPU, NVLink to the CPU).
    Cpu,
}

/// Locality of an I/O object: the CPUs and NUMA nodes of its first non-I/O ancestor.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Locality {
    pub(crate) cpus: CpuList,
    pub(crate) nodes: Vec<u32>,
    /// The ancestor is the whole machine: hwloc knows no closer locality (e.g. `numa_node = -1`).
    pub(crate) whole_machine: bool,
}

impl Locality {
    /// A single NUMA node, claimed only when hwloc attached the object below the machine level.
    pub(crate) fn numa_node(&self) -> Option<u32> {
        match self.nodes.as_slice() {
            [one] if !self.whole_machine => Some(*one),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HwHostBridge {
    pub(crate) id: String,
    pub(crate) domain: u32,
    pub(crate) first_bus: u8,
    pub(crate) last_bus: u8,
    pub(crate) locality: Locality,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HwBridge {
    pub(crate) bdf: Bdf,
    pub(crate) parent: PciParent,
    pub(crate) vendor: u16,
    pub(crate) device: u16,
    pub(crate) secondary_bus: u8,
    pub(crate) subordinate_bus: u8,
    pub(crate) link_gbps: f32,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HwPciDevice {
    pub(crate) bdf: Bdf,
    pub(crate) parent: PciParent,
    pub(crate) host_bridge: String,
    pub(crate) vendor: u16,
    pub(crate) device: u16,
    /// Class as hwloc stores it: base class and subclass (`0x0302`).
    pub(crate) class_id: u16,
    pub(crate) revision: u8,
    pub(crate) link_gbps: f32,
    /// `PCIDevice` info (from pci.ids), e.g. `GH100 [H200 SXM 141GB]`.
    pub(crate) name: Option<String>,
    pub(crate) locality: Locality,
    pub(crate) os_devices: Vec<HwOsDevice>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HwOsDevice {
    pub(crate) name: String,
    pub(crate) kind: OsDevKind,
    pub(crate) infos: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OsDevKind {
    Network,
    OpenFabrics,
    Other,
}

/// Discover the running machine, or the tree under `fsroot` when given.
pub(crate) fn discover(fsroot: Option<&Path>) -> Result<HwlocView, HwlocError> {
    let topology = match fsroot {
        // The x86 backend reads CPUID of the machine we run on, which would leak into a
        // description of another machine.
        Some(root) => with_fsroot(root, || {
            builder()?
                .without_component("x86")
                .map_err(|e| HwlocError::Discovery(e.to_string()))?
                .build()
                .map_err(|e| HwlocError::Discovery(e.to_string()))
        })??,
        None => builder()?.build().map_err(|e| HwlocError::Discovery(e.to_string()))?,
    };
    Ok(view(&topology))
}

/// hwloc 2 takes a fake root only from `HWLOC_FSROOT` (no API sets it). Changing the
/// environment races with any thread reading it, so it is done only while this process runs
/// one thread: the command line's main thread, before any runtime or child thread starts.
/// Every caller is there (`probe`, local `irq-pin`/`doctor`, the node side); a caller from
/// a threaded context gets an error instead of a data race.
fn with_fsroot<T>(root: &Path, f: impl FnOnce() -> T) -> Result<T, HwlocError> {
    if threads_in_process() != Some(1) {
        return Err(HwlocError::Discovery(
            "a --fsroot tree can only be read before other threads start (internal error: please report it)".into(),
        ));
    }
    std::env::set_var("HWLOC_FSROOT", root);
    let out = f();
    std::env::remove_var("HWLOC_FSROOT");
    Ok(out)
}

/// `Threads:` of /proc/self/status.
fn threads_in_process() -> Option<u32> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// Load hwloc XML from memory; `origin` names it in errors.
pub(crate) fn from_xml_text(text: &str, origin: &str) -> Result<HwlocView, HwlocError> {
    let bad = |reason: String| HwlocError::BadXml {
        path: origin.to_string(),
        reason,
    };
    if !text.contains("<topology") {
        return Err(bad("no <topology> element: not an hwloc XML export".into()));
    }
    if let Some(v) = export_version(text).filter(|v| {
        v.split('.')
            .next()
            .is_some_and(|m| m.parse::<u32>().is_ok_and(|m| m >= 3))
    }) {
        return Err(bad(format!(
            "an hwloc {v} export: the libhwloc 2.x topo-tune is built on cannot read XML format {v}; export it again for hwloc 2 with hwloc 3's `lstopo --of v2xml FILE.xml` (or with any hwloc 2.x `lstopo FILE.xml`)"
        )));
    }
    precheck(text).map_err(|r| bad(r.0))?;
    let _guard = HWLOC_IMPORT.lock().unwrap_or_else(|e| e.into_inner());
    let topology = builder()?
        .from_xml(text)
        .map_err(|e| {
            bad(format!(
                "{e} (hwloc 2.x reads XML v2 exports; run `lstopo --of xml` with hwloc 2)"
            ))
        })?
        .build()
        .map_err(|e| bad(e.to_string()))?;
    let root = topology.root_object();
    let cpus_ok = root
        .cpuset()
        .is_none_or(|s| finite(s.weight(), s.last_set().map(usize::from)));
    let nodes_ok = root
        .nodeset()
        .is_none_or(|s| finite(s.weight(), s.last_set().map(usize::from)));
    if !cpus_ok || !nodes_ok {
        return Err(bad(format!(
            "the machine's CPU or NUMA set is infinite or names ids beyond {}: refused",
            crate::model::cpulist::MAX_ID
        )));
    }
    let view = view(&topology);
    if let Some(why) = view.nvlink_matrix.as_ref().and_then(HwNvlinkMatrix::asymmetry) {
        return Err(bad(format!("{why}: refused")));
    }
    Ok(view)
}

/// The `version` of the export's `<topology>` element (`2.0`, `3.0`), if it says.
fn export_version(text: &str) -> Option<String> {
    let start = text.find("<topology")?;
    let tag = &text[start..text[start..].find('>').map_or(text.len(), |e| start + e)];
    let v = tag.split("version=").nth(1)?;
    let quote = v.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let v = &v[1..];
    let end = v.find(quote)?;
    Some(v[..end].chars().take(16).collect())
}

/// What hwloc's importer must never see: a document that is not well-formed (a truncated
/// export would otherwise read as a smaller machine), an internal DTD or entities (libxml2
/// has crashed on them), or nesting deeper than any machine has.
fn precheck(text: &str) -> Result<(), crate::model::Refusal> {
    if let Some(i) = text.find("<!DOCTYPE") {
        let decl = &text[i..text[i..].find('>').map_or(text.len(), |e| i + e)];
        if decl.contains('[') || text.contains("<!ENTITY") {
            return Err(crate::model::Refusal(
                "an internal DTD or entity declarations: refused (hwloc exports have neither)".into(),
            ));
        }
    }
    if super::xml::nesting_exceeds(text, MAX_DEPTH) {
        return Err(crate::model::Refusal(format!(
            "elements nested more than {MAX_DEPTH} deep: refused"
        )));
    }
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        nodes_limit: 10_000_000,
    };
    let doc = roxmltree::Document::parse_with_options(text, opts).map_err(|e| {
        crate::model::Refusal(format!(
            "not well-formed XML ({e}): a truncated or damaged export is not read as a machine"
        ))
    })?;
    // Every set hwloc writes comes with its `complete_` twin; its importer crashes on an
    // object that has one without the other (found by the fuzz harness).
    for n in doc.descendants().filter(|n| n.has_tag_name("object")) {
        for set in ["cpuset", "nodeset"] {
            if n.attribute(set).is_some() && n.attribute(format!("complete_{set}").as_str()).is_none() {
                return Err(crate::model::Refusal(format!(
                    "an object with a {set} but no complete_{set} (line {}): not what hwloc exports; refused",
                    doc.text_pos_at(n.range().start).row
                )));
            }
        }
    }
    // hwloc writes an infinite set as `0xf...f`: no machine has one.
    let infinite = doc
        .descendants()
        .flat_map(|n| n.attributes())
        .find(|a| a.name().ends_with("set") && a.value().contains("..."));
    if let Some(a) = infinite {
        return Err(crate::model::Refusal(format!(
            "an infinite CPU or NUMA set ({}=\"{}\"): refused",
            a.name(),
            a.value()
        )));
    }
    Ok(())
}

/// Deeper than any real hwloc export (PCI trees are a dozen levels).
const MAX_DEPTH: usize = 256;

fn builder() -> Result<hwlocality::topology::builder::TopologyBuilder, HwlocError> {
    Topology::builder()
        .with_io_type_filter(TypeFilter::KeepAll)
        .map_err(|e| HwlocError::Discovery(e.to_string()))?
        .with_flags(BuildFlags::INCLUDE_DISALLOWED)
        .map_err(|e| HwlocError::Discovery(e.to_string()))
}

fn info(obj: &TopologyObject, key: &str) -> Option<String> {
    obj.info(key)
        .and_then(|c| c.to_str().ok())
        .map(str::to_string)
        .filter(|s| !s.is_empty())
}

/// The object's CPUs; an infinite or out-of-range set (a crafted export) reads as none —
/// `from_xml_text` refuses such an export before it gets here.
fn cpulist_of(obj: &TopologyObject) -> CpuList {
    obj.cpuset()
        .filter(|set| finite(set.weight(), set.last_set().map(usize::from)))
        .map(|set| CpuList::from_ids(set.iter_set().map(|i| usize::from(i) as u32)))
        .unwrap_or_default()
}

/// A bitmap topo-tune may iterate: finite, and no id beyond [`crate::model::cpulist::MAX_ID`].
fn finite(weight: Option<usize>, last: Option<usize>) -> bool {
    weight.is_some() && last.is_none_or(|l| l <= crate::model::cpulist::MAX_ID as usize)
}

fn locality_of(obj: &TopologyObject) -> Locality {
    match obj.first_non_io_ancestor() {
        Some(anc) => Locality {
            cpus: cpulist_of(anc),
            nodes: anc
                .nodeset()
                .filter(|s| finite(s.weight(), s.last_set().map(usize::from)))
                .map(|s| s.iter_set().map(|i| usize::from(i) as u32).collect())
                .unwrap_or_default(),
            whole_machine: anc.parent().is_none(),
        },
        None => Locality::default(),
    }
}

fn bdf_of(obj: &TopologyObject) -> Option<(Bdf, u16, u16, u16, u8, f32)> {
    let attrs = match obj.attributes()? {
        ObjectAttributes::PCIDevice(p) => *p,
        ObjectAttributes::Bridge(b) => match b.upstream_attributes()? {
            UpstreamAttributes::PCI(p) => *p,
        },
        _ => return None,
    };
    let bdf = Bdf {
        domain: u32::from(attrs.domain()),
        bus: attrs.bus_id(),
        device: attrs.bus_device(),
        function: attrs.function(),
    };
    Some((
        bdf,
        attrs.vendor_id(),
        attrs.device_id(),
        attrs.class_id(),
        attrs.revision(),
        attrs.link_speed(),
    ))
}

fn is_host_bridge(obj: &TopologyObject) -> bool {
    matches!(obj.attributes(), Some(ObjectAttributes::Bridge(b)) if b.upstream_type() == BridgeType::Host)
}

fn host_bridge_id(obj: &TopologyObject) -> Option<(String, u32, u8, u8)> {
    let Some(ObjectAttributes::Bridge(b)) = obj.attributes() else {
        return None;
    };
    match b.downstream_attributes()? {
        DownstreamAttributes::PCI(d) => {
            let domain = u32::from(d.domain());
            Some((
                format!("pci{:04x}:{:02x}", domain, d.secondary_bus()),
                domain,
                d.secondary_bus(),
                d.subordinate_bus(),
            ))
        }
    }
}

fn parent_of(obj: &TopologyObject) -> (PciParent, String) {
    let mut parent = PciParent::HostBridge(String::new());
    let mut host = String::new();
    if let Some(p) = obj.parent() {
        if is_host_bridge(p) {
            let id = host_bridge_id(p).map(|h| h.0).unwrap_or_default();
            parent = PciParent::HostBridge(id.clone());
            host = id;
        } else if let Some((bdf, ..)) = bdf_of(p) {
            parent = PciParent::Bridge(bdf);
        }
    }
    if host.is_empty() {
        host = obj
            .ancestors()
            .find(|a| is_host_bridge(a))
            .and_then(host_bridge_id)
            .map(|h| h.0)
            .unwrap_or_default();
    }
    (parent, host)
}

fn view(topology: &Topology) -> HwlocView {
    let root = topology.root_object();
    let (host_bridges, bridges) = bridges_of(topology);
    let count = |t: ObjectType| topology.objects_with_type(t).count() as u32;
    HwlocView {
        hostname: info(root, "HostName"),
        product: info(root, "DMIProductName"),
        architecture: info(root, "Architecture"),
        kernel: info(root, "OSRelease"),
        cpu_model: topology
            .objects_with_type(ObjectType::Package)
            .find_map(|p| info(p, "CPUModel")),
        packages: count(ObjectType::Package),
        cores: count(ObjectType::Core),
        pus: count(ObjectType::PU),
        cpus: cpulist_of(root),
        numa_nodes: numa_nodes_of(topology),
        host_bridges,
        bridges,
        devices: devices_of(topology),
        nvlink_matrix: nvlink_matrix_of(topology),
    }
}

/// hwloc's `NVLinkBandwidth` distances: the matrix's objects are the GPUs' NVML OS devices,
/// then any NVSwitch (a PCI object) or CPU-side object a link reaches; the diagonal holds an
/// artificial 1,000,000 (hwloc's topology-nvml.c) and is skipped.
fn nvlink_matrix_of(topology: &Topology) -> Option<HwNvlinkMatrix> {
    let matrices = topology.distances_with_name("NVLinkBandwidth").ok()?;
    if matrices.is_empty() {
        return None;
    }
    let mut out = HwNvlinkMatrix::default();
    for m in &matrices {
        let ends: Vec<Option<NvlinkEnd>> = m.objects().map(|o| o.and_then(nvlink_end)).collect();
        out.gpus.extend(ends.iter().filter_map(|e| match e {
            Some(NvlinkEnd::Gpu(b)) => Some(*b),
            _ => None,
        }));
        for ((i, j), mbps) in m.enumerate_distances() {
            let (Some(Some(NvlinkEnd::Gpu(gpu))), Some(Some(peer))) = (ends.get(i), ends.get(j)) else {
                continue;
            };
            if i == j || mbps == 0 {
                continue;
            }
            let peer = match peer {
                NvlinkEnd::Gpu(b) => NvlinkPeerEnd::Gpu(*b),
                NvlinkEnd::Switch(b) => NvlinkPeerEnd::Switch(*b),
                NvlinkEnd::Cpu => NvlinkPeerEnd::Cpu,
            };
            out.cells.push(HwNvlinkBandwidth { gpu: *gpu, peer, mbps });
        }
    }
    Some(out)
}

enum NvlinkEnd {
    Gpu(Bdf),
    Switch(Bdf),
    Cpu,
}

/// A matrix object: a GPU's OS device (its PCI parent's bus id), a PCI device (an NVSwitch),
/// or anything CPU-side.
fn nvlink_end(obj: &TopologyObject) -> Option<NvlinkEnd> {
    match obj.object_type() {
        ObjectType::OSDevice => {
            let pci = obj.ancestors().find(|a| a.object_type() == ObjectType::PCIDevice)?;
            bdf_of(pci).map(|(bdf, ..)| NvlinkEnd::Gpu(bdf))
        }
        ObjectType::PCIDevice => bdf_of(obj).map(|(bdf, ..)| NvlinkEnd::Switch(bdf)),
        _ => Some(NvlinkEnd::Cpu),
    }
}

fn numa_nodes_of(topology: &Topology) -> Vec<NumaNode> {
    let mut numa_nodes: Vec<NumaNode> = topology
        .objects_with_type(ObjectType::NUMANode)
        .filter_map(|n| {
            let id = u32::try_from(n.os_index()?).ok()?;
            let memory_bytes = match n.attributes() {
                Some(ObjectAttributes::NUMANode(a)) => a.local_memory().map(|m| m.get()),
                _ => None,
            };
            Some(NumaNode {
                id,
                cpus: cpulist_of(n),
                memory_bytes,
            })
        })
        .collect();
    numa_nodes.sort_by_key(|n| n.id);
    numa_nodes
}

/// Host bridges (root complexes) and PCI-to-PCI bridges, each sorted.
fn bridges_of(topology: &Topology) -> (Vec<HwHostBridge>, Vec<HwBridge>) {
    let mut host_bridges = Vec::new();
    let mut bridges = Vec::new();
    for b in topology.objects_with_type(ObjectType::Bridge) {
        if is_host_bridge(b) {
            if let Some((id, domain, first_bus, last_bus)) = host_bridge_id(b) {
                host_bridges.push(HwHostBridge {
                    id,
                    domain,
                    first_bus,
                    last_bus,
                    locality: locality_of(b),
                });
            }
            continue;
        }
        let Some((bdf, vendor, device, _, _, link_gbps)) = bdf_of(b) else {
            continue;
        };
        let (secondary_bus, subordinate_bus) = match b.attributes() {
            Some(ObjectAttributes::Bridge(attr)) => match attr.downstream_attributes() {
                Some(DownstreamAttributes::PCI(d)) => (d.secondary_bus(), d.subordinate_bus()),
                None => (0, 0),
            },
            _ => (0, 0),
        };
        bridges.push(HwBridge {
            bdf,
            parent: parent_of(b).0,
            vendor,
            device,
            secondary_bus,
            subordinate_bus,
            link_gbps,
        });
    }
    host_bridges.sort_by_key(|h| (h.domain, h.first_bus));
    bridges.sort_by_key(|b| b.bdf);
    (host_bridges, bridges)
}

/// PCI functions with their OS devices (netdevs, RDMA devices), sorted by bus id.
fn devices_of(topology: &Topology) -> Vec<HwPciDevice> {
    let mut devices: Vec<HwPciDevice> = topology
        .pci_devices()
        .filter_map(|d| {
            let (bdf, vendor, device, class_id, revision, link_gbps) = bdf_of(d)?;
            let (parent, host_bridge) = parent_of(d);
            Some(HwPciDevice {
                bdf,
                parent,
                host_bridge,
                vendor,
                device,
                class_id,
                revision,
                link_gbps,
                name: info(d, "PCIDevice"),
                locality: locality_of(d),
                os_devices: os_devices_of(d),
            })
        })
        .collect();
    devices.sort_by_key(|d| d.bdf);
    devices
}

fn os_devices_of(d: &TopologyObject) -> Vec<HwOsDevice> {
    d.io_children()
        .filter(|c| c.object_type() == ObjectType::OSDevice)
        .filter_map(|c| {
            let name = c.name()?.to_str().ok()?.to_string();
            let kind = match c.attributes() {
                Some(ObjectAttributes::OSDevice(o)) => match o.device_type() {
                    OSDeviceType::Network => OsDevKind::Network,
                    OSDeviceType::OpenFabrics => OsDevKind::OpenFabrics,
                    _ => OsDevKind::Other,
                },
                _ => OsDevKind::Other,
            };
            let infos = c
                .infos()
                .iter()
                .filter_map(|i| {
                    Some((
                        i.name().to_str().ok()?.to_string(),
                        i.value().to_str().ok()?.to_string(),
                    ))
                })
                .collect();
            Some(HwOsDevice { name, kind, infos })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fsroot_is_never_set_while_other_threads_run() {
        // The test harness runs this on a worker thread: the process has several.
        assert!(threads_in_process().unwrap_or(0) > 1);
        let dir = tempfile::tempdir().unwrap();
        let err = discover(Some(dir.path())).unwrap_err();
        assert!(err.to_string().contains("before other threads start"), "{err}");
        assert!(
            std::env::var_os("HWLOC_FSROOT").is_none(),
            "the environment was not touched"
        );
    }
}
