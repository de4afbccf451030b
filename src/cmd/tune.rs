//! `topo-tune tune`: measure which NCCL choices win on one set of nodes (`flow::tune`) and
//! print what was kept, per collective and size range.

use super::{finish, Done};
use crate::cli::TuneArgs;
use crate::error::Error;
use crate::exit;
use crate::report::envelope::{Envelope, NoDetail, NodeRow};
use crate::report::tune::{self as tune_report, TunePayload};
use crate::report::Printer;

pub(crate) fn run(args: &TuneArgs, printer: &Printer) -> Result<Done, Error> {
    let s = args.resolve()?;
    let o = crate::flow::tune::tune(&s, printer)?;
    let payload = TunePayload {
        files: o.files.iter().map(|p| p.display().to_string()).collect(),
        benchmark_rounds: o.runs,
        seconds: o.seconds,
        trials: o.trials,
        tuning: o.tuning,
    };
    let msg = tune_report::summary(&payload);
    let envelope = Envelope {
        command: "tune",
        changed: o.changed,
        failed: false,
        msg,
        exit_code: exit::OK,
        nodes: payload
            .tuning
            .hosts
            .iter()
            .map(|h| NodeRow::ok(h, false, NoDetail {}))
            .collect(),
        payload,
    };
    finish(printer, envelope, tune_report::render)
}
