//! From snapshots to a Plan: classes of identical nodes, their rings, the node order, and the
//! predictions for the solved and the default order. Pure.

use super::cost::{predict, HostRing};
use super::order::{crossings, default_order, lower_bound, solved_order};
use super::ring::{self, LinkMatrix};
use crate::config::Fabric;
use crate::graph::cluster::{gpu_link_matrix, ClusterGraph, LAT_NVLINK_US, LAT_PCI_US};
use crate::model::plan::*;
use crate::model::snapshot::{NodeSnapshot, Note};
use std::collections::{BTreeMap, HashMap};

/// One node as the planner sees it.
pub struct PlanNode<'a> {
    pub host: String,
    pub labels: BTreeMap<String, String>,
    pub snapshot: &'a NodeSnapshot,
}

/// A matrix as a map key (bandwidths to 0.1 GB/s).
fn signature(m: &LinkMatrix) -> String {
    let mut s = String::new();
    for (row_b, row_c) in m.bw.iter().zip(&m.cost) {
        for (b, c) in row_b.iter().zip(row_c) {
            s.push_str(&format!("{:.1}/{c},", b));
        }
        s.push(';');
    }
    s
}

pub fn plan(nodes: &[PlanNode], fabric: Option<&Fabric>, message_bytes: u64) -> Plan {
    let mut notes = Vec::new();
    let mut excluded = Vec::new();
    let usable: Vec<&PlanNode> = nodes
        .iter()
        .filter(|n| {
            if n.snapshot.gpus.is_empty() {
                excluded.push(Excluded {
                    host: n.host.clone(),
                    reason: "no GPU: it cannot hold a rank".into(),
                });
                false
            } else {
                true
            }
        })
        .collect();

    // Classes: one ring solve per distinct GPU link matrix.
    let matrices: Vec<LinkMatrix> = usable.iter().map(|n| gpu_link_matrix(n.snapshot)).collect();
    let mut classes: Vec<(String, LinkMatrix, Vec<String>)> = Vec::new();
    let mut class_of: HashMap<String, usize> = HashMap::new();
    for (n, m) in usable.iter().zip(&matrices) {
        let sig = signature(m);
        let idx = *class_of.entry(sig.clone()).or_insert_with(|| {
            classes.push((sig, m.clone(), Vec::new()));
            classes.len() - 1
        });
        classes[idx].2.push(n.host.clone());
    }
    let mut node_classes = Vec::new();
    let mut rings: HashMap<String, HostRing> = HashMap::new();
    for (i, (_, m, hosts)) in classes.iter().enumerate() {
        let r = ring::solve(m);
        let index_order: Vec<usize> = (0..m.len()).collect();
        let (ib, ic) = m.score(&index_order);
        let ib = if m.len() < 2 { 0.0 } else { ib };
        let all_nvlink =
            r.order.len() > 1 && (0..r.order.len()).all(|k| m.cost[r.order[k]][r.order[(k + 1) % r.order.len()]] == 1);
        let beats = ring::better((r.bottleneck_gbps, r.cost), (ib, ic));
        let reason = if m.len() < 2 {
            "one GPU: no intra-node ring".to_string()
        } else if beats {
            format!(
                "ring {:?} reaches {:.1} GB/s at hop cost {} where index order {:?} reaches {:.1} GB/s at cost {}",
                r.order, r.bottleneck_gbps, r.cost, index_order, ib, ic
            )
        } else {
            format!(
                "index order is already optimal: bottleneck {:.1} GB/s, hop cost {} (NCCL finds it by itself)",
                r.bottleneck_gbps, r.cost
            )
        };
        for h in hosts {
            rings.insert(
                h.clone(),
                HostRing {
                    gpus: m.len(),
                    bottleneck_gbps: r.bottleneck_gbps,
                    step_latency_us: if all_nvlink { LAT_NVLINK_US } else { LAT_PCI_US },
                },
            );
        }
        node_classes.push(NodeClass {
            name: format!("class-{i}"),
            hosts: hosts.clone(),
            gpus: m.len(),
            ring: r,
            index_order_bottleneck_gbps: ib,
            index_order_cost: ic,
            reason,
            graph_file: None,
        });
    }

    let assumed: Vec<&str> = usable
        .iter()
        .filter(|n| crate::graph::cluster::assumes_nvswitch(n.snapshot))
        .map(|n| n.host.as_str())
        .collect();
    if !assumed.is_empty() {
        notes.push(Note::info(
            "assumed-nvswitch",
            format!(
                "NVLink is unknown on {} node(s) (e.g. {}: described by files, or no driver), but NVSwitches are on PCI and the GPUs are SXM parts: an all-to-all NVSwitch fabric at full link count is assumed",
                assumed.len(),
                assumed[0]
            ),
        ));
    }
    let unknown: Vec<&str> = usable
        .iter()
        .filter(|n| {
            n.snapshot.gpus.iter().any(|g| g.nvlinks.is_none()) && !crate::graph::cluster::assumes_nvswitch(n.snapshot)
        })
        .map(|n| n.host.as_str())
        .collect();
    if !unknown.is_empty() {
        notes.push(Note::warn(
            "nvlink-unknown",
            format!("NVLink is unknown on {} node(s) (e.g. {}): their intra-node rings are planned on PCIe paths only; probe them with the NVIDIA driver for real figures", unknown.len(), unknown[0]),
        ));
    }
    let nodes_for_graph: Vec<(String, BTreeMap<String, String>, &NodeSnapshot, &LinkMatrix)> = usable
        .iter()
        .zip(&matrices)
        .map(|(n, m)| (n.host.clone(), n.labels.clone(), n.snapshot, m))
        .collect();
    let graph = ClusterGraph::build(&nodes_for_graph, fabric);
    let hosts: Vec<String> = usable.iter().map(|n| n.host.clone()).collect();
    let unplaced: Vec<&String> = hosts
        .iter()
        .filter(|h| {
            graph
                .placement
                .get(*h)
                .is_none_or(|p| p.rack.is_none() && p.leaf.is_none())
        })
        .collect();
    if fabric.is_some() && !unplaced.is_empty() && unplaced.len() < hosts.len() {
        notes.push(Note::warn(
            "unplaced-nodes",
            format!("{} node(s) have no rack or leaf in the fabric (e.g. {}): they go last in the ring and their network path is unknown", unplaced.len(), unplaced[0]),
        ));
    }
    if usable.iter().any(|n| {
        n.snapshot
            .nics
            .iter()
            .all(|nic| nic.kind != crate::model::NicKind::Rdma)
    }) && usable.len() > 1
    {
        notes.push(Note::warn(
            "no-rdma-nic",
            "some nodes have no RDMA NIC: NCCL falls back to sockets there, and the whole ring runs at that speed",
        ));
    }
    let node_order = solved_order(&hosts, &graph.placement);
    let default = default_order(&hosts);
    let solved_pred = predict(&node_order, &graph, &rings, message_bytes);
    let default_pred = predict(&default, &graph, &rings, message_bytes);
    let gain = if default_pred.busbw_gbps > 0.0 {
        solved_pred.busbw_gbps / default_pred.busbw_gbps
    } else {
        1.0
    };
    Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        message_bytes,
        crossings: CrossingReport {
            solved: crossings(&node_order, &graph.placement),
            default: crossings(&default, &graph.placement),
            lower_bound: lower_bound(&hosts, &graph.placement),
        },
        node_order,
        default_order: default,
        predicted: Predicted {
            solved: solved_pred,
            default: default_pred,
            gain,
        },
        node_classes,
        excluded,
        notes,
    }
}
