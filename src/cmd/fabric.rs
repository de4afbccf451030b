//! `topo-tune fabric`: the fabric as the wires report it (`flow::fabric`), its findings, and
//! the cluster.yaml that states it.

use super::{finish, Done};
use crate::cli::FabricArgs;
use crate::error::Error;
use crate::exit;
use crate::report::envelope::Envelope;
use crate::report::fabric::{self as fabric_report, FabricPayload};
use crate::report::Printer;
use crate::wires::derive::Severity;

pub(crate) fn run(args: &FabricArgs, printer: &Printer) -> Result<Done, Error> {
    let s = args.resolve()?;
    let o = crate::flow::fabric::discover(&s)?;
    let failing = o.discovered.findings.iter().any(|f| f.severity == Severity::Fail);
    let msg = fabric_report::summary(&o.discovered);
    let envelope = Envelope {
        command: "fabric",
        changed: o.written.is_some(),
        failed: failing,
        msg,
        exit_code: if failing { exit::CHECKS_FAILED } else { exit::OK },
        nodes: Vec::new(),
        payload: FabricPayload {
            discovered: o.discovered,
            diff: o.diff,
            written: o.written,
            placement_groups: o.placement_groups,
        },
    };
    finish(printer, envelope, fabric_report::render)
}
