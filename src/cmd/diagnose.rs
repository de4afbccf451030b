//! `topo-tune diagnose`: the sweep on the selected nodes, held against the plan's prediction,
//! localised when slower (`flow::diagnose`), and printed; or with `--trace`, the job's own
//! profiler traces read (`flow::trace`).

use super::{finish, Done};
use crate::cli::DiagnoseArgs;
use crate::error::Error;
use crate::exit;
use crate::flow::settings::{DiagnoseMode, DiagnoseSettings, TraceSettings};
use crate::report::diagnose as diagnose_report;
use crate::report::envelope::{Envelope, NoDetail, NodeRow};
use crate::report::Printer;

pub(crate) fn run(args: &DiagnoseArgs, printer: &Printer) -> Result<Done, Error> {
    match args.resolve()? {
        DiagnoseMode::Sweep(s) => sweep(&s, printer),
        DiagnoseMode::Trace(s) => traces(&s, printer),
    }
}

fn sweep(s: &DiagnoseSettings, printer: &Printer) -> Result<Done, Error> {
    let d = crate::flow::diagnose::diagnose(s, printer)?;
    let envelope = Envelope {
        command: "diagnose",
        changed: false,
        failed: !d.set_measured,
        msg: d.msg,
        exit_code: if d.set_measured { exit::OK } else { exit::DATA_ERROR },
        nodes: d.order.iter().map(|h| NodeRow::ok(h, false, NoDetail {})).collect(),
        payload: d.payload,
    };
    finish(printer, envelope, diagnose_report::render)
}

fn traces(s: &TraceSettings, printer: &Printer) -> Result<Done, Error> {
    let o = crate::flow::trace::diagnose_traces(s, printer)?;
    let envelope = Envelope {
        command: "diagnose",
        changed: false,
        failed: false,
        msg: format!(
            "{} rank(s): {}",
            o.report.ranks.len(),
            crate::report::trace::verdict(&o.report)
        ),
        exit_code: exit::OK,
        nodes: Vec::<NodeRow<NoDetail>>::new(),
        payload: crate::report::trace::TracePayload {
            trace: o.report,
            doctor: o.doctor,
        },
    };
    finish(printer, envelope, crate::report::trace::render)
}
