//! Predicted ring all-reduce time and bus bandwidth for a node order, read off the cluster
//! graph: the α–β ring model with NCCL's constants (`model::topo_h`). Pure.
//!
//! T(S) = lat + S / algBw, algBw = B · nranks / (2(nranks−1)), busbw = (S/T) · 2(nranks−1)/nranks
//! lat  = base + (nsteps − nInterSteps)·intraLat + nInterSteps·interLat (× 1.4 multi-node)
//! B    = the slowest link the ring uses: a node's intra-node ring, or any graph link on the
//!        routes of the ring's edges, divided by the number of ring edges routed over it in
//!        the same direction (a leaf's uplink shared by every edge that leaves the leaf).

use crate::graph::cluster::{ClusterGraph, LinkKind, Route};
use crate::model::plan::Prediction;
use crate::model::topo_h::{BASE_LAT_US, LAT_NVLINK_US, MULTI_NODE_LAT_FACTOR};
use petgraph::graph::EdgeIndex;
use std::collections::HashMap;

/// The slowest link seen so far and what it is.
struct Bottleneck {
    gbps: f64,
    what: String,
}

impl Bottleneck {
    fn consider(&mut self, gbps: f64, what: impl FnOnce() -> String) {
        if gbps < self.gbps {
            self.gbps = gbps;
            self.what = what();
        }
    }
}

/// Ring edges routed over each link, per direction (`true` = up).
type Loads = HashMap<(EdgeIndex, bool), usize>;

pub fn predict(order: &[String], g: &ClusterGraph, message_bytes: u64) -> Prediction {
    let mut b = Bottleneck {
        gbps: f64::INFINITY,
        what: "none".into(),
    };
    let (nranks, intra_lat) = intra_node(order, g, &mut b);
    let nnodes = order.len();
    let mut inter_lat_sum = 0.0;
    if nnodes > 1 {
        let routes: Vec<(usize, Route)> = (0..nnodes)
            .filter_map(|k| g.route(&order[k], &order[(k + 1) % nnodes]).map(|r| (k, r)))
            .collect();
        let loads = loads(&routes);
        for (k, route) in &routes {
            network(g, &order[*k], &order[(k + 1) % nnodes], &mut b);
            shared_links(g, route, &loads, &mut b);
            inter_lat_sum += g.route_latency_us(route);
        }
    }
    if nranks < 2 || !b.gbps.is_finite() || b.gbps <= 0.0 {
        return nothing_to_reduce();
    }
    let nsteps = 2 * (nranks - 1);
    let inter_steps = if nnodes > 1 { 2 * (nnodes - 1) } else { 0 };
    let inter_lat = if nnodes > 1 { inter_lat_sum / nnodes as f64 } else { 0.0 };
    let mut latency_us =
        BASE_LAT_US + (nsteps - inter_steps.min(nsteps)) as f64 * intra_lat + inter_steps as f64 * inter_lat;
    if nnodes > 1 {
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

/// Each end's own network: every ring edge leaves one host and enters the next.
fn network(g: &ClusterGraph, a: &str, b_host: &str, b: &mut Bottleneck) {
    let net = |h: &str| g.host(h).map_or(f64::INFINITY, |f| f.net_gbps);
    let (na, nb) = (net(a), net(b_host));
    let slower = if na <= nb { a } else { b_host };
    b.consider(na.min(nb), || format!("network of {slower}"));
}

/// Switch links on the route, each shared by every ring edge routed the same way over it.
fn shared_links(g: &ClusterGraph, route: &Route, loads: &Loads, b: &mut Bottleneck) {
    let up = route.up.iter().map(|&e| (e, true));
    let down = route.down.iter().map(|&e| (e, false));
    for (e, dir) in up.chain(down) {
        let link = g.link(e);
        if link.kind == LinkKind::Network || !link.gbps.is_finite() {
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
    }
}
