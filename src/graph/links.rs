//! What the links inside one node are worth with NCCL's figures: the GPU link matrix the ring
//! solver reads, PCIe link bandwidth, a node's network bandwidth, and the NVSwitch fabric
//! assumed on SXM boards whose NVLink is unknown. Pure.

use crate::model::fabric::{NodeHints, NvlinkHint};
use crate::model::gpu_parts::{self, Board, GpuPart};
use crate::model::ring::LinkMatrix;
use crate::model::snapshot::{NicKind, NodeSnapshot};
use crate::model::topo_h::{self, DEFAULT_NET_GBPS, INTER_CPU_GBPS};
use crate::model::{PathClass, PcieLink};

/// A node with no RDMA NIC falls back to sockets over its Ethernet; 10 GbE when its speed is
/// unknown. A topo-tune assumption, not an NCCL figure.
pub(crate) const SOCKET_FALLBACK_GBPS: f64 = 1.25;
/// hwloc's raw figure for a Gen5 x16 link (GB/s), to scale hwloc-only links to NCCL's.
const HWLOC_GEN5_X16_GBPS: f64 = 63.02;

/// NCCL's figure for a PCIe link, by generation and width (hwloc-only input: its raw figure
/// scaled to NCCL's).
pub(crate) fn pcie_gbps(link: &PcieLink) -> f64 {
    match (link.current_gen, link.current_width) {
        (Some(g), Some(w)) => topo_h::pcie_x16_gbps(g) * f64::from(w) / 16.0,
        _ => link.bandwidth_gbps.map_or(topo_h::pcie_x16_gbps(3), |b| {
            b * topo_h::pcie_x16_gbps(5) / HWLOC_GEN5_X16_GBPS
        }),
    }
}

/// How a node's GPU-to-GPU links are known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NvlinkBasis {
    /// The node reported NVLink itself (driver, or `<nvlink>` in its file): used as is.
    Reported,
    /// An all-to-all NVSwitch fabric: `links` per GPU at `gbps` each, and why it is believed.
    Nvswitch { links: u32, gbps: f64, why: String },
    /// Unknown: PCIe paths only, and why.
    Unknown { why: String },
}

impl NvlinkBasis {
    /// A stable code for the plan's notes.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            NvlinkBasis::Reported => "nvlink-reported",
            NvlinkBasis::Nvswitch { why, .. } if why.starts_with("stated") => "stated-nvswitch",
            NvlinkBasis::Nvswitch { .. } => "assumed-nvswitch",
            NvlinkBasis::Unknown { .. } => "nvlink-unknown",
        }
    }
}

/// NVLinks per GPU of an NVSwitch board by SM, where the part is unknown but its generation is.
fn nvswitch_links_by_sm(sm: u32) -> Option<u32> {
    match sm / 10 {
        7 => Some(6),
        8 if sm == 80 => Some(12),
        9 | 10 => Some(18),
        _ => None,
    }
}

/// The GPUs' compute capability × 10, when the snapshot knows it (`9.0` → 90).
fn sm_of(snap: &NodeSnapshot) -> Option<u32> {
    let cc = snap.gpus.first()?.compute_capability.as_deref()?;
    let (major, minor) = cc.split_once('.')?;
    Some(major.parse::<u32>().ok()? * 10 + minor.parse::<u32>().ok()?)
}

/// The node's GPU part: from its PCI ids (all GPUs alike), else as cluster.yaml names it.
fn part_of(snap: &NodeSnapshot, hints: &NodeHints) -> Option<&'static GpuPart> {
    let ids: Vec<Option<&str>> = snap.gpus.iter().map(|g| g.placement.pci_id.as_deref()).collect();
    match ids.first() {
        Some(Some(first)) if ids.iter().all(|i| *i == Some(*first)) => gpu_parts::by_pci_id(first),
        _ => hints.gpu.as_deref().and_then(gpu_parts::by_key),
    }
}

/// Decide how the node's GPUs are joined: the node's own report, else an NVSwitch fabric the
/// part's board implies or cluster.yaml states, else PCIe only — with the reason.
pub(crate) fn nvlink_basis(snap: &NodeSnapshot, hints: &NodeHints) -> NvlinkBasis {
    if snap.gpus.is_empty() || snap.gpus.iter().any(|g| g.nvlinks.is_some()) {
        return NvlinkBasis::Reported;
    }
    let part = part_of(snap, hints);
    let sm = part.map(|p| p.sm).or_else(|| sm_of(snap));
    let gbps = sm.and_then(|s| topo_h::nvlink_gbps((s / 10) as i32, (s % 10) as i32));
    let links = part
        .map(|p| p.nvlinks)
        .filter(|&l| l > 0)
        .or_else(|| sm.and_then(nvswitch_links_by_sm));
    let named = part.map_or_else(|| "GPU part unknown".to_string(), |p| p.name.to_string());
    let fabric = |why: String| match (links, gbps) {
        (Some(links), Some(gbps)) => NvlinkBasis::Nvswitch { links, gbps, why },
        _ => NvlinkBasis::Unknown {
            why: format!(
                "{why}, but the GPU generation is unknown (no PCI id or SM): add `gpu: <part>` (docs/cluster-yaml.md)"
            ),
        },
    };
    match hints.nvlink {
        NvlinkHint::None => NvlinkBasis::Unknown {
            why: "stated in cluster.yaml: `nvlink: none`".into(),
        },
        NvlinkHint::Nvswitch => fabric(format!("stated in cluster.yaml: `nvlink: nvswitch` ({named})")),
        NvlinkHint::Auto => auto_basis(snap, part, fabric),
    }
}

/// `nvlink: auto`: what the part's board and the NVSwitch functions on PCI say.
fn auto_basis(
    snap: &NodeSnapshot,
    part: Option<&'static GpuPart>,
    fabric: impl Fn(String) -> NvlinkBasis,
) -> NvlinkBasis {
    let unknown = |why: String| NvlinkBasis::Unknown { why };
    let Some(p) = part else {
        return unknown("NVLink unknown (described by files, or no driver) and the GPU part is not known: PCIe paths only; state `nvlink: nvswitch` in cluster.yaml if the node has NVSwitches".into());
    };
    let switches = snap.pci.nvswitches.len();
    match p.board {
        Board::NvswitchOnPci if switches > 0 => fabric(format!(
            "assumed: {} NVSwitch function(s) on PCI and {} GPUs (an HGX NVSwitch board)",
            switches, p.name
        )),
        Board::NvswitchHidden => fabric(format!(
            "assumed: {} GPUs sit on HGX B100/B200/B300 boards, whose NVSwitches never appear on PCIe",
            p.name
        )),
        Board::NvswitchOnPci => unknown(format!(
            "{} GPUs, whose 8-GPU boards carry NVSwitches, but none is on PCI (a VM, or a 4-GPU board): PCIe paths only; state `nvlink: nvswitch` in cluster.yaml if the node has them",
            p.name
        )),
        Board::DirectMesh => unknown(format!(
            "{} GPUs use a hybrid cube mesh only the driver can report: PCIe paths only",
            p.name
        )),
        Board::Pcie => unknown(format!(
            "{} cards reach each other over NVLink only through bridges the driver reports: PCIe paths only",
            p.name
        )),
    }
}

/// Bandwidth and hop cost between every pair of GPUs of a node (GPUs in index order), from
/// the node's path classes computed once (`graph::paths::path_classes`) and its NVLink basis.
pub(crate) fn gpu_link_matrix_with(
    snap: &NodeSnapshot,
    mut classes: Vec<Vec<PathClass>>,
    basis: &NvlinkBasis,
) -> LinkMatrix {
    let mut gpus: Vec<&crate::model::Gpu> = snap.gpus.iter().collect();
    gpus.sort_by_key(|g| g.index);
    let n = gpus.len();
    let fabric_link = match basis {
        NvlinkBasis::Nvswitch { links, gbps, .. } => Some((*links, *gbps)),
        _ => None,
    };
    if let Some((links, _)) = fabric_link {
        for (i, row) in classes.iter_mut().enumerate().take(n) {
            for (j, c) in row.iter_mut().enumerate().take(n) {
                if i != j {
                    *c = PathClass::NvLink(links);
                }
            }
        }
    }
    let mut bw = vec![vec![0.0; n]; n];
    let mut cost = vec![vec![0; n]; n];
    for i in 0..n {
        let per_link = gpus[i]
            .nvlinks
            .as_ref()
            .and_then(|l| l.iter().find_map(|x| x.bandwidth_gbps))
            .or(fabric_link.map(|(_, gb)| gb))
            .or(topo_h::nvlink_gbps(8, 0))
            .unwrap_or_default();
        for j in 0..n {
            if i == j {
                continue;
            }
            let pcie = pcie_gbps(&gpus[i].placement.pcie).min(pcie_gbps(&gpus[j].placement.pcie));
            let class = classes[i][j];
            bw[i][j] = match class {
                PathClass::NvLink(k) => per_link * f64::from(k),
                PathClass::Sys => pcie.min(INTER_CPU_GBPS),
                PathClass::SelfPath => 0.0,
                _ => pcie,
            };
            cost[i][j] = class.nccl_path().rank();
        }
    }
    LinkMatrix { bw, cost }
}

/// GB/s a host can put on the network: its RDMA NICs' port rates, else sockets.
pub fn host_net_gbps(snap: &NodeSnapshot) -> f64 {
    let rdma: f64 = snap
        .nics
        .iter()
        .filter(|n| n.kind == NicKind::Rdma)
        .map(|n| {
            n.rdma
                .as_ref()
                .and_then(|r| r.ports.iter().filter_map(|p| p.rate_gbps).reduce(f64::max))
                .map_or(DEFAULT_NET_GBPS, |gb| gb / 8.0)
        })
        .sum();
    if rdma > 0.0 {
        rdma
    } else {
        snap.nics
            .iter()
            .flat_map(|n| n.netdevs.iter())
            .filter_map(|d| d.speed_mbps)
            .max()
            .map_or(SOCKET_FALLBACK_GBPS, |m| m as f64 / 8000.0)
    }
}
