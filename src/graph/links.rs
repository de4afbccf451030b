//! What the links inside one node are worth with NCCL's figures: the GPU link matrix the ring
//! solver reads, PCIe link bandwidth, a node's network bandwidth, and the NVSwitch fabric
//! assumed on SXM boards whose NVLink is unknown. Pure.

use super::paths::path_classes;
use crate::model::ring::LinkMatrix;
use crate::model::snapshot::{NicKind, NodeSnapshot};
use crate::model::topo_h::{self, DEFAULT_NET_GBPS, INTER_CPU_GBPS};
use crate::model::{PathClass, PcieLink};

/// A node with no RDMA NIC falls back to sockets over its Ethernet; 10 GbE when its speed is
/// unknown. A topo-tune assumption, not an NCCL figure.
pub const SOCKET_FALLBACK_GBPS: f64 = 1.25;
/// hwloc's raw figure for a Gen5 x16 link (GB/s), to scale hwloc-only links to NCCL's.
const HWLOC_GEN5_X16_GBPS: f64 = 63.02;

/// NCCL's figure for a PCIe link, by generation and width (hwloc-only input: its raw figure
/// scaled to NCCL's).
pub fn pcie_gbps(link: &PcieLink) -> f64 {
    match (link.current_gen, link.current_width) {
        (Some(g), Some(w)) => topo_h::pcie_x16_gbps(g) * f64::from(w) / 16.0,
        _ => link.bandwidth_gbps.map_or(topo_h::pcie_x16_gbps(3), |b| {
            b * topo_h::pcie_x16_gbps(5) / HWLOC_GEN5_X16_GBPS
        }),
    }
}

/// NVLink of SXM GPUs on an NVSwitch board: (links per GPU, NCCL GB/s per link), by PCI id.
/// Used only when the driver did not say (NVLink unknown) but NVSwitches are on PCI.
pub fn nvswitch_links(pci_id: &str) -> Option<(u32, f64)> {
    match pci_id {
        // A100 SXM4 40/80 GB: NVLink 3, 12 links, sm80.
        "10de:20b0" | "10de:20b2" => Some((12, 20.0)),
        // H100 SXM5, H800, H200 SXM: NVLink 4, 18 links, sm90.
        "10de:2330" | "10de:2324" | "10de:2335" => Some((18, 20.6)),
        // B200: NVLink 5, 18 links, sm100.
        "10de:2901" => Some((18, 40.1)),
        _ => None,
    }
}

/// Whether [`gpu_link_matrix`] assumes an NVSwitch fabric for this node.
pub fn assumes_nvswitch(snap: &NodeSnapshot) -> bool {
    !snap.pci.nvswitches.is_empty()
        && !snap.gpus.is_empty()
        && snap
            .gpus
            .iter()
            .all(|g| g.nvlinks.is_none() && nvswitch_links(&g.placement.pci_id).is_some())
}

/// Bandwidth and hop cost between every pair of GPUs of a node (GPUs in index order).
pub fn gpu_link_matrix(snap: &NodeSnapshot) -> LinkMatrix {
    gpu_link_matrix_with(snap, path_classes(snap))
}

/// The same, from the node's path classes computed once (`graph::paths::path_classes`).
pub fn gpu_link_matrix_with(snap: &NodeSnapshot, mut classes: Vec<Vec<PathClass>>) -> LinkMatrix {
    let mut gpus: Vec<&crate::model::Gpu> = snap.gpus.iter().collect();
    gpus.sort_by_key(|g| g.index);
    let n = gpus.len();
    if assumes_nvswitch(snap) {
        let links = gpus
            .iter()
            .filter_map(|g| nvswitch_links(&g.placement.pci_id))
            .map(|(k, _)| k)
            .min()
            .unwrap_or(0);
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
            .or_else(|| nvswitch_links(&gpus[i].placement.pci_id).map(|(_, gb)| gb))
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
