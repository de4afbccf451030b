//! `topo-tune status`: per node, what topo-tune wrote there (the manifest's last run and files
//! with their sha256), whether the live files still match, what is staged, and which rollout
//! wave the node belongs to with its last decision (from the state directory).

use super::{finish, Done};
use crate::canary::state::Unreadable;
use crate::cli::StatusArgs;
use crate::error::Error;
use crate::exit;
use crate::flow::status::{standing, Standing};
use crate::report::envelope::{Envelope, NodeRow, NodeStatus, Summary};
use crate::report::fold::View;
use crate::report::status::{render_status, StatusDetail, StatusPayload};
use crate::report::Printer;

pub(crate) fn run(args: &StatusArgs, printer: &Printer) -> Result<Done, Error> {
    let s = args.resolve()?;
    let Standing {
        rows,
        unfinished,
        unreadable,
    } = standing(&s, printer)?;
    let summary = Summary::of(&rows);
    let unsettled = rows
        .iter()
        .filter(|r| {
            let undone = r.detail.rollout.as_ref().is_some_and(|ro| ro.on_node.is_some());
            undone
                || r.detail
                    .state
                    .as_ref()
                    .is_some_and(|s| s.drift() || s.pending || s.staged.is_some() || s.tuner_plugin_gone())
        })
        .count();
    let exit_code = if summary.failed > 0 {
        exit::for_nodes(summary.nodes - summary.skipped, summary.ok).unwrap_or(exit::PARTIAL_FAILURE)
    } else if !unreadable.is_empty() {
        exit::DATA_ERROR
    } else if unsettled > 0 || !unfinished.is_empty() {
        exit::DRIFT
    } else {
        exit::OK
    };
    let msg = message(&rows, &summary, unsettled, &unfinished, &unreadable);
    let envelope = Envelope {
        command: "status",
        changed: false,
        failed: exit_code != exit::OK,
        msg,
        exit_code,
        nodes: rows,
        payload: StatusPayload {
            state_dir: s.state_dir.display().to_string(),
            summary,
            unfinished,
            unreadable_records: unreadable,
        },
    };
    let view = View::of(s.per_node);
    finish(printer, envelope, |e| render_status(e, view))
}

fn message(
    rows: &[NodeRow<StatusDetail>],
    summary: &Summary,
    unsettled: usize,
    unfinished: &[String],
    unreadable: &[Unreadable],
) -> String {
    let mut msg = format!(
        "status: {} node(s): {} as recorded, {unsettled} with drift or pending work, {} unreadable, {} skipped",
        summary.nodes,
        rows.iter().filter(|r| r.status == NodeStatus::Ok).count() - unsettled.min(summary.ok),
        summary.failed,
        summary.skipped
    );
    if !unfinished.is_empty() {
        msg.push_str(&format!(
            "; unfinished rollout(s): {} (`topo-tune apply --resume ID` goes on)",
            unfinished.join(", ")
        ));
    }
    let stale = rows.iter().filter(|r| r.detail.tune_again.is_some()).count();
    if stale > 0 {
        msg.push_str(&format!(
            "; {stale} node(s) run another NCCL than their tuning was measured on: tune again"
        ));
    }
    for u in unreadable {
        msg.push_str(&format!("; record {} not read: {}", u.path, u.reason));
    }
    msg
}
