//! `topo-tune init`: read cluster.yaml, gather one snapshot per node, plan, and write on every
//! node the NCCL files the plan gives it — or apply a reviewed `plan.json` exactly
//! (`--plan`), or stop after collecting (`--collect-only`), or only list (`--dry-run`).

use super::gather::{gather, Ask, Settlements, Snapshots};
use super::plan::{admit, gather_and_plan, reviewed_plan, Facts};
use super::reach::on_nodes;
use super::{finish, Done};
use crate::apply::tree::Tree;
use crate::apply::writer::{Bundle, WriteError};
use crate::cli::{InitArgs, OutputFormat};
use crate::config::Inventory;
use crate::error::Error;
use crate::exit;
use crate::model::files::host_dir;
use crate::model::plan::{NcclClass, Plan};
use crate::model::NodeSnapshot;
use crate::model::{Failure, FailureKind};
use crate::node::{calls::Write, write_target, NodeJob};
use crate::report::collect::{self as collect_report, CollectDetail, CollectPayload};
use crate::report::envelope::{to_json, Envelope, NodeRow, NodeStatus, Summary};
use crate::report::write::{self as write_report, WriteDetail, WritePayload};
use crate::transport::transport_name;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

pub fn run(args: &InitArgs, output: OutputFormat) -> Result<Done, Error> {
    let inv = Inventory::load(&args.gather.cluster_config)?;
    if args.list {
        return list(&inv, args, output);
    }
    if args.collect_only {
        return collect_only(&inv, args, output);
    }
    // The probe also says whether each node's files are settled — unless the files go
    // elsewhere (--output-dir), where the node's own files say nothing.
    let ask = match args.output_dir {
        None => Ask::SnapshotAndFiles,
        Some(_) => Ask::Snapshot,
    };
    let (plan, facts, settled) = match &args.plan {
        Some(path) => reviewed_plan(path, &inv, &args.gather, output, ask)?,
        None => {
            let planned = gather_and_plan(&inv, &args.gather, output, 1 << 30, ask)?;
            let facts = Facts::of_plan(&planned.plan, &planned.reached);
            (planned.plan, facts, planned.settled)
        }
    };
    write_plan(&inv, args, &plan, &facts, &settled, output)
}

/// Why a node gets no files from this plan.
fn unplanned_reason(plan: &Plan, host: &str) -> String {
    plan.nccl
        .refused
        .iter()
        .chain(&plan.excluded)
        .find(|e| e.host == host && !e.reason.starts_with("no GPU"))
        .map_or_else(
            || "the plan gives this node no NCCL settings".to_string(),
            |e| e.reason.clone(),
        )
}

fn write_plan(
    inv: &Inventory,
    args: &InitArgs,
    plan: &Plan,
    facts: &Facts,
    settled: &Settlements,
    output: OutputFormat,
) -> Result<Done, Error> {
    let by_host = plan.nccl_by_host();
    let mut rows: Vec<Option<NodeRow<WriteDetail>>> = Vec::new();
    let mut jobs = Vec::new();
    let mut slots = Vec::new();
    for n in &inv.nodes {
        let detail = |class: Option<&&NcclClass>| WriteDetail {
            transport: transport_name(n),
            settings: class.map(|c| c.settings.clone()).unwrap_or_default(),
            left_out: class.map(|c| c.left_out.clone()).unwrap_or_default(),
            ..WriteDetail::default()
        };
        let class = by_host.get(n.host.as_str());
        // A node that could not say what it is gets nothing, with its own failure.
        if let Some(f) = facts.failed.get(&n.host) {
            rows.push(Some(NodeRow::failed(&n.host, f.clone(), detail(class))));
            continue;
        }
        // What would be written passes the class checks and the guard, against the node's
        // own ports (a plan may have been edited since it was made).
        let ports = facts.ports.get(&n.host).map(Vec::as_slice).unwrap_or_default();
        if let Some(Err(why)) = class.map(|c| admit(inv, n, c, ports)) {
            let f = Failure::new(FailureKind::NotPlanned, why);
            rows.push(Some(NodeRow::failed(&n.host, f, detail(class))));
            continue;
        }
        let bundle = match class.map(|c| Bundle::of(c)) {
            Some(Ok(b)) => b,
            Some(Err(r)) => {
                let f = Failure::new(FailureKind::NotPlanned, format!("refused setting: {r}"));
                rows.push(Some(NodeRow::failed(&n.host, f, detail(class))));
                continue;
            }
            None => {
                let f = Failure::new(FailureKind::NotPlanned, unplanned_reason(plan, &n.host));
                rows.push(Some(NodeRow::failed(&n.host, f, detail(None))));
                continue;
            }
        };
        // Its probe found these very files in place: nothing to write, no second round trip.
        if let Some(report) = settled.get(&n.host).and_then(|s| s.report_for(&bundle)) {
            let detail = WriteDetail {
                files: report.files,
                ..detail(class)
            };
            rows.push(Some(NodeRow::ok(&n.host, false, detail)));
            continue;
        }
        slots.push((rows.len(), detail(class)));
        rows.push(None);
        jobs.push(NodeJob {
            node: n.clone(),
            target: write_target(n, args.output_dir.as_deref()),
            call: Write {
                bundle,
                check: args.checking(),
                diff: args.diff,
                run_id: None,
            },
        });
    }
    let outcomes = on_nodes(inv, &args.gather.reach, output, jobs)?;
    for ((slot, detail), o) in slots.into_iter().zip(outcomes) {
        // A failed node keeps what it was to be told; an answer adds what changed.
        rows[slot] = Some(match &o.result {
            Ok(rep) => NodeRow::ok(
                &o.host,
                rep.changed(),
                WriteDetail {
                    files: rep.files.clone(),
                    run_id: rep.run_id.clone(),
                    ..detail
                },
            ),
            Err(f) => NodeRow::failed(&o.host, f.clone(), detail),
        });
    }
    let rows: Vec<NodeRow<WriteDetail>> = rows.into_iter().flatten().collect();
    finish_write(rows, args, output)
}

fn finish_write(rows: Vec<NodeRow<WriteDetail>>, args: &InitArgs, output: OutputFormat) -> Result<Done, Error> {
    let summary = Summary::of(&rows);
    let not_ok = summary.nodes - summary.ok;
    let any_changed = summary.changed > 0;
    let exit_code = if let Some(code) = summary.failure_exit() {
        code
    } else if args.checking() && any_changed {
        exit::CHANGES_PENDING
    } else {
        exit::OK
    };
    let verb = if args.checking() { "would change" } else { "changed" };
    let msg = format!(
        "init: {} node(s), {} {verb}, {} failed, {} skipped",
        summary.nodes, summary.changed, summary.failed, summary.skipped
    );
    let envelope = Envelope {
        command: "init",
        changed: any_changed && !args.checking(),
        failed: not_ok > 0,
        msg,
        exit_code,
        nodes: rows,
        payload: WritePayload {
            pending: args.checking() && any_changed,
            check: args.checking(),
            plan_file: args.plan.as_ref().map(|p| p.display().to_string()),
            output_dir: args.output_dir.as_ref().map(|d| d.display().to_string()),
            summary,
        },
    };
    finish(output, envelope, write_report::render_init)
}

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

fn collect_only(inv: &Inventory, args: &InitArgs, output: OutputFormat) -> Result<Done, Error> {
    let out_dir = args
        .output_dir
        .clone()
        .ok_or_else(|| Error::Usage("init --collect-only needs --output-dir DIR (where the snapshots go)".into()))?;
    let tree = Tree::open(&out_dir).map_err(WriteError::from)?;
    let started = Instant::now();
    let outcomes: Snapshots = gather(inv, &args.gather, output)?;
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
                let dir = host_dir(&out_dir, &o.host).map_err(Error::Usage)?;
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
    let summary = Summary::of(&rows);
    let msg = format!(
        "collected {} of {} nodes ({} failed, {} skipped) in {:.1} s into {}",
        summary.ok,
        summary.nodes,
        summary.failed,
        summary.skipped,
        elapsed.as_secs_f64(),
        out_dir.display()
    );
    let failed = summary.failed + summary.skipped > 0;
    let envelope = Envelope {
        command: "init",
        changed: summary_changed || summary.changed > 0,
        failed,
        msg,
        exit_code: summary.failure_exit().unwrap_or(exit::OK),
        nodes: rows,
        payload: CollectPayload {
            list: false,
            output_dir: Some(out_dir.display().to_string()),
            summary,
        },
    };
    finish(output, envelope, collect_report::render_collect)
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

fn list(inv: &Inventory, args: &InitArgs, output: OutputFormat) -> Result<Done, Error> {
    let snapshot_path = |host: &str| -> Option<PathBuf> {
        let dir = args.output_dir.as_ref()?;
        host_dir(dir, host).ok().map(|d| d.join("snapshot.json"))
    };
    let rows: Vec<NodeRow<CollectDetail>> = inv
        .nodes
        .iter()
        .map(|n| NodeRow {
            host: n.host.clone(),
            status: NodeStatus::Pending,
            changed: false,
            error: None,
            detail: CollectDetail {
                transport: if args.gather.from_probes.is_some() {
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
        .collect();
    let msg = format!(
        "{} nodes would be probed ({} declared in {}); nothing was contacted",
        rows.len(),
        inv.nodes.len(),
        inv.path.display()
    );
    let envelope = Envelope {
        command: "init",
        changed: false,
        failed: false,
        msg,
        exit_code: exit::OK,
        payload: CollectPayload {
            list: true,
            output_dir: args.output_dir.as_ref().map(|d| d.display().to_string()),
            summary: Summary::of(&rows),
        },
        nodes: rows,
    };
    finish(output, envelope, collect_report::render_list)
}
