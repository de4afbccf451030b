//! Rules: from a node's snapshot (and the fabric) to NCCL settings, each with the fact that
//! caused it. Debug-class variables are never produced here (NCCL's docs: "should not be used
//! in production"); cluster.yaml overrides win and are validated like everything else. Pure.

use super::conf::Setting;
use super::table::{validate, Class, Rejection};
use super::version::NcclVersion;
use crate::graph::paths::{path_matrix, PathClass};
use crate::model::snapshot::{LinkLayer, Nic, NicKind, NodeSnapshot, PciParent};
use std::collections::BTreeMap;

/// Where the topology file goes on a node.
pub const TOPO_FILE_PATH: &str = "/etc/nccl/topo-tune/topology.xml";

#[derive(Debug, Clone, PartialEq)]
pub struct Derived {
    pub settings: Vec<Setting>,
    /// NCCL topology XML to install at [`TOPO_FILE_PATH`], when a rule asked for it.
    pub topology_xml: Option<String>,
    /// Facts worth saying that set nothing (advisories, skipped rules).
    pub notes: Vec<String>,
}

fn is_efa(n: &Nic) -> bool {
    n.driver.as_deref() == Some("efa")
        || n.name.starts_with("rdmap")
        || n.pci.as_ref().is_some_and(|p| p.pci_id.starts_with("1d0f:"))
}

pub fn derive(
    snap: &NodeSnapshot,
    rails: Option<u32>,
    version: Option<NcclVersion>,
    overrides: &BTreeMap<String, String>,
) -> Result<Derived, Rejection> {
    let mut settings: Vec<Setting> = Vec::new();
    let mut notes = Vec::new();
    let matrix = path_matrix(snap);
    let gpu_rows: Vec<usize> = (0..matrix.devices.len())
        .filter(|&i| matrix.devices[i].label.starts_with("GPU"))
        .collect();
    let nearest = |nic_label: &str| -> Option<(PathClass, String)> {
        let j = matrix.devices.iter().position(|d| d.label == nic_label)?;
        gpu_rows
            .iter()
            .map(|&i| (matrix.classes[i][j], matrix.devices[i].label.clone()))
            .min_by_key(|(c, _)| *c)
    };
    let rdma: Vec<(String, &Nic)> = snap
        .matrix_nics()
        .enumerate()
        .map(|(i, n)| (format!("NIC{i}"), n))
        .collect();

    // NCCL_IB_HCA: exact names of the active RDMA devices near the GPUs.
    let verbs: Vec<&(String, &Nic)> = rdma.iter().filter(|(_, n)| !is_efa(n)).collect();
    // A NIC known only by its bus id (an NCCL topology file without `<net name>`) has no
    // device name NCCL could match: naming it would select nothing.
    let unnamed = verbs
        .iter()
        .filter(|(_, n)| n.name.parse::<crate::model::Bdf>().is_ok())
        .count();
    let verbs: Vec<&(String, &Nic)> = if unnamed > 0 {
        notes.push(format!(
            "{unnamed} RDMA NIC(s) are known only by bus id: NCCL_IB_HCA left to NCCL's detection"
        ));
        Vec::new()
    } else {
        verbs
    };
    if rdma.iter().any(|(_, n)| is_efa(n)) {
        notes.push(
            "EFA devices: NCCL reaches them through the aws-ofi-nccl plugin; NCCL_IB_HCA does not apply to them"
                .to_string(),
        );
    }
    let active: Vec<&&(String, &Nic)> = verbs
        .iter()
        .filter(|(_, n)| {
            n.rdma
                .as_ref()
                .is_some_and(|r| r.ports.is_empty() || r.ports.iter().any(|p| p.state_code.is_none_or(|c| c == 4)))
        })
        .collect();
    if !active.is_empty() {
        let near: Vec<&&&(String, &Nic)> = active
            .iter()
            .filter(|(l, _)| nearest(l).is_some_and(|(c, _)| c <= PathClass::Pxb))
            .collect();
        let chosen: Vec<&(String, &Nic)> = if near.is_empty() {
            active.iter().map(|x| **x).collect()
        } else {
            near.iter().map(|x| ***x).collect()
        };
        let mut names: Vec<&str> = chosen.iter().map(|(_, n)| n.name.as_str()).collect();
        names.sort_by_key(|n| crate::model::natural_key(n));
        let why: Vec<String> = chosen
            .iter()
            .map(|(l, n)| match nearest(l) {
                Some((c, g)) => format!("{} ({c} to {g})", n.name),
                None => n.name.clone(),
            })
            .collect();
        let skipped = verbs.len() - chosen.len();
        settings.push(Setting {
            name: "NCCL_IB_HCA".into(),
            value: format!("={}", names.join(",")),
            reason: format!(
                "active RDMA devices {}: {}{}; `=` makes the names exact (without it mlx5_1 also matches mlx5_10..19)",
                if near.is_empty() {
                    "(none within PXB of a GPU, so all)"
                } else {
                    "within PXB of a GPU"
                },
                why.join(", "),
                if skipped > 0 {
                    format!("; {skipped} other RDMA device(s) left out (down, or far from every GPU)")
                } else {
                    String::new()
                }
            ),
        });
    }

    // NCCL_SOCKET_IFNAME: the out-of-band Ethernet interface that is up.
    let mut oob: Vec<&str> = snap
        .nics
        .iter()
        .filter(|n| n.kind == NicKind::Ethernet)
        .flat_map(|n| n.netdevs.iter())
        .filter(|d| d.operstate.as_deref() == Some("up"))
        .map(|d| d.name.as_str())
        .collect();
    oob.sort_by_key(|n| crate::model::natural_key(n));
    match oob.first() {
        Some(ifname) => settings.push(Setting {
            name: "NCCL_SOCKET_IFNAME".into(),
            value: format!("={ifname}"),
            reason: format!("{ifname} is the Ethernet interface that is up and not an RDMA port ({} such); `=` avoids prefix matches", oob.len()),
        }),
        None => notes.push("no Ethernet interface is up apart from RDMA ports: NCCL_SOCKET_IFNAME left to NCCL's detection".into()),
    }

    // NCCL_IB_GID_INDEX: the RoCE v2 GID on RoCE ports, where NCCL does not pick it itself.
    let roce: Vec<(&str, Vec<u32>)> = verbs
        .iter()
        .filter_map(|(_, n)| n.rdma.as_ref().map(|r| (n.name.as_str(), r)))
        .flat_map(|(name, r)| {
            r.ports
                .iter()
                .filter(|p| p.link_layer == LinkLayer::Ethernet)
                .map(move |p| (name, p.roce_v2_gid_indexes.clone()))
        })
        .collect();
    if !roce.is_empty() {
        if version.is_some_and(|v| v >= NcclVersion(2, 21, 0)) {
            notes.push(
                "RoCE ports: NCCL ≥ 2.21 selects the RoCE v2 GID itself (NCCL_IB_GID_INDEX=-1), so none is forced"
                    .into(),
            );
        } else {
            // mlx5 lists link-local GIDs first; the last RoCE v2 index is the IPv4-mapped one.
            let picks: Vec<Option<u32>> = roce.iter().map(|(_, v)| v.last().copied()).collect();
            match picks.first().copied().flatten() {
                Some(idx) if picks.iter().all(|p| *p == Some(idx)) => settings.push(Setting {
                    name: "NCCL_IB_GID_INDEX".into(),
                    value: idx.to_string(),
                    reason: format!(
                        "RoCE v2 GIDs on {}: {:?}; {idx} is the last (IPv4-mapped) one{}",
                        roce[0].0,
                        roce[0].1,
                        if version.is_none() {
                            " (NCCL version unknown: set in case it is older than 2.21)"
                        } else {
                            ""
                        }
                    ),
                }),
                _ => notes.push(format!(
                    "RoCE ports disagree on their RoCE v2 GID index ({roce:?}): NCCL_IB_GID_INDEX not forced"
                )),
            }
        }
    }

    // NCCL_CROSS_NIC=0 on rail-optimised fabrics.
    if let Some(r) = rails {
        settings.push(Setting {
            name: "NCCL_CROSS_NIC".into(),
            value: "0".into(),
            reason: format!("the fabric is rail-optimised ({r} rails): keep each ring on one NIC/rail"),
        });
    }

    // NCCL_TOPO_FILE where NCCL's own detection is known to be wrong: a VM's flat PCI tree with
    // numa_node = -1 on GPUs or NICs (NCCL files them under a synthetic `numaid="-1"` CPU).
    let flat_unknown = snap
        .gpus
        .iter()
        .map(|g| &g.placement)
        .chain(rdma.iter().filter_map(|(_, n)| n.pci.as_ref()))
        .any(|p| p.numa_node.is_none() && p.numa_affinity.len() == 1 && matches!(p.parent, PciParent::HostBridge(_)));
    let mut topology_xml = None;
    if flat_unknown {
        topology_xml = Some(crate::emit::topo_xml::topology_xml(snap));
        settings.push(Setting {
            name: "NCCL_TOPO_FILE".into(),
            value: TOPO_FILE_PATH.into(),
            reason: "numa_node is -1 on GPUs/NICs straight under a host bridge (a VM): the file places them on the NUMA node their CPUs say".into(),
        });
    }

    // Advisory only: GPUDirect RDMA distance (NCCL_NET_GDR_LEVEL is a debugging variable).
    for (l, n) in &rdma {
        if let Some((c, g)) = nearest(l) {
            if c > PathClass::Pxb {
                notes.push(format!("{} is {c} from the nearest GPU ({g}): GPUDirect RDMA is off by default beyond PXB; NCCL_NET_GDR_LEVEL is a debugging variable, left to the canary", n.name));
            }
        }
    }

    // cluster.yaml overrides win; validated for this node's NCCL.
    for (name, value) in overrides {
        let var = validate(name, value, version)?;
        if var.class == Class::Debug {
            return Err(Rejection {
                name: name.clone(),
                value: value.clone(),
                reason: "a debugging variable in NCCL's docs: never written globally (a canary may try it)".into(),
            });
        }
        settings.retain(|s| &s.name != name);
        settings.push(Setting {
            name: name.clone(),
            value: value.clone(),
            reason: "cluster.yaml `nccl:` override".into(),
        });
    }
    for s in &settings {
        validate(&s.name, &s.value, version)?;
    }
    settings.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Derived {
        settings,
        topology_xml,
        notes,
    })
}
