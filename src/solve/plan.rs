//! From snapshots to a Plan: classes of identical nodes and their rings, the cluster graph,
//! the node order and its predicted worth, and what NCCL is told on every node. Pure.

use super::cost::predict;
use super::order::{crossings, default_order, lower_bound, solved_order};
use super::ring::{self, better};
use crate::emit;
use crate::graph::cluster::{ClusterGraph, HostFacts, HostSpec};
use crate::graph::links::{
    gpu_link_matrix_with, host_net, nvlink_basis, nvlink_out_gbps, part_of, GpuLinks, NvlinkBasis,
};
use crate::graph::paths::path_classes;
use crate::model::fabric::{Fabric, NodeHints, NvlinkHint, Placement};
use crate::model::gpu_parts::Board;
use crate::model::plan::*;
use crate::model::ring::LinkMatrix;
use crate::model::snapshot::{NicKind, NodeSnapshot, Note};
use crate::model::topo_h::{NcclPath, LAT_NVLINK_US, LAT_PCI_US};
use crate::model::{NcclVersion, PathClass, Refusal, Setting};
use crate::nccl::guard;
use crate::nccl::guard::NvlinkGuard;
use crate::nccl::rules::{derive_from, Facts, NodeRails};
use std::collections::{BTreeMap, HashMap};

/// One node as the planner sees it.
pub struct PlanNode<'a> {
    pub host: String,
    pub labels: BTreeMap<String, String>,
    pub snapshot: &'a NodeSnapshot,
    /// What cluster.yaml states where the snapshot cannot tell.
    pub hints: NodeHints,
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

/// What the plan is made for, beside the nodes.
pub(crate) struct Context<'a> {
    pub(crate) fabric: Option<&'a Fabric>,
    pub(crate) message_bytes: u64,
    pub(crate) nccl: &'a NcclPolicy,
}

/// One node as the planner keeps it once its snapshot has been read: its decisions and the
/// few facts the cluster-wide steps need. A fleet is planned from these, so a snapshot can
/// be dropped as soon as it is digested (16,384 snapshots need not be held at once).
#[derive(Clone)]
pub(crate) struct Digest {
    host: String,
    labels: BTreeMap<String, String>,
    nvlink_hint: NvlinkHint,
    has_gpus: bool,
    /// No RDMA NIC: NCCL falls back to sockets there.
    no_rdma: bool,
    net_gbps: f64,
    /// What `net_gbps` rests on when not the node's own report.
    net_assumed: Option<String>,
    /// The GPU links (none without GPUs) and how its NVLink is known.
    links: Option<GpuLinks>,
    basis: NvlinkBasis,
    /// GB/s the node's GPUs put on NVLink together (what a domain member offers the domain).
    nvlink_gbps: f64,
    /// The multi-node NVLink domain the node is in, from its GPUs or cluster.yaml.
    domain: Option<DomainMember>,
    /// cluster.yaml's domain contradicts the node's own (an error: [`Digest::domain_conflict`]).
    domain_conflict: Option<String>,
    /// A part whose trays form NVLink domains, with no word of which one.
    domain_unknown: bool,
    /// The files NCCL reads there, or why there are none.
    nccl: Result<NcclKey, Refusal>,
}

/// A node's membership of a multi-node NVLink domain.
#[derive(Debug, Clone)]
struct DomainMember {
    name: String,
    source: &'static str,
    health: Vec<String>,
}

impl Digest {
    /// The digest of another node made from the same snapshot and hints: everything but its
    /// name and labels is the snapshot's and the hints' (`digest` reads no more), so paper
    /// nodes of one source are digested once. `None` where the digest names its node (a
    /// domain conflict's message): that node is digested on its own.
    pub(crate) fn for_node(&self, host: &str, labels: &BTreeMap<String, String>) -> Option<Digest> {
        self.domain_conflict.is_none().then(|| Digest {
            host: host.to_string(),
            labels: labels.clone(),
            ..self.clone()
        })
    }

    /// cluster.yaml states a domain for the node that its own GPUs contradict.
    pub(crate) fn domain_conflict(&self) -> Option<(&str, &str)> {
        self.domain_conflict.as_deref().map(|c| (self.host.as_str(), c))
    }
}

/// Everything the planner decides for one node from its own facts.
pub(crate) fn digest(n: &PlanNode, cx: &Context) -> Digest {
    let classes = path_classes(n.snapshot);
    let basis = nvlink_basis(n.snapshot, &n.hints);
    let has_gpus = !n.snapshot.gpus.is_empty();
    let links = has_gpus.then(|| gpu_link_matrix_with(n.snapshot, classes.clone(), &basis));
    let nvlink_gbps = links.as_ref().map_or(0.0, |l| nvlink_out_gbps(n.snapshot, l, &basis));
    let (domain, domain_conflict) = domain_of(n);
    let guard_facts = NvlinkGuard {
        nvlink: nvlink_gbps > 0.0,
        domain: domain.as_ref().map(|d| d.name.clone()),
    };
    let nccl = node_nccl(n, cx, &classes, &guard_facts);
    let net = host_net(n.snapshot, n.hints.nic_gbps);
    let domain_unknown = domain.is_none()
        && has_gpus
        && part_of(n.snapshot, &n.hints).is_some_and(|p| p.board == Board::NvlinkSwitchTray);
    Digest {
        host: n.host.clone(),
        labels: n.labels.clone(),
        nvlink_hint: n.hints.nvlink,
        has_gpus,
        no_rdma: n.snapshot.nics.iter().all(|nic| nic.kind != NicKind::Rdma),
        net_gbps: net.gbps,
        net_assumed: net.assumed,
        links,
        basis,
        nvlink_gbps,
        // A member with no NVLink figures would carry nothing: it plans as outside any domain.
        domain: domain.filter(|_| nvlink_gbps > 0.0),
        domain_conflict,
        domain_unknown,
        nccl,
    }
}

/// What the NVLink guard protects on a node, from its own snapshot and cluster.yaml's
/// statements: a reviewed plan's nodes are judged on these, not on what the plan says.
pub(crate) fn nvlink_guard_of(snapshot: &NodeSnapshot, hints: &NodeHints) -> NvlinkGuard {
    let n = PlanNode {
        host: snapshot.hostname.clone(),
        labels: BTreeMap::new(),
        snapshot,
        hints: hints.clone(),
    };
    let basis = nvlink_basis(snapshot, hints);
    let nvlink = !snapshot.gpus.is_empty()
        && nvlink_out_gbps(
            snapshot,
            &gpu_link_matrix_with(snapshot, path_classes(snapshot), &basis),
            &basis,
        ) > 0.0;
    let (domain, conflict) = domain_of(&n);
    NvlinkGuard {
        nvlink,
        // A contradiction keeps both domains' protection: the node is in one of them.
        domain: domain.map(|d| d.name).or(conflict.and(snapshot.nvlink_domain.clone())),
    }
}

/// The node's domain: its GPUs' own (NVML), else cluster.yaml's `nvlink_domain:`; a statement
/// the GPUs contradict is a conflict.
fn domain_of(n: &PlanNode) -> (Option<DomainMember>, Option<String>) {
    let health: Vec<String> = n
        .snapshot
        .gpus
        .iter()
        .filter_map(|g| g.fabric.as_ref()?.health.as_ref())
        .flat_map(|h| h.problems())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let reported = n.snapshot.nvlink_domain.clone();
    let stated = n.hints.nvlink_domain.clone();
    match (reported, stated) {
        (Some(r), Some(s)) if r != s => (
            None,
            Some(format!(
                "cluster.yaml states `nvlink_domain: {s}` for {}, but its GPUs report NVLink domain {r}",
                n.host
            )),
        ),
        (Some(r), _) => (
            Some(DomainMember {
                name: r,
                source: "nvml",
                health,
            }),
            None,
        ),
        (None, Some(s)) => (
            Some(DomainMember {
                name: s,
                source: "cluster.yaml",
                health,
            }),
            None,
        ),
        (None, None) => (None, None),
    }
}

/// Derive the node's NCCL settings, render its topology file, and hold the result to the
/// never-slower guard.
fn node_nccl(n: &PlanNode, cx: &Context, classes: &[Vec<PathClass>], nvlink: &NvlinkGuard) -> Result<NcclKey, Refusal> {
    // The node's own NCCL when the probe found one, else cluster.yaml's.
    let version = n.snapshot.nccl_version.or(cx.nccl.cluster_version);
    let rails = NodeRails::of(cx.fabric, &n.host);
    let facts = Facts::new(n.snapshot, classes, rails, version);
    let derived = derive_from(&facts, &cx.nccl.overrides).map_err(|r| Refusal(format!("refused setting: {r}")))?;
    let topology_xml = derived
        .wants_topology_file
        .then(|| emit::topo_xml::topology_xml(n.snapshot));
    let gpu_ports = facts.gpu_ports().to_vec();
    guard::check(
        &derived.settings,
        &gpu_ports,
        &n.hints.non_gpu_nics,
        rails.count.is_some(),
        topology_xml.as_deref(),
    )
    .map_err(|v| Refusal(format!("refused by the never-slower guard: {v}")))?;
    guard::check_nvlink(&derived.settings, nvlink, topology_xml.as_deref())
        .map_err(|v| Refusal(format!("refused by the never-slower guard: {v}")))?;
    Ok(NcclKey {
        version,
        settings: derived.settings,
        left_out: derived.left_out,
        topology_xml,
        gpu_ports,
    })
}

pub fn plan(input: &PlanInput) -> Plan {
    let cx = Context {
        fabric: input.fabric,
        message_bytes: input.message_bytes,
        nccl: input.nccl,
    };
    plan_digests(input.nodes.iter().map(|n| digest(n, &cx)).collect(), &cx)
}

/// The plan of digested nodes (in inventory order).
pub(crate) fn plan_digests(nodes: Vec<Digest>, cx: &Context) -> Plan {
    let notes_of_nodes = nvlink_notes(&nodes);
    let usable: Vec<&Digest> = nodes.iter().filter(|n| n.has_gpus).collect();
    let (node_classes, facts) = ring_classes(&usable);
    let specs: Vec<HostSpec> = usable
        .iter()
        .zip(facts)
        .map(|(n, facts)| HostSpec {
            name: &n.host,
            labels: &n.labels,
            facts,
            domain: n.domain.as_ref().map(|d| d.name.as_str()),
        })
        .collect();
    let graph = ClusterGraph::build(&specs, cx.fabric);
    let hosts: Vec<String> = usable.iter().map(|n| n.host.clone()).collect();
    let node_order = solved_order(&graph);
    let default = default_order(&hosts);
    let solved = predict(&node_order, &graph, cx.message_bytes);
    let default_pred = predict(&default, &graph, cx.message_bytes);
    let has_domains = usable.iter().any(|n| n.domain.is_some());
    let without_domains = has_domains.then(|| {
        let flat: Vec<HostSpec> = specs
            .iter()
            .map(|h| HostSpec {
                name: h.name,
                labels: h.labels,
                facts: h.facts.clone(),
                domain: None,
            })
            .collect();
        predict(&node_order, &ClusterGraph::build(&flat, cx.fabric), cx.message_bytes)
    });
    let gain = if default_pred.busbw_gbps > 0.0 {
        solved.busbw_gbps / default_pred.busbw_gbps
    } else {
        1.0
    };
    let nvlink_domains = domains(&usable, &node_order);
    let notes = [
        notes_of_nodes,
        planning_notes(&usable, cx.fabric),
        domain_notes(&usable, &nvlink_domains),
    ]
    .concat();
    let crossings = CrossingReport {
        solved: crossings(&node_order, &graph),
        default: crossings(&default, &graph),
        lower_bound: lower_bound(&hosts, &graph),
    };
    drop(specs);
    let excluded = nodes
        .iter()
        .filter(|n| !n.has_gpus)
        .map(|n| Excluded {
            host: n.host.clone(),
            reason: "no GPU: it cannot hold a rank".into(),
        })
        .collect();
    Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        message_bytes: cx.message_bytes,
        crossings,
        node_order,
        default_order: default,
        predicted: Predicted {
            solved,
            default: default_pred,
            gain,
            without_domains,
        },
        node_classes,
        nccl: nccl_plan(nodes),
        excluded,
        nvlink_domains,
        notes,
    }
}

/// The plan's domains, members in ring order.
fn domains(usable: &[&Digest], order: &[String]) -> Vec<NvlinkDomain> {
    let pos: HashMap<&str, usize> = order.iter().enumerate().map(|(i, h)| (h.as_str(), i)).collect();
    let mut out: Vec<NvlinkDomain> = Vec::new();
    let mut members: Vec<&&Digest> = usable.iter().filter(|n| n.domain.is_some()).collect();
    members.sort_by_key(|n| pos.get(n.host.as_str()).copied().unwrap_or(usize::MAX));
    for n in members {
        let Some(d) = &n.domain else { continue };
        let gpus = n.links.as_ref().map_or(0, |l| l.matrix.len());
        match out.iter_mut().find(|x| x.name == d.name) {
            Some(x) => {
                x.hosts.push(n.host.clone());
                x.gpus += gpus;
                for h in &d.health {
                    if !x.health.contains(h) {
                        x.health.push(h.clone());
                    }
                }
                if x.source != d.source {
                    x.source = "nvml, cluster.yaml".into();
                }
            }
            None => out.push(NvlinkDomain {
                name: d.name.clone(),
                hosts: vec![n.host.clone()],
                gpus,
                source: d.source.to_string(),
                health: d.health.clone(),
            }),
        }
    }
    out
}

/// What the plan could not know about domains, and what the members report wrong.
fn domain_notes(usable: &[&Digest], domains: &[NvlinkDomain]) -> Vec<Note> {
    let mut notes = Vec::new();
    let unknown: Vec<&str> = usable
        .iter()
        .filter(|n| n.domain_unknown)
        .map(|n| n.host.as_str())
        .collect();
    if let Some(first) = unknown.first() {
        notes.push(Note::warn(
            "nvlink-domain-unknown",
            format!(
                "{} node(s) (e.g. {first}) are Grace-Blackwell trays with no fabric info (no driver): assumed members of an unknown NVLink domain, planned over NVLink inside each tray and over the NICs between trays; state `nvlink_domain:` in cluster.yaml",
                unknown.len()
            ),
        ));
    }
    for d in domains.iter().filter(|d| !d.health.is_empty()) {
        notes.push(Note::warn(
            "nvlink-domain-unhealthy",
            format!("NVLink domain {} reports: {}", d.name, d.health.join("; ")),
        ));
    }
    if let Some(d) = domains.first() {
        notes.push(Note::info(
            "nvlink-domains",
            format!(
                "{} NVLink domain(s) (e.g. {}: {} nodes, {} GPUs): NCCL joins each domain's GPUs into one system; the ring order matters only between domains, and no ring file is written for their nodes",
                domains.len(),
                d.name,
                d.hosts.len(),
                d.gpus
            ),
        ));
    }
    notes
}

/// A matrix as a map key (bandwidths to 0.1 GB/s).
fn signature(m: &LinkMatrix) -> Vec<(i64, u32)> {
    m.bw.iter()
        .zip(&m.cost)
        .flat_map(|(row_b, row_c)| row_b.iter().zip(row_c).map(|(b, c)| ((b * 10.0).round() as i64, *c)))
        .collect()
}

/// One ring per distinct GPU link matrix (domain members apart: NCCL searches their rings
/// itself); each host's facts for the cluster graph.
fn ring_classes(usable: &[&Digest]) -> (Vec<NodeClass>, Vec<HostFacts>) {
    let mut groups: Vec<(&Digest, Vec<usize>)> = Vec::new();
    let mut index: HashMap<(Vec<(i64, u32)>, bool), usize> = HashMap::new();
    for (i, n) in usable.iter().enumerate() {
        let Some(l) = &n.links else { continue };
        let key = (signature(&l.matrix), n.domain.is_some());
        let g = *index.entry(key).or_insert_with(|| {
            groups.push((n, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(i);
    }
    let mut facts: Vec<Option<HostFacts>> = vec![None; usable.len()];
    let mut classes = Vec::new();
    for (c, (first, members)) in groups.into_iter().enumerate() {
        let Some(links) = &first.links else { continue };
        let m = &links.matrix;
        let hosts = members.iter().map(|&i| usable[i].host.clone()).collect();
        let mut origins: Vec<NvlinkOrigin> = Vec::new();
        for &i in &members {
            let o = usable[i].basis.origin();
            if !origins.contains(&o) {
                origins.push(o);
            }
        }
        let class = node_class(c, first, links, hosts, origins);
        let ring_facts = HostFacts {
            gpus: m.len(),
            ring_gbps: class.ring.bottleneck_gbps,
            hop_latency_us: if m.worst_hop(&class.ring.order) == NcclPath::Nvl.rank() {
                LAT_NVLINK_US
            } else {
                LAT_PCI_US
            },
            net_gbps: 0.0,
            net_assumed: None,
            nvlink_gbps: 0.0,
        };
        for i in members {
            facts[i] = Some(HostFacts {
                net_gbps: usable[i].net_gbps,
                net_assumed: usable[i].net_assumed.clone(),
                nvlink_gbps: usable[i].nvlink_gbps,
                ..ring_facts.clone()
            });
        }
        classes.push(class);
    }
    (classes, facts.into_iter().flatten().collect())
}

/// Solve one class's ring and say why it is what it is.
fn node_class(
    index: usize,
    first: &Digest,
    links: &GpuLinks,
    hosts: Vec<String>,
    origins: Vec<NvlinkOrigin>,
) -> NodeClass {
    let m = &links.matrix;
    let r = ring::solve(m);
    let index_order: Vec<usize> = (0..m.len()).collect();
    let (ib, ic) = m.score(&index_order);
    let ib = if m.len() < 2 { 0.0 } else { ib };
    let in_domain = first.domain.is_some();
    let beats = m.len() > 1 && better((r.bottleneck_gbps, r.cost), (ib, ic));
    let reason = if m.len() < 2 {
        "one GPU: no intra-node ring".to_string()
    } else if in_domain {
        format!(
            "in a multi-node NVLink domain: NCCL joins the domain's GPUs into one system and searches its rings itself, so no ring file is written (ring {:?} reaches {:.1} GB/s inside the node)",
            r.order, r.bottleneck_gbps
        )
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
    let nvlink = (m.len() > 1).then(|| ClassNvlink {
        origins,
        gbps_per_link: links.gbps_per_link,
        links: links.nvlinks(),
    });
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
        nvlink,
    };
    if beats && !in_domain {
        class.graph_xml = Some(emit::graph_xml::ring_graph(&class));
    }
    class
}

/// What the wires' rails give the plan: how many nodes keep to them, and each node the fabric
/// shows off its rails (no rail-dependent NCCL setting is made for it: `nccl::rules`).
fn rail_notes(usable: &[&Digest], fabric: Option<&Fabric>) -> Vec<Note> {
    let Some(f) = fabric.filter(|f| !f.rail_hcas.is_empty()) else {
        return Vec::new();
    };
    let file = f.stated_in.as_deref().unwrap_or("cluster.yaml");
    let off: Vec<(&str, &str)> = usable
        .iter()
        .filter_map(|n| Some((n.host.as_str(), f.off_rail.get(&n.host)?.as_str())))
        .collect();
    let mut notes = vec![Note::info(
        "rails",
        format!(
            "the fabric ({file}) is rail-optimised with {} rails: {} of {} node(s) planned on them (NCCL_CROSS_NIC, NCCL_IB_HCA rail ids where each GPU's NIC sits on the rail of its index)",
            f.rails.unwrap_or(0),
            usable.len() - off.len(),
            usable.len()
        ),
    )];
    for (host, why) in off.iter().take(16) {
        notes.push(Note::warn(
            "off-rail",
            format!("{host}: {why}; no rail-dependent NCCL setting is made for it until it is recabled and `topo-tune fabric` run again"),
        ));
    }
    if off.len() > 16 {
        notes.push(Note::warn(
            "off-rail",
            format!(
                "and {} more node(s) off their rails (fabric.off_rail in {file})",
                off.len() - 16
            ),
        ));
    }
    notes
}

fn planning_notes(usable: &[&Digest], fabric: Option<&Fabric>) -> Vec<Note> {
    let mut notes = Vec::new();
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
    notes.extend(rail_notes(usable, fabric));
    notes.extend(net_rate_notes(usable));
    let no_rdma = usable.iter().any(|n| n.no_rdma);
    if no_rdma && usable.len() > 1 {
        notes.push(Note::warn(
            "no-rdma-nic",
            "some nodes have no RDMA NIC: NCCL falls back to sockets there, and the whole ring runs at that speed",
        ));
    }
    notes
}

/// Nodes whose network figure is not their own report, one note per reason: a default is a
/// warning (every prediction over those NICs rests on it), a stated `nic_gbps` an info.
fn net_rate_notes(usable: &[&Digest]) -> Vec<Note> {
    let mut by_reason: Vec<(&str, Vec<String>)> = Vec::new();
    for n in usable {
        let Some(why) = n.net_assumed.as_deref() else { continue };
        match by_reason.iter_mut().find(|(w, _)| *w == why) {
            Some((_, hosts)) => hosts.push(n.host.clone()),
            None => by_reason.push((why, vec![n.host.clone()])),
        }
    }
    by_reason
        .into_iter()
        .map(|(why, hosts)| {
            let text = format!("{} node(s) (e.g. {}): network figure: {why}", hosts.len(), hosts[0]);
            if why.starts_with("assumed") {
                Note::warn("nic-rate-assumed", text)
            } else {
                Note::info("nic-rate-stated", text)
            }
        })
        .collect()
}

/// The files NCCL reads on one node, as the plan decides them.
#[derive(Clone, PartialEq, Eq, Hash)]
struct NcclKey {
    version: Option<NcclVersion>,
    settings: Vec<Setting>,
    left_out: Vec<String>,
    topology_xml: Option<String>,
    gpu_ports: Vec<GpuPort>,
}

/// Every node's NCCL settings (GPU-less nodes included: they run NCCL's bootstrap too),
/// grouped by identical files.
fn nccl_plan(nodes: Vec<Digest>) -> NcclPlan {
    let mut out = NcclPlan::default();
    let mut index: HashMap<NcclKey, usize> = HashMap::new();
    for n in nodes {
        let key = match n.nccl {
            Ok(k) => k,
            Err(Refusal(reason)) => {
                out.refused.push(Excluded {
                    host: n.host.clone(),
                    reason,
                });
                continue;
            }
        };
        let c = *index.entry(key.clone()).or_insert_with(|| {
            out.classes.push(NcclClass {
                name: format!("nccl-{}", out.classes.len()),
                hosts: Vec::new(),
                nccl_version: key.version,
                settings: key.settings,
                left_out: key.left_out,
                topology_xml: key.topology_xml,
                gpu_ports: key.gpu_ports,
            });
            out.classes.len() - 1
        });
        out.classes[c].hosts.push(n.host.clone());
    }
    out
}

/// Say, per group of nodes, how their NVLink is known: reported, an NVSwitch fabric assumed
/// or stated (and why), or unknown (PCIe only, and why); and where cluster.yaml's statement
/// was overruled by what the node reported.
fn nvlink_notes(nodes: &[Digest]) -> Vec<Note> {
    let mut groups: Vec<(String, String, Vec<&str>)> = Vec::new();
    for n in nodes {
        let (code, why) = match &n.basis {
            NvlinkBasis::Reported { .. } if n.nvlink_hint != NvlinkHint::Auto && n.has_gpus => (
                "nvlink-hint-ignored",
                "the node reports its NVLink itself: cluster.yaml's `nvlink:` is not needed and was not used"
                    .to_string(),
            ),
            NvlinkBasis::Reported { .. } => continue,
            NvlinkBasis::Nvswitch { links, gbps, why } => (
                n.basis.code(),
                format!("an all-to-all NVSwitch fabric, NV{links} × {gbps} GB/s per GPU pair: {why}"),
            ),
            NvlinkBasis::Mesh { why, .. } => (n.basis.code(), why.clone()),
            NvlinkBasis::Unknown { .. } if n.nvlink_hint == NvlinkHint::None => (
                "stated-no-nvlink",
                "PCIe paths only: stated in cluster.yaml (`nvlink: none`)".to_string(),
            ),
            NvlinkBasis::Unknown { why } => (n.basis.code(), why.clone()),
        };
        match groups.iter_mut().find(|(c, w, _)| c == code && *w == why) {
            Some((_, _, hosts)) => hosts.push(&n.host),
            None => groups.push((code.to_string(), why, vec![&n.host])),
        }
    }
    groups
        .into_iter()
        .map(|(code, why, hosts)| {
            let text = format!("{} node(s) (e.g. {}): {why}", hosts.len(), hosts[0]);
            if code == "nvlink-unknown" {
                Note::warn(&code, text)
            } else {
                Note::info(&code, text)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::{as_connectx, p4d, p5en};

    const GIB: u64 = 1 << 30;

    fn node<'a>(host: &str, rack: &str, snapshot: &'a NodeSnapshot) -> PlanNode<'a> {
        PlanNode {
            host: host.into(),
            labels: BTreeMap::from([("rack".to_string(), rack.to_string())]),
            snapshot,
            hints: NodeHints::default(),
        }
    }

    fn plan_of(nodes: &[PlanNode], fabric: Option<&Fabric>, nccl: &NcclPolicy) -> Plan {
        plan(&PlanInput {
            nodes,
            fabric,
            message_bytes: GIB,
            nccl,
        })
    }

    fn two_racks() -> Fabric {
        Fabric {
            racks: BTreeMap::from([
                ("r1".to_string(), Some("leaf-a".to_string())),
                ("r2".to_string(), Some("leaf-b".to_string())),
            ]),
            leaves: BTreeMap::new(),
            rails: None,
            ..Default::default()
        }
    }

    #[test]
    fn identical_nodes_make_one_class_and_one_set_of_files() {
        let s = as_connectx(p5en());
        let nodes: Vec<PlanNode> = (0..4).map(|i| node(&format!("n{i}"), "r1", &s)).collect();
        let p = plan_of(&nodes, None, &NcclPolicy::default());
        assert_eq!(p.node_classes.len(), 1);
        assert_eq!(p.node_classes[0].hosts, ["n0", "n1", "n2", "n3"]);
        assert_eq!(p.node_classes[0].gpus, 8);
        assert_eq!(p.nccl.classes.len(), 1);
        assert_eq!(p.nccl.classes[0].hosts.len(), 4);
        let mut order = p.node_order.clone();
        order.sort();
        assert_eq!(order, ["n0", "n1", "n2", "n3"], "every host once");
        assert!(p.excluded.is_empty() && p.nccl.refused.is_empty());
        assert_eq!(p.message_bytes, GIB);
    }

    #[test]
    fn different_boards_are_different_classes() {
        let (a, b) = (p4d(), p5en());
        let nodes = [node("a0", "r1", &a), node("b0", "r1", &b), node("a1", "r1", &a)];
        let p = plan_of(&nodes, None, &NcclPolicy::default());
        assert_eq!(p.node_classes.len(), 2);
        assert_eq!(p.node_classes[0].hosts, ["a0", "a1"]);
        assert_eq!(p.node_classes[1].hosts, ["b0"]);
    }

    #[test]
    fn a_node_without_gpus_holds_no_rank_but_gets_nccl_files() {
        let s = p5en();
        let mut bare = p5en();
        bare.gpus.clear();
        let nodes = [node("gpu0", "r1", &s), node("login", "r1", &bare)];
        let p = plan_of(&nodes, None, &NcclPolicy::default());
        assert_eq!(p.node_order, ["gpu0"]);
        assert_eq!(p.excluded.len(), 1);
        assert_eq!(p.excluded[0].host, "login");
        assert!(p.excluded[0].reason.contains("no GPU"));
        let with_files: Vec<&String> = p.nccl.classes.iter().flat_map(|c| &c.hosts).collect();
        assert!(
            with_files.contains(&&"login".to_string()),
            "bootstrap runs NCCL there too"
        );
    }

    #[test]
    fn a_refused_override_refuses_every_node_and_names_why() {
        let s = as_connectx(p5en());
        let nodes = [node("n0", "r1", &s), node("n1", "r1", &s)];
        let policy = NcclPolicy {
            cluster_version: None,
            overrides: BTreeMap::from([("NCCL_IB_HCA".to_string(), "=lo".to_string())]),
        };
        let p = plan_of(&nodes, None, &policy);
        assert!(p.nccl.classes.is_empty());
        assert_eq!(p.nccl.refused.len(), 2);
        assert!(
            p.nccl.refused[0].reason.contains("never-slower guard"),
            "{}",
            p.nccl.refused[0].reason
        );
    }

    #[test]
    fn the_cluster_version_applies_where_the_node_does_not_say() {
        let s = p5en();
        assert_eq!(s.nccl_version, None);
        let nodes = [node("n0", "r1", &s)];
        let policy = NcclPolicy {
            cluster_version: Some(NcclVersion(2, 18, 1)),
            overrides: BTreeMap::new(),
        };
        let p = plan_of(&nodes, None, &policy);
        assert_eq!(p.nccl.classes[0].nccl_version, Some(NcclVersion(2, 18, 1)));
    }

    #[test]
    fn the_solved_order_keeps_racks_together_and_is_never_predicted_worse() {
        let s = as_connectx(p5en());
        let fabric = two_racks();
        // Inventory order alternates racks: the default ring crosses between them each hop.
        let nodes: Vec<PlanNode> = (0..8)
            .map(|i| node(&format!("n{i}"), if i % 2 == 0 { "r1" } else { "r2" }, &s))
            .collect();
        let p = plan_of(&nodes, Some(&fabric), &NcclPolicy::default());
        assert!(p.crossings.solved.rack < p.crossings.default.rack, "{:?}", p.crossings);
        assert!(p.crossings.solved.rack >= p.crossings.lower_bound.rack);
        assert!(p.predicted.gain >= 1.0, "gain {}", p.predicted.gain);
        assert_eq!(p.default_order, (0..8).map(|i| format!("n{i}")).collect::<Vec<_>>());
    }

    #[test]
    fn unplaced_nodes_among_placed_ones_are_a_warning() {
        let s = p5en();
        let fabric = two_racks();
        let mut loose = node("loose", "r1", &s);
        loose.labels.clear();
        let nodes = [node("n0", "r1", &s), loose];
        let p = plan_of(&nodes, Some(&fabric), &NcclPolicy::default());
        assert!(p.notes.iter().any(|n| n.code == "unplaced-nodes"), "{:?}", p.notes);
    }

    #[test]
    fn planning_from_digests_is_what_plan_does() {
        // `init` digests each snapshot as it arrives and plans the digests; tests and benches
        // call `plan`. Both must be the same plan.
        let (a, b) = (as_connectx(p5en()), p4d());
        let nodes = [node("a", "r1", &a), node("b", "r2", &b), node("c", "r2", &a)];
        let fabric = two_racks();
        let policy = NcclPolicy::default();
        let whole = plan_of(&nodes, Some(&fabric), &policy);
        let cx = Context {
            fabric: Some(&fabric),
            message_bytes: GIB,
            nccl: &policy,
        };
        let streamed = plan_digests(nodes.iter().map(|n| digest(n, &cx)).collect(), &cx);
        assert_eq!(
            serde_json::to_value(&whole).unwrap(),
            serde_json::to_value(&streamed).unwrap()
        );
    }
}
