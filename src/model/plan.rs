//! Plan: the decision, as reviewable data (plan.json). Every item carries its reason.

use crate::model::snapshot::Note;
use crate::solve::cost::Prediction;
use crate::solve::order::Crossings;
use crate::solve::ring::Ring;
use serde::Serialize;

pub const PLAN_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub schema_version: u32,
    /// All-reduce size the predictions are for, in bytes.
    pub message_bytes: u64,
    /// Hosts in ring order: the order to hand the launcher.
    pub node_order: Vec<String>,
    /// The order launchers use by default (hostnames sorted), for comparison.
    pub default_order: Vec<String>,
    pub predicted: Predicted,
    pub crossings: CrossingReport,
    pub node_classes: Vec<NodeClass>,
    /// Hosts left out of the ring, with the reason.
    pub excluded: Vec<Excluded>,
    pub notes: Vec<Note>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Predicted {
    pub solved: Prediction,
    pub default: Prediction,
    /// solved busbw / default busbw.
    pub gain: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CrossingReport {
    pub solved: Crossings,
    pub default: Crossings,
    pub lower_bound: Crossings,
}

/// Hosts with the same GPU link matrix share one intra-node ring.
#[derive(Debug, Clone, Serialize)]
pub struct NodeClass {
    pub name: String,
    pub hosts: Vec<String>,
    pub gpus: usize,
    pub ring: Ring,
    /// The ring NCCL tries first: GPUs in index (PCI) order.
    pub index_order_bottleneck_gbps: f64,
    pub index_order_cost: u32,
    /// Why this ring, in words.
    pub reason: String,
    /// Per-job NCCL_GRAPH_FILE written for this class (only when the ring beats index order).
    pub graph_file: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Excluded {
    pub host: String,
    pub reason: String,
}
