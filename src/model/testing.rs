//! Unit-test fixtures: real snapshots (AWS p4d and p5en, as `probe --from-hwloc-xml` made
//! them from hwloc 2.10 exports; see tests/data/SOURCES.md) and the edits tests make to them.

use super::snapshot::{LinkLayer, NicKind, NodeSnapshot};

/// p4d.24xlarge: 8 A100 (NVSwitch), 4 EFA devices.
pub(crate) fn p4d() -> NodeSnapshot {
    NodeSnapshot::from_json(include_str!("../../tests/data/snapshots/aws-p4d.json")).expect("fixture parses")
}

/// p5en.48xlarge: 8 H200 (NVSwitch), 16 EFA devices, 4 Ethernet interfaces.
pub(crate) fn p5en() -> NodeSnapshot {
    NodeSnapshot::from_json(include_str!("../../tests/data/snapshots/aws-p5en.json")).expect("fixture parses")
}

/// The same board with its RDMA devices as ConnectX (mlx5_0, mlx5_1, …, in PCI order): NCCL
/// drives them through verbs, so the IB rules apply.
pub(crate) fn as_connectx(mut s: NodeSnapshot) -> NodeSnapshot {
    for (i, nic) in s.nics.iter_mut().filter(|n| n.kind == NicKind::Rdma).enumerate() {
        let name = format!("mlx5_{i}");
        nic.name = name.clone();
        nic.driver = Some("mlx5_core".into());
        if let Some(p) = nic.pci.as_mut() {
            p.pci_id = Some("15b3:1021".into());
        }
        if let Some(r) = nic.rdma.as_mut() {
            r.device = name;
            for p in &mut r.ports {
                p.link_layer = LinkLayer::InfiniBand;
            }
        }
    }
    s
}
