//! `topo-tune probe`: snapshot one node (live, `--fsroot` tree, hwloc XML or NCCL topology
//! file) and print it.

use super::{finish, Done};
use crate::cli::ProbeArgs;
use crate::error::Error;
use crate::exit;
use crate::graph::paths::{path_matrix, PathMatrix};
use crate::model::NodeSnapshot;
use crate::probe::probe;
use crate::report::envelope::{Envelope, NoDetail, NodeRow};
use crate::report::{self};
use serde::Serialize;

/// The snapshot, with its path matrix beside it when asked (`--matrix`).
#[derive(Serialize)]
pub(crate) struct ProbePayload {
    #[serde(flatten)]
    snapshot: NodeSnapshot,
    #[serde(skip_serializing_if = "Option::is_none")]
    matrix: Option<PathMatrix>,
}

pub(crate) fn run(args: &ProbeArgs, printer: &crate::report::Printer) -> Result<Done, Error> {
    let s = args.resolve();
    let snapshot = probe(&s.request)?;
    let envelope = Envelope {
        command: "probe",
        changed: false,
        failed: false,
        msg: format!(
            "{}: {} GPU(s), {} NIC(s), {} note(s)",
            snapshot.hostname,
            snapshot.gpus.len(),
            snapshot.nics.len(),
            snapshot.notes.len()
        ),
        exit_code: exit::OK,
        nodes: vec![NodeRow::ok(&snapshot.hostname, false, NoDetail {})],
        payload: ProbePayload {
            matrix: s.matrix.then(|| path_matrix(&snapshot)),
            snapshot,
        },
    };
    let matrix = s.matrix;
    finish(printer, envelope, |e| match &e.payload.matrix {
        Some(m) if matrix => report::matrix::render(m, report::matrix::nvlink_shown(&e.payload.snapshot)),
        _ => report::probe::render(&e.payload.snapshot),
    })
}
