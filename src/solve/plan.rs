//! From snapshots to a Plan: classes of identical nodes and their rings, the cluster graph,
//! the node order and its predicted worth, and what NCCL is told on every node. Pure.

use super::cost::predict;
use super::order::{crossings, default_order, lower_bound, solved_order};
use super::ring::{self, better};
use crate::emit;
use crate::graph::cluster::{ClusterGraph, HostFacts, HostSpec};
use crate::graph::links::{assumes_nvswitch, gpu_link_matrix_with, host_net_gbps};
use crate::graph::paths::path_classes;
use crate::model::fabric::{Fabric, Placement};
use crate::model::plan::*;
use crate::model::ring::LinkMatrix;
use crate::model::snapshot::{NicKind, NodeSnapshot, Note};
use crate::model::topo_h::{NcclPath, LAT_NVLINK_US, LAT_PCI_US};
use crate::model::{NcclVersion, Setting};
use crate::nccl::rules::{derive_from, Derived, Facts};
use crate::nccl::table::Rejection;
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

/// What one node's paths give: its GPU link matrix (none without GPUs) and NCCL's settings.
fn per_node(n: &PlanNode, input: &PlanInput) -> (Option<LinkMatrix>, Result<Derived, Rejection>) {
    let classes = path_classes(n.snapshot);
    // The node's own NCCL when the probe found one, else cluster.yaml's.
    let version = n.snapshot.nccl_version.or(input.nccl.cluster_version);
    let rails = input.fabric.and_then(|f| f.rails);
    let derived = derive_from(&Facts::new(n.snapshot, &classes, rails, version), &input.nccl.overrides);
    let matrix = (!n.snapshot.gpus.is_empty()).then(|| gpu_link_matrix_with(n.snapshot, classes));
    (matrix, derived)
}

pub fn plan(input: &PlanInput) -> Plan {
    let (matrices, derived): (Vec<Option<LinkMatrix>>, Vec<Result<Derived, Rejection>>) =
        input.nodes.iter().map(|n| per_node(n, input)).unzip();
    let (usable, excluded): (Vec<&PlanNode>, Vec<&PlanNode>) =
        input.nodes.iter().partition(|n| !n.snapshot.gpus.is_empty());
    let matrices: Vec<LinkMatrix> = matrices.into_iter().flatten().collect();
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
        nccl: nccl_plan(input, derived),
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
fn signature(m: &LinkMatrix) -> Vec<(i64, u32)> {
    m.bw.iter()
        .zip(&m.cost)
        .flat_map(|(row_b, row_c)| row_b.iter().zip(row_c).map(|(b, c)| ((b * 10.0).round() as i64, *c)))
        .collect()
}

/// One ring per distinct GPU link matrix; each host's facts for the cluster graph.
fn ring_classes(usable: &[&PlanNode], matrices: &[LinkMatrix]) -> (Vec<NodeClass>, Vec<HostFacts>) {
    let mut groups: Vec<(&LinkMatrix, Vec<usize>)> = Vec::new();
    let mut index: HashMap<Vec<(i64, u32)>, usize> = HashMap::new();
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
fn nccl_plan(input: &PlanInput, derived: Vec<Result<Derived, Rejection>>) -> NcclPlan {
    let mut out = NcclPlan::default();
    let mut index: HashMap<NcclKey, usize> = HashMap::new();
    for (n, derived) in input.nodes.iter().zip(derived) {
        let version = n.snapshot.nccl_version.or(input.nccl.cluster_version);
        let derived = match derived {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ring::LinkMatrix;

    fn snapshot(name: &str) -> NodeSnapshot {
        let text = match name {
            "p5en" => include_str!("../../tests/data/snapshots/aws-p5en.json"),
            _ => include_str!("../../tests/data/snapshots/aws-p4d.json"),
        };
        NodeSnapshot::from_json(text).unwrap()
    }

    #[test]
    fn typeintra_names_the_worst_hop_not_the_average() {
        // Seven NVLink hops chain 0..7, the eighth (7→0) crosses sockets: the ring's worst
        // link is SYS, although the average hop cost (16/8 = 2) would read PIX.
        let n = 8;
        let mut bw = vec![vec![10.0; n]; n];
        let mut cost = vec![vec![NcclPath::Sys.rank(); n]; n];
        for i in 0..n - 1 {
            for (a, b) in [(i, i + 1), (i + 1, i)] {
                bw[a][b] = 100.0;
                cost[a][b] = NcclPath::Nvl.rank();
            }
        }
        for (i, row) in cost.iter_mut().enumerate() {
            row[i] = 0;
        }
        let class = node_class(0, &LinkMatrix { bw, cost }, vec!["h".into()]);
        assert_eq!(class.ring.cost, 16);
        assert_eq!(class.type_intra, "SYS");
        assert!(class.graph_xml.is_none(), "index order is this ring: nothing to write");
    }

    #[test]
    fn identical_nodes_share_one_ring_and_one_nccl_class() {
        let (a, b) = (snapshot("p5en"), snapshot("p5en"));
        let mut c = snapshot("p5en");
        c.nccl_version = Some(NcclVersion(2, 20, 5));
        let d = snapshot("p4d");
        let nodes: Vec<PlanNode> = [("n1", &a), ("n2", &b), ("n3", &c), ("n4", &d)]
            .iter()
            .map(|(h, s)| PlanNode {
                host: h.to_string(),
                labels: BTreeMap::new(),
                snapshot: s,
            })
            .collect();
        let policy = NcclPolicy {
            cluster_version: Some(NcclVersion(2, 28, 9)),
            overrides: BTreeMap::from([("NCCL_IB_TIMEOUT".to_string(), "22".to_string())]),
        };
        let p = plan(&PlanInput {
            nodes: &nodes,
            fabric: None,
            message_bytes: 1 << 30,
            nccl: &policy,
        });
        let ring_hosts: Vec<&Vec<String>> = p.node_classes.iter().map(|c| &c.hosts).collect();
        assert_eq!(ring_hosts, [&vec!["n1", "n2", "n3"], &vec!["n4"]]);
        // The node's own NCCL (n3: 2.20.5) beats cluster.yaml's: its files differ.
        let nccl_hosts: Vec<&Vec<String>> = p.nccl.classes.iter().map(|c| &c.hosts).collect();
        assert_eq!(nccl_hosts, [&vec!["n1", "n2"], &vec!["n3"], &vec!["n4"]]);
        assert_eq!(p.nccl.classes[0].nccl_version, Some(NcclVersion(2, 28, 9)));
        assert_eq!(p.nccl.classes[1].nccl_version, Some(NcclVersion(2, 20, 5)));
        for c in &p.nccl.classes {
            let timeout = c.settings.iter().find(|s| s.name == "NCCL_IB_TIMEOUT").unwrap();
            assert_eq!(
                (timeout.value.as_str(), timeout.reason.as_str()),
                ("22", "cluster.yaml `nccl:` override")
            );
        }
        // EFA on p5en: no NCCL_IB_HCA, and the plan says why.
        assert!(p.nccl.classes[0].settings.iter().all(|s| s.name != "NCCL_IB_HCA"));
        assert!(p.nccl.classes[0].left_out.iter().any(|w| w.contains("EFA")));
        assert_eq!(p.node_order, ["n1", "n2", "n3", "n4"]);
    }

    #[test]
    fn a_refused_override_names_the_hosts_and_writes_nothing_for_them() {
        let a = snapshot("p4d");
        let nodes = [PlanNode {
            host: "n1".into(),
            labels: BTreeMap::new(),
            snapshot: &a,
        }];
        let policy = NcclPolicy {
            cluster_version: Some(NcclVersion(2, 28, 9)),
            overrides: BTreeMap::from([("NCCL_ALGO".to_string(), "Ring".to_string())]),
        };
        let p = plan(&PlanInput {
            nodes: &nodes,
            fabric: None,
            message_bytes: 1 << 30,
            nccl: &policy,
        });
        assert!(p.nccl.classes.is_empty());
        assert_eq!(p.nccl.refused[0].host, "n1");
        assert!(p.nccl.refused[0].reason.contains("debugging variable"));
    }

    #[test]
    fn a_plan_reads_back_as_it_was_written() {
        let a = snapshot("p5en");
        let nodes = [PlanNode {
            host: "n1".into(),
            labels: BTreeMap::new(),
            snapshot: &a,
        }];
        let p = plan(&PlanInput {
            nodes: &nodes,
            fabric: None,
            message_bytes: 1 << 30,
            nccl: &NcclPolicy::default(),
        });
        let back: Plan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }
}
