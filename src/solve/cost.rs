//! Predicted ring all-reduce time and bus bandwidth for a node order, read off the cluster
//! graph: the α–β ring model with NCCL's constants (`model::topo_h`). Pure.
//!
//! T(S) = lat + S / algBw, algBw = B · nranks / (2(nranks−1)), busbw = (S/T) · 2(nranks−1)/nranks
//! lat  = base + (nsteps − nInterSteps)·intraLat + nInterSteps·interLat (× 1.4 multi-node)
//! B    = the slowest link the ring uses: a node's intra-node ring, or any graph link on the
//!        routes of the ring's edges, divided by the number of ring edges routed over it in
//!        the same direction (a leaf's uplink shared by every edge that leaves the leaf).
//!
//! A ring edge between two members of one NVLink domain is an NVLink hop (NCCL joins the
//! domain's GPUs into one system): it loads the members' NVLink, not their NICs, and counts
//! as an intra-node step; `nInterSteps` counts only the edges that leave a domain (or join
//! two nodes outside any), as NCCL counts nodes as domains (cliques).

use crate::graph::cluster::{ClusterGraph, LinkKind, Route};
use crate::model::plan::Prediction;
use crate::model::topo_h::{BASE_LAT_US, LAT_NVLINK_US, MULTI_NODE_LAT_FACTOR};
use petgraph::graph::EdgeIndex;
use std::collections::HashMap;

/// The slowest link seen so far and what it is.
struct Bottleneck {
    gbps: f64,
    what: String,
    /// What the figure rests on when it is not a node's own report.
    assumed: Option<String>,
}

impl Bottleneck {
    fn consider(&mut self, gbps: f64, what: impl FnOnce() -> String) {
        self.consider_assumed(gbps, what, || None);
    }

    fn consider_assumed(&mut self, gbps: f64, what: impl FnOnce() -> String, assumed: impl FnOnce() -> Option<String>) {
        if gbps < self.gbps {
            self.gbps = gbps;
            self.what = what();
            self.assumed = assumed();
        }
    }
}

/// Ring edges routed over each link, per direction (`true` = up).
type Loads = HashMap<(EdgeIndex, bool), usize>;

pub(crate) fn predict(order: &[String], g: &ClusterGraph, message_bytes: u64) -> Prediction {
    let mut b = Bottleneck {
        gbps: f64::INFINITY,
        what: "none".into(),
        assumed: None,
    };
    let (nranks, intra_lat) = intra_node(order, g, &mut b);
    let nnodes = order.len();
    let mut inter_lat_sum = 0.0;
    let mut inter_edges = 0;
    if nnodes > 1 {
        let routes: Vec<(usize, Route)> = (0..nnodes)
            .filter_map(|k| g.route(&order[k], &order[(k + 1) % nnodes]).map(|r| (k, r)))
            .collect();
        let loads = loads(&routes);
        for (k, route) in &routes {
            if g.within_domain(route) {
                nvlink_links(g, route, &loads, &mut b);
                continue;
            }
            inter_edges += 1;
            network(g, &order[*k], &order[(k + 1) % nnodes], &mut b);
            shared_links(g, route, &loads, &mut b);
            inter_lat_sum += g.route_latency_us(route);
        }
    }
    if nranks < 2 || !b.gbps.is_finite() || b.gbps <= 0.0 {
        return nothing_to_reduce();
    }
    let nsteps = 2 * (nranks - 1);
    // A ring of k NVLink islands (domains, or nodes outside any) has k edges between them.
    let inter_steps = if inter_edges > 1 { 2 * (inter_edges - 1) } else { 0 };
    let inter_lat = if inter_edges > 0 {
        inter_lat_sum / inter_edges as f64
    } else {
        0.0
    };
    let mut latency_us =
        BASE_LAT_US + (nsteps - inter_steps.min(nsteps)) as f64 * intra_lat + inter_steps as f64 * inter_lat;
    if inter_edges > 0 {
        latency_us *= MULTI_NODE_LAT_FACTOR;
    }
    let algbw = b.gbps * nranks as f64 / nsteps as f64;
    let s = message_bytes as f64;
    let time_us = latency_us + s / (1000.0 * algbw);
    Prediction {
        time_us,
        busbw_gbps: s / time_us / 1000.0 * nsteps as f64 / nranks as f64,
        algbw_gbps: s / time_us / 1000.0,
        bottleneck_gbps: b.gbps,
        bottleneck: b.what,
        latency_us,
        assumed: b.assumed,
    }
}

/// Ranks in the ring and the intra-node hop latency; every node's ring is a candidate
/// bottleneck.
fn intra_node(order: &[String], g: &ClusterGraph, b: &mut Bottleneck) -> (usize, f64) {
    let mut nranks = 0;
    let mut lat: f64 = 0.0;
    for h in order {
        let Some(f) = g.host(h) else { continue };
        nranks += f.gpus;
        if f.gpus > 1 {
            b.consider(f.ring_gbps, || format!("intra-node ring on {h}"));
            lat = lat.max(f.hop_latency_us);
        }
    }
    (nranks, if lat == 0.0 { LAT_NVLINK_US } else { lat })
}

fn loads(routes: &[(usize, Route)]) -> Loads {
    let mut loads = Loads::new();
    for (_, r) in routes {
        for &e in &r.up {
            *loads.entry((e, true)).or_default() += 1;
        }
        for &e in &r.down {
            *loads.entry((e, false)).or_default() += 1;
        }
    }
    loads
}

/// Each end's own network: every ring edge leaves one host and enters the next (a domain
/// member's is its whole domain's).
fn network(g: &ClusterGraph, a: &str, b_host: &str, b: &mut Bottleneck) {
    let net = |h: &str| g.net_gbps(h).unwrap_or(f64::INFINITY);
    let (na, nb) = (net(a), net(b_host));
    let slower = if na <= nb { a } else { b_host };
    b.consider_assumed(
        na.min(nb),
        || match g.domain_of(slower) {
            Some(_) => format!("network of {slower}'s NVLink domain"),
            None => format!("network of {slower}"),
        },
        || g.host(slower).and_then(|f| f.net_assumed.clone()),
    );
}

/// The members' NVLink on a route inside a domain, each shared by the ring edges over it.
fn nvlink_links(g: &ClusterGraph, route: &Route, loads: &Loads, b: &mut Bottleneck) {
    let up = route.up.iter().map(|&e| (e, true));
    let down = route.down.iter().map(|&e| (e, false));
    for (e, dir) in up.chain(down) {
        let link = g.link(e);
        let k = loads.get(&(e, dir)).copied().unwrap_or(1);
        b.consider(link.gbps / k as f64, || {
            format!("NVLink of {} into its domain", g.below(e).name)
        });
    }
}

/// Switch links on the route, each shared by every ring edge routed the same way over it.
/// A host's own network link is its `network`, and its NVLink carries nothing out of a domain.
fn shared_links(g: &ClusterGraph, route: &Route, loads: &Loads, b: &mut Bottleneck) {
    let up = route.up.iter().map(|&e| (e, true));
    let down = route.down.iter().map(|&e| (e, false));
    for (e, dir) in up.chain(down) {
        let link = g.link(e);
        if matches!(link.kind, LinkKind::Network | LinkKind::Nvlink) || !link.gbps.is_finite() {
            continue;
        }
        let k = loads.get(&(e, dir)).copied().unwrap_or(1);
        b.consider(link.gbps / k as f64, || {
            format!("uplink of {} shared by {k} ring edge(s)", g.below(e).name)
        });
    }
}

fn nothing_to_reduce() -> Prediction {
    Prediction {
        time_us: 0.0,
        busbw_gbps: 0.0,
        algbw_gbps: 0.0,
        bottleneck_gbps: 0.0,
        bottleneck: "fewer than 2 ranks: nothing to reduce".into(),
        latency_us: 0.0,
        assumed: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::cluster::{HostFacts, HostSpec};
    use crate::model::fabric::{Fabric, Leaf};
    use std::collections::BTreeMap;

    fn facts(ring_gbps: f64, net_gbps: f64) -> HostFacts {
        HostFacts {
            gpus: 8,
            ring_gbps,
            hop_latency_us: LAT_NVLINK_US,
            net_gbps,
            net_assumed: None,
            nvlink_gbps: 0.0,
        }
    }

    /// Hosts `h0..hN` with labels from `rack_of`, each with the same facts.
    fn cluster(racks: &[&str], fabric: Option<&Fabric>, f: &HostFacts) -> (Vec<String>, ClusterGraph) {
        let hosts: Vec<String> = (0..racks.len()).map(|i| format!("h{i}")).collect();
        let labels: Vec<BTreeMap<String, String>> = racks
            .iter()
            .map(|r| BTreeMap::from([("rack".to_string(), r.to_string())]))
            .collect();
        let specs: Vec<HostSpec> = hosts
            .iter()
            .zip(&labels)
            .map(|(h, l)| HostSpec {
                name: h,
                labels: l,
                facts: f.clone(),
                domain: None,
            })
            .collect();
        let g = ClusterGraph::build(&specs, fabric);
        (hosts, g)
    }

    fn fabric(uplink_gbps: f64) -> Fabric {
        Fabric {
            racks: BTreeMap::from([
                ("r0".to_string(), Some("leaf-0".to_string())),
                ("r1".to_string(), Some("leaf-1".to_string())),
            ]),
            leaves: BTreeMap::from([
                (
                    "leaf-0".to_string(),
                    Leaf {
                        spine: Some("s0".into()),
                        uplink_gbps: Some(uplink_gbps),
                    },
                ),
                (
                    "leaf-1".to_string(),
                    Leaf {
                        spine: Some("s1".into()),
                        uplink_gbps: Some(uplink_gbps),
                    },
                ),
            ]),
            rails: None,
            ..Default::default()
        }
    }

    #[test]
    fn two_nodes_under_one_leaf_by_hand() {
        let (hosts, g) = cluster(&["r0", "r0"], Some(&fabric(3200.0)), &facts(100.0, 50.0));
        let p = predict(&hosts, &g, 1 << 30);
        // 16 ranks, 30 steps, 2 of them between nodes; no switch tier inside one leaf.
        let latency = (BASE_LAT_US + 28.0 * LAT_NVLINK_US + 2.0 * 14.0) * MULTI_NODE_LAT_FACTOR;
        assert!((p.latency_us - latency).abs() < 1e-9, "{}", p.latency_us);
        assert_eq!(p.bottleneck, "network of h0");
        assert_eq!(p.bottleneck_gbps, 50.0);
        let algbw = 50.0 * 16.0 / 30.0;
        let time = latency + (1u64 << 30) as f64 / (1000.0 * algbw);
        assert!((p.time_us - time).abs() < 1e-6);
        assert!((p.busbw_gbps - (1u64 << 30) as f64 / time / 1000.0 * 30.0 / 16.0).abs() < 1e-9);
    }

    #[test]
    fn routes_through_two_spines_cost_two_tiers() {
        let f = facts(100.0, 50.0);
        let (same, g1) = cluster(&["r0", "r0"], Some(&fabric(3200.0)), &f);
        let (split, g2) = cluster(&["r0", "r1"], Some(&fabric(3200.0)), &f);
        let extra = predict(&split, &g2, 1 << 30).latency_us - predict(&same, &g1, 1 << 30).latency_us;
        // Two inter-node steps, each 2 tiers (leaf→spine→core and back down) more, × 1.4.
        assert!((extra - 2.0 * 2.0 * MULTI_NODE_LAT_FACTOR).abs() < 1e-9, "{extra}");
    }

    #[test]
    fn a_shared_uplink_divides_by_the_ring_edges_over_it() {
        // h0 r0, h1 r1, h2 r0, h3 r1: in this order every ring edge crosses, 2 each way per
        // leaf; 800 Gb/s = 100 GB/s shared by 2 = 50 < the nodes' 60 GB/s networks.
        let f = facts(400.0, 60.0);
        let (hosts, g) = cluster(&["r0", "r1", "r0", "r1"], Some(&fabric(800.0)), &f);
        let p = predict(&hosts, &g, 1 << 30);
        assert_eq!(p.bottleneck, "uplink of leaf-0 shared by 2 ring edge(s)");
        assert_eq!(p.bottleneck_gbps, 50.0);
        // Grouped by leaf, each uplink carries one edge each way: the networks bound it.
        let grouped = ["h0", "h2", "h1", "h3"].map(String::from);
        let q = predict(&grouped, &g, 1 << 30);
        assert_eq!(q.bottleneck, "network of h0");
        assert!(q.busbw_gbps > p.busbw_gbps);
    }

    #[test]
    fn the_slowest_intra_node_ring_can_be_the_bottleneck() {
        let (hosts, g) = cluster(&["r0", "r0"], None, &facts(10.0, 50.0));
        let p = predict(&hosts, &g, 1 << 30);
        assert_eq!(p.bottleneck, "intra-node ring on h0");
        assert_eq!(p.bottleneck_gbps, 10.0);
    }

    #[test]
    fn one_gpu_alone_has_nothing_to_reduce() {
        let one = HostFacts {
            gpus: 1,
            ..facts(0.0, 50.0)
        };
        let (hosts, g) = cluster(&["r0"], None, &one);
        let p = predict(&hosts, &g, 1 << 30);
        assert_eq!(p.busbw_gbps, 0.0);
        assert!(p.bottleneck.contains("fewer than 2 ranks"));
    }

    /// Hosts `h0..hN` in racks and NVLink domains (`""`: none), each with 4 GPUs on 700 GB/s
    /// of NVLink, a 720 GB/s ring inside and 200 GB/s of NICs.
    fn trays(placement: &[(&str, &str)]) -> (Vec<String>, ClusterGraph) {
        let hosts: Vec<String> = (0..placement.len()).map(|i| format!("h{i}")).collect();
        let labels: Vec<BTreeMap<String, String>> = placement
            .iter()
            .map(|(r, _)| BTreeMap::from([("rack".to_string(), r.to_string())]))
            .collect();
        let f = HostFacts {
            gpus: 4,
            ring_gbps: 720.0,
            hop_latency_us: LAT_NVLINK_US,
            net_gbps: 200.0,
            net_assumed: None,
            nvlink_gbps: 2800.0,
        };
        let specs: Vec<HostSpec> = hosts
            .iter()
            .zip(&labels)
            .zip(placement)
            .map(|((h, l), (_, d))| HostSpec {
                name: h,
                labels: l,
                facts: f.clone(),
                domain: (!d.is_empty()).then_some(*d),
            })
            .collect();
        let g = ClusterGraph::build(&specs, Some(&fabric(12800.0)));
        (hosts, g)
    }

    #[test]
    fn a_ring_inside_one_domain_never_touches_the_network() {
        let (hosts, g) = trays(&[("r0", "a"), ("r0", "a"), ("r0", "a")]);
        let p = predict(&hosts, &g, 1 << 30);
        assert_eq!(p.bottleneck, "intra-node ring on h0", "NVLink all the way");
        assert_eq!(p.bottleneck_gbps, 720.0);
        // One NVLink island: every step is an NVLink step, no multi-node factor.
        let latency = BASE_LAT_US + 22.0 * LAT_NVLINK_US;
        assert!((p.latency_us - latency).abs() < 1e-9, "{}", p.latency_us);
        // The same trays outside any domain go through their NICs.
        let (flat, g2) = trays(&[("r0", ""), ("r0", ""), ("r0", "")]);
        let q = predict(&flat, &g2, 1 << 30);
        assert_eq!(q.bottleneck, "network of h0");
        assert!(p.busbw_gbps > 3.0 * q.busbw_gbps);
    }

    #[test]
    fn between_domains_a_domain_offers_all_its_members_nics() {
        // Two domains of two trays: the ring leaves each domain once, over 2 × 200 GB/s.
        let (hosts, g) = trays(&[("r0", "a"), ("r0", "a"), ("r1", "b"), ("r1", "b")]);
        let p = predict(&hosts, &g, 1 << 30);
        assert_eq!(p.bottleneck, "network of h1's NVLink domain");
        assert_eq!(p.bottleneck_gbps, 400.0);
        // Two islands, two edges between them: 2 inter-node steps of 16 ranks' 30.
        let inter = g.route_latency_us(&g.route("h1", "h2").unwrap());
        let latency = (BASE_LAT_US + 28.0 * LAT_NVLINK_US + 2.0 * inter) * MULTI_NODE_LAT_FACTOR;
        assert!((p.latency_us - latency).abs() < 1e-9, "{} vs {latency}", p.latency_us);
    }
}
