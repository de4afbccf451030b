//! Writing a plan's files on the nodes (`init`), and undoing the last run (`rollback`): the
//! node calls over each node's transport, one row per node with what changed.

use super::gather::Settlements;
use super::plan::{admit, Facts};
use super::reach::{on_nodes, write_jobs};
use super::settings::{InitSettings, RollbackSettings};
use super::tuned::Rollable;
use crate::apply::writer::{Bundle, Tuner, WriteReport};
use crate::error::Error;
use crate::model::plan::{NcclClass, Plan};
use crate::model::{Failure, FailureKind};
use crate::nccl::guard::NvlinkGuard;
use crate::nccl::table::Rejection;
use crate::node::calls::{Rollback, Write};
use crate::node::{write_target, NodeJob};
use crate::report::envelope::NodeRow;
use crate::report::write::WriteDetail;
use crate::report::Printer;
use crate::transport::transport_name;
use crate::tune::onto;
use std::borrow::Cow;

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

/// Every node's files from `plan`: each class admitted against the node's own `facts`, a
/// node whose files are settled on the same bundle left alone (no second round trip), the
/// rest written (or checked) where their files live. One row per inventory node, in order.
pub(crate) fn write_plan(
    s: &InitSettings,
    plan: &Plan,
    facts: &Facts,
    settled: &Settlements,
    tuned: Option<&Rollable>,
    printer: &Printer,
) -> Result<Vec<NodeRow<WriteDetail>>, Error> {
    let inv = &s.gather.inv;
    let by_host = plan.nccl_by_host();
    // One run, one id, made before the first node is touched: every node records this run
    // under it, however many seconds the writes span (a node-made id gave one per second).
    let run_id = crate::apply::writer::run_id();
    let mut rows: Vec<Option<NodeRow<WriteDetail>>> = Vec::new();
    let mut jobs = Vec::new();
    let mut slots = Vec::new();
    for n in &inv.nodes {
        let planned = by_host.get(n.host.as_str()).copied();
        let t = with_tuning(plan, &n.host, planned, tuned);
        let class = t.class.as_deref();
        let detail = WriteDetail {
            transport: transport_name(n),
            settings: class.map(|c| c.settings.clone()).unwrap_or_default(),
            left_out: class.map(|c| c.left_out.clone()).unwrap_or_default(),
            warnings: t.refused.clone().into_iter().collect(),
            tuned: t.given,
            ..WriteDetail::default()
        };
        // The plan's own settings are admitted against the node; the tuning's (its plugin,
        // its globals) were checked when it was read.
        let bundle = match bundle_for(inv, n, plan, planned, facts, &t) {
            Ok(b) => b,
            Err(f) => {
                // Nothing is written there: the tuning is not given either.
                let detail = WriteDetail { tuned: false, ..detail };
                rows.push(Some(NodeRow::failed(&n.host, f, detail)));
                continue;
            }
        };
        // Its probe found these very files in place: nothing to write, no second round trip.
        if let Some(report) = settled.get(&n.host).and_then(|s| s.report_for(&bundle)) {
            let mut detail = WriteDetail {
                files: report.files,
                ..detail
            };
            detail
                .warnings
                .extend(operator_warnings(&report.operator, facts.nvlink.get(&n.host)));
            rows.push(Some(NodeRow::ok(&n.host, false, detail)));
            continue;
        }
        slots.push((rows.len(), detail));
        rows.push(None);
        jobs.push(NodeJob {
            node: n.clone(),
            target: write_target(n, s.output_dir.as_deref()),
            call: Write {
                bundle,
                check: s.check,
                diff: s.diff,
                run_id: Some(run_id.clone()),
            },
        });
    }
    let outcomes = on_nodes(inv, &s.gather.reach, printer, jobs)?;
    for ((slot, detail), o) in slots.into_iter().zip(outcomes) {
        // A failed node keeps what it was to be told; an answer adds what changed.
        rows[slot] = Some(match &o.result {
            Ok(rep) => {
                let mut detail = WriteDetail {
                    files: rep.files.clone(),
                    run_id: rep.run_id.clone(),
                    ..detail
                };
                detail
                    .warnings
                    .extend(operator_warnings(&rep.operator, facts.nvlink.get(&o.host)));
                NodeRow::ok(&o.host, rep.changed(), detail)
            }
            Err(f) => NodeRow::failed(&o.host, f.clone(), WriteDetail { tuned: false, ..detail }),
        });
    }
    Ok(rows.into_iter().flatten().collect())
}

/// A node's NCCL class with the tuning where it may have it (`tune::onto`), the tuner files
/// it installs, and why it is not given it.
pub(crate) struct WithTuning<'a> {
    pub(crate) class: Option<Cow<'a, NcclClass>>,
    pub(crate) tuner: Option<Tuner>,
    pub(crate) given: bool,
    pub(crate) refused: Option<String>,
}

pub(crate) fn with_tuning<'a>(
    plan: &Plan,
    host: &str,
    class: Option<&'a NcclClass>,
    tuned: Option<&Rollable>,
) -> WithTuning<'a> {
    let plain = |refused: Option<String>| WithTuning {
        class: class.map(Cow::Borrowed),
        tuner: None,
        given: false,
        refused,
    };
    let (Some(c), Some(t)) = (class, tuned) else {
        return plain(None);
    };
    if let Some(why) = onto::refused_for(plan, host, c.nccl_version, &t.tuning) {
        return plain(Some(format!("not given the tuning: {why}")));
    }
    let sha = t
        .tuner
        .as_ref()
        .and_then(|x| x.plugin.as_ref())
        .map(|p| p.sha256.as_str());
    match onto::tuned_class(c, &t.tuning, sha) {
        Ok(tuned_class) => WithTuning {
            class: Some(Cow::Owned(tuned_class)),
            tuner: t.tuner.clone(),
            given: true,
            refused: None,
        },
        Err(why) => plain(Some(format!("not given the tuning: {}", why.0))),
    }
}

/// The bundle a node is written, rendered once: its class as given the tuning where it is
/// (with the tuning's files), else the plan's own.
pub(crate) fn bundle_of(class: &NcclClass, t: &WithTuning) -> Result<Bundle, Rejection> {
    match (t.given, t.class.as_deref()) {
        (true, Some(tuned)) => Ok(Bundle {
            tuner: t.tuner.clone(),
            ..Bundle::of(tuned)?
        }),
        _ => Bundle::of(class),
    }
}

/// The operator's own settings that would take NVLink away where the node has it: kept (they
/// are the operator's), said.
fn operator_warnings(files: &[crate::apply::writer::OperatorFile], nvlink: Option<&NvlinkGuard>) -> Vec<String> {
    let Some(g) = nvlink else { return Vec::new() };
    files
        .iter()
        .flat_map(|f| {
            crate::nccl::guard::nvlink_killers(&f.settings, g)
                .into_iter()
                .map(move |v| {
                    format!(
                        "{}: {} (the operator's setting: kept; remove it to let NCCL use NVLink)",
                        f.path,
                        v.describe()
                    )
                })
        })
        .collect()
}

/// What one node is to be written, or why it gets nothing: a node that could not say what it
/// is gets nothing, with its own failure; what would be written passes the class checks and
/// the guard against the node's own ports (a plan may have been edited since it was made).
fn bundle_for(
    inv: &crate::config::Inventory,
    n: &crate::config::NodeSpec,
    plan: &Plan,
    class: Option<&NcclClass>,
    facts: &Facts,
    tuning: &WithTuning,
) -> Result<Bundle, Failure> {
    if let Some(f) = facts.failed.get(&n.host) {
        return Err(f.clone());
    }
    let Some(class) = class else {
        return Err(Failure::new(FailureKind::NotPlanned, unplanned_reason(plan, &n.host)));
    };
    admit(inv, n, class, facts).map_err(|why| Failure::new(FailureKind::NotPlanned, why.0))?;
    bundle_of(class, tuning).map_err(|r| Failure::new(FailureKind::NotPlanned, format!("refused setting: {r}")))
}

/// `rollback` on every node: its last run undone (or the run named), one row per node.
pub(crate) fn rollback(s: &RollbackSettings, printer: &Printer) -> Result<Vec<NodeRow<WriteDetail>>, Error> {
    let jobs = write_jobs(&s.inv, s.output_dir.as_deref(), |_| Rollback { run_id: s.run.clone() });
    let outcomes = on_nodes(&s.inv, &s.reach, printer, jobs)?;
    Ok(outcomes
        .iter()
        .zip(&s.inv.nodes)
        .map(|(o, n)| {
            NodeRow::from_outcome(
                o,
                |rep: &WriteReport| {
                    (
                        rep.changed(),
                        WriteDetail {
                            transport: transport_name(n),
                            files: rep.files.clone(),
                            run_id: rep.run_id.clone(),
                            note: rep.note.clone(),
                            run_not_undone: rep.run_not_undone,
                            ..WriteDetail::default()
                        },
                    )
                },
                || WriteDetail {
                    transport: transport_name(n),
                    ..WriteDetail::default()
                },
            )
        })
        .collect())
}
