//! `topo-tune rollback`: on every node, undo the last run `init` recorded there.

use super::{finish, Done};
use crate::cli::RollbackArgs;
use crate::error::Error;
use crate::exit;
use crate::report::envelope::{Envelope, Summary};
use crate::report::fold::View;
use crate::report::write::{self as write_report, RollbackPayload};
use crate::report::Printer;

pub(crate) fn run(args: &RollbackArgs, printer: &Printer) -> Result<Done, Error> {
    let s = args.resolve()?;
    let rows = crate::flow::write::rollback(&s, printer)?;
    let summary = Summary::of(&rows);
    let not_ok = summary.nodes - summary.ok;
    let envelope = Envelope {
        command: "rollback",
        changed: summary.changed > 0,
        failed: not_ok > 0,
        msg: format!(
            "rollback: {} node(s), {} changed, {} failed, {} skipped",
            summary.nodes, summary.changed, summary.failed, summary.skipped
        ),
        exit_code: summary.failure_exit().unwrap_or(exit::OK),
        nodes: rows,
        payload: RollbackPayload {
            output_dir: s.output_dir.as_ref().map(|d| d.display().to_string()),
            summary,
        },
    };
    let view = View::of(s.per_node);
    finish(printer, envelope, |e| write_report::render_rollback(e, view))
}
