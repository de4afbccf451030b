//! `topo-tune doctor`: the checks on this machine (or a `--fsroot` tree), or on every node of
//! a cluster through the node protocol.

use super::{finish, Done};
use crate::cli::DoctorArgs;
use crate::doctor::Status;
use crate::error::Error;
use crate::exit;
use crate::report::doctor::{self as doctor_report, DoctorPayload};
use crate::report::envelope::{Envelope, Summary};
use crate::report::fold::View;
use crate::report::Printer;

pub(crate) fn run(args: &DoctorArgs, printer: &Printer) -> Result<Done, Error> {
    let s = args.resolve()?;
    let rows = crate::flow::doctor::checks(&s, printer)?;
    let summary = Summary::of(&rows);
    // Unreachable is not "a check failed": a node not checked makes it 4 (8 when none was),
    // whatever the others found; 5 means every node was checked and some check failed. A
    // simulated node has nothing to check: it is skipped, and neither.
    let unreached = summary.failure_exit_beside_paper(&rows);
    let check_failed = rows
        .iter()
        .filter_map(|r| r.detail.as_ref())
        .any(|d| d.checks.iter().any(|c| c.status == Status::Fail));
    let fails: usize = rows
        .iter()
        .filter_map(|r| r.detail.as_ref())
        .map(|d| d.checks.iter().filter(|c| c.status == Status::Fail).count())
        .sum();
    let textfile = match &s.textfile {
        Some(dir) => Some(crate::flow::doctor::write_textfile(dir, &rows)?),
        None => None,
    };
    let envelope = Envelope {
        command: "doctor",
        changed: false,
        failed: unreached.is_some() || check_failed,
        msg: format!(
            "doctor: {} node(s), {fails} failing check(s), {} node(s) not checked",
            summary.nodes,
            summary.nodes - summary.ok
        ),
        exit_code: match (unreached, check_failed) {
            (Some(code), _) => code,
            (None, true) => exit::CHECKS_FAILED,
            (None, false) => exit::OK,
        },
        nodes: rows,
        payload: DoctorPayload { summary, textfile },
    };
    let view = View::of(s.per_node);
    finish(printer, envelope, |e| doctor_report::render(e, view))
}
