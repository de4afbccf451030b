//! Inter-node order. NCCL chains nodes in rank order and detects no network topology
//! (NVIDIA/nccl#1340), so the hostfile order *is* the ring. Walking the cluster graph depth
//! first (spines, then leaves, racks, hosts, each in natural name order) makes the ring cross
//! each switch level exactly once per group at that level — the lower bound, since a ring
//! visiting g groups must leave each of them at least once. Nodes the fabric does not place
//! hang off the core and go last. Pure.

use crate::graph::cluster::{ClusterGraph, Level};
use crate::model::plan::Crossings;
use std::collections::HashSet;

/// The solved order: the cluster graph's hosts, depth first.
pub(crate) fn solved_order(g: &ClusterGraph) -> Vec<String> {
    g.depth_first_hosts()
}

/// What launchers do by default: hosts in lexicographic order (torchrun's node ranks, a
/// sorted hostfile).
pub(crate) fn default_order(hosts: &[String]) -> Vec<String> {
    let mut v = hosts.to_vec();
    v.sort();
    v
}

const LEVELS: [Level; 3] = [Level::Spine, Level::Leaf, Level::Rack];

/// Ring edges that change group, per level; at the domain level, edges whose ends are not in
/// one NVLink domain (two hosts outside any domain do not cross one).
pub(crate) fn crossings(order: &[String], g: &ClusterGraph) -> Crossings {
    let n = order.len();
    let mut c = [0usize; 3];
    let mut domain = 0;
    if n >= 2 {
        for k in 0..n {
            let (a, b) = (&order[k], &order[(k + 1) % n]);
            for (i, level) in LEVELS.iter().enumerate() {
                c[i] += usize::from(g.group_at(a, *level) != g.group_at(b, *level));
            }
            domain += usize::from(g.domain_of(a) != g.domain_of(b));
        }
    }
    Crossings {
        spine: c[0],
        leaf: c[1],
        rack: c[2],
        domain,
    }
}

/// The fewest crossings any ring can have: the number of groups at each level (0 for one).
pub(crate) fn lower_bound(hosts: &[String], g: &ClusterGraph) -> Crossings {
    let count = |level: Level| {
        let groups: HashSet<_> = hosts.iter().map(|h| g.group_at(h, level)).collect();
        if groups.len() > 1 {
            groups.len()
        } else {
            0
        }
    };
    let domains: HashSet<_> = hosts.iter().map(|h| g.domain_of(h)).collect();
    let any_domain = domains.iter().any(Option::is_some);
    Crossings {
        spine: count(Level::Spine),
        leaf: count(Level::Leaf),
        rack: count(Level::Rack),
        // Each domain (and the hosts outside any, together) is left once at best.
        domain: if any_domain && domains.len() > 1 {
            domains.len()
        } else {
            0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::cluster::{HostFacts, HostSpec};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn labels(rack: usize, racks_per_leaf: usize, leaves_per_spine: usize) -> BTreeMap<String, String> {
        let leaf = rack / racks_per_leaf;
        BTreeMap::from([
            ("spine".to_string(), format!("spine-{}", leaf / leaves_per_spine)),
            ("leaf".to_string(), format!("leaf-{leaf}")),
            ("rack".to_string(), format!("rack-{rack}")),
        ])
    }

    fn facts() -> HostFacts {
        HostFacts {
            gpus: 8,
            ring_gbps: 100.0,
            hop_latency_us: 3.4,
            net_gbps: 50.0,
            net_assumed: None,
            nvlink_gbps: 0.0,
        }
    }

    fn graph(hosts: &[String], labels: &[BTreeMap<String, String>]) -> ClusterGraph {
        let specs: Vec<HostSpec> = hosts
            .iter()
            .zip(labels)
            .map(|(h, l)| HostSpec {
                name: h,
                labels: l,
                facts: facts(),
                domain: None,
            })
            .collect();
        ClusterGraph::build(&specs, None)
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
            let l: Vec<_> = assignment.iter().take(hosts.len()).map(|&r| labels(r, racks_per_leaf, leaves_per_spine)).collect();
            let g = graph(&hosts, &l);
            let order = solved_order(&g);
            prop_assert_eq!(crossings(&order, &g), lower_bound(&hosts, &g));
            let mut sorted = order.clone();
            sorted.sort();
            prop_assert_eq!(sorted, hosts.clone(), "every host exactly once");
        }
    }

    #[test]
    fn interleaved_hostnames_cross_every_time_by_default() {
        let hosts: Vec<String> = (0..16).map(|i| format!("gpu{i:03}")).collect();
        let l: Vec<_> = (0..16).map(|i| labels(i % 4, 1, 4)).collect();
        let g = graph(&hosts, &l);
        assert_eq!(crossings(&default_order(&hosts), &g).rack, 16);
        assert_eq!(crossings(&solved_order(&g), &g).rack, 4);
        assert_eq!(lower_bound(&hosts, &g).rack, 4);
    }

    #[test]
    fn unplaced_nodes_go_last_and_natural_order_holds() {
        let hosts: Vec<String> = ["gpu10", "gpu9", "lost", "gpu2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let l: Vec<_> = hosts
            .iter()
            .map(|h| if h == "lost" { BTreeMap::new() } else { labels(0, 1, 1) })
            .collect();
        assert_eq!(solved_order(&graph(&hosts, &l)), ["gpu2", "gpu9", "gpu10", "lost"]);
    }

    #[test]
    fn a_node_without_a_leaf_is_grouped_by_its_spine() {
        // (spine-0, no leaf) and (spine-1, no leaf) are different leaf-level groups, as they
        // are different spines; two unplaced nodes share one group at every level.
        let hosts: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let l = vec![
            BTreeMap::from([("spine".to_string(), "spine-0".to_string())]),
            BTreeMap::from([("spine".to_string(), "spine-1".to_string())]),
            BTreeMap::new(),
            BTreeMap::new(),
        ];
        let g = graph(&hosts, &l);
        assert_eq!(
            crossings(&hosts, &g),
            Crossings {
                spine: 3,
                leaf: 3,
                rack: 3,
                domain: 0,
            }
        );
        assert_eq!(lower_bound(&hosts, &g).leaf, 3);
    }
}
