//! doctor's NUMA checks: each GPU with an RDMA NIC on its socket, and every device's NUMA
//! node known (NCCL guesses from the PCI path otherwise).

use super::facts::Facts;
use super::finding::Finding;
use crate::graph::paths::path_matrix;
use crate::model::PathClass;

/// Each GPU and its nearest RDMA NIC on one NUMA node.
pub(super) fn gpu_nic_numa(f: &Facts) -> Option<Finding> {
    let m = path_matrix(f.snap);
    let gpus: Vec<usize> = (0..m.devices.len())
        .filter(|&i| m.devices[i].label.starts_with("GPU"))
        .collect();
    let nics: Vec<usize> = (0..m.devices.len())
        .filter(|&i| m.devices[i].label.starts_with("NIC"))
        .collect();
    if gpus.is_empty() || nics.is_empty() {
        return Some(Finding::skip("no GPU with an RDMA NIC on this node"));
    }
    let far: Vec<String> = gpus
        .iter()
        .filter_map(|&g| {
            let best = nics.iter().map(|&n| m.classes[g][n]).min()?;
            (best == PathClass::Sys).then(|| m.devices[g].label.clone())
        })
        .collect();
    Some(if far.is_empty() {
        Finding::pass("every GPU has an RDMA NIC on its NUMA node")
    } else {
        Finding::warn(
            format!(
                "{} reach their nearest RDMA NIC only across sockets (SYS)",
                far.join(", ")
            ),
            "move NICs or GPUs so each GPU has a NIC on its socket",
        )
    })
}

pub(super) fn numa_known(f: &Facts) -> Option<Finding> {
    Some(match f.snap.notes.iter().find(|n| n.code == "numa-unknown") {
        Some(n) => Finding::warn(n.message.clone(), "numa_node -1 means the firmware (ACPI _PXM) or the hypervisor does not say: ask for a BIOS/VM setting that exposes it; NCCL then guesses from the PCI path, and topo-tune init does not write a topology file for this"),
        None => Finding::pass("every GPU and NIC has a NUMA node"),
    })
}
