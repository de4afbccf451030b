//! NCCL topology XML (`NCCL_TOPO_FILE`) in NCCL's own dialect (research/nccl.md §2; compare
//! ../shared/captures/h200-vm-1gpu/nccl-topo.xml): `<system version="1">`, one `<cpu>` per
//! NUMA node with its `numaid` and `affinity`, `<pci>` leaves with lower-case 4-digit-domain
//! bus ids. Following NCCL's maintainers' recipe only `<cpu>` and `<pci>` are written; NCCL
//! fills GPUs, NICs and CPU vendor details itself. No XML declaration, no tabs, one tag a line.

use crate::model::snapshot::{NicKind, NodeSnapshot, PciPlacement};
use crate::model::CpuList;
use std::collections::BTreeMap;
use std::fmt::Write;

/// NCCL's cpumask text: 32-bit groups of 8 hex digits, most significant first.
pub(crate) fn affinity_mask(cpus: &CpuList) -> String {
    let max = cpus.iter().last().unwrap_or(0);
    let groups = (max / 32 + 1) as usize;
    let mut words = vec![0u32; groups];
    for c in cpus.iter() {
        words[(c / 32) as usize] |= 1 << (c % 32);
    }
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn speed_text(gen: Option<u8>) -> Option<&'static str> {
    Some(match gen? {
        1 => "2.5 GT/s PCIe",
        2 => "5.0 GT/s PCIe",
        3 => "8.0 GT/s PCIe",
        4 => "16.0 GT/s PCIe",
        5 => "32.0 GT/s PCIe",
        6 => "64.0 GT/s PCIe",
        _ => return None,
    })
}

/// The node's GPUs and RDMA NICs under the NUMA node their CPUs belong to. Devices whose
/// affinity does not name exactly one node are left out (NCCL detects those itself).
pub(crate) fn topology_xml(snap: &NodeSnapshot) -> String {
    let mut by_node: BTreeMap<u32, Vec<&PciPlacement>> = BTreeMap::new();
    let devices = snap.gpus.iter().map(|g| &g.placement).chain(
        snap.nics
            .iter()
            .filter(|n| n.kind == NicKind::Rdma)
            .filter_map(|n| n.pci.as_ref()),
    );
    for p in devices {
        let node = p.numa_node.or(match p.numa_affinity.as_slice() {
            [one] => Some(*one),
            _ => None,
        });
        if let Some(n) = node {
            by_node.entry(n).or_default().push(p);
        }
    }
    // A PCI function is listed once, under the first NUMA node that claims it.
    let mut listed = std::collections::HashSet::new();
    for devs in by_node.values_mut() {
        devs.retain(|p| listed.insert(p.bdf));
    }
    by_node.retain(|_, devs| !devs.is_empty());
    let mut out = String::from("<system version=\"1\">\n");
    for (node, devs) in by_node {
        let cpus = snap
            .numa_nodes
            .iter()
            .find(|n| n.id == node)
            .map(|n| n.cpus.clone())
            .unwrap_or_default();
        let _ = write!(out, "  <cpu numaid=\"{node}\"");
        if !cpus.is_empty() {
            let _ = write!(out, " affinity=\"{}\"", affinity_mask(&cpus));
        }
        if let Some(arch) = &snap.machine.architecture {
            let _ = write!(out, " arch=\"{}\"", super::xml_attr(arch));
        }
        out.push_str(">\n");
        let mut devs = devs;
        devs.sort_by_key(|p| p.bdf);
        // A multi-port NIC is several devices on one PCI function: one <pci> element.
        devs.dedup_by_key(|p| p.bdf);
        for p in devs {
            let _ = write!(
                out,
                "    <pci busid=\"{}\" class=\"{}\"",
                p.bdf,
                super::xml_attr(&p.class)
            );
            if let Some(s) = speed_text(p.pcie.current_gen) {
                let _ = write!(out, " link_speed=\"{s}\"");
            }
            if let Some(w) = p.pcie.current_width {
                let _ = write!(out, " link_width=\"{w}\"");
            }
            out.push_str("/>\n");
        }
        out.push_str("  </cpu>\n");
    }
    out.push_str("</system>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_like_nccls() {
        assert_eq!(affinity_mask(&CpuList::parse("0-15").unwrap()), "0000ffff");
        assert_eq!(
            affinity_mask(&CpuList::parse("0-19,40-59").unwrap()),
            "0fffff00,000fffff"
        );
        assert_eq!(
            affinity_mask(&CpuList::parse("64").unwrap()),
            "00000001,00000000,00000000"
        );
    }

    #[test]
    fn a_multi_port_nic_is_one_pci_element() {
        // Found by the fuzz harness: mlx5_0 and mlx5_1 share bus 0000:12:00.0.
        let snap =
            NodeSnapshot::from_json(include_str!("../../fuzz/corpus/snapshot_json/seed-dual-port.json")).unwrap();
        let xml = topology_xml(&snap);
        assert_eq!(xml.matches("busid=\"0000:12:00.0\"").count(), 1, "{xml}");
    }
}
