//! One snapshot per inventory node: probed where each node lives (ssh, local, simulated), or
//! read from `--from-probes` files another engine gathered. Shared by every flow that plans.

use super::reach::{machine_jobs, on_nodes};
use super::settings::{GatherSettings, Source};
use crate::apply::writer::Settled;
use crate::config::{Inventory, NodeSpec, TransportKind};
use crate::error::Error;
use crate::model::NodeSnapshot;
use crate::model::{Deploy, Failure, FailureKind, NodeOutcome};
use crate::node::calls::{Probe, Survey, Surveyed};
use crate::node::Call;
use crate::report::Printer;
use crate::transport::ssh::MAX_ANSWER_BYTES;
use crate::transport::{simulated, transport_name};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// One snapshot per node, shared where nodes are the same on paper (a `simulate:` source is
/// read and held once, however many nodes are made from it).
pub(crate) type Snapshots = Vec<NodeOutcome<Arc<NodeSnapshot>>>;

/// The nodes whose NCCL files are settled (by host), as their probes reported.
pub(crate) type Settlements = HashMap<String, Settled>;

/// What to ask each reached node for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// Its snapshot.
    Snapshot,
    /// Its snapshot and whether its files are settled (`init`, which writes next).
    SnapshotAndFiles,
}

/// Every node's snapshot, in inventory order.
pub(crate) fn gather(g: &GatherSettings, printer: &Printer) -> Result<Snapshots, Error> {
    Ok(gather_asking(g, printer, Ask::Snapshot)?.0)
}

/// Every node's snapshot, in inventory order, and (asked for, from nodes reached) which nodes
/// are settled.
pub(crate) fn gather_asking(
    g: &GatherSettings,
    printer: &Printer,
    ask: Ask,
) -> Result<(Snapshots, Settlements), Error> {
    let inv = &g.inv;
    match (&g.source, ask) {
        (Source::Probes(dir), _) => Ok((from_probes(inv, dir)?, Settlements::new())),
        (Source::Nodes, Ask::Snapshot) => collect(g, printer, |_| Probe {}, |s| (s, None)),
        (Source::Nodes, Ask::SnapshotAndFiles) => collect(
            g,
            printer,
            |_| Survey {
                cluster_nccl_version: inv.nccl_version,
            },
            |a: Surveyed| (a.snapshot, a.settled),
        ),
    }
}

fn collect<C: Call>(
    g: &GatherSettings,
    printer: &Printer,
    call: impl Fn(&NodeSpec) -> C,
    split: impl Fn(C::Answer) -> (NodeSnapshot, Option<Settled>),
) -> Result<(Snapshots, Settlements), Error> {
    let inv = &g.inv;
    // Paper nodes answer here from their shared source; through the fan-out only when a
    // latency is simulated (benchmarks of the fan-out itself).
    let on_paper = |n: &NodeSpec| n.transport == TransportKind::Simulated && g.reach.simulated_latency.is_zero();
    let jobs = machine_jobs(inv, call)
        .into_iter()
        .filter(|j| !on_paper(&j.node))
        .collect();
    let mut settlements = Settlements::new();
    let mut reached = on_nodes(inv, &g.reach, printer, jobs)?.into_iter();
    let mut outcomes = Vec::with_capacity(inv.nodes.len());
    for n in &inv.nodes {
        let o = if on_paper(n) {
            let start = Instant::now();
            NodeOutcome {
                host: n.host.clone(),
                transport: transport_name(n),
                result: simulated::shared(n),
                duration: start.elapsed(),
                attempts: 0,
                deploy: Some(Deploy::NotNeeded),
            }
        } else {
            let Some(o) = reached.next() else { break };
            o.map(|answer| {
                let (snapshot, settled) = split(answer);
                if let Some(s) = settled {
                    settlements.insert(n.host.clone(), s);
                }
                Arc::new(snapshot)
            })
        };
        outcomes.push(o);
    }
    // A snapshot from another build is refused here, where it enters.
    for o in &mut outcomes {
        if let Ok(s) = &o.result {
            if let Err(e) = s.check_version() {
                o.result = Err(Failure::new(FailureKind::BadAnswer, e.to_string()));
            }
        }
    }
    Ok((outcomes, settlements))
}

/// Snapshots gathered by another engine: `DIR/<host>.json` or `DIR/<host>/snapshot.json`.
fn from_probes(inv: &Inventory, dir: &Path) -> Result<Snapshots, Error> {
    probes_dir(dir)?;
    let others = Names::of(inv);
    Ok(inv
        .nodes
        .iter()
        .map(|n| probe_file(n, dir, &others).map(Arc::new))
        .collect())
}

/// The names of the inventory's nodes (hosts and Slurm names): a snapshot file for one node
/// that describes another of them is someone else's file.
pub(crate) struct Names<'a>(std::collections::HashSet<&'a str>);

impl<'a> Names<'a> {
    pub(crate) fn of(inv: &'a Inventory) -> Names<'a> {
        Names(
            inv.every_node()
                .flat_map(|n| [n.host.as_str(), n.slurm_name.as_str()])
                .collect(),
        )
    }

    /// Why `snap`, filed as `n`'s, is not its: it names another node of the inventory.
    fn foreign(&self, n: &NodeSpec, snap: &NodeSnapshot) -> Option<String> {
        self.other_node(n, &snap.hostname).map(|name| {
            format!(
                "this snapshot describes `{name}`, another node of the inventory, not `{}`: a file filed under the wrong name",
                n.host
            )
        })
    }

    /// `name`, when it is another node of the inventory than `n`. A machine that calls
    /// itself something the inventory does not list (an ssh alias, an IP address, a short
    /// name) is `n` as far as anyone can tell.
    pub(crate) fn other_node<'n>(&self, n: &NodeSpec, name: &'n str) -> Option<&'n str> {
        let own = name == n.host || name == n.slurm_name;
        (!own && self.0.contains(name)).then_some(name)
    }
}

/// `--from-probes DIR` must be a directory.
pub(crate) fn probes_dir(dir: &Path) -> Result<(), Error> {
    if dir.is_dir() {
        return Ok(());
    }
    Err(Error::Io {
        what: format!("--from-probes {}", dir.display()),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
    })
}

/// One node's snapshot file, read and parsed.
pub(crate) fn probe_file(n: &NodeSpec, dir: &Path, names: &Names) -> NodeOutcome<NodeSnapshot> {
    let start = Instant::now();
    // `<slurm name>.json` too: what `srun --output=DIR/%N.json` writes.
    let candidates: [PathBuf; 3] = [
        dir.join(format!("{}.json", n.host)),
        crate::model::files::host_dir(dir, &n.host)
            .unwrap_or_else(|_| dir.join("-"))
            .join("snapshot.json"),
        dir.join(format!("{}.json", n.slurm_name)),
    ];
    let result = match candidates.iter().find(|p| p.exists()) {
        None => Err(Failure::new(
            FailureKind::ProbeFileMissing,
            if n.slurm_name == n.host {
                format!("no {} or {}", candidates[0].display(), candidates[1].display())
            } else {
                format!(
                    "no {}, {} or {}",
                    candidates[0].display(),
                    candidates[1].display(),
                    candidates[2].display()
                )
            },
        )),
        Some(p) => read_probe_file(p).and_then(|snap| match names.foreign(n, &snap) {
            Some(why) => Err(Failure::new(FailureKind::BadAnswer, format!("{}: {why}", p.display()))),
            None => Ok(snap),
        }),
    };
    NodeOutcome {
        host: n.host.clone(),
        transport: "files",
        duration: start.elapsed(),
        attempts: 0,
        deploy: Some(Deploy::NotNeeded),
        result,
    }
}

fn read_probe_file(path: &Path) -> Result<NodeSnapshot, Failure> {
    let text = crate::input::read_text(path, MAX_ANSWER_BYTES, "snapshot").map_err(|e| {
        let kind = match e.kind() {
            std::io::ErrorKind::InvalidData => FailureKind::AnswerTooLarge,
            _ => FailureKind::ProbeFileMissing,
        };
        Failure::new(kind, format!("{}: {e}", path.display()))
    })?;
    NodeSnapshot::from_json(&text).map_err(|e| Failure::new(FailureKind::BadAnswer, format!("{}: {e}", path.display())))
}
