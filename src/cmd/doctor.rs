//! `topo-tune doctor`: the checks on this machine (or a `--fsroot` tree), or on every node of
//! a cluster through the node protocol.

use super::reach::{progress_bar, resolve};
use super::{finish, Done};
use crate::cli::{DoctorArgs, OutputFormat};
use crate::config::Inventory;
use crate::error::Error;
use crate::exit;
use crate::irq::doctor::{Check, DoctorRequest, Status};
use crate::node::calls::{Doctor, DoctorReport};
use crate::node::{self, machine_target, NodeJob};
use crate::report::doctor as doctor_report;
use crate::report::envelope::{Envelope, NodeRow, NodeStatus, Summary};
use crate::transport::NodeEnv;
use serde::Serialize;

/// One node's checks.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DoctorDetail {
    pub checks: Vec<Check>,
}

impl From<&DoctorReport> for DoctorDetail {
    fn from(r: &DoctorReport) -> Self {
        DoctorDetail {
            checks: r.checks.clone(),
        }
    }
}

#[derive(Serialize)]
pub(crate) struct DoctorPayload {
    pub summary: Summary,
}

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
    let reserved = args
        .reserve_cpus
        .clone()
        .or_else(|| inv.reserved_cpus.clone())
        .unwrap_or_default();
    let jobs = inv
        .nodes
        .iter()
        .map(|n| NodeJob {
            node: n.clone(),
            target: machine_target(n),
            call: Doctor(DoctorRequest {
                reserved: reserved.clone(),
            }),
        })
        .collect();
    let bar = progress_bar(inv.nodes.len(), output);
    let reach = resolve(&args.reach, &inv, &bar);
    let outcomes = node::run(&inv, &reach, jobs).map_err(Error::Reach)?;
    bar.finish_and_clear();
    Ok(outcomes
        .iter()
        .map(|o| NodeRow::from_outcome(o, |r| (false, Some(DoctorDetail::from(r))), || None))
        .collect())
}
