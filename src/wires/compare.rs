//! A discovered fabric held against cluster.yaml: racks the wires split or join, hosts one side
//! lacks, switch names cluster.yaml uses that the wires do not show. Pure.

use super::derive::Discovered;
use crate::config::Inventory;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Where cluster.yaml and the wires disagree.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Diff {
    /// A typed rack whose hosts the wires put in more than one leaf group, or a group whose
    /// hosts cluster.yaml puts in more than one rack.
    pub(crate) regrouped: Vec<String>,
    /// Hosts cluster.yaml lists that no port of the capture names.
    pub(crate) not_seen: Vec<String>,
    /// Hosts on the wires cluster.yaml does not list.
    pub(crate) not_listed: usize,
    /// Leaves and spines cluster.yaml names that are no switch or group on the wires.
    pub(crate) switches_not_seen: Vec<String>,
}

/// cluster.yaml against the wires: racks the wires split or join, hosts one side lacks,
/// switch names cluster.yaml uses that the wires do not show.
pub(crate) fn diff(d: &Discovered, inv: &Inventory) -> Diff {
    let group_of: BTreeMap<&str, &str> = d
        .groups
        .iter()
        .flat_map(|g| g.hosts.iter().map(move |h| (h.as_str(), g.name.as_str())))
        .collect();
    let mut by_rack: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut by_group: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut not_seen = Vec::new();
    for n in &inv.nodes {
        match group_of.get(n.host.as_str()) {
            None => not_seen.push(n.host.clone()),
            Some(g) => {
                if let Some(r) = n.labels.get("rack") {
                    by_rack.entry(r).or_default().insert(g);
                    by_group.entry(g).or_default().insert(r);
                }
            }
        }
    }
    let mut regrouped = Vec::new();
    for (rack, groups) in by_rack.iter().filter(|(_, g)| g.len() > 1) {
        regrouped.push(format!(
            "rack {rack}: its hosts are on {} leaf groups on the wires ({})",
            groups.len(),
            groups.iter().copied().collect::<Vec<_>>().join(", ")
        ));
    }
    for (group, racks) in by_group.iter().filter(|(_, r)| r.len() > 1) {
        regrouped.push(format!(
            "leaf group {group}: cluster.yaml puts its hosts in {} racks ({})",
            racks.len(),
            racks.iter().copied().collect::<Vec<_>>().join(", ")
        ));
    }
    let listed: BTreeSet<&str> = inv.nodes.iter().map(|n| n.host.as_str()).collect();
    let on_wires: BTreeSet<&str> = d
        .switches
        .iter()
        .map(|s| s.name.as_str())
        .chain(d.groups.iter().map(|g| g.name.as_str()))
        .collect();
    let switches_not_seen = inv
        .fabric
        .iter()
        .flat_map(|f| {
            f.leaves
                .iter()
                .flat_map(|(l, leaf)| std::iter::once(l.clone()).chain(leaf.spine.clone()))
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|s| !on_wires.contains(s.as_str()))
        .collect();
    Diff {
        regrouped,
        not_seen,
        not_listed: d.hosts.iter().filter(|h| !listed.contains(h.name.as_str())).count(),
        switches_not_seen,
    }
}
