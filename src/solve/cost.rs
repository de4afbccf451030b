//! Predicted ring all-reduce time and bus bandwidth for a node order: the α–β ring model with
//! NCCL's constants (research/peers.md §5, NVIDIA/nccl src/graph/tuning.cc). Pure.
//!
//! T(S) = lat + S / algBw, algBw = B · nranks / (2(nranks−1)), busbw = (S/T) · 2(nranks−1)/nranks
//! lat  = base + (nsteps − nInterSteps)·intraLat + nInterSteps·interLat (× 1.4 multi-node)
//! B    = the slowest link the ring uses: a node's intra-node ring, a node's network, or a
//!        leaf's uplink shared by every ring edge that leaves (or enters) that leaf.

use crate::graph::cluster::{ClusterGraph, LAT_NET_US, LAT_PER_TIER_US};
use serde::Serialize;
use std::collections::HashMap;

/// NCCL Ring/Simple base latency, µs.
pub const BASE_LAT_US: f64 = 8.4;
/// NCCL's multi-node Ring/Simple latency factor on SM ≥ 80.
pub const MULTI_NODE_LAT_FACTOR: f64 = 1.4;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    pub time_us: f64,
    pub busbw_gbps: f64,
    pub algbw_gbps: f64,
    /// The ring's slowest link, GB/s, and what it is.
    pub bottleneck_gbps: f64,
    pub bottleneck: String,
    pub latency_us: f64,
}

/// Per host: GPUs in the job, intra-node ring bottleneck (GB/s) and hop latency (µs).
#[derive(Debug, Clone)]
pub struct HostRing {
    pub gpus: usize,
    pub bottleneck_gbps: f64,
    pub step_latency_us: f64,
}

pub fn predict(
    order: &[String],
    g: &ClusterGraph,
    rings: &HashMap<String, HostRing>,
    message_bytes: u64,
) -> Prediction {
    let nnodes = order.len();
    let nranks: usize = order.iter().map(|h| rings.get(h).map_or(0, |r| r.gpus)).sum();
    let mut bottleneck = (f64::INFINITY, String::from("none"));
    let mut consider = |gbps: f64, what: String| {
        if gbps < bottleneck.0 {
            bottleneck = (gbps, what);
        }
    };
    let mut intra_lat: f64 = 0.0;
    for h in order {
        if let Some(r) = rings.get(h) {
            if r.gpus > 1 {
                consider(r.bottleneck_gbps, format!("intra-node ring on {h}"));
                intra_lat = intra_lat.max(r.step_latency_us);
            }
        }
    }
    if intra_lat == 0.0 {
        intra_lat = crate::graph::cluster::LAT_NVLINK_US;
    }
    let mut inter_lat_sum = 0.0;
    if nnodes > 1 {
        // Uplink load: ring edges leaving (out) and entering (in) each leaf.
        let leaf = |h: &String| g.placement.get(h).and_then(|p| p.leaf.clone());
        let spine = |h: &String| g.placement.get(h).and_then(|p| p.spine.clone());
        let mut out_load: HashMap<String, usize> = HashMap::new();
        let mut in_load: HashMap<String, usize> = HashMap::new();
        let edges: Vec<(&String, &String)> = (0..nnodes).map(|k| (&order[k], &order[(k + 1) % nnodes])).collect();
        for (a, b) in &edges {
            if let (Some(la), Some(lb)) = (leaf(a), leaf(b)) {
                if la != lb {
                    *out_load.entry(la).or_default() += 1;
                    *in_load.entry(lb).or_default() += 1;
                }
            }
        }
        for (a, b) in &edges {
            let net = |h: &String| {
                g.host_net_gbps
                    .get(h.as_str())
                    .copied()
                    .unwrap_or(crate::graph::cluster::SOCKET_FALLBACK_GBPS)
            };
            consider(
                net(a).min(net(b)),
                format!("network of {}", if net(a) <= net(b) { a } else { b }),
            );
            let mut tiers = 0.0;
            if let (Some(la), Some(lb)) = (leaf(a), leaf(b)) {
                if la != lb {
                    tiers = if spine(a) == spine(b) { 1.0 } else { 2.0 };
                    for (l, load) in [(&la, out_load.get(&la)), (&lb, in_load.get(&lb))] {
                        if let (Some(up), Some(&k)) = (g.leaf_uplink_gbps.get(l), load) {
                            consider(up / k as f64, format!("uplink of {l} shared by {k} ring edge(s)"));
                        }
                    }
                }
            }
            inter_lat_sum += LAT_NET_US + tiers * LAT_PER_TIER_US;
        }
    }
    let (b, what) = bottleneck;
    if nranks < 2 || !b.is_finite() || b <= 0.0 {
        return Prediction {
            time_us: 0.0,
            busbw_gbps: 0.0,
            algbw_gbps: 0.0,
            bottleneck_gbps: 0.0,
            bottleneck: "fewer than 2 ranks: nothing to reduce".into(),
            latency_us: 0.0,
        };
    }
    let nsteps = 2 * (nranks - 1);
    let inter_steps = if nnodes > 1 { 2 * (nnodes - 1) } else { 0 };
    let inter_lat = if nnodes > 1 { inter_lat_sum / nnodes as f64 } else { 0.0 };
    let mut latency_us =
        BASE_LAT_US + (nsteps - inter_steps.min(nsteps)) as f64 * intra_lat + inter_steps as f64 * inter_lat;
    if nnodes > 1 {
        latency_us *= MULTI_NODE_LAT_FACTOR;
    }
    let algbw = b * nranks as f64 / nsteps as f64;
    let s = message_bytes as f64;
    let time_us = latency_us + s / (1000.0 * algbw);
    let busbw = s / time_us / 1000.0 * nsteps as f64 / nranks as f64;
    Prediction {
        time_us,
        busbw_gbps: busbw,
        algbw_gbps: s / time_us / 1000.0,
        bottleneck_gbps: b,
        bottleneck: what,
        latency_us,
    }
}
