//! The intra-node ring problem as data: pairwise GPU link facts and a solved ring.

use serde::{Deserialize, Serialize};

/// Pairwise link facts between the GPUs of one node.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkMatrix {
    /// One-direction GB/s of the path between GPU i and GPU j.
    pub bw: Vec<Vec<f64>>,
    /// Hop cost of that path: NCCL's path type number (NVLink 1 … SYS 9), lower is better.
    pub cost: Vec<Vec<u32>>,
}

impl LinkMatrix {
    pub fn len(&self) -> usize {
        self.bw.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bw.is_empty()
    }

    /// (bottleneck GB/s, summed hop cost) of a cycle in the given order.
    pub fn score(&self, order: &[usize]) -> (f64, u32) {
        let n = order.len();
        if n < 2 {
            return (f64::INFINITY, 0);
        }
        let mut bottleneck = f64::INFINITY;
        let mut cost = 0;
        for k in 0..n {
            let (a, b) = (order[k], order[(k + 1) % n]);
            bottleneck = bottleneck.min(self.bw[a][b].min(self.bw[b][a]));
            cost += self.cost[a][b];
        }
        (bottleneck, cost)
    }

    /// The largest hop cost of a cycle: its worst link.
    pub fn worst_hop(&self, order: &[usize]) -> u32 {
        let n = order.len();
        (0..n)
            .map(|k| self.cost[order[k]][order[(k + 1) % n]])
            .max()
            .unwrap_or(0)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ring {
    /// GPU indices in ring order (starting at the lowest index).
    pub order: Vec<usize>,
    /// Slowest link of the ring, GB/s.
    pub bottleneck_gbps: f64,
    /// Sum of hop costs around the ring.
    pub cost: u32,
    pub method: Method,
    /// Upper bound on the bottleneck (heuristic only): `(bound - found) / bound`.
    pub gap: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    Exact,
    Heuristic,
}
