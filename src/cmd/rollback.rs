//! `topo-tune rollback`: on every node, undo the last run `init` recorded there.

use super::{finish, Done};
use crate::cli::RollbackArgs;
use crate::error::Error;
use crate::exit;
use crate::report::envelope::{Envelope, Summary};
use crate::report::fold::View;
use crate::report::write::{self as write_report, RollbackPayload, RunUndone};
use crate::report::Printer;

pub(crate) fn run(args: &RollbackArgs, printer: &Printer) -> Result<Done, Error> {
    let s = args.resolve()?;
    let rows = crate::flow::write::rollback(&s, printer)?;
    let summary = Summary::of(&rows);
    let not_ok = summary.nodes - summary.ok;
    let run = s.run.as_deref().map(|id| RunUndone::of(id, &rows));
    let mut msg = format!(
        "rollback: {} node(s), {} changed, {} failed, {} skipped",
        summary.nodes, summary.changed, summary.failed, summary.skipped
    );
    // A run undone on some of its nodes is not undone: said, and not exit 0.
    let partial = run.as_ref().is_some_and(|r| !r.whole());
    if let Some(r) = &run {
        msg = format!("{msg}; {}", r.sentence());
    }
    let exit_code = match summary.failure_exit() {
        Some(code) => code,
        None if partial => exit::PARTIAL_FAILURE,
        None => exit::OK,
    };
    let envelope = Envelope {
        command: "rollback",
        changed: summary.changed > 0,
        failed: not_ok > 0 || partial,
        msg,
        exit_code,
        nodes: rows,
        payload: RollbackPayload {
            output_dir: s.output_dir.as_ref().map(|d| d.display().to_string()),
            summary,
            run,
        },
    };
    let view = View::of(s.per_node);
    finish(printer, envelope, |e| write_report::render_rollback(e, view))
}
