//! The cluster as one petgraph graph: hosts with their GPUs and NICs, leaf and spine switches,
//! every edge with GB/s and µs. Figures are NCCL's own where it has them (src/graph/topo.h,
//! research/peers.md §1.2 and §5). Pure.

use super::paths::{path_matrix, PathClass};
use crate::config::Fabric;
use crate::model::snapshot::{NicKind, NodeSnapshot};
use crate::model::PcieLink;
use crate::solve::ring::LinkMatrix;
use petgraph::graph::{NodeIndex, UnGraph};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Inter-socket bandwidth NCCL assumes for Skylake-class and later Intel (SKL_QPI_BW).
pub const INTER_CPU_GBPS: f64 = 10.0;
/// NCCL's default network bandwidth when a NIC reports none (100 Gb/s).
pub const DEFAULT_NET_GBPS: f64 = 12.0;
/// A node with no RDMA NIC falls back to sockets over its Ethernet; assume 10 GbE if unknown.
pub const SOCKET_FALLBACK_GBPS: f64 = 1.25;
/// NCCL's Ring/Simple hardware latencies, µs (tuning.cc `hwLat`).
pub const LAT_NVLINK_US: f64 = 3.4;
pub const LAT_PCI_US: f64 = 5.7;
pub const LAT_NET_US: f64 = 14.0;
/// Extra latency per switch tier crossed above the leaf (two traversals of ~0.5 µs). An
/// assumption, not an NCCL constant; only the comparison of two orders depends on it.
pub const LAT_PER_TIER_US: f64 = 1.0;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Vertex {
    Host { host: String },
    Gpu { host: String, index: u32 },
    Nic { host: String, name: String },
    Leaf { name: String },
    Spine { name: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    NvLink,
    Pcie,
    CpuInterconnect,
    Network,
    Uplink,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub kind: LinkKind,
    pub gbps: f64,
    pub latency_us: f64,
}

/// A node's place in the fabric: `[spine, leaf, rack]`, each possibly unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Placement {
    pub spine: Option<String>,
    pub leaf: Option<String>,
    pub rack: Option<String>,
}

pub struct ClusterGraph {
    pub graph: UnGraph<Vertex, Link>,
    pub hosts: Vec<String>,
    host_vertex: HashMap<String, NodeIndex>,
    pub placement: HashMap<String, Placement>,
    /// Leaf uplink GB/s (one direction), where the fabric declares it.
    pub leaf_uplink_gbps: HashMap<String, f64>,
    /// Network GB/s a host can send (sum of its RDMA NICs), and whether it is RDMA at all.
    pub host_net_gbps: HashMap<String, f64>,
}

/// NCCL's PCIe figure for a link: x16 Gen3 12, Gen4 24, Gen5 48, Gen6 96 GB/s, by width.
pub fn pcie_gbps(link: &PcieLink) -> f64 {
    let per_x16 = |gen: u8| match gen {
        1 => 3.0,
        2 => 6.0,
        3 => 12.0,
        4 => 24.0,
        5 => 48.0,
        _ => 96.0,
    };
    match (link.current_gen, link.current_width) {
        (Some(g), Some(w)) => per_x16(g) * f64::from(w) / 16.0,
        // hwloc-only input: scale its raw figure to NCCL's (48 of 63.02 for Gen5 x16).
        _ => link.bandwidth_gbps.map_or(12.0, |b| b * 48.0 / 63.02),
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

/// Whether [`gpu_link_matrix`] assumed an NVSwitch fabric for this node.
pub fn assumes_nvswitch(snap: &NodeSnapshot) -> bool {
    !snap.pci.nvswitches.is_empty()
        && !snap.gpus.is_empty()
        && snap
            .gpus
            .iter()
            .all(|g| g.nvlinks.is_none() && nvswitch_links(&g.placement.pci_id).is_some())
}

/// Bandwidth and hop cost between every pair of GPUs of a node, from its path matrix.
pub fn gpu_link_matrix(snap: &NodeSnapshot) -> LinkMatrix {
    let mut m = path_matrix(snap);
    if assumes_nvswitch(snap) {
        let n = snap.gpus.len();
        let links = snap
            .gpus
            .iter()
            .filter_map(|g| nvswitch_links(&g.placement.pci_id))
            .map(|(k, _)| k)
            .min()
            .unwrap_or(0);
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    m.classes[i][j] = PathClass::NvLink(links);
                }
            }
        }
    }
    let mut gpus: Vec<&crate::model::Gpu> = snap.gpus.iter().collect();
    gpus.sort_by_key(|g| g.index);
    let n = gpus.len();
    let mut bw = vec![vec![0.0; n]; n];
    let mut cost = vec![vec![0; n]; n];
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            let pcie = pcie_gbps(&gpus[i].placement.pcie).min(pcie_gbps(&gpus[j].placement.pcie));
            let per_link = gpus[i]
                .nvlinks
                .as_ref()
                .and_then(|l| l.iter().find_map(|x| x.bandwidth_gbps))
                .or_else(|| nvswitch_links(&gpus[i].placement.pci_id).map(|(_, gb)| gb))
                .unwrap_or(20.0);
            let (b, c) = match m.classes[i][j] {
                PathClass::NvLink(k) => (per_link * f64::from(k), 1),
                PathClass::Pix => (pcie, 4),
                PathClass::Pxb => (pcie, 5),
                PathClass::Phb | PathClass::Node => (pcie, 8),
                PathClass::Sys => (pcie.min(INTER_CPU_GBPS), 9),
                PathClass::SelfPath => (0.0, 0),
            };
            bw[i][j] = b;
            cost[i][j] = c;
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

/// Where a node sits: `rack` label, its leaf (label or fabric.racks), the leaf's spine.
pub fn placement_of(labels: &BTreeMap<String, String>, fabric: Option<&Fabric>) -> Placement {
    let rack = labels.get("rack").cloned();
    let leaf = labels
        .get("leaf")
        .cloned()
        .or_else(|| fabric.and_then(|f| rack.as_ref().and_then(|r| f.racks.get(r).cloned().flatten())));
    let spine = labels
        .get("spine")
        .cloned()
        .or_else(|| fabric.and_then(|f| leaf.as_ref().and_then(|l| f.leaves.get(l).and_then(|(s, _)| s.clone()))));
    Placement { spine, leaf, rack }
}

impl ClusterGraph {
    /// `nodes`: (host, labels, snapshot, its [`gpu_link_matrix`]) in inventory order.
    pub fn build(
        nodes: &[(String, BTreeMap<String, String>, &NodeSnapshot, &LinkMatrix)],
        fabric: Option<&Fabric>,
    ) -> ClusterGraph {
        let mut graph = UnGraph::new_undirected();
        let mut host_vertex = HashMap::new();
        let mut placement = HashMap::new();
        let mut host_net = HashMap::new();
        let mut switches: HashMap<String, NodeIndex> = HashMap::new();
        let mut leaf_uplink_gbps = HashMap::new();
        if let Some(f) = fabric {
            for (leaf, (_, uplink)) in &f.leaves {
                if let Some(gb) = uplink {
                    leaf_uplink_gbps.insert(leaf.clone(), gb / 8.0);
                }
            }
        }
        for (host, labels, snap, m) in nodes {
            let hv = graph.add_node(Vertex::Host { host: host.clone() });
            host_vertex.insert(host.clone(), hv);
            let mut gpus: Vec<&crate::model::Gpu> = snap.gpus.iter().collect();
            gpus.sort_by_key(|g| g.index);
            let gv: Vec<NodeIndex> = gpus
                .iter()
                .map(|g| {
                    graph.add_node(Vertex::Gpu {
                        host: host.clone(),
                        index: g.index,
                    })
                })
                .collect();
            for i in 0..gv.len().min(m.len()) {
                for j in i + 1..gv.len().min(m.len()) {
                    let kind = match m.cost[i][j] {
                        1 => LinkKind::NvLink,
                        9 => LinkKind::CpuInterconnect,
                        _ => LinkKind::Pcie,
                    };
                    let latency_us = if kind == LinkKind::NvLink {
                        LAT_NVLINK_US
                    } else {
                        LAT_PCI_US
                    };
                    graph.add_edge(
                        gv[i],
                        gv[j],
                        Link {
                            kind,
                            gbps: m.bw[i][j],
                            latency_us,
                        },
                    );
                }
            }
            let net = host_net_gbps(snap);
            host_net.insert(host.clone(), net);
            for nic in snap.nics.iter().filter(|n| n.kind == NicKind::Rdma) {
                let nv = graph.add_node(Vertex::Nic {
                    host: host.clone(),
                    name: nic.name.clone(),
                });
                let gbps = nic.pci.as_ref().map_or(DEFAULT_NET_GBPS, |p| pcie_gbps(&p.pcie));
                graph.add_edge(
                    hv,
                    nv,
                    Link {
                        kind: LinkKind::Pcie,
                        gbps,
                        latency_us: LAT_PCI_US,
                    },
                );
            }
            let p = placement_of(labels, fabric);
            if let Some(leaf) = &p.leaf {
                let lv = *switches
                    .entry(format!("leaf:{leaf}"))
                    .or_insert_with(|| graph.add_node(Vertex::Leaf { name: leaf.clone() }));
                graph.add_edge(
                    hv,
                    lv,
                    Link {
                        kind: LinkKind::Network,
                        gbps: net,
                        latency_us: LAT_NET_US,
                    },
                );
                if let Some(spine) = &p.spine {
                    let sv = *switches
                        .entry(format!("spine:{spine}"))
                        .or_insert_with(|| graph.add_node(Vertex::Spine { name: spine.clone() }));
                    if graph.find_edge(lv, sv).is_none() {
                        let gbps = leaf_uplink_gbps.get(leaf).copied().unwrap_or(f64::INFINITY);
                        graph.add_edge(
                            lv,
                            sv,
                            Link {
                                kind: LinkKind::Uplink,
                                gbps,
                                latency_us: LAT_PER_TIER_US,
                            },
                        );
                    }
                }
            }
            placement.insert(host.clone(), p);
        }
        ClusterGraph {
            graph,
            hosts: nodes.iter().map(|(h, ..)| h.clone()).collect(),
            host_vertex,
            placement,
            leaf_uplink_gbps,
            host_net_gbps: host_net,
        }
    }

    pub fn host_vertex(&self, host: &str) -> Option<NodeIndex> {
        self.host_vertex.get(host).copied()
    }
}
