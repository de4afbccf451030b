//! Turns what hwloc, sysfs, procfs and NVML said into one NodeSnapshot. No I/O here: the
//! readers run first (`probe::probe`), so this logic is tested on plain values.

use super::hwloc::{HwPciDevice, HwlocView, OsDevKind};
use super::nvml::{parse_bus_id, DriverError, DriverGpu, DriverReport};
use super::procfs::Interrupts;
use super::sysfs::{NetdevFacts, PciFacts, RdmaFacts};
use crate::graph::pcitree::{self, BridgeLink};
use crate::model::gpu_parts;
use crate::model::nvfabric::{
    domain_name_ok, node_domain, nvml_return_name, uuid_bytes, uuid_text, FabricHealth, FabricState, GpuFabric,
    HealthSummary, NoDomain,
};
use crate::model::pci::{is_nvidia_gpu, round2, Bdf, Degradation};
use crate::model::snapshot::*;
use crate::model::{CpuList, PcieLink};
use std::collections::{BTreeMap, HashMap};

/// Everything sysfs/procfs said (absent for hwloc XML input).
#[derive(Debug, Clone, Default)]
pub(crate) struct SysView {
    pub(crate) pci: HashMap<Bdf, PciFacts>,
    pub(crate) rdma: Vec<RdmaFacts>,
    pub(crate) netdevs: Vec<NetdevFacts>,
    pub(crate) interrupts: Option<Result<Interrupts, crate::model::Refusal>>,
    pub(crate) irq_affinity: HashMap<u32, super::sysfs::IrqFacts>,
}

pub(crate) struct Gathered {
    pub(crate) view: HwlocView,
    pub(crate) sys: Option<SysView>,
    pub(crate) driver: Result<DriverReport, DriverError>,
    /// Whether the driver was asked at all (it is not for machines described by files).
    pub(crate) driver_queried: bool,
    pub(crate) source: SnapshotSource,
    pub(crate) hostname: String,
    pub(crate) kernel: Option<String>,
}

pub(crate) fn assemble(g: Gathered) -> NodeSnapshot {
    let mut notes = Vec::new();
    let view = &g.view;
    let sys = g.sys.as_ref();
    let place = |d: &HwPciDevice| placement(view, sys, d);
    let mut gpus = gpus_of(&g, &place, &mut notes);
    gpus.sort_by_key(|g| g.index);
    if gpus.is_empty() {
        let amd = view
            .devices
            .iter()
            .filter(|d| d.vendor == 0x1002 && matches!(d.class_id >> 8, 0x03 | 0x12))
            .count();
        notes.push(Note::info(
            "no-gpu",
            if amd > 0 {
                format!("no NVIDIA GPU found (PCI vendor 0x10de, class 0x0300/0x0302), but {amd} AMD GPU(s) (vendor 0x1002): topo-tune plans NCCL on NVIDIA GPUs only and leaves them out")
            } else {
                "no NVIDIA GPU found (PCI vendor 0x10de, class 0x0300/0x0302)".to_string()
            },
        ));
    }
    let nics = match sys {
        Some(s) => nics_from_sysfs(view, s, &place, &mut notes),
        None => nics_from_hwloc(view, &place),
    };
    let pci = pci_topology(view, sys, &gpus, &nics, &mut notes);
    let nvlink_domain = nvlink_domain(&gpus, &mut notes);
    if let Some(s) = sys {
        numa_unknown_note(s, &gpus, &nics, &mut notes);
    }
    degraded_notes(&gpus, &nics, &mut notes);
    if let Some(Some(Err(e))) = sys.map(|s| s.interrupts.as_ref()) {
        notes.push(Note::warn(
            "interrupts-unreadable",
            format!("/proc/interrupts could not be read, IRQ names and counts are unknown: {e}"),
        ));
    }
    NodeSnapshot {
        schema_version: SCHEMA_VERSION,
        hostname: g.hostname.clone(),
        source: g.source.clone(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        machine: MachineInfo {
            product: view.product.clone(),
            architecture: view.architecture.clone(),
            kernel: g.kernel.clone(),
            cpu_model: view.cpu_model.clone(),
            nvidia_driver: g.driver.as_ref().ok().and_then(|r| r.driver_version.clone()),
            cuda_driver: g.driver.as_ref().ok().and_then(|r| r.cuda_driver_version.clone()),
        },
        cpu: CpuSummary {
            packages: Some(view.packages),
            cores: Some(view.cores),
            pus: Some(view.pus),
            cpus: view.cpus.clone(),
        },
        numa_nodes: view.numa_nodes.clone(),
        pci,
        gpus,
        nics,
        nccl_version: None,
        nvlink_domain,
        notes,
    }
}

/// Where a PCI function hangs and what is local to it (sysfs over hwloc where both say).
fn placement(view: &HwlocView, sys: Option<&SysView>, d: &HwPciDevice) -> PciPlacement {
    let facts = sys.and_then(|s| s.pci.get(&d.bdf));
    let cpu_affinity = facts
        .and_then(|f| f.local_cpus.clone())
        .unwrap_or_else(|| d.locality.cpus.clone());
    PciPlacement {
        bdf: d.bdf,
        pci_id: Some(format!("{:04x}:{:04x}", d.vendor, d.device)),
        class: format!("0x{:04x}{:02x}", d.class_id, 0),
        parent: d.parent.clone(),
        host_bridge: d.host_bridge.clone(),
        numa_node: match (sys, facts) {
            (Some(_), Some(f)) => f.numa_node,
            _ => d.locality.numa_node(),
        },
        numa_affinity: numa_affinity(&view.numa_nodes, &cpu_affinity),
        cpu_affinity,
        pcie: link_of(facts, d.link_gbps),
    }
}

/// The GPUs: from the driver when it answered, else from PCI (NVLink then unknown).
fn gpus_of(g: &Gathered, place: &dyn Fn(&HwPciDevice) -> PciPlacement, notes: &mut Vec<Note>) -> Vec<Gpu> {
    let pci_gpus: Vec<&HwPciDevice> = g
        .view
        .devices
        .iter()
        .filter(|d| is_nvidia_gpu(d.vendor, d.class_id))
        .collect();
    let err = match &g.driver {
        Ok(report) => return gpus_from_driver(report, &pci_gpus, place, &g.view.numa_nodes, notes),
        Err(err) => err,
    };
    if let Some(m) = g.view.nvlink_matrix.as_ref().filter(|m| !m.gpus.is_empty()) {
        notes.push(Note::info(
            "nvlink-from-hwloc",
            format!(
                "NVLink read from the export's NVLinkBandwidth matrix ({} GPUs; hwloc's 25 GB/s per link for NVLink 2-4, 50 for NVLink 5, counted as links at NCCL's per-link figure)",
                m.gpus.len()
            ),
        ));
    } else if !pci_gpus.is_empty() {
        let why = if g.driver_queried {
            err.to_string()
        } else {
            "the machine is described by files, so NVML was not asked".to_string()
        };
        notes.push(Note::info(
            "nvlink-unknown",
            format!("GPUs listed from PCI; NVLink unknown: {why}"),
        ));
    }
    pci_gpus
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let nvlinks = g.view.nvlink_matrix.as_ref().and_then(|m| nvlinks_from_hwloc(d, m));
            Gpu {
                index: i as u32,
                name: gpu_name(d),
                uuid: None,
                placement: place(d),
                compute_capability: None,
                nvlink_source: nvlinks.as_ref().map(|_| NvlinkSource::HwlocDistances),
                nvlink_speed_mbps: None,
                nvlinks,
                c2c: None,
                fabric: None,
                health: None,
                source: GpuSource::Pci,
            }
        })
        .collect()
}

/// hwloc's per-link MB/s (topology-nvml.c): 20,000 for NVLink 1 (sm_60), 25,000 for NVLink
/// 2 to 4 (sm_70 to sm_90), 50,000 for NVLink 5 (sm_100 and later).
fn hwloc_link_mbps(sm: Option<u32>, total: u64) -> u64 {
    match sm {
        Some(s) if s < 70 => 20_000,
        Some(s) if s < 100 => 25_000,
        Some(_) => 50_000,
        // The part is unknown: the figure that divides the total, NVLink 2-4 first.
        None => [25_000, 50_000, 20_000]
            .into_iter()
            .find(|l| total.is_multiple_of(*l))
            .unwrap_or(25_000),
    }
}

/// A GPU's NVLinks from hwloc's `NVLinkBandwidth` matrix: per peer, its MB/s over hwloc's
/// per-link figure links, each worth NCCL's per-link figure for the part. `None` when the
/// matrix does not cover the GPU.
fn nvlinks_from_hwloc(d: &HwPciDevice, m: &super::hwloc::HwNvlinkMatrix) -> Option<Vec<NvLink>> {
    use super::hwloc::NvlinkPeerEnd;
    if !m.gpus.contains(&d.bdf) {
        return None;
    }
    let part = gpu_parts::by_pci_id(&format!("{:04x}:{:04x}", d.vendor, d.device));
    let sm = part.map(|p| p.sm);
    let per_link = sm.and_then(|s| crate::model::topo_h::nvlink_gbps((s / 10) as i32, (s % 10) as i32));
    let mut out = Vec::new();
    for cell in m.cells.iter().filter(|c| c.gpu == d.bdf) {
        let count = (cell.mbps as f64 / hwloc_link_mbps(sm, cell.mbps) as f64)
            .round()
            .max(1.0) as u32;
        let (remote, remote_bdf) = match cell.peer {
            NvlinkPeerEnd::Gpu(b) => (NvLinkPeer::Gpu, Some(b)),
            NvlinkPeerEnd::Switch(b) => (NvLinkPeer::Switch, Some(b)),
            NvlinkPeerEnd::Cpu => (NvLinkPeer::Unknown, None),
        };
        for _ in 0..count.min(64) {
            out.push(NvLink {
                link: out.len() as u32,
                active: true,
                version: None,
                remote_bdf,
                remote,
                bandwidth_gbps: per_link,
            });
        }
    }
    Some(out)
}

/// A GPU's name from what hwloc knows: the model its OS devices report (`GPUModel`, e.g.
/// "NVIDIA B200"), else the PCI ID database's name, else topo-tune's table of parts, else
/// the ids.
fn gpu_name(d: &HwPciDevice) -> String {
    let model = d
        .os_devices
        .iter()
        .flat_map(|o| o.infos.iter())
        .find(|(k, v)| k == "GPUModel" && !v.is_empty())
        .map(|(_, v)| v.clone());
    let id = format!("{:04x}:{:04x}", d.vendor, d.device);
    model
        .or_else(|| d.name.as_ref().map(|n| format!("NVIDIA {n}")))
        .or_else(|| gpu_parts::by_pci_id(&id).map(|p| format!("NVIDIA {}", p.name)))
        .unwrap_or_else(|| format!("NVIDIA GPU {id}"))
}

/// Bridges with their roles, switches, host bridges, NVSwitches, and whether switches are
/// visible at all (a GPU or NIC straight under a host bridge hides whatever is between).
fn pci_topology(
    view: &HwlocView,
    sys: Option<&SysView>,
    gpus: &[Gpu],
    nics: &[Nic],
    notes: &mut Vec<Note>,
) -> PciTopology {
    let links: Vec<BridgeLink> = view
        .bridges
        .iter()
        .map(|b| BridgeLink {
            bdf: b.bdf,
            parent: b.parent.clone(),
            pci_id: Some(format!("{:04x}:{:04x}", b.vendor, b.device)),
        })
        .collect();
    let (roles, switches) = pcitree::classify(&links);
    let bridges = view
        .bridges
        .iter()
        .map(|b| PciBridge {
            bdf: b.bdf,
            parent: b.parent.clone(),
            role: roles.get(&b.bdf).copied().unwrap_or(BridgeRole::Bridge),
            vendor_id: format!("{:04x}", b.vendor),
            device_id: format!("{:04x}", b.device),
            secondary_bus: b.secondary_bus,
            subordinate_bus: b.subordinate_bus,
            link: link_of(sys.and_then(|s| s.pci.get(&b.bdf)), b.link_gbps),
        })
        .collect();
    let host_bridges = view
        .host_bridges
        .iter()
        .map(|h| HostBridge {
            id: h.id.clone(),
            domain: h.domain,
            first_bus: h.first_bus,
            last_bus: h.last_bus,
            numa_node: h.locality.numa_node(),
            cpus: h.locality.cpus.clone(),
        })
        .collect();
    let exposed: Vec<String> = nccl_devices(gpus, nics)
        .into_iter()
        .filter(|(_, p)| matches!(p.parent, PciParent::HostBridge(_)))
        .map(|(label, p)| format!("{label} ({})", p.bdf))
        .collect();
    if !exposed.is_empty() {
        notes.push(Note::info(
            "switches-not-visible",
            format!(
                "switches not visible: {} sit straight under a PCI host bridge, so any PCIe switch between them is hidden (typical of VMs); their mutual paths read PHB or NODE",
                list_some(&exposed)
            ),
        ));
    }
    PciTopology {
        host_bridges,
        bridges,
        switches,
        switches_visible: exposed.is_empty(),
        nvswitches: view
            .devices
            .iter()
            .filter(|d| {
                d.vendor == crate::model::pci::VENDOR_NVIDIA && d.class_id == crate::model::pci::class::NVSWITCH
            })
            .map(|d| d.bdf)
            .collect(),
    }
}

/// Unknown NUMA, as the firmware left it.
fn numa_unknown_note(s: &SysView, gpus: &[Gpu], nics: &[Nic], notes: &mut Vec<Note>) {
    let unknown_numa = |bdf: &Bdf| s.pci.get(bdf).is_some_and(|f| f.numa_unknown);
    let unknown: Vec<String> = gpus
        .iter()
        .filter(|g| unknown_numa(&g.placement.bdf))
        .map(|g| format!("GPU{}", g.index))
        .chain(
            nics.iter()
                .filter(|n| n.pci.as_ref().is_some_and(|p| unknown_numa(&p.bdf)))
                .map(|n| n.name.clone()),
        )
        .collect();
    if !unknown.is_empty() {
        notes.push(Note::info(
            "numa-unknown",
            format!(
                "numa_node is -1 (unknown) for {}: the firmware gives no NUMA proximity (typical of VMs); NUMA affinity is derived from CPU affinity, as nvidia-smi does",
                list_some(&unknown)
            ),
        ));
    }
}

/// Links running below their maximum (a GPU's speed drop at idle is only info).
fn degraded_notes(gpus: &[Gpu], nics: &[Nic], notes: &mut Vec<Note>) {
    for (label, p) in nccl_devices(gpus, nics) {
        let Some(d) = p.pcie.degradation() else { continue };
        let what = match d {
            Degradation::Width => "width",
            Degradation::Speed => "speed",
            Degradation::WidthAndSpeed => "width and speed",
        };
        let mut msg = format!(
            "{label} ({}) PCIe link runs at {}: {what} below maximum",
            p.bdf,
            p.pcie.describe()
        );
        if label.starts_with("GPU") && d == Degradation::Speed {
            msg.push_str(" (GPUs lower the link speed when idle: check again under load)");
            notes.push(Note::info("pcie-degraded", msg));
        } else {
            notes.push(Note::warn("pcie-degraded", msg));
        }
    }
}

/// What NCCL uses, labelled: GPUs and RDMA NICs with a PCI function. (An onboard management
/// NIC often sits on the root bus of a machine whose switches are all visible: not counted.)
fn nccl_devices<'a>(gpus: &'a [Gpu], nics: &'a [Nic]) -> Vec<(String, &'a PciPlacement)> {
    gpus.iter()
        .map(|g| (format!("GPU{}", g.index), &g.placement))
        .chain(
            nics.iter()
                .filter(|n| n.kind == NicKind::Rdma)
                .filter_map(|n| n.pci.as_ref().map(|p| (n.name.clone(), p))),
        )
        .collect()
}

fn list_some(items: &[String]) -> String {
    const SHOWN: usize = 4;
    if items.len() <= SHOWN {
        items.join(", ")
    } else {
        format!("{} and {} more", items[..SHOWN].join(", "), items.len() - SHOWN)
    }
}

fn link_of(facts: Option<&PciFacts>, hwloc_gbps: f32) -> PcieLink {
    match facts {
        Some(f) if f.link.current_gen.is_some() || f.link.current_width.is_some() => f.link.clone(),
        _ if hwloc_gbps > 0.0 => PcieLink {
            bandwidth_gbps: Some(round2(f64::from(hwloc_gbps))),
            ..PcieLink::default()
        },
        _ => PcieLink::default(),
    }
}

/// One-direction GB/s per NVLink that NCCL assumes for this GPU generation.
pub(crate) fn nvlink_gbps(cc: Option<(i32, i32)>) -> Option<f64> {
    cc.and_then(|(major, minor)| crate::model::topo_h::nvlink_gbps(major, minor))
}

fn gpus_from_driver(
    report: &DriverReport,
    pci_gpus: &[&HwPciDevice],
    placement: &dyn Fn(&HwPciDevice) -> PciPlacement,
    numa_nodes: &[NumaNode],
    notes: &mut Vec<Note>,
) -> Vec<Gpu> {
    let by_bdf: HashMap<Bdf, &DriverGpu> = report
        .gpus
        .iter()
        .filter_map(|g| Some((parse_bus_id(&g.bus_id)?, g)))
        .collect();
    let gpu_bdfs: Vec<Bdf> = by_bdf.keys().copied().collect();
    let mut out = Vec::new();
    for d in pci_gpus {
        match by_bdf.get(&d.bdf) {
            Some(dg) => out.push(gpu_from_driver(dg, placement(d), &gpu_bdfs, numa_nodes)),
            None => notes.push(Note::warn(
                "gpu-not-in-driver",
                format!(
                    "GPU at {} is on PCI but the NVIDIA driver does not list it (unbound, in reset, or passed to a VM)",
                    d.bdf
                ),
            )),
        }
    }
    for (bdf, dg) in &by_bdf {
        if !pci_gpus.iter().any(|d| d.bdf == *bdf) {
            notes.push(Note::warn(
                "gpu-not-on-pci",
                format!(
                    "NVML lists GPU {} at {bdf}, which hwloc did not find on PCI; its PCI path is unknown",
                    dg.index
                ),
            ));
            let p = PciPlacement {
                bdf: *bdf,
                pci_id: None,
                class: "0x030200".into(),
                parent: PciParent::HostBridge(String::new()),
                host_bridge: String::new(),
                numa_node: None,
                numa_affinity: Vec::new(),
                cpu_affinity: CpuList::new(),
                pcie: PcieLink::default(),
            };
            out.push(gpu_from_driver(dg, p, &gpu_bdfs, numa_nodes));
        }
    }
    out
}

fn gpu_from_driver(dg: &DriverGpu, mut p: PciPlacement, gpu_bdfs: &[Bdf], numa_nodes: &[NumaNode]) -> Gpu {
    let small = |v: Option<u32>| v.and_then(|x| u8::try_from(x).ok()).filter(|x| *x > 0);
    p.pcie = PcieLink::from_gen_width(
        small(dg.pcie_current_gen),
        small(dg.pcie_current_width),
        small(dg.pcie_max_gen),
        small(dg.pcie_max_width),
    );
    if let Some(aff) = dg
        .cpu_affinity
        .as_deref()
        .and_then(|a| CpuList::parse(a).ok())
        .filter(|a| !a.is_empty())
    {
        p.numa_affinity = numa_affinity(numa_nodes, &aff);
        p.cpu_affinity = aff;
    }
    if dg.numa_node.is_some() {
        p.numa_node = dg.numa_node;
    }
    let per_link = nvlink_gbps(dg.compute_capability);
    let nvlinks = dg
        .nvlinks
        .iter()
        .map(|l| {
            let remote_bdf = l.remote_bus_id.as_deref().and_then(parse_bus_id);
            let remote = match remote_bdf {
                Some(r) if gpu_bdfs.contains(&r) => NvLinkPeer::Gpu,
                Some(_) => NvLinkPeer::Switch,
                None => NvLinkPeer::Unknown,
            };
            NvLink {
                link: l.link,
                active: l.active,
                version: l.version,
                remote_bdf,
                remote,
                bandwidth_gbps: per_link,
            }
        })
        .collect();
    Gpu {
        index: dg.index,
        name: dg.name.clone(),
        uuid: dg.uuid.clone(),
        placement: p,
        compute_capability: dg.compute_capability.map(|(a, b)| format!("{a}.{b}")),
        nvlinks: Some(nvlinks),
        nvlink_source: Some(NvlinkSource::Nvml),
        nvlink_speed_mbps: dg.nvlink_speed_mbps,
        c2c: dg.c2c.as_ref().map(|c| C2cLink {
            links: c.links,
            gbps_per_link: (c.max_bw_mbps > 0).then(|| f64::from(c.max_bw_mbps) / 1000.0),
        }),
        fabric: dg.fabric.as_ref().and_then(fabric_of),
        health: dg.health.clone(),
        source: GpuSource::Nvml,
    }
}

/// NVML's fabric answer decoded; `None` when the call failed for another reason than "not
/// supported" (which is an answer: no multi-node fabric).
fn fabric_of(f: &super::nvml::DriverFabric) -> Option<GpuFabric> {
    const NOT_SUPPORTED: u32 = 3;
    if f.ret == NOT_SUPPORTED {
        return Some(GpuFabric {
            state: FabricState::NotSupported,
            status: None,
            cluster_uuid: None,
            clique_id: None,
            health: None,
            struct_version: f.version,
        });
    }
    if f.ret != 0 {
        return None;
    }
    let state = FabricState::from_nvml(f.state)?;
    let completed = state == FabricState::Completed;
    Some(GpuFabric {
        state,
        status: completed.then(|| nvml_return_name(f.status)),
        cluster_uuid: uuid_bytes(&f.cluster_uuid).and_then(|b| uuid_text(&b)),
        clique_id: completed.then_some(f.clique_id),
        health: f
            .health_mask
            .map(|m| FabricHealth::decode(m, f.health_summary.and_then(HealthSummary::from_nvml))),
        struct_version: f.version,
    })
}

/// The node's NVLink domain from its GPUs' fabric info, with notes on what keeps it out of one
/// (only when the driver answered: files say nothing about the fabric).
fn nvlink_domain(gpus: &[Gpu], notes: &mut Vec<Note>) -> Option<String> {
    for g in gpus {
        let problems = g
            .fabric
            .as_ref()
            .and_then(|f| f.health.as_ref())
            .map(FabricHealth::problems);
        if let Some(p) = problems.filter(|p| !p.is_empty()) {
            notes.push(Note::warn(
                "nvlink-fabric-unhealthy",
                format!("GPU{}: {}", g.index, p.join("; ")),
            ));
        }
    }
    let fabrics: Vec<Option<&GpuFabric>> = gpus.iter().map(|g| g.fabric.as_ref()).collect();
    match node_domain(&fabrics) {
        Ok(d) if domain_name_ok(&d) => Some(d),
        Ok(d) => {
            notes.push(Note::warn(
                "nvlink-domain-unnamed",
                format!(
                    "the GPUs report NVLink domain {:?}, which is not a name topo-tune can write",
                    d.escape_default().to_string()
                ),
            ));
            None
        }
        Err(NoDomain::NotReported | NoDomain::NotSupported) => None,
        Err(NoDomain::NotMember { gpu, why }) => {
            notes.push(Note::warn(
                "nvlink-domain-not-joined",
                format!("GPU{} is in no multi-node NVLink domain ({why}): NCCL will not use multi-node NVLink from this node", gpus[gpu].index),
            ));
            None
        }
        Err(NoDomain::Mixed(ds)) => {
            notes.push(Note::warn(
                "nvlink-domain-mixed",
                format!(
                    "the GPUs name {} different NVLink domains ({}): no one domain for the node",
                    ds.len(),
                    ds.join(", ")
                ),
            ));
            None
        }
    }
}

fn irq_class(name: Option<&str>) -> IrqClass {
    let Some(name) = name else {
        return IrqClass::Unknown;
    };
    let eq = name.split('@').next().unwrap_or(name);
    if eq.starts_with("mlx5_comp") || eq.starts_with("mlx5_sf_comp") {
        IrqClass::Completion
    } else if eq.starts_with("mlx5_")
        && ["async", "pages", "cmd", "ctrl", "combined", "page_fault"]
            .iter()
            .any(|k| eq.contains(k))
    {
        IrqClass::Control
    } else {
        IrqClass::Other
    }
}

fn nics_from_sysfs(
    view: &HwlocView,
    s: &SysView,
    placement: &dyn Fn(&HwPciDevice) -> PciPlacement,
    notes: &mut Vec<Note>,
) -> Vec<Nic> {
    let hw_by_bdf: HashMap<Bdf, &HwPciDevice> = view.devices.iter().map(|d| (d.bdf, d)).collect();
    let mut netdevs_by_bdf: BTreeMap<Bdf, Vec<Netdev>> = BTreeMap::new();
    for n in &s.netdevs {
        netdevs_by_bdf.entry(n.bdf).or_default().push(n.netdev.clone());
    }
    let place = |bdf: Bdf| -> Option<PciPlacement> { hw_by_bdf.get(&bdf).map(|d| placement(d)) };
    let irqs_of = |bdf: Option<Bdf>| -> Vec<Irq> {
        let Some(facts) = bdf.and_then(|b| s.pci.get(&b)) else {
            return Vec::new();
        };
        let table = s.interrupts.as_ref().and_then(|r| r.as_ref().ok());
        facts
            .msi_irqs
            .iter()
            .map(|&irq| {
                let row = table.and_then(|t| t.rows.get(&irq));
                let f = s.irq_affinity.get(&irq).cloned().unwrap_or_default();
                // /proc/interrupts first; /sys/kernel/irq/N/actions when it has no row.
                let name = row.and_then(|r| r.name.clone()).or(f.actions.clone());
                Irq {
                    irq,
                    class: irq_class(name.as_deref()),
                    name,
                    affinity: f.affinity,
                    effective_affinity: f.effective,
                    affinity_hint: f.hint,
                    count: row.map(|r| r.per_cpu.iter().sum()),
                }
            })
            .collect()
    };
    let mut nics = Vec::new();
    let mut claimed: Vec<Bdf> = Vec::new();
    for r in &s.rdma {
        let netdevs = r.bdf.and_then(|b| netdevs_by_bdf.get(&b)).cloned().unwrap_or_default();
        if let Some(b) = r.bdf {
            claimed.push(b);
        }
        nics.push(Nic {
            name: r.device.clone(),
            kind: NicKind::Rdma,
            pci: r.bdf.and_then(place),
            rdma: Some(RdmaDevice {
                device: r.device.clone(),
                ports: r.ports.clone(),
            }),
            netdevs,
            driver: r.bdf.and_then(|b| s.pci.get(&b)).and_then(|f| f.driver.clone()),
            irqs: irqs_of(r.bdf),
        });
    }
    for (bdf, netdevs) in &netdevs_by_bdf {
        if claimed.contains(bdf) {
            continue;
        }
        let mut netdevs = netdevs.clone();
        netdevs.sort_by(|a, b| a.name.cmp(&b.name));
        nics.push(Nic {
            name: netdevs[0].name.clone(),
            kind: NicKind::Ethernet,
            pci: place(*bdf),
            rdma: None,
            netdevs,
            driver: s.pci.get(bdf).and_then(|f| f.driver.clone()),
            irqs: irqs_of(Some(*bdf)),
        });
    }
    if nics.iter().any(|n| n.pci.is_none() && n.kind == NicKind::Rdma) {
        notes.push(Note::info("nic-without-pci", "some RDMA devices have no PCI function that hwloc knows (soft-RoCE, virtual, or hidden): they are listed without a PCI path"));
    }
    nics.sort_by(|a, b| {
        (a.kind != NicKind::Rdma, crate::model::natural_key(&a.name))
            .cmp(&(b.kind != NicKind::Rdma, crate::model::natural_key(&b.name)))
    });
    nics
}

fn port_state_name(code: u8) -> &'static str {
    match code {
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "NOP",
    }
}

fn nics_from_hwloc(view: &HwlocView, placement: &dyn Fn(&HwPciDevice) -> PciPlacement) -> Vec<Nic> {
    let mut nics: Vec<Nic> = view
        .devices
        .iter()
        .filter(|d| d.class_id >> 8 == 0x02)
        .map(|d| {
            let fabrics = d.os_devices.iter().find(|o| o.kind == OsDevKind::OpenFabrics);
            let netdevs: Vec<Netdev> = d
                .os_devices
                .iter()
                .filter(|o| o.kind == OsDevKind::Network)
                .map(|o| Netdev {
                    name: o.name.clone(),
                    operstate: None,
                    speed_mbps: None,
                    mtu: None,
                })
                .collect();
            let rdma = fabrics.map(|f| {
                let mut ports: Vec<RdmaPort> = f
                    .infos
                    .iter()
                    .filter_map(|(k, v)| {
                        let port: u32 = k.strip_prefix("Port")?.strip_suffix("State")?.parse().ok()?;
                        let code: u8 = v.parse().ok()?;
                        Some(RdmaPort {
                            port,
                            state: Some(port_state_name(code).to_string()),
                            state_code: Some(code),
                            rate: None,
                            rate_gbps: None,
                            link_layer: if d.class_id == crate::model::pci::class::INFINIBAND {
                                LinkLayer::InfiniBand
                            } else {
                                LinkLayer::Unknown
                            },
                            roce_v2_gid_indexes: Vec::new(),
                            netdev: netdevs.first().map(|n| n.name.clone()),
                        })
                    })
                    .collect();
                ports.sort_by_key(|p| p.port);
                RdmaDevice {
                    device: f.name.clone(),
                    ports,
                }
            });
            let name = rdma
                .as_ref()
                .map(|r| r.device.clone())
                .or_else(|| netdevs.first().map(|n| n.name.clone()))
                .unwrap_or_else(|| d.bdf.to_string());
            Nic {
                name,
                kind: if rdma.is_some() {
                    NicKind::Rdma
                } else {
                    NicKind::Ethernet
                },
                pci: Some(placement(d)),
                rdma,
                netdevs,
                driver: None,
                irqs: Vec::new(),
            }
        })
        .collect();
    nics.sort_by(|a, b| {
        (a.kind != NicKind::Rdma, a.pci.as_ref().map(|p| p.bdf))
            .cmp(&(b.kind != NicKind::Rdma, b.pci.as_ref().map(|p| p.bdf)))
    });
    nics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irq_names_of_every_era() {
        assert_eq!(irq_class(Some("mlx5_comp3@pci:0000:81:00.0")), IrqClass::Completion);
        assert_eq!(irq_class(Some("mlx5_sf_comp0@pci:0000:81:00.0")), IrqClass::Completion);
        assert_eq!(irq_class(Some("mlx5_async0@pci:0000:81:00.0")), IrqClass::Control);
        assert_eq!(irq_class(Some("mlx5_pages_eq@pci:0000:81:00.0")), IrqClass::Control);
        assert_eq!(irq_class(Some("mlx5_cmd_eq@pci:8b76:00:02.0")), IrqClass::Control);
        assert_eq!(irq_class(Some("mlx5_combined0@pci:0000:81:00.0")), IrqClass::Control);
        assert_eq!(irq_class(Some("nvidia")), IrqClass::Other);
        assert_eq!(irq_class(None), IrqClass::Unknown);
    }

    #[test]
    fn nvlink_figures_follow_nccl() {
        assert_eq!(nvlink_gbps(Some((9, 0))), Some(20.6));
        assert_eq!(nvlink_gbps(Some((8, 6))), Some(12.0));
        assert_eq!(nvlink_gbps(Some((8, 0))), Some(20.0));
        assert_eq!(nvlink_gbps(None), None);
    }

    #[test]
    fn natural_order_of_rdma_names() {
        let mut names = vec!["mlx5_10", "mlx5_2", "mlx5_1"];
        names.sort_by_key(|n| crate::model::natural_key(n));
        assert_eq!(names, vec!["mlx5_1", "mlx5_2", "mlx5_10"]);
    }

    fn gpu_device(bdf: &str, device: u16) -> HwPciDevice {
        HwPciDevice {
            bdf: bdf.parse().unwrap(),
            parent: PciParent::HostBridge("pci0000:00".into()),
            host_bridge: "pci0000:00".into(),
            vendor: 0x10de,
            device,
            class_id: 0x0302,
            revision: 0,
            link_gbps: 0.0,
            name: None,
            locality: Default::default(),
            os_devices: Vec::new(),
        }
    }

    #[test]
    fn hwloc_matrix_cells_become_links_to_gpus_switches_and_cpus() {
        use super::super::hwloc::{HwNvlinkBandwidth, HwNvlinkMatrix, NvlinkPeerEnd};
        let a: Bdf = "0000:01:00.0".parse().unwrap();
        let b: Bdf = "0000:02:00.0".parse().unwrap();
        let sw: Bdf = "0000:09:00.0".parse().unwrap();
        let m = HwNvlinkMatrix {
            gpus: vec![a, b],
            cells: vec![
                HwNvlinkBandwidth {
                    gpu: a,
                    peer: NvlinkPeerEnd::Gpu(b),
                    mbps: 50_000,
                },
                HwNvlinkBandwidth {
                    gpu: a,
                    peer: NvlinkPeerEnd::Switch(sw),
                    mbps: 100_000,
                },
                HwNvlinkBandwidth {
                    gpu: a,
                    peer: NvlinkPeerEnd::Cpu,
                    mbps: 25_000,
                },
            ],
        };
        // An H100 (NVLink 4: hwloc's 25000 MB/s per link).
        let links = nvlinks_from_hwloc(&gpu_device("0000:01:00.0", 0x2330), &m).unwrap();
        let count = |peer: NvLinkPeer| links.iter().filter(|l| l.remote == peer).count();
        assert_eq!(
            (
                count(NvLinkPeer::Gpu),
                count(NvLinkPeer::Switch),
                count(NvLinkPeer::Unknown)
            ),
            (2, 4, 1)
        );
        assert!(links.iter().all(|l| l.bandwidth_gbps == Some(20.6)));
        // A B200 (NVLink 5: 50000 MB/s per link): half the links for the same figure.
        let links = nvlinks_from_hwloc(&gpu_device("0000:01:00.0", 0x2901), &m).unwrap();
        assert_eq!(links.iter().filter(|l| l.remote == NvLinkPeer::Gpu).count(), 1);
        // A GPU the matrix does not cover: unknown, not "no NVLink".
        assert_eq!(nvlinks_from_hwloc(&gpu_device("0000:03:00.0", 0x2330), &m), None);
        // A GPU it covers with no cell: no NVLink.
        assert_eq!(
            nvlinks_from_hwloc(&gpu_device("0000:02:00.0", 0x2330), &m),
            Some(vec![])
        );
        // An unknown part: the per-link figure that divides the total.
        assert_eq!(hwloc_link_mbps(None, 150_000), 25_000);
        assert_eq!(hwloc_link_mbps(None, 60_000), 20_000);
    }

    fn fabric_answer(
        ret: u32,
        state: u8,
        status: u32,
        uuid: &str,
        mask: Option<u32>,
    ) -> super::super::nvml::DriverFabric {
        super::super::nvml::DriverFabric {
            ret,
            version: if mask.is_some() { 3 } else { 1 },
            cluster_uuid: uuid.into(),
            status,
            clique_id: 7,
            state,
            health_mask: mask,
            health_summary: mask.map(|_| 1),
        }
    }

    #[test]
    fn driver_fabric_answers_decode_or_say_nothing() {
        let uuid = "dc6e40c4d72243579ba65291dd461278";
        let f = fabric_of(&fabric_answer(0, 3, 0, uuid, Some(0xaa))).unwrap();
        assert_eq!(f.domain().unwrap(), "dc6e40c4-d722-4357-9ba6-5291dd461278.7");
        assert_eq!(f.health.unwrap().summary, Some(HealthSummary::Healthy));
        // Not supported is an answer; another failed call is none.
        assert_eq!(
            fabric_of(&fabric_answer(3, 0, 0, uuid, None)).unwrap().state,
            FabricState::NotSupported
        );
        assert_eq!(fabric_of(&fabric_answer(9, 3, 0, uuid, None)), None);
        // A state NVML does not define, or a UUID that is not 32 hex digits, says no domain.
        assert_eq!(fabric_of(&fabric_answer(0, 9, 0, uuid, None)), None);
        let bad = fabric_of(&fabric_answer(0, 3, 0, "xyz", None)).unwrap();
        assert_eq!(bad.cluster_uuid, None);
        // Before completion the status and clique mean nothing.
        let busy = fabric_of(&fabric_answer(0, 2, 27, uuid, None)).unwrap();
        assert_eq!((busy.status, busy.clique_id), (None, None));
    }
}
