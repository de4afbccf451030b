//! The GPU/NIC path matrix with `nvidia-smi topo -m`'s classes, computed from a snapshot. Pure.
//!
//! Classes (nvidia-smi's legend, research/irq.md §4.1):
//! `X` self; `NV#` a bonded set of # NVLinks; `PIX` at most one PCIe bridge (a switch counts
//! once); `PXB` several bridges without the host bridge; `PHB` through a host bridge; `NODE`
//! between host bridges of one NUMA node; `SYS` across the SMP interconnect between NUMA nodes.

use super::pcitree::{upstream_hops, UpstreamHop};
use crate::model::snapshot::{BridgeRole, NodeSnapshot, NvLinkPeer, PciParent, PciPlacement};
use crate::model::{Bdf, PathClass};
use serde::Serialize;
use std::collections::HashMap;

/// nvidia-smi's legend, word for word.
pub const LEGEND: &str = "Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks";

#[derive(Debug, Clone, Serialize)]
pub struct MatrixDevice {
    /// `GPU0`, `NIC3`.
    pub label: String,
    /// GPU model or RDMA device name.
    pub name: String,
    pub bdf: Option<Bdf>,
    pub cpu_affinity: String,
    /// `0`, `0-1`, or `N/A`.
    pub numa_affinity: String,
    /// `Gen5 x8 (max Gen5 x16)` when the link is degraded, else `None`.
    pub degraded_link: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PathMatrix {
    pub devices: Vec<MatrixDevice>,
    /// `classes[i][j]`: path from device i to device j.
    pub classes: Vec<Vec<PathClass>>,
}

struct Endpoint<'a> {
    label: String,
    name: &'a str,
    placement: Option<&'a PciPlacement>,
    gpu: Option<&'a crate::model::Gpu>,
}

/// The matrix's devices in its order: GPUs by index, then the RDMA NICs.
fn endpoints(snap: &NodeSnapshot) -> Vec<Endpoint<'_>> {
    let mut gpus: Vec<&crate::model::Gpu> = snap.gpus.iter().collect();
    gpus.sort_by_key(|g| g.index);
    let gpus = gpus.into_iter().map(|g| Endpoint {
        label: format!("GPU{}", g.index),
        name: &g.name,
        placement: Some(&g.placement),
        gpu: Some(g),
    });
    let nics = snap.matrix_nics().enumerate().map(|(i, n)| Endpoint {
        label: format!("NIC{i}"),
        name: &n.name,
        placement: n.pci.as_ref(),
        gpu: None,
    });
    gpus.chain(nics).collect()
}

/// The path matrix with its device columns (labels, affinities, degraded links).
pub fn path_matrix(snap: &NodeSnapshot) -> PathMatrix {
    let ends = endpoints(snap);
    let classes = classes_of(snap, &ends);
    let devices = ends
        .into_iter()
        .map(|e| matrix_device(e.label, e.name.to_string(), e.placement))
        .collect();
    PathMatrix { devices, classes }
}

/// Only the classes (rows and columns as in [`path_matrix`]): what the planner and the rules
/// need, without formatting a string per device.
pub(crate) fn path_classes(snap: &NodeSnapshot) -> Vec<Vec<PathClass>> {
    classes_of(snap, &endpoints(snap))
}

fn classes_of(snap: &NodeSnapshot, endpoints: &[Endpoint]) -> Vec<Vec<PathClass>> {
    let roles: HashMap<Bdf, BridgeRole> = snap.pci.bridges.iter().map(|b| (b.bdf, b.role)).collect();
    let parents: HashMap<Bdf, PciParent> = snap.pci.bridges.iter().map(|b| (b.bdf, b.parent.clone())).collect();
    let host_numa: HashMap<&str, Option<u32>> = snap
        .pci
        .host_bridges
        .iter()
        .map(|h| (h.id.as_str(), h.numa_node))
        .collect();
    let hops: Vec<Vec<UpstreamHop>> = endpoints
        .iter()
        .map(|e| {
            e.placement
                .map(|p| upstream_hops(&p.parent, &roles, &parents))
                .unwrap_or_default()
        })
        .collect();
    let numa_of = |e: &Endpoint| -> Option<u32> {
        let p = e.placement?;
        p.numa_node
            .or_else(|| host_numa.get(p.host_bridge.as_str()).copied().flatten())
    };
    let single_numa = snap.numa_nodes.len() <= 1;
    let n = endpoints.len();
    let mut classes = vec![vec![PathClass::SelfPath; n]; n];
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            let (a, b) = (&endpoints[i], &endpoints[j]);
            if let (Some(ga), Some(gb)) = (a.gpu, b.gpu) {
                if let Some(links) = nvlinks_between(ga, gb) {
                    classes[i][j] = PathClass::NvLink(links);
                    continue;
                }
            }
            classes[i][j] = match (a.placement, b.placement) {
                (Some(pa), Some(pb)) => pcie_class(pa, pb, &hops[i], &hops[j], numa_of(a), numa_of(b), single_numa),
                // A device with no PCI path: nothing proves locality.
                _ => PathClass::Sys,
            };
        }
    }
    classes
}

fn matrix_device(label: String, name: String, p: Option<&PciPlacement>) -> MatrixDevice {
    MatrixDevice {
        label,
        name,
        bdf: p.map(|p| p.bdf),
        cpu_affinity: p
            .map(|p| p.cpu_affinity.to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "N/A".into()),
        numa_affinity: p
            .map(|p| crate::model::CpuList::from_ids(p.numa_affinity.iter().copied()).to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "N/A".into()),
        degraded_link: p.filter(|p| p.pcie.degradation().is_some()).map(|p| p.pcie.describe()),
    }
}

/// `NV#` between two GPUs: direct links to each other, else (both on an NVSwitch fabric) the
/// smaller of their switch-link counts, as nvidia-smi shows `NV18` on an HGX H100.
fn nvlinks_between(a: &crate::model::Gpu, b: &crate::model::Gpu) -> Option<u32> {
    let la = a.nvlinks.as_ref()?;
    let lb = b.nvlinks.as_ref()?;
    let direct = la
        .iter()
        .filter(|l| l.active && l.remote == NvLinkPeer::Gpu && l.remote_bdf == Some(b.placement.bdf))
        .count() as u32;
    if direct > 0 {
        return Some(direct);
    }
    let switch_links =
        |ls: &[crate::model::NvLink]| ls.iter().filter(|l| l.active && l.remote == NvLinkPeer::Switch).count() as u32;
    let (sa, sb) = (switch_links(la), switch_links(lb));
    (sa > 0 && sb > 0).then_some(sa.min(sb))
}

fn pcie_class(
    pa: &PciPlacement,
    pb: &PciPlacement,
    ha: &[UpstreamHop],
    hb: &[UpstreamHop],
    na: Option<u32>,
    nb: Option<u32>,
    single_numa: bool,
) -> PathClass {
    if let Some((i, j)) = ha
        .iter()
        .enumerate()
        .find_map(|(i, hop)| hb.iter().position(|h| h == hop).map(|j| (i, j)))
    {
        // Bridges crossed: those below the common one on each side, plus the common one.
        return if i + j < 1 { PathClass::Pix } else { PathClass::Pxb };
    }
    if !pa.host_bridge.is_empty() && pa.host_bridge == pb.host_bridge {
        return PathClass::Phb;
    }
    match (na, nb) {
        (Some(x), Some(y)) if x == y => PathClass::Node,
        (Some(_), Some(_)) => PathClass::Sys,
        _ if single_numa => PathClass::Node,
        // Unknown NUMA on a multi-node machine: never claim locality.
        _ => PathClass::Sys,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legend_is_nvidia_smi_verbatim() {
        let captured = include_str!("../../tests/data/h200-vm/topo-m.txt");
        assert!(captured.contains(LEGEND), "legend differs from the H200 capture");
    }
}
