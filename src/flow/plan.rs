//! Planning from the nodes' facts: every snapshot digested as it is read (on every core) and
//! planned; a reviewed plan.json read as `--plan` reads it; what a node may be given
//! (`admit`: the class checks and the never-slower guard, against the node's own facts); and
//! `plan --output-dir`'s files.

use super::gather::{gather_asking, probe_file, probes_dir, Ask, Names, Settlements};
use super::settings::{GatherSettings, Source};
use crate::apply::tree::Tree;
use crate::apply::writer::WriteError;
use crate::config::{Inventory, NodeSpec};
use crate::emit;
use crate::error::Error;
use crate::model::fabric::Placement;
use crate::model::plan::{Excluded, GpuPort, NcclClass, Plan, PLAN_SCHEMA_VERSION};
use crate::model::Refusal;
use crate::model::{NodeOutcome, NodeSnapshot};
use crate::nccl::guard::NvlinkGuard;
use crate::report::envelope::to_json;
use crate::report::Printer;
use crate::solve::plan::{digest, nvlink_guard_of, plan_digests, Context, Digest, NcclPolicy, PlanNode};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// How many threads digest nodes: the work is per node and independent.
fn workers(jobs: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(16)
        .min(jobs.max(1))
}

/// `f` over `items` on every core, results in order.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let chunk = items.len().div_ceil(workers(items.len())).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| s.spawn(|| part.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// Each node's digest, where nodes that share one snapshot (paper nodes of one source) and
/// the same hints are digested once, on every core, and the rest take a copy under their own
/// name and labels: 65,536 paper nodes of one profile are one digest, not 65,536.
/// A host the fabric marks off its rails is digested apart from its peers: its NCCL settings
/// are not theirs.
fn digest_shared(
    pairs: &[(&NodeSpec, NodeOutcome<std::sync::Arc<NodeSnapshot>>)],
    fabric: Option<&crate::model::fabric::Fabric>,
    digest_of: &(impl Fn(&NodeSpec, &NodeSnapshot) -> Digest + Sync),
) -> Vec<(Reached, Option<Digest>)> {
    type Key<'k> = (usize, crate::model::fabric::NodeHints, Option<&'k str>);
    let key = |(n, o): &(&NodeSpec, NodeOutcome<std::sync::Arc<NodeSnapshot>>)| -> Option<Key> {
        let s = o.result.as_ref().ok()?;
        let off_rail = fabric.and_then(|f| f.off_rail.get(&n.host)).map(String::as_str);
        Some((std::sync::Arc::as_ptr(s) as usize, n.hints.clone(), off_rail))
    };
    let mut leader_of: HashMap<Key, usize> = HashMap::new();
    let mut leaders: Vec<usize> = Vec::new();
    for (i, p) in pairs.iter().enumerate() {
        if let Some(k) = key(p) {
            leader_of.entry(k).or_insert_with(|| {
                leaders.push(i);
                i
            });
        }
    }
    let first: HashMap<usize, Digest> = leaders
        .iter()
        .copied()
        .zip(par_map(&leaders, |&i| {
            let (n, o) = &pairs[i];
            o.result.as_ref().map(|s| digest_of(n, s)).ok()
        }))
        .filter_map(|(i, d)| Some((i, d?)))
        .collect();
    par_map(pairs, |p| {
        let (n, o) = p;
        let (reached, snap) = strip(o.clone());
        let shared = key(p)
            .and_then(|k| leader_of.get(&k))
            .and_then(|i| first.get(i))
            .and_then(|d| d.for_node(&n.host, &n.labels));
        (reached, snap.map(|s| shared.unwrap_or_else(|| digest_of(n, &s))))
    })
}

/// A node's outcome without its answer: what the command reports per node.
pub(crate) type Reached = NodeOutcome<()>;

fn strip<T>(o: NodeOutcome<T>) -> (Reached, Option<T>) {
    let mut answer = None;
    let reached = o.map(|a| answer = Some(a));
    (reached, answer)
}

/// A plan, how each node was reached, and which nodes' files are settled (when asked).
pub(crate) struct Planned {
    pub(crate) plan: Plan,
    pub(crate) reached: Vec<Reached>,
    pub(crate) settled: Settlements,
}

/// Gather every node's facts (as `init` does) and plan. Each snapshot is digested as soon as
/// it is read, on every core, and dropped: a fleet's snapshots are never all held at once
/// when they come from files; paper nodes share one snapshot per source.
pub(crate) fn gather_and_plan(
    g: &GatherSettings,
    printer: &Printer,
    message_bytes: u64,
    ask: Ask,
) -> Result<Planned, Error> {
    let inv = &g.inv;
    let policy = NcclPolicy {
        cluster_version: inv.nccl_version,
        overrides: inv.nccl.clone(),
    };
    let cx = Context {
        fabric: inv.fabric.as_ref(),
        message_bytes,
        nccl: &policy,
    };
    let digest_of = |spec: &NodeSpec, snap: &NodeSnapshot| {
        digest(
            &PlanNode {
                host: spec.host.clone(),
                labels: spec.labels.clone(),
                snapshot: snap,
                hints: spec.hints.clone(),
            },
            &cx,
        )
    };
    let mut settled = Settlements::new();
    let digested: Vec<(Reached, Option<Digest>)> = match &g.source {
        Source::Probes(dir) => {
            probes_dir(dir)?;
            let names = Names::of(inv);
            par_map(&inv.nodes, |n| {
                let (reached, snap) = strip(probe_file(n, dir, &names));
                (reached, snap.map(|s| digest_of(n, &s)))
            })
        }
        Source::Nodes => {
            let (snapshots, settlements) = gather_asking(g, printer, ask)?;
            settled = settlements;
            let pairs: Vec<(&NodeSpec, NodeOutcome<std::sync::Arc<NodeSnapshot>>)> =
                inv.nodes.iter().zip(snapshots).collect();
            digest_shared(&pairs, inv.fabric.as_ref(), &digest_of)
        }
    };
    let mut failed = Vec::new();
    let mut digests = Vec::new();
    let mut reached = Vec::new();
    for (r, d) in digested {
        match (&r.result, d) {
            (Ok(()), Some(d)) => digests.push(d),
            (Err(f), _) => failed.push(Excluded {
                host: r.host.clone(),
                reason: format!("not probed: {}", f.message),
            }),
            (Ok(()), None) => {}
        }
        reached.push(r);
    }
    if let Some((host, why)) = digests.iter().find_map(|d| d.domain_conflict()) {
        let at = inv
            .nodes
            .iter()
            .find(|n| n.host == host)
            .map_or_else(|| inv.path.display().to_string(), |n| n.declared_at.clone());
        return Err(Error::Config(crate::config::ConfigError::Invalid {
            at,
            message: why.to_string(),
        }));
    }
    let mut p = plan_digests(digests, &cx);
    p.excluded.extend(failed);
    Ok(Planned {
        plan: p,
        reached,
        settled,
    })
}

/// What the nodes themselves say now, for a plan made elsewhere: per host, the ports NCCL
/// would use there for GPU traffic (what the guard protects), or why the node could not say.
pub(crate) struct Facts {
    pub(crate) ports: HashMap<String, Vec<GpuPort>>,
    /// What the NVLink edition of the guard protects there.
    pub(crate) nvlink: HashMap<String, NvlinkGuard>,
    pub(crate) failed: HashMap<String, crate::model::Failure>,
}

impl Facts {
    /// A fresh plan's own facts: its classes' ports were derived from these very snapshots.
    pub(crate) fn of_plan(plan: &Plan, reached: &[Reached]) -> Facts {
        let ports = plan
            .nccl
            .classes
            .iter()
            .flat_map(|c| c.hosts.iter().map(move |h| (h.clone(), c.gpu_ports.clone())))
            .collect();
        let failed = reached
            .iter()
            .filter_map(|o| o.result.as_ref().err().map(|f| (o.host.clone(), f.clone())))
            .collect();
        let mut nvlink: HashMap<String, NvlinkGuard> = HashMap::new();
        for c in &plan.node_classes {
            let joined = c
                .nvlink
                .as_ref()
                .is_some_and(|n| n.links.iter().flatten().any(|&k| k > 0));
            for h in &c.hosts {
                nvlink.entry(h.clone()).or_default().nvlink = joined;
            }
        }
        for d in &plan.nvlink_domains {
            for h in &d.hosts {
                nvlink.entry(h.clone()).or_default().domain = Some(d.name.clone());
            }
        }
        Facts { ports, nvlink, failed }
    }
}

/// A reviewed plan (`--plan`) with every guard fact re-derived from the nodes' own answers
/// (probed now, or `--from-probes`): a plan is an artifact that travels, and its own
/// `gpu_ports` say only what was true where and when it was made.
pub(crate) fn reviewed_plan(
    path: &Path,
    g: &GatherSettings,
    printer: &Printer,
    ask: Ask,
) -> Result<(Plan, Facts, Settlements), Error> {
    let plan = read_plan(path, &g.inv)?;
    let (snapshots, settled) = gather_asking(g, printer, ask)?;
    let mut facts = Facts {
        ports: HashMap::new(),
        nvlink: HashMap::new(),
        failed: HashMap::new(),
    };
    let specs: HashMap<&str, &NodeSpec> = g.inv.nodes.iter().map(|n| (n.host.as_str(), n)).collect();
    for o in snapshots {
        match o.result {
            Ok(snap) => {
                facts.ports.insert(o.host.clone(), crate::nccl::guard::gpu_ports(&snap));
                if let Some(spec) = specs.get(o.host.as_str()) {
                    facts.nvlink.insert(o.host, nvlink_guard_of(&snap, &spec.hints));
                }
            }
            Err(f) => {
                facts.failed.insert(o.host, f);
            }
        }
    }
    Ok((plan, facts, settled))
}

/// Whether a node may get its class's files: the settings pass what cluster.yaml's `nccl:`
/// must (and name only topo-tune's or cluster.yaml's files and libraries), and the
/// never-slower guard holds against `ports`, the node's own.
pub(crate) fn admit(inv: &Inventory, node: &NodeSpec, class: &NcclClass, facts: &Facts) -> Result<(), Refusal> {
    let ports = facts.ports.get(&node.host).map(Vec::as_slice).unwrap_or_default();
    crate::nccl::review::check_settings(
        &class.settings,
        &inv.nccl,
        class.topology_xml.is_some(),
        class.nccl_version,
    )
    .map_err(|r| Refusal(format!("refused setting: {r}")))?;
    crate::nccl::guard::check(
        &class.settings,
        ports,
        &node.hints.non_gpu_nics,
        inv.fabric.as_ref().is_some_and(|f| f.rails.is_some()),
        class.topology_xml.as_deref(),
    )
    .map_err(|v| Refusal(format!("refused by the never-slower guard: {v}")))?;
    let nvlink = facts.nvlink.get(&node.host).cloned().unwrap_or_default();
    crate::nccl::guard::check_nvlink(&class.settings, &nvlink, class.topology_xml.as_deref())
        .map_err(|v| Refusal(format!("refused by the never-slower guard: {v}")))
}

/// A reviewed plan.json, checked against this build and this cluster before anything runs.
pub(crate) fn read_plan(path: &Path, inv: &Inventory) -> Result<Plan, Error> {
    let bad = |message: String| Error::PlanFile {
        path: path.display().to_string(),
        message,
    };
    let text = crate::input::read_text(path, crate::input::PLAN_LIMIT, "plan").map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::Io {
            what: format!("--plan {}", path.display()),
            source: e,
        },
        _ => bad(e.to_string()),
    })?;
    plan_from_text(&text, inv).map_err(|r| bad(r.0))
}

/// A plan.json's text as `--plan` reads it: this build's schema, only this cluster's hosts,
/// files topo-tune can write and read back (the settings are judged per node, by [`admit`]).
pub(crate) fn plan_from_text(text: &str, inv: &Inventory) -> Result<Plan, Refusal> {
    #[derive(serde::Deserialize)]
    struct VersionOnly {
        schema_version: u32,
    }
    let v: VersionOnly = serde_json::from_str(text).map_err(|e| Refusal(format!("not a topo-tune plan: {e}")))?;
    if v.schema_version != PLAN_SCHEMA_VERSION {
        return Err(Refusal(format!(
            "plan schema_version {} is not the one this topo-tune writes ({PLAN_SCHEMA_VERSION})",
            v.schema_version
        )));
    }
    let plan: Plan = serde_json::from_str(text).map_err(|e| Refusal(format!("not a topo-tune plan: {e}")))?;
    // A plan for the whole cluster, applied to the nodes `--nodes` selects, names the others.
    let known: HashSet<&str> = inv.every_node().map(|n| n.host.as_str()).collect();
    let strangers: Vec<&str> = plan
        .nccl
        .classes
        .iter()
        .flat_map(|c| c.hosts.iter())
        .map(String::as_str)
        .filter(|h| !known.contains(h))
        .collect();
    if let Some(first) = strangers.first() {
        return Err(Refusal(format!(
            "names {} host(s) that {} does not list (e.g. `{first}`): made for another cluster?",
            strangers.len(),
            inv.path.display()
        )));
    }
    check_plan_files(&plan)?;
    Ok(plan)
}

/// What a plan would write besides its settings (checked by the writer): a topology file must
/// be an NCCL topology topo-tune can read back, and each GPU port a device name or a PCI
/// address.
fn check_plan_files(plan: &Plan) -> Result<(), Refusal> {
    for c in &plan.nccl.classes {
        if let Some(xml) = &c.topology_xml {
            crate::probe::check_topology_artifact(xml, &format!("nccl.classes[{}].topology_xml", c.name))?;
        }
        // A device name, or the PCI address of a NIC a file names only by bus id.
        for p in &c.gpu_ports {
            if p.device.parse::<crate::model::pci::Bdf>().is_err() {
                crate::model::snapshot_check::device_name(
                    || format!("nccl.classes[{}].gpu_ports", c.name),
                    &p.device,
                    63,
                )
                .map_err(|e| Refusal(e.to_string()))?;
            }
        }
    }
    Ok(())
}

/// The Slurm files: each inventory node's Slurm name under its place in the fabric, and, when
/// the plan has NVLink domains, one block per domain (topology.conf then holds the blocks,
/// topology-tree.conf the tree; topology.yaml both).
struct SlurmFiles {
    conf: String,
    yaml: String,
    tree_conf: Option<String>,
}

fn slurm_files(inv: &Inventory, plan: &Plan, header: &str) -> Result<SlurmFiles, Error> {
    let bad = |e: emit::slurm::SlurmError| Error::PlanFile {
        path: inv.path.display().to_string(),
        message: format!("the fabric cannot be written for Slurm: {e}"),
    };
    let placed: Vec<(String, Placement)> = inv
        .nodes
        .iter()
        .map(|n| (n.slurm_name.clone(), Placement::of(&n.labels, inv.fabric.as_ref())))
        .collect();
    let switches = emit::slurm::tree(&placed).map_err(bad)?;
    let tree_conf = emit::slurm::topology_conf(&switches, header);
    if plan.nvlink_domains.is_empty() {
        return Ok(SlurmFiles {
            yaml: emit::slurm::topology_yaml(&switches, header),
            conf: tree_conf,
            tree_conf: None,
        });
    }
    let slurm_name: HashMap<&str, &str> = inv
        .nodes
        .iter()
        .map(|n| (n.host.as_str(), n.slurm_name.as_str()))
        .collect();
    let named = |h: &String| slurm_name.get(h.as_str()).map_or_else(|| h.clone(), |s| s.to_string());
    let domains: Vec<(String, Vec<String>)> = plan
        .nvlink_domains
        .iter()
        .map(|d| (d.name.clone(), d.hosts.iter().map(named).collect()))
        .collect();
    let in_block: std::collections::HashSet<&str> = plan
        .nvlink_domains
        .iter()
        .flat_map(|d| d.hosts.iter().map(String::as_str))
        .collect();
    let unblocked: Vec<String> = inv
        .nodes
        .iter()
        .filter(|n| !in_block.contains(n.host.as_str()))
        .map(|n| n.slurm_name.clone())
        .collect();
    let (blocks, sizes) = emit::slurm::blocks(&domains).map_err(bad)?;
    Ok(SlurmFiles {
        conf: emit::slurm::block_conf(&blocks, &sizes, &unblocked, header),
        yaml: emit::slurm::topology_yaml_with_blocks(&switches, &blocks, &sizes, header),
        tree_conf: Some(tree_conf),
    })
}

/// The Kubernetes node labels: each inventory node's domain (from the plan) and switches.
fn k8s_labels(inv: &Inventory, plan: &Plan) -> Vec<emit::k8s::NodeLabels> {
    let domain_of: HashMap<&str, &str> = plan
        .nvlink_domains
        .iter()
        .flat_map(|d| d.hosts.iter().map(move |h| (h.as_str(), d.name.as_str())))
        .collect();
    let nodes: Vec<(String, Placement, Option<String>)> = inv
        .nodes
        .iter()
        .map(|n| {
            (
                n.host.clone(),
                Placement::of(&n.labels, inv.fabric.as_ref()),
                domain_of.get(n.host.as_str()).map(|d| d.to_string()),
            )
        })
        .collect();
    emit::k8s::node_labels(&nodes)
}

/// `plan --output-dir`: plan.json (what `init --plan` applies), the graph files, hostfiles
/// and Slurm's topology; whether any file changed.
pub(crate) fn write_outputs(p: &mut Plan, inv: &Inventory, dir: &Path) -> Result<bool, Error> {
    // Everything that can be refused is made before the first file is written.
    // The path is the operator's, and a file name may hold a newline: one comment line.
    let header = emit::comment_text(&format!(
        "made by topo-tune {} from {} (`topo-tune plan --output-dir`)",
        env!("CARGO_PKG_VERSION"),
        inv.path.display()
    ));
    let slurm = slurm_files(inv, p, &header)?;
    let labels = k8s_labels(inv, p);
    let tree = Tree::open(dir).map_err(WriteError::from)?;
    let write = |name: &str, content: &str| -> Result<bool, Error> {
        Ok(tree.write(name, content.as_bytes(), 0o644).map_err(WriteError::from)?)
    };
    let mut changed = false;
    for class in p.node_classes.iter_mut() {
        if let Some(xml) = &class.graph_xml {
            let name = format!("nccl-graph-{}.xml", class.name);
            changed |= write(&name, xml)?;
            class.graph_file = Some(dir.join(&name).display().to_string());
        }
    }
    changed |= write("hostfile", &emit::launch::mpi_hostfile(p))?;
    let slurm_names: HashMap<&str, &str> = inv
        .nodes
        .iter()
        .map(|n| (n.host.as_str(), n.slurm_name.as_str()))
        .collect();
    changed |= write("slurm-hostfile", &emit::launch::slurm_hostfile(p, &slurm_names))?;
    changed |= write("topology.conf", &slurm.conf)?;
    changed |= write("topology.yaml", &slurm.yaml)?;
    if let Some(tree) = &slurm.tree_conf {
        changed |= write("topology-tree.conf", tree)?;
    }
    if !labels.is_empty() {
        changed |= write("k8s-node-labels.yaml", &emit::k8s::labels_yaml(&labels, &header))?;
        changed |= write("k8s-label-nodes.sh", &emit::k8s::labels_sh(&labels, &header))?;
    }
    changed |= write("torchrun-node-ranks.txt", &emit::launch::torchrun_node_ranks(p))?;
    changed |= write("plan.json", &to_json(p)?)?;
    Ok(changed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn par_map_keeps_the_order_and_covers_every_item() {
        let items: Vec<u32> = (0..1001).collect();
        let out = super::par_map(&items, |x| x * 2);
        assert_eq!(out, items.iter().map(|x| x * 2).collect::<Vec<_>>());
        assert!(super::par_map(&[] as &[u32], |x| *x).is_empty());
    }
}
