//! `topo-tune diagnose`: one all-reduce sweep on a set of nodes through the canary's
//! benchmark runner, read for its α–β fit, small-message cliff, flat range and crossover,
//! and held against what the planner predicts for the same nodes.

use super::gather::Ask;
use super::plan::gather_and_plan;
use super::reach::{progress_bar, resolve};
use super::{finish, Done};
use crate::bench::parse::{BenchRun, SizeFigures};
use crate::bench::sweep::{self, Findings};
use crate::canary::runner::{self, BenchRequest, Variant};
use crate::cli::{DiagnoseArgs, OutputFormat};
use crate::config::benchmark::RunsOn;
use crate::config::Inventory;
use crate::error::Error;
use crate::exit;
use crate::model::files::host_dir;
use crate::node::{self, calls::Bench, write_target, NodeJob};
use crate::report::diagnose::{self as diagnose_report, DiagnosePayload, Prediction};
use crate::report::envelope::{Envelope, NoDetail, NodeRow};
use crate::transport::{NodeEnv, Target};
use std::path::PathBuf;
use std::time::Duration;

pub fn run(args: &DiagnoseArgs, output: OutputFormat) -> Result<Done, Error> {
    let full = Inventory::load(&args.gather.cluster_config)?;
    let hosts = match &args.nodes {
        Some(sel) => crate::canary::select::select(sel, &full).map_err(Error::Usage)?,
        None => full.nodes.iter().map(|n| n.host.clone()).collect(),
    };
    let mut inv = full.clone();
    inv.nodes.retain(|n| hosts.contains(&n.host));
    // The model's figures for exactly these nodes.
    let planned = gather_and_plan(&inv, &args.gather, output, 1 << 30, Ask::Snapshot)?;
    let gpus = inv
        .benchmark
        .gpus_per_node
        .or_else(|| planned.plan.node_classes.iter().map(|c| c.gpus as u32).min())
        .unwrap_or(1)
        .max(1);
    let order = if planned.plan.node_order.is_empty() {
        hosts.clone()
    } else {
        planned.plan.node_order.clone()
    };
    let run = sweep_on(&inv, args, &order, gpus, output)?;
    let findings = sweep::findings(&run.rows, run.ranks);
    let predicted = Prediction {
        busbw_gbps: planned.plan.predicted.solved.busbw_gbps,
        latency_us: planned.plan.predicted.solved.latency_us,
    };
    let below = predicted.busbw_gbps > 0.0 && findings.large_busbw < args.ceiling_fraction * predicted.busbw_gbps;
    let msg = summary(&findings, &predicted, args.ceiling_fraction, below);
    let mut rows: Vec<SizeFigures> = run.rows.clone();
    rows.sort_by_key(|r| r.size);
    let envelope = Envelope {
        command: "diagnose",
        changed: false,
        failed: false,
        msg,
        exit_code: exit::OK,
        nodes: order.iter().map(|h| NodeRow::ok(h, false, NoDetail {})).collect(),
        payload: DiagnosePayload {
            ranks: run.ranks,
            sizes: rows,
            findings,
            predicted,
            ceiling_fraction: args.ceiling_fraction,
            below_ceiling: below,
        },
    };
    finish(output, envelope, diagnose_report::render)
}

/// One line: the verdict with its numbers.
fn summary(f: &Findings, p: &Prediction, fraction: f64, below: bool) -> String {
    if p.busbw_gbps <= 0.0 {
        return format!(
            "diagnose: large-message busbw {:.1} GB/s; no prediction to hold it against (the model predicts rings across nodes: sweep two or more)",
            f.large_busbw
        );
    }
    let large = format!(
        "large-message busbw {:.1} GB/s vs {:.1} GB/s predicted",
        f.large_busbw, p.busbw_gbps
    );
    if below {
        format!(
            "diagnose: {large}: below {:.0}% of the ceiling — something on the path is slow",
            fraction * 100.0
        )
    } else {
        format!("diagnose: {large}: at or above {:.0}% of the ceiling", fraction * 100.0)
    }
}

/// The sweep: the cluster's benchmark command on these hosts, with their live NCCL files.
fn sweep_on(
    inv: &Inventory,
    args: &DiagnoseArgs,
    hosts: &[String],
    gpus: u32,
    output: OutputFormat,
) -> Result<BenchRun, Error> {
    let b = &inv.benchmark;
    let first = inv
        .nodes
        .iter()
        .find(|n| hosts.first() == Some(&n.host))
        .ok_or_else(|| Error::Usage("no node selected".into()))?;
    let target = match b.runs_on {
        RunsOn::FirstNode => write_target(first, args.output_dir.as_deref()),
        RunsOn::Controller => Target::Here(NodeEnv {
            write_root: match &args.output_dir {
                Some(d) => host_dir(d, &first.host).map_err(Error::Usage)?,
                None => PathBuf::from("/"),
            },
            ..NodeEnv::live()
        }),
    };
    let timeout_s = args.budget.map_or(b.timeout_s, |s| s.min(b.timeout_s));
    let job = NodeJob {
        node: first.clone(),
        target,
        call: Bench {
            request: BenchRequest {
                template: b.command.clone(),
                variant: Variant::Baseline,
                hosts: hosts.to_vec(),
                gpus_per_node: gpus,
                timeout_s,
            },
        },
    };
    let bar = progress_bar(1, output);
    let mut reach = resolve(&args.gather.reach, inv, &bar);
    reach.command_timeout = reach.command_timeout.max(Duration::from_secs(timeout_s + 30));
    let outcome = node::run(inv, &reach, vec![job])
        .map_err(|e| match e {
            node::RunError::Failed(f) => Error::Reach(f),
            node::RunError::Interrupted(signal) => Error::Interrupted { signal },
        })?
        .pop()
        .ok_or_else(|| Error::Usage("the benchmark gave no answer".into()))?;
    bar.finish_and_clear();
    let answer = outcome.result.map_err(Error::Reach)?;
    runner::judge(&answer, timeout_s).map_err(|why| {
        Error::Reach(crate::transport::Failure::new(
            crate::transport::FailureKind::BenchmarkFailed,
            format!("the benchmark ({}) {why}", answer.command),
        ))
    })
}
