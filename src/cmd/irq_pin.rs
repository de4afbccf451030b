//! `topo-tune irq-pin`: on this machine (or a `--fsroot` tree), or on every node of a cluster
//! through the node protocol — one result shape either way.

use super::reach::{local_scope, machine_jobs, on_nodes, reserved_cpus};
use super::{finish, Done};
use crate::cli::{IrqPinArgs, OutputFormat};
use crate::config::Inventory;
use crate::error::Error;
use crate::exit;
use crate::irq::pin::{PinReport, PinRequest};
use crate::irq::system::System;
use crate::model::CpuList;
use crate::model::NodeOutcome;
use crate::node::calls::IrqPin;
use crate::report::envelope::{Envelope, NodeRow, Summary};
use crate::report::irq::{self as irq_report, PinDetail, PinPayload};
use crate::transport::NodeEnv;
use std::path::Path;

fn request(args: &IrqPinArgs, reserved: CpuList) -> PinRequest {
    PinRequest {
        reserved,
        include_control: args.include_control,
        dry_run: args.dry_run,
        irqbalance: args.irqbalance.into(),
        install: args.install,
    }
}

pub fn run(args: &IrqPinArgs, output: OutputFormat) -> Result<Done, Error> {
    let rows = match &local_scope(args.cluster_config.as_deref(), args.cluster)? {
        None => vec![here(args)?],
        Some(cfg) => cluster(args, cfg, output)?,
    };
    let summary = Summary::of(&rows);
    let pins_failed: usize = rows
        .iter()
        .filter_map(|r| r.detail.as_ref())
        .map(PinDetail::failed)
        .sum();
    let node_failure = summary.failure_exit_beside_paper(&rows);
    let failed = node_failure.is_some() || pins_failed > 0;
    // A dry run with moves to make is `init --check` with changes pending.
    let pending = args.dry_run && rows.iter().filter_map(|r| r.detail.as_ref()).any(PinDetail::would_move);
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
            dry_run: args.dry_run,
            summary,
        },
    };
    finish(output, envelope, irq_report::render_pin)
}

/// This machine, or the --fsroot tree: errors are the command's.
fn here(args: &IrqPinArgs) -> Result<NodeRow<Option<PinDetail>>, Error> {
    let env = NodeEnv {
        fsroot: args.fsroot.clone(),
        ..NodeEnv::live()
    };
    let sys: &dyn System = crate::irq::system::for_root(args.fsroot.as_deref());
    let call = IrqPin(request(args, args.reserve_cpus.clone().unwrap_or_default()));
    let report = call.run(&env, sys)?;
    Ok(NodeRow::ok(
        &report.hostname,
        report.changed,
        Some(PinDetail::from(&report)),
    ))
}

/// Every node of the cluster, with its reserved_cpus unless --reserve-cpus is given.
fn cluster(args: &IrqPinArgs, cfg: &Path, output: OutputFormat) -> Result<Vec<NodeRow<Option<PinDetail>>>, Error> {
    let inv = Inventory::load(cfg)?;
    let reserved = reserved_cpus(args.reserve_cpus.as_ref(), &inv);
    let jobs = machine_jobs(&inv, |_| IrqPin(request(args, reserved.clone())));
    let outcomes: Vec<NodeOutcome<PinReport>> = on_nodes(&inv, &args.reach, output, jobs)?;
    Ok(outcomes
        .iter()
        .map(|o| NodeRow::from_outcome(o, |r| (r.changed, Some(PinDetail::from(r))), || None))
        .collect())
}
