//! Bridge roles and PCIe switches, derived from the parent links of a PCI tree. Pure.
//!
//! A PCIe switch shows up as two kinds of bridge: one upstream port whose children are the
//! downstream ports. hwloc and sysfs only give parent links, not the port type (that is in
//! config space), so roles are derived structurally:
//! - a bridge straight under a host bridge is a root port — unless it has two or more bridge
//!   children, which no root port can have (one link), so it is a switch upstream port that a
//!   hypervisor put straight on the root bus;
//! - a bridge under a switch upstream port is one of its downstream ports;
//! - any other bridge with bridge children is the upstream port of a (possibly nested) switch;
//! - anything else is a plain bridge.
//!
//! Each switch is then counted once, by its upstream port.

use crate::model::pci::Bdf;
use crate::model::snapshot::{BridgeRole, PciParent, PciSwitch};
use std::collections::HashMap;

/// The minimum a bridge needs for role assignment.
#[derive(Debug, Clone)]
pub(crate) struct BridgeLink {
    pub(crate) bdf: Bdf,
    pub(crate) parent: PciParent,
    pub(crate) pci_id: Option<String>,
}

/// Assign a role to every bridge and list the switches. Bridges whose parent is missing from
/// the list are treated as if under a host bridge (never panics on a broken tree).
pub(crate) fn classify(bridges: &[BridgeLink]) -> (HashMap<Bdf, BridgeRole>, Vec<PciSwitch>) {
    let by_bdf: HashMap<Bdf, &BridgeLink> = bridges.iter().map(|b| (b.bdf, b)).collect();
    let mut bridge_children: HashMap<Bdf, usize> = HashMap::new();
    for b in bridges {
        if let PciParent::Bridge(p) = b.parent {
            if by_bdf.contains_key(&p) {
                *bridge_children.entry(p).or_default() += 1;
            }
        }
    }
    let mut roles: HashMap<Bdf, BridgeRole> = HashMap::new();
    // Resolve parents before children: sort by depth (bounded walk, so cycles cannot loop).
    let depth = |b: &BridgeLink| {
        let mut d = 0usize;
        let mut cur = b.parent.clone();
        while let PciParent::Bridge(p) = cur {
            match by_bdf.get(&p) {
                Some(parent) if d < bridges.len() => {
                    d += 1;
                    cur = parent.parent.clone();
                }
                _ => break,
            }
        }
        d
    };
    let mut order: Vec<&BridgeLink> = bridges.iter().collect();
    order.sort_by_key(|b| (depth(b), b.bdf));
    for b in order {
        let children = bridge_children.get(&b.bdf).copied().unwrap_or(0);
        let parent_role = match b.parent {
            PciParent::Bridge(p) => roles.get(&p).copied(),
            PciParent::HostBridge(_) => None,
        };
        let role = match parent_role {
            None if children >= 2 => BridgeRole::SwitchUpstream,
            None => BridgeRole::RootPort,
            Some(BridgeRole::SwitchUpstream) => BridgeRole::SwitchDownstream,
            Some(_) if children >= 1 => BridgeRole::SwitchUpstream,
            Some(_) => BridgeRole::Bridge,
        };
        roles.insert(b.bdf, role);
    }
    let mut switches: Vec<PciSwitch> = bridges
        .iter()
        .filter(|b| roles.get(&b.bdf) == Some(&BridgeRole::SwitchUpstream))
        .map(|up| {
            let mut downstream: Vec<Bdf> = bridges
                .iter()
                .filter(|b| b.parent == PciParent::Bridge(up.bdf))
                .map(|b| b.bdf)
                .collect();
            downstream.sort();
            PciSwitch {
                upstream: up.bdf,
                downstream_ports: downstream,
                host_bridge: host_bridge_of(&up.parent, &by_bdf),
                pci_id: up.pci_id.clone(),
            }
        })
        .collect();
    switches.sort_by_key(|s| s.upstream);
    (roles, switches)
}

fn host_bridge_of(parent: &PciParent, by_bdf: &HashMap<Bdf, &BridgeLink>) -> String {
    let mut cur = parent.clone();
    for _ in 0..=by_bdf.len() {
        match cur {
            PciParent::HostBridge(id) => return id,
            PciParent::Bridge(p) => match by_bdf.get(&p) {
                Some(b) => cur = b.parent.clone(),
                None => return String::new(),
            },
        }
    }
    String::new()
}

/// One step on the way from a device up to its host bridge, with a switch's two port levels
/// folded into one step (that is how `nvidia-smi` and NCCL count "a PCIe bridge").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum UpstreamHop {
    Switch(Bdf),
    Port(Bdf),
    Bridge(Bdf),
}

/// Hops from a device's parent up to (not including) its host bridge, nearest first.
pub(crate) fn upstream_hops(
    parent: &PciParent,
    roles: &HashMap<Bdf, BridgeRole>,
    parents: &HashMap<Bdf, PciParent>,
) -> Vec<UpstreamHop> {
    let mut hops = Vec::new();
    let mut cur = parent.clone();
    for _ in 0..=parents.len() {
        let PciParent::Bridge(b) = cur else { break };
        let Some(next) = parents.get(&b) else { break };
        match roles.get(&b) {
            Some(BridgeRole::SwitchDownstream) => {
                // Fold the downstream port into its switch and continue above the upstream port.
                let PciParent::Bridge(up) = next else {
                    hops.push(UpstreamHop::Bridge(b));
                    cur = next.clone();
                    continue;
                };
                hops.push(UpstreamHop::Switch(*up));
                cur = parents.get(up).cloned().unwrap_or(PciParent::HostBridge(String::new()));
            }
            Some(BridgeRole::SwitchUpstream) => {
                hops.push(UpstreamHop::Switch(b));
                cur = next.clone();
            }
            Some(BridgeRole::RootPort) => {
                hops.push(UpstreamHop::Port(b));
                cur = next.clone();
            }
            _ => {
                hops.push(UpstreamHop::Bridge(b));
                cur = next.clone();
            }
        }
    }
    hops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bdf {
        s.parse().unwrap()
    }
    fn link(bdf: &str, parent: PciParent) -> BridgeLink {
        BridgeLink {
            bdf: b(bdf),
            parent,
            pci_id: Some("1000:c010".into()),
        }
    }
    fn hb() -> PciParent {
        PciParent::HostBridge("pci0000:00".into())
    }

    #[test]
    fn switch_behind_root_port_counts_once() {
        let bridges = vec![
            link("0000:00:01.0", hb()),
            link("0000:01:00.0", PciParent::Bridge(b("0000:00:01.0"))),
            link("0000:02:00.0", PciParent::Bridge(b("0000:01:00.0"))),
            link("0000:02:01.0", PciParent::Bridge(b("0000:01:00.0"))),
        ];
        let (roles, switches) = classify(&bridges);
        assert_eq!(roles[&b("0000:00:01.0")], BridgeRole::RootPort);
        assert_eq!(roles[&b("0000:01:00.0")], BridgeRole::SwitchUpstream);
        assert_eq!(roles[&b("0000:02:01.0")], BridgeRole::SwitchDownstream);
        assert_eq!(switches.len(), 1);
        assert_eq!(switches[0].downstream_ports.len(), 2);
        assert_eq!(switches[0].host_bridge, "pci0000:00");
    }

    #[test]
    fn nested_switches_and_flattened_upstream() {
        let bridges = vec![
            // A switch upstream port put straight on the root bus (two bridge children).
            link("0000:00:02.0", hb()),
            link("0000:01:00.0", PciParent::Bridge(b("0000:00:02.0"))),
            link("0000:01:01.0", PciParent::Bridge(b("0000:00:02.0"))),
            // A second switch below the first downstream port.
            link("0000:02:00.0", PciParent::Bridge(b("0000:01:00.0"))),
            link("0000:03:00.0", PciParent::Bridge(b("0000:02:00.0"))),
        ];
        let (roles, switches) = classify(&bridges);
        assert_eq!(roles[&b("0000:00:02.0")], BridgeRole::SwitchUpstream);
        assert_eq!(roles[&b("0000:02:00.0")], BridgeRole::SwitchUpstream);
        assert_eq!(roles[&b("0000:03:00.0")], BridgeRole::SwitchDownstream);
        assert_eq!(switches.len(), 2);
    }

    #[test]
    fn cycles_and_dangling_parents_do_not_hang() {
        let bridges = vec![
            link("0000:01:00.0", PciParent::Bridge(b("0000:02:00.0"))),
            link("0000:02:00.0", PciParent::Bridge(b("0000:01:00.0"))),
            link("0000:05:00.0", PciParent::Bridge(b("0000:09:00.0"))),
        ];
        let (roles, _) = classify(&bridges);
        assert_eq!(roles.len(), 3);
        let parents: HashMap<Bdf, PciParent> = bridges.iter().map(|x| (x.bdf, x.parent.clone())).collect();
        let hops = upstream_hops(&PciParent::Bridge(b("0000:01:00.0")), &roles, &parents);
        assert!(hops.len() <= parents.len() + 1);
    }
}
