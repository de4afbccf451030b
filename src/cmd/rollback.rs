//! `topo-tune rollback`: on every node, undo the last run `init` recorded there.

use super::reach::{on_nodes, write_jobs};
use super::{finish, Done};
use crate::apply::writer::WriteReport;
use crate::cli::{OutputFormat, RollbackArgs};
use crate::config::Inventory;
use crate::error::Error;
use crate::exit;
use crate::node::calls::Rollback;
use crate::report::envelope::{Envelope, NodeRow, Summary};
use crate::report::write::{self as write_report, RollbackPayload, WriteDetail};
use crate::transport::transport_name;

pub fn run(args: &RollbackArgs, output: OutputFormat) -> Result<Done, Error> {
    let inv = Inventory::load(&args.cluster_config)?;
    let jobs = write_jobs(&inv, args.output_dir.as_deref(), |_| Rollback {
        run_id: args.run.clone(),
    });
    let outcomes = on_nodes(&inv, &args.reach, output, jobs)?;
    let rows: Vec<NodeRow<WriteDetail>> = outcomes
        .iter()
        .zip(&inv.nodes)
        .map(|(o, n)| {
            NodeRow::from_outcome(
                o,
                |rep: &WriteReport| {
                    (
                        rep.changed(),
                        WriteDetail {
                            transport: transport_name(n),
                            files: rep.files.clone(),
                            run_id: rep.run_id.clone(),
                            note: rep.note.clone(),
                            ..WriteDetail::default()
                        },
                    )
                },
                || WriteDetail {
                    transport: transport_name(n),
                    ..WriteDetail::default()
                },
            )
        })
        .collect();
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
            output_dir: args.output_dir.as_ref().map(|d| d.display().to_string()),
            summary,
        },
    };
    finish(output, envelope, write_report::render_rollback)
}
