//! `topo-tune init`: read cluster.yaml, gather one snapshot per node, plan, and write on every
//! node the NCCL files the plan gives it — or apply a reviewed `plan.json` exactly
//! (`--plan`), or stop after collecting (`--collect-only`), or only list (`--list`).

use super::{finish, Done};
use crate::cli::InitArgs;
use crate::error::Error;
use crate::exit;
use crate::flow::gather::Ask;
use crate::flow::plan::{gather_and_plan, reviewed_plan, Facts};
use crate::flow::settings::{InitMode, InitSettings};
use crate::report::collect::{self as collect_report, CollectDetail, CollectPayload};
use crate::report::envelope::{Envelope, NodeRow, Summary};
use crate::report::fold::View;
use crate::report::write::{self as write_report, TuningGiven, WriteDetail, WritePayload};
use crate::report::Printer;

pub(crate) fn run(args: &InitArgs, printer: &Printer) -> Result<Done, Error> {
    let s = args.resolve()?;
    match s.mode {
        InitMode::List => return list(&s, printer),
        InitMode::CollectOnly => return collect_only(&s, printer),
        InitMode::Write => {}
    }
    // A tuning that cannot be obeyed is refused before any node is contacted.
    let tuned = s.tuning.as_ref().map(crate::flow::tuned::read).transpose()?;
    // The probe also says whether each node's files are settled — unless the files go
    // elsewhere (--output-dir), where the node's own files say nothing.
    let ask = match s.output_dir {
        None => Ask::SnapshotAndFiles,
        Some(_) => Ask::Snapshot,
    };
    let (plan, facts, settled) = match &s.plan {
        Some(path) => reviewed_plan(path, &s.gather, printer, ask)?,
        None => {
            let planned = gather_and_plan(&s.gather, printer, crate::flow::PREDICTION_BYTES, ask)?;
            let facts = Facts::of_plan(&planned.plan, &planned.reached);
            (planned.plan, facts, planned.settled)
        }
    };
    let rows = crate::flow::write::write_plan(&s, &plan, &facts, &settled, tuned.as_ref(), printer)?;
    finish_write(rows, &s, tuned.as_ref(), printer)
}

fn finish_write(
    rows: Vec<NodeRow<WriteDetail>>,
    s: &InitSettings,
    tuned: Option<&crate::flow::tuned::Rollable>,
    printer: &Printer,
) -> Result<Done, Error> {
    let summary = Summary::of(&rows);
    let not_ok = summary.nodes - summary.ok;
    let any_changed = summary.changed > 0;
    let exit_code = if let Some(code) = summary.failure_exit() {
        code
    } else if s.check && any_changed {
        exit::CHANGES_PENDING
    } else {
        exit::OK
    };
    let verb = if s.check { "would change" } else { "changed" };
    let tuning = tuned.map(|t| TuningGiven {
        file: t.file.display().to_string(),
        set: t.tuning.set.clone(),
        given: rows.iter().filter(|r| r.detail.tuned && r.error.is_none()).count(),
    });
    let msg = format!(
        "init: {} node(s), {} {verb}, {} failed, {} skipped{}",
        summary.nodes,
        summary.changed,
        summary.failed,
        summary.skipped,
        tuning
            .as_ref()
            .map(|t| format!("; the tuning of {} given to {} node(s)", t.set, t.given))
            .unwrap_or_default()
    );
    let envelope = Envelope {
        command: "init",
        changed: any_changed && !s.check,
        failed: not_ok > 0,
        msg,
        exit_code,
        nodes: rows,
        payload: WritePayload {
            pending: s.check && any_changed,
            check: s.check,
            plan_file: s.plan.as_ref().map(|p| p.display().to_string()),
            tuning,
            output_dir: s.output_dir.as_ref().map(|d| d.display().to_string()),
            summary,
        },
    };
    let view = View::of(s.per_node);
    finish(printer, envelope, |e| write_report::render_init(e, view))
}

fn collect_only(s: &InitSettings, printer: &Printer) -> Result<Done, Error> {
    let out_dir = s
        .output_dir
        .clone()
        .ok_or_else(|| Error::Usage("init --collect-only needs --output-dir DIR (where the snapshots go)".into()))?;
    let c = crate::flow::collect::collect_only(&s.gather, &out_dir, printer)?;
    let summary = Summary::of(&c.rows);
    let msg = format!(
        "collected {} of {} nodes ({} failed, {} skipped) in {:.1} s into {}",
        summary.ok,
        summary.nodes,
        summary.failed,
        summary.skipped,
        c.elapsed.as_secs_f64(),
        out_dir.display()
    );
    let failed = summary.failed + summary.skipped > 0;
    let envelope = Envelope {
        command: "init",
        changed: c.summary_changed || summary.changed > 0,
        failed,
        msg,
        exit_code: summary.failure_exit().unwrap_or(exit::OK),
        nodes: c.rows,
        payload: CollectPayload {
            list: false,
            output_dir: Some(out_dir.display().to_string()),
            summary,
        },
    };
    finish(printer, envelope, collect_report::render_collect)
}

fn list(s: &InitSettings, printer: &Printer) -> Result<Done, Error> {
    let rows: Vec<NodeRow<CollectDetail>> = crate::flow::collect::list(&s.gather, s.output_dir.as_deref());
    let msg = format!(
        "{} nodes would be probed ({} declared in {}); nothing was contacted",
        rows.len(),
        s.gather.inv.every_node().count(),
        s.gather.inv.path.display()
    );
    let envelope = Envelope {
        command: "init",
        changed: false,
        failed: false,
        msg,
        exit_code: exit::OK,
        payload: CollectPayload {
            list: true,
            output_dir: s.output_dir.as_ref().map(|d| d.display().to_string()),
            summary: Summary::of(&rows),
        },
        nodes: rows,
    };
    finish(printer, envelope, collect_report::render_list)
}
