//! From snapshots to a Plan: classes of identical nodes and their rings, the cluster graph,
//! the node order and its predicted worth, and what NCCL is told on every node. Pure.

use super::cost::predict;
use super::order::{crossings, default_order, lower_bound, solved_order};
use super::ring::{self, better};
use crate::emit;
use crate::graph::cluster::{ClusterGraph, HostFacts, HostSpec};
use crate::graph::links::{assumes_nvswitch, gpu_link_matrix, host_net_gbps};
use crate::model::fabric::{Fabric, Placement};
use crate::model::plan::*;
use crate::model::ring::LinkMatrix;
use crate::model::snapshot::{NicKind, NodeSnapshot, Note};
use crate::model::topo_h::{NcclPath, LAT_NVLINK_US, LAT_PCI_US};
use crate::model::{NcclVersion, Setting};
use crate::nccl::rules::derive;
use std::collections::{BTreeMap, HashMap};

/// One node as the planner sees it.
pub struct PlanNode<'a> {
    pub host: String,
    pub labels: BTreeMap<String, String>,
    pub snapshot: &'a NodeSnapshot,
}

/// What cluster.yaml says about NCCL: the version when a node does not report its own, and
/// the variables forced on every node.
#[derive(Debug, Clone, Default)]
pub struct NcclPolicy {
    pub cluster_version: Option<NcclVersion>,
    pub overrides: BTreeMap<String, String>,
}

pub struct PlanInput<'a> {
    pub nodes: &'a [PlanNode<'a>],
    pub fabric: Option<&'a Fabric>,
    pub message_bytes: u64,
    pub nccl: &'a NcclPolicy,
}

pub fn plan(input: &PlanInput) -> Plan {
    let (usable, excluded): (Vec<&PlanNode>, Vec<&PlanNode>) =
        input.nodes.iter().partition(|n| !n.snapshot.gpus.is_empty());
    let matrices: Vec<LinkMatrix> = usable.iter().map(|n| gpu_link_matrix(n.snapshot)).collect();
    let (node_classes, facts) = ring_classes(&usable, &matrices);
    let specs: Vec<HostSpec> = usable
        .iter()
        .zip(facts)
        .map(|(n, facts)| HostSpec {
            name: &n.host,
            labels: &n.labels,
            facts,
        })
        .collect();
    let graph = ClusterGraph::build(&specs, input.fabric);
    let hosts: Vec<String> = usable.iter().map(|n| n.host.clone()).collect();
    let node_order = solved_order(&graph);
    let default = default_order(&hosts);
    let solved = predict(&node_order, &graph, input.message_bytes);
    let default_pred = predict(&default, &graph, input.message_bytes);
    let gain = if default_pred.busbw_gbps > 0.0 {
        solved.busbw_gbps / default_pred.busbw_gbps
    } else {
        1.0
    };
    Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        message_bytes: input.message_bytes,
        crossings: CrossingReport {
            solved: crossings(&node_order, &graph),
            default: crossings(&default, &graph),
            lower_bound: lower_bound(&hosts, &graph),
        },
        node_order,
        default_order: default,
        predicted: Predicted {
            solved,
            default: default_pred,
            gain,
        },
        node_classes,
        nccl: nccl_plan(input),
        excluded: excluded
            .iter()
            .map(|n| Excluded {
                host: n.host.clone(),
                reason: "no GPU: it cannot hold a rank".into(),
            })
            .collect(),
        notes: planning_notes(&usable, input.fabric),
    }
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

/// One ring per distinct GPU link matrix; each host's facts for the cluster graph.
fn ring_classes(usable: &[&PlanNode], matrices: &[LinkMatrix]) -> (Vec<NodeClass>, Vec<HostFacts>) {
    let mut groups: Vec<(&LinkMatrix, Vec<usize>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, m) in matrices.iter().enumerate() {
        let g = *index.entry(signature(m)).or_insert_with(|| {
            groups.push((m, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(i);
    }
    let mut facts: Vec<Option<HostFacts>> = vec![None; usable.len()];
    let mut classes = Vec::new();
    for (c, (m, members)) in groups.into_iter().enumerate() {
        let class = node_class(c, m, members.iter().map(|&i| usable[i].host.clone()).collect());
        let ring_facts = HostFacts {
            gpus: m.len(),
            ring_gbps: class.ring.bottleneck_gbps,
            hop_latency_us: if m.worst_hop(&class.ring.order) == NcclPath::Nvl.rank() {
                LAT_NVLINK_US
            } else {
                LAT_PCI_US
            },
            net_gbps: 0.0,
        };
        for i in members {
            facts[i] = Some(HostFacts {
                net_gbps: host_net_gbps(usable[i].snapshot),
                ..ring_facts.clone()
            });
        }
        classes.push(class);
    }
    (classes, facts.into_iter().flatten().collect())
}

/// Solve one class's ring and say why it is what it is.
fn node_class(index: usize, m: &LinkMatrix, hosts: Vec<String>) -> NodeClass {
    let r = ring::solve(m);
    let index_order: Vec<usize> = (0..m.len()).collect();
    let (ib, ic) = m.score(&index_order);
    let ib = if m.len() < 2 { 0.0 } else { ib };
    let beats = m.len() > 1 && better((r.bottleneck_gbps, r.cost), (ib, ic));
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
    // The graph file names the ring's worst link, as NCCL's own search labels it.
    let type_intra = NcclPath::from_rank(m.worst_hop(&r.order)).name().to_string();
    let mut class = NodeClass {
        name: format!("class-{index}"),
        hosts,
        gpus: m.len(),
        ring: r,
        index_order_bottleneck_gbps: ib,
        index_order_cost: ic,
        type_intra,
        reason,
        graph_xml: None,
        graph_file: None,
    };
    if beats {
        class.graph_xml = Some(emit::graph_xml::ring_graph(&class));
    }
    class
}

fn planning_notes(usable: &[&PlanNode], fabric: Option<&Fabric>) -> Vec<Note> {
    let mut notes = Vec::new();
    let assumed: Vec<&str> = usable
        .iter()
        .filter(|n| assumes_nvswitch(n.snapshot))
        .map(|n| n.host.as_str())
        .collect();
    if let Some(first) = assumed.first() {
        notes.push(Note::info(
            "assumed-nvswitch",
            format!(
                "NVLink is unknown on {} node(s) (e.g. {first}: described by files, or no driver), but NVSwitches are on PCI and the GPUs are SXM parts: an all-to-all NVSwitch fabric at full link count is assumed",
                assumed.len()
            ),
        ));
    }
    let unknown: Vec<&str> = usable
        .iter()
        .filter(|n| n.snapshot.gpus.iter().any(|g| g.nvlinks.is_none()) && !assumes_nvswitch(n.snapshot))
        .map(|n| n.host.as_str())
        .collect();
    if let Some(first) = unknown.first() {
        notes.push(Note::warn(
            "nvlink-unknown",
            format!("NVLink is unknown on {} node(s) (e.g. {first}): their intra-node rings are planned on PCIe paths only; probe them with the NVIDIA driver for real figures", unknown.len()),
        ));
    }
    let unplaced: Vec<&str> = usable
        .iter()
        .filter(|n| {
            let p = Placement::of(&n.labels, fabric);
            p.rack.is_none() && p.leaf.is_none()
        })
        .map(|n| n.host.as_str())
        .collect();
    if fabric.is_some() && !unplaced.is_empty() && unplaced.len() < usable.len() {
        notes.push(Note::warn(
            "unplaced-nodes",
            format!("{} node(s) have no rack or leaf in the fabric (e.g. {}): they go last in the ring and their network path is unknown", unplaced.len(), unplaced[0]),
        ));
    }
    let no_rdma = usable
        .iter()
        .any(|n| n.snapshot.nics.iter().all(|nic| nic.kind != NicKind::Rdma));
    if no_rdma && usable.len() > 1 {
        notes.push(Note::warn(
            "no-rdma-nic",
            "some nodes have no RDMA NIC: NCCL falls back to sockets there, and the whole ring runs at that speed",
        ));
    }
    notes
}

/// The files NCCL reads on one node, as the plan decides them.
#[derive(Clone, PartialEq, Eq, Hash)]
struct NcclKey {
    version: Option<NcclVersion>,
    settings: Vec<Setting>,
    left_out: Vec<String>,
    topology_xml: Option<String>,
}

/// Every node's NCCL settings (GPU-less nodes included: they run NCCL's bootstrap too),
/// grouped by identical files.
fn nccl_plan(input: &PlanInput) -> NcclPlan {
    let rails = input.fabric.and_then(|f| f.rails);
    let mut out = NcclPlan::default();
    let mut index: HashMap<NcclKey, usize> = HashMap::new();
    for n in input.nodes {
        // The node's own NCCL when the probe found one, else cluster.yaml's.
        let version = n.snapshot.nccl_version.or(input.nccl.cluster_version);
        let derived = match derive(n.snapshot, rails, version, &input.nccl.overrides) {
            Ok(d) => d,
            Err(r) => {
                out.refused.push(Excluded {
                    host: n.host.clone(),
                    reason: format!("refused setting: {r}"),
                });
                continue;
            }
        };
        let key = NcclKey {
            version,
            topology_xml: derived
                .wants_topology_file
                .then(|| emit::topo_xml::topology_xml(n.snapshot)),
            settings: derived.settings,
            left_out: derived.left_out,
        };
        let c = *index.entry(key.clone()).or_insert_with(|| {
            out.classes.push(NcclClass {
                name: format!("nccl-{}", out.classes.len()),
                hosts: Vec::new(),
                nccl_version: key.version,
                settings: key.settings,
                left_out: key.left_out,
                topology_xml: key.topology_xml,
            });
            out.classes.len() - 1
        });
        out.classes[c].hosts.push(n.host.clone());
    }
    out
}
