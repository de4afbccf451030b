//! `topo-tune doctor`: the checks on this machine (or a `--fsroot` tree), or on every node of
//! a cluster through the node protocol.

use super::reach::{machine_jobs, on_nodes, reserved_cpus};
use super::{finish, Done};
use crate::cli::{DoctorArgs, OutputFormat};
use crate::config::Inventory;
use crate::error::Error;
use crate::exit;
use crate::irq::doctor::{DoctorRequest, Status};
use crate::node::calls::Doctor;
use crate::report::doctor::{self as doctor_report, DoctorDetail, DoctorPayload};
use crate::report::envelope::{Envelope, NodeRow, NodeStatus, Summary};
use crate::transport::NodeEnv;

pub fn run(args: &DoctorArgs, output: OutputFormat) -> Result<Done, Error> {
    let rows = match &args.cluster_config {
        None => vec![here(args)?],
        Some(cfg) => cluster(args, cfg, output)?,
    };
    let summary = Summary::of(&rows);
    let any_fail = rows.iter().any(|r| {
        r.status != NodeStatus::Ok
            || r.detail
                .as_ref()
                .is_some_and(|d| d.checks.iter().any(|c| c.status == Status::Fail))
    });
    let fails: usize = rows
        .iter()
        .filter_map(|r| r.detail.as_ref())
        .map(|d| d.checks.iter().filter(|c| c.status == Status::Fail).count())
        .sum();
    let envelope = Envelope {
        command: "doctor",
        changed: false,
        failed: any_fail,
        msg: format!(
            "doctor: {} node(s), {fails} failing check(s), {} node(s) not checked",
            summary.nodes,
            summary.nodes - summary.ok
        ),
        exit_code: if any_fail { exit::CHECKS_FAILED } else { exit::OK },
        nodes: rows,
        payload: DoctorPayload { summary },
    };
    finish(output, envelope, doctor_report::render)
}

fn here(args: &DoctorArgs) -> Result<NodeRow<Option<DoctorDetail>>, Error> {
    let env = NodeEnv {
        fsroot: args.fsroot.clone(),
        ..NodeEnv::live()
    };
    let call = Doctor(DoctorRequest {
        reserved: args.reserve_cpus.clone().unwrap_or_default(),
    });
    let report = call.run(&env)?;
    Ok(NodeRow::ok(&report.hostname, false, Some(DoctorDetail::from(&report))))
}

fn cluster(
    args: &DoctorArgs,
    cfg: &std::path::Path,
    output: OutputFormat,
) -> Result<Vec<NodeRow<Option<DoctorDetail>>>, Error> {
    let inv = Inventory::load(cfg)?;
    let reserved = reserved_cpus(args.reserve_cpus.as_ref(), &inv);
    let jobs = machine_jobs(&inv, |_| {
        Doctor(DoctorRequest {
            reserved: reserved.clone(),
        })
    });
    let outcomes = on_nodes(&inv, &args.reach, output, jobs)?;
    Ok(outcomes
        .iter()
        .map(|o| NodeRow::from_outcome(o, |r| (false, Some(DoctorDetail::from(r))), || None))
        .collect())
}
