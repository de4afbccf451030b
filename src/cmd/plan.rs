//! `topo-tune plan`: gather snapshots (as `init` does), solve, print the plan, and with
//! `--output-dir` write plan.json (what `init --plan` applies) and the launcher files.

use super::{finish, Done};
use crate::cli::PlanArgs;
use crate::error::Error;
use crate::exit;
use crate::flow::gather::Ask;
use crate::flow::plan::{gather_and_plan, write_outputs, Planned};
use crate::report::envelope::{Envelope, NoDetail, NodeRow};
use crate::report::plan::{self as plan_report, PlanPayload};
use crate::report::Printer;

pub(crate) fn run(args: &PlanArgs, printer: &Printer) -> Result<Done, Error> {
    let s = args.resolve()?;
    let Planned {
        plan: mut p,
        reached: snapshots,
        ..
    } = gather_and_plan(&s.gather, printer, s.message_bytes, Ask::Snapshot)?;
    let changed = match &s.output_dir {
        Some(dir) => write_outputs(&mut p, &s.gather.inv, dir)?,
        None => false,
    };
    let nodes: Vec<NodeRow<NoDetail>> = snapshots
        .iter()
        .map(|o| match &o.result {
            Ok(_) => NodeRow::ok(&o.host, false, NoDetail {}),
            Err(f) => NodeRow::failed(&o.host, f.clone(), NoDetail {}),
        })
        .collect();
    let any_failed = snapshots.iter().any(|o| o.result.is_err());
    let reached = snapshots.iter().filter(|o| o.result.is_ok()).count();
    let msg = format!(
        "plan: {} node(s) in the ring, predicted gain {:.2}x over hostname order{}",
        p.node_order.len(),
        p.predicted.gain,
        if any_failed {
            "; some nodes could not be probed"
        } else {
            ""
        }
    );
    let envelope = Envelope {
        command: "plan",
        changed,
        failed: any_failed,
        msg,
        exit_code: exit::for_nodes(snapshots.len(), reached).unwrap_or(exit::OK),
        nodes,
        payload: PlanPayload {
            plan: p,
            output_dir: s.output_dir.as_ref().map(|d| d.display().to_string()),
        },
    };
    finish(printer, envelope, plan_report::render)
}
