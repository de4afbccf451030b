//! `topo-tune irq-pin`: on this machine (or a `--fsroot` tree), or on every node of a cluster
//! through the node protocol — one result shape either way.

use super::{finish, Done};
use crate::cli::IrqPinArgs;
use crate::error::Error;
use crate::exit;
use crate::report::envelope::{Envelope, Summary};
use crate::report::irq::{self as irq_report, PinDetail, PinPayload};
use crate::report::Printer;

pub(crate) fn run(args: &IrqPinArgs, printer: &Printer) -> Result<Done, Error> {
    let s = args.resolve()?;
    let rows = crate::flow::irq::pin(&s, printer)?;
    let summary = Summary::of(&rows);
    let pins_failed: usize = rows
        .iter()
        .filter_map(|r| r.detail.as_ref())
        .map(PinDetail::failed)
        .sum();
    let node_failure = summary.failure_exit_beside_paper(&rows);
    let failed = node_failure.is_some() || pins_failed > 0;
    // A dry run with moves to make is `init --check` with changes pending.
    let pending = s.request.dry_run && rows.iter().filter_map(|r| r.detail.as_ref()).any(PinDetail::would_move);
    let msg = match rows.as_slice() {
        [one] => one
            .detail
            .as_ref()
            .map_or_else(|| "irq-pin failed".to_string(), |d| d.msg.clone()),
        _ => format!(
            "irq-pin: {} node(s), {} changed, {} failed, {} skipped, {pins_failed} interrupt(s) not moved",
            summary.nodes, summary.changed, summary.failed, summary.skipped
        ),
    };
    let envelope = Envelope {
        command: "irq-pin",
        changed: summary.changed > 0,
        failed,
        msg,
        exit_code: match (node_failure, failed, pending) {
            (Some(code), _, _) => code,
            // Every node answered, but some interrupt could not be moved.
            (None, true, _) => exit::PARTIAL_FAILURE,
            (None, false, true) => exit::CHANGES_PENDING,
            (None, false, false) => exit::OK,
        },
        nodes: rows,
        payload: PinPayload {
            dry_run: s.request.dry_run,
            summary,
        },
    };
    let view = crate::report::fold::View::of(s.per_node);
    finish(printer, envelope, |e| irq_report::render_pin(e, view))
}
