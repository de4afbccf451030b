//! Inter-node order. NCCL chains nodes in rank order and detects no network topology
//! (NVIDIA/nccl#1340), so the hostfile order *is* the ring. Sorting nodes by their place in
//! the fabric (spine, leaf, rack, then hostname) makes the ring cross each switch level
//! exactly once per group at that level — the lower bound, since a ring visiting g groups
//! must leave each of them at least once. Nodes the fabric does not place go last. Pure.

use crate::graph::cluster::Placement;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// Ring edges that change group, per level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Crossings {
    pub spine: usize,
    pub leaf: usize,
    pub rack: usize,
}

pub use crate::model::natural_key;

fn tier(v: &Option<String>) -> (bool, Vec<(String, u64)>) {
    (v.is_none(), v.as_deref().map(natural_key).unwrap_or_default())
}

/// The solved order: by spine, leaf, rack, then hostname (natural order).
pub fn solved_order(hosts: &[String], placement: &HashMap<String, Placement>) -> Vec<String> {
    let none = Placement::default();
    let mut v = hosts.to_vec();
    v.sort_by_cached_key(|h| {
        let p = placement.get(h).unwrap_or(&none);
        (tier(&p.spine), tier(&p.leaf), tier(&p.rack), natural_key(h))
    });
    v
}

/// What launchers do by default: hosts in lexicographic order (torchrun's node ranks, a
/// sorted hostfile).
pub fn default_order(hosts: &[String]) -> Vec<String> {
    let mut v = hosts.to_vec();
    v.sort();
    v
}

pub fn crossings(order: &[String], placement: &HashMap<String, Placement>) -> Crossings {
    let n = order.len();
    let mut c = Crossings::default();
    if n < 2 {
        return c;
    }
    let none = Placement::default();
    for k in 0..n {
        let a = placement.get(&order[k]).unwrap_or(&none);
        let b = placement.get(&order[(k + 1) % n]).unwrap_or(&none);
        c.spine += usize::from(a.spine != b.spine);
        c.leaf += usize::from((&a.spine, &a.leaf) != (&b.spine, &b.leaf));
        c.rack += usize::from((&a.spine, &a.leaf, &a.rack) != (&b.spine, &b.leaf, &b.rack));
    }
    c
}

/// The fewest crossings any ring can have: the number of groups at each level (0 for one).
pub fn lower_bound(hosts: &[String], placement: &HashMap<String, Placement>) -> Crossings {
    let none = Placement::default();
    let count = |f: &dyn Fn(&Placement) -> String| {
        let groups: HashSet<String> = hosts.iter().map(|h| f(placement.get(h).unwrap_or(&none))).collect();
        if groups.len() > 1 {
            groups.len()
        } else {
            0
        }
    };
    Crossings {
        spine: count(&|p| format!("{:?}", p.spine)),
        leaf: count(&|p| format!("{:?}/{:?}", p.spine, p.leaf)),
        rack: count(&|p| format!("{:?}/{:?}/{:?}", p.spine, p.leaf, p.rack)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn placement(rack: usize, racks_per_leaf: usize, leaves_per_spine: usize) -> Placement {
        let leaf = rack / racks_per_leaf;
        Placement {
            spine: Some(format!("spine-{}", leaf / leaves_per_spine)),
            leaf: Some(format!("leaf-{leaf}")),
            rack: Some(format!("rack-{rack}")),
        }
    }

    proptest! {
        #[test]
        fn shuffled_hostnames_reach_the_lower_bound(
            assignment in proptest::collection::vec(0usize..12, 2..300),
            racks_per_leaf in 1usize..4,
            leaves_per_spine in 1usize..3,
            seed in any::<u64>(),
        ) {
            // Hostnames that say nothing about racks, in a shuffled inventory order.
            let mut hosts: Vec<String> = (0..assignment.len()).map(|i| format!("n{:x}", (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed)).collect();
            hosts.sort();
            hosts.dedup();
            let p: HashMap<String, Placement> = hosts.iter().zip(&assignment).map(|(h, &r)| (h.clone(), placement(r, racks_per_leaf, leaves_per_spine))).collect();
            let order = solved_order(&hosts, &p);
            prop_assert_eq!(crossings(&order, &p), lower_bound(&hosts, &p));
            let mut sorted = order.clone();
            sorted.sort();
            prop_assert_eq!(sorted, hosts.clone(), "every host exactly once");
        }
    }

    #[test]
    fn interleaved_hostnames_cross_every_time_by_default() {
        let hosts: Vec<String> = (0..16).map(|i| format!("gpu{i:03}")).collect();
        let p: HashMap<String, Placement> = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.clone(), placement(i % 4, 1, 4)))
            .collect();
        assert_eq!(crossings(&default_order(&hosts), &p).rack, 16);
        assert_eq!(crossings(&solved_order(&hosts, &p), &p).rack, 4);
        assert_eq!(lower_bound(&hosts, &p).rack, 4);
    }

    #[test]
    fn unplaced_nodes_go_last_and_natural_order_holds() {
        let hosts: Vec<String> = ["gpu10", "gpu9", "lost", "gpu2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut p = HashMap::new();
        for h in ["gpu10", "gpu9", "gpu2"] {
            p.insert(h.to_string(), placement(0, 1, 1));
        }
        assert_eq!(solved_order(&hosts, &p), ["gpu2", "gpu9", "gpu10", "lost"]);
    }
}
