//! Collecting snapshots only (`init --collect-only`: one file per node, for `--from-probes`
//! later), and listing what `init` would contact (`--list`).

use super::gather::{gather, Snapshots};
use super::settings::GatherSettings;
use crate::apply::tree::Tree;
use crate::apply::writer::WriteError;
use crate::error::Error;
use crate::model::files::host_dir;
use crate::model::{Failure, NodeSnapshot};
use crate::report::collect::CollectDetail;
use crate::report::envelope::{to_json, NodeRow, NodeStatus};
use crate::report::Printer;
use crate::transport::transport_name;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `summary.json` beside the snapshots: no timings, so an identical second run leaves it
/// untouched.
#[derive(Serialize)]
struct SummaryFile<'a> {
    cluster_config: String,
    nodes: Vec<SummaryNode<'a>>,
}

#[derive(Serialize)]
struct SummaryNode<'a> {
    host: &'a str,
    status: NodeStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a Failure>,
}

/// What `--collect-only` did: a row per node, whether `summary.json` changed, how long.
pub(crate) struct Collected {
    pub(crate) rows: Vec<NodeRow<CollectDetail>>,
    pub(crate) summary_changed: bool,
    pub(crate) elapsed: std::time::Duration,
}

/// Every node's snapshot into `out_dir/<host>/snapshot.json` (left alone when it describes
/// the same machine), and `summary.json` beside them.
pub(crate) fn collect_only(g: &GatherSettings, out_dir: &Path, printer: &Printer) -> Result<Collected, Error> {
    let inv = &g.inv;
    let tree = Tree::open(out_dir).map_err(WriteError::from)?;
    let started = Instant::now();
    let outcomes: Snapshots = gather(g, printer)?;
    let elapsed = started.elapsed();
    let mut rows = Vec::new();
    for o in &outcomes {
        let mut detail = CollectDetail {
            transport: o.transport,
            duration_ms: Some(o.duration.as_millis() as u64),
            attempts: (o.attempts > 0).then_some(o.attempts),
            deploy: o.deploy,
            ..CollectDetail::default()
        };
        let row = match &o.result {
            Ok(snap) => {
                let dir = host_dir(out_dir, &o.host).map_err(|e| Error::Usage(e.0))?;
                let rel = format!("{}/snapshot.json", o.host);
                // A shared paper snapshot carries no host name of its own: this node's. A
                // machine's snapshot keeps the name the machine reported.
                let renamed;
                let written: &NodeSnapshot = if o.transport != "simulated" || snap.hostname == o.host {
                    snap
                } else {
                    renamed = NodeSnapshot {
                        hostname: o.host.clone(),
                        ..(**snap).clone()
                    };
                    &renamed
                };
                // Only what describes the machine counts: interrupt counters move on every run.
                let changed = !same_machine(&tree, &rel, written) && write_file(&tree, &rel, &to_json(written)?)?;
                detail.snapshot = Some(dir.join("snapshot.json").display().to_string());
                NodeRow::ok(&o.host, changed, detail)
            }
            Err(f) => NodeRow::failed(&o.host, f.clone(), detail),
        };
        rows.push(row);
    }
    let summary_file = SummaryFile {
        cluster_config: inv.path.display().to_string(),
        nodes: rows
            .iter()
            .map(|r| SummaryNode {
                host: &r.host,
                status: r.status,
                error: r.error.as_ref(),
            })
            .collect(),
    };
    let summary_changed = write_file(&tree, "summary.json", &to_json(&summary_file)?)?;
    Ok(Collected {
        rows,
        summary_changed,
        elapsed,
    })
}

/// The snapshot file at `rel` describes the same machine as `snap` (volatile figures aside):
/// it is left as it is. An unreadable or different file is rewritten.
fn same_machine(tree: &Tree, rel: &str, snap: &NodeSnapshot) -> bool {
    let Ok(Some(text)) = tree.read_text(rel, crate::transport::ssh::MAX_ANSWER_BYTES) else {
        return false;
    };
    NodeSnapshot::from_json(&text).is_ok_and(|old| old.without_volatile() == snap.without_volatile())
}

fn write_file(tree: &Tree, path: &str, text: &str) -> Result<bool, Error> {
    Ok(tree.write(path, text.as_bytes(), 0o644).map_err(WriteError::from)?)
}

/// `init --list`: what would be contacted, and how (nothing is).
pub(crate) fn list(g: &GatherSettings, output_dir: Option<&Path>) -> Vec<NodeRow<CollectDetail>> {
    let snapshot_path = |host: &str| -> Option<PathBuf> {
        let dir = output_dir?;
        host_dir(dir, host).ok().map(|d| d.join("snapshot.json"))
    };
    g.inv
        .nodes
        .iter()
        .map(|n| NodeRow {
            host: n.host.clone(),
            status: NodeStatus::Pending,
            changed: false,
            error: None,
            detail: CollectDetail {
                transport: if g.probes_dir().is_some() {
                    "files"
                } else {
                    transport_name(n)
                },
                snapshot: snapshot_path(&n.host).map(|p| p.display().to_string()),
                declared_at: Some(n.declared_at.clone()),
                labels: n.labels.clone(),
                ..CollectDetail::default()
            },
        })
        .collect()
}
