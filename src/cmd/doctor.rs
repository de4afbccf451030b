//! `topo-tune doctor`: the checks on this machine (or a `--fsroot` tree), or on every node of
//! a cluster through the node protocol.

use super::reach::{local_scope, machine_jobs, on_nodes, reserved_cpus};
use super::{finish, Done};
use crate::cli::{DoctorArgs, OutputFormat};
use crate::config::Inventory;
use crate::error::Error;
use crate::exit;
use crate::irq::doctor::{DoctorRequest, Status};
use crate::node::calls::Doctor;
use crate::report::doctor::{self as doctor_report, DoctorDetail, DoctorPayload};
use crate::report::envelope::{Envelope, NodeRow, Summary};
use crate::transport::NodeEnv;

pub fn run(args: &DoctorArgs, output: OutputFormat) -> Result<Done, Error> {
    let rows = match &local_scope(args.cluster_config.as_deref(), args.cluster)? {
        None => vec![here(args)?],
        Some(cfg) => cluster(args, cfg, output)?,
    };
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
    let textfile = match &args.textfile {
        Some(dir) => Some(write_textfile(dir, &rows)?),
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

/// The metrics file, replaced atomically (temp + fsync + rename, no link followed).
fn write_textfile(dir: &std::path::Path, rows: &[NodeRow<Option<DoctorDetail>>]) -> Result<String, Error> {
    use crate::apply::{tree::Tree, writer::WriteError};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let text = crate::report::metrics::textfile(rows, now);
    let tree = Tree::open(dir).map_err(WriteError::from)?;
    tree.write(crate::report::metrics::TEXTFILE, text.as_bytes(), 0o644)
        .map_err(WriteError::from)?;
    Ok(dir.join(crate::report::metrics::TEXTFILE).display().to_string())
}
