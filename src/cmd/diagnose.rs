//! `topo-tune diagnose`: one all-reduce sweep on a set of nodes through the canary's
//! benchmark runner, read for its α–β fit, small-message cliff, flat range and crossover,
//! and held against what the planner predicts for the same nodes.

use super::gather::Ask;
use super::plan::gather_and_plan;
use super::reach::{bench_target, machine_jobs, on_nodes, progress_bar, resolve};
use super::{finish, Done};
use crate::bench::locate;
use crate::bench::parse::{BenchRun, SizeFigures};
use crate::bench::sweep::{self, Findings};
use crate::canary::runner::{self, BenchRequest, Variant};
use crate::cli::{DiagnoseArgs, OutputFormat};
use crate::config::Inventory;
use crate::error::Error;
use crate::exit;
use crate::irq::doctor::{Check, DoctorRequest, Status};
use crate::node::calls::Doctor;
use crate::node::{self, calls::Bench, NodeJob};
use crate::report::diagnose::{self as diagnose_report, DiagnosePayload, Localisation, Prediction, Rails, Verdict};
use crate::report::envelope::{Envelope, NoDetail, NodeRow};
use std::time::Duration;

pub fn run(args: &DiagnoseArgs, output: OutputFormat) -> Result<Done, Error> {
    let full = Inventory::load(&args.gather.cluster_config)?;
    let hosts = match &args.nodes {
        Some(sel) => crate::canary::select::select(sel, &full).map_err(Error::Usage)?,
        None => full.nodes.iter().map(|n| n.host.clone()).collect(),
    };
    let selected: std::collections::HashSet<&str> = hosts.iter().map(String::as_str).collect();
    let mut inv = full.clone();
    inv.nodes.retain(|n| selected.contains(n.host.as_str()));
    // The model's figures for exactly these nodes.
    let planned = gather_and_plan(&inv, &args.gather, output, 1 << 30, Ask::Snapshot)?;
    let gpus = inv
        .benchmark
        .gpus_per_node
        .or_else(|| {
            planned
                .plan
                .node_classes
                .iter()
                .filter(|c| c.gpus > 0)
                .map(|c| c.gpus as u32)
                .min()
        })
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
    let localisation = if below || args.localise {
        Some(localise(&inv, args, &order, gpus, output)?)
    } else {
        None
    };
    let mut msg = summary(&findings, &predicted, args.ceiling_fraction, below);
    if let Some(l) = &localisation {
        msg.push_str(&match (&l.suspect, l.rails.as_ref().and_then(|r| r.slow)) {
            (Some(s), _) => format!("; the slow node: {}", s.name),
            (None, Some(r)) => format!("; the slow rail: {r}"),
            (None, None) => "; no outlier: no node or rail is slower than its peers".into(),
        });
    }
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
            localisation,
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

/// One benchmark run: the cluster's command on `hosts` with their live NCCL files.
struct Run<'a> {
    hosts: &'a [String],
    gpus: u32,
    rail: Option<u32>,
}

/// The runs of one round, at once (disjoint groups, or one group per rail): each one's
/// figures, or why it gave none.
fn runs(
    inv: &Inventory,
    args: &DiagnoseArgs,
    round: &[Run<'_>],
    output: OutputFormat,
) -> Result<Vec<Result<BenchRun, String>>, Error> {
    let b = &inv.benchmark;
    let timeout_s = args.budget.map_or(b.timeout_s, |s| s.min(b.timeout_s));
    let mut jobs = Vec::new();
    for r in round {
        let first = inv
            .nodes
            .iter()
            .find(|n| r.hosts.first() == Some(&n.host))
            .ok_or_else(|| Error::Usage("no node selected".into()))?;
        let target = bench_target(first, b.runs_on, args.output_dir.as_deref())?;
        jobs.push(NodeJob {
            node: first.clone(),
            target,
            call: Bench {
                request: BenchRequest {
                    template: b.command.clone(),
                    variant: Variant::Baseline,
                    hosts: r.hosts.to_vec(),
                    gpus_per_node: r.gpus,
                    timeout_s,
                    rail: r.rail,
                },
            },
        });
    }
    let bar = progress_bar(jobs.len(), output);
    let mut reach = resolve(&args.gather.reach, inv, &bar);
    reach.command_timeout = reach.command_timeout.max(Duration::from_secs(timeout_s + 30));
    let outcomes = node::run(inv, &reach, jobs).map_err(|e| match e {
        node::RunError::Failed(f) => Error::Reach(f),
        node::RunError::Interrupted(signal) => Error::Interrupted { signal },
    })?;
    bar.finish_and_clear();
    Ok(outcomes
        .into_iter()
        .map(|o| match o.result {
            Ok(answer) => {
                runner::judge(&answer, timeout_s).map_err(|why| format!("the benchmark ({}) {why}", answer.command))
            }
            Err(f) => Err(f.message),
        })
        .collect())
}

/// The sweep on the whole set; a failed run is an error, never a figure.
fn sweep_on(
    inv: &Inventory,
    args: &DiagnoseArgs,
    hosts: &[String],
    gpus: u32,
    output: OutputFormat,
) -> Result<BenchRun, Error> {
    let run = Run {
        hosts,
        gpus,
        rail: None,
    };
    runs(inv, args, &[run], output)?
        .pop()
        .ok_or_else(|| Error::Usage("the benchmark gave no answer".into()))?
        .map_err(|why| {
            Error::Reach(crate::transport::Failure::new(
                crate::transport::FailureKind::BenchmarkFailed,
                why,
            ))
        })
}

/// Large-message bus bandwidth of each run of a round (`None`: the run failed).
fn round_figures(
    inv: &Inventory,
    args: &DiagnoseArgs,
    round: &[Run<'_>],
    output: OutputFormat,
) -> Result<Vec<Option<f64>>, Error> {
    Ok(runs(inv, args, round, output)?
        .into_iter()
        .map(|r| {
            r.ok()
                .and_then(|run| sweep::findings(&run.rows, run.ranks).large_busbw.into())
        })
        .collect())
}

/// Localise: bisect the nodes (bench::locate), and per rail when the command takes `{rail}`;
/// then `doctor` on the suspect node.
fn localise(
    inv: &Inventory,
    args: &DiagnoseArgs,
    order: &[String],
    gpus: u32,
    output: OutputFormat,
) -> Result<Localisation, Error> {
    let mut failed: Option<Error> = None;
    let located = locate::locate(order, &mut |groups| {
        let round: Vec<Run<'_>> = groups
            .iter()
            .map(|g| Run {
                hosts: g,
                gpus,
                rail: None,
            })
            .collect();
        match round_figures(inv, args, &round, output) {
            Ok(f) => f,
            Err(e) => {
                failed.get_or_insert(e);
                vec![None; groups.len()]
            }
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let rails = if inv.benchmark.command.contains("{rail}") && gpus > 1 {
        let round: Vec<Run<'_>> = (0..gpus)
            .map(|r| Run {
                hosts: order,
                gpus: 1,
                rail: Some(r),
            })
            .collect();
        let busbw = round_figures(inv, args, &round, output)?;
        let (median, slow) = locate::slow_rail(&busbw);
        Some(Rails {
            busbw,
            median,
            slow: slow.map(|i| i as u32),
        })
    } else {
        None
    };
    let doctor = match &located.suspect {
        Some(s) => doctor_on(inv, args, &s.name, output)?,
        None => Ok(Vec::new()),
    };
    let verdicts = verdicts(&located, rails.as_ref(), &doctor);
    let doctor = doctor.unwrap_or_default();
    Ok(Localisation {
        rounds: located.rounds,
        suspect: located.suspect,
        rails,
        doctor,
        verdicts,
    })
}

/// `doctor` on one node: its failing and warning checks, or why it could not be checked.
fn doctor_on(
    inv: &Inventory,
    args: &DiagnoseArgs,
    host: &str,
    output: OutputFormat,
) -> Result<Result<Vec<Check>, String>, Error> {
    let mut one = inv.clone();
    one.nodes.retain(|n| n.host == host);
    let reserved = one.reserved_cpus.clone().unwrap_or_default();
    let jobs = machine_jobs(&one, |_| {
        Doctor(DoctorRequest {
            reserved: reserved.clone(),
        })
    });
    let outcome = on_nodes(&one, &args.gather.reach, output, jobs)?.pop();
    Ok(match outcome.map(|o| o.result) {
        Some(Ok(r)) => Ok(r
            .checks
            .into_iter()
            .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
            .collect()),
        Some(Err(f)) => Err(f.message),
        None => Err("no answer".into()),
    })
}

/// The final table: suspect, evidence, likely cause, fix.
fn verdicts(located: &locate::Located, rails: Option<&Rails>, doctor: &Result<Vec<Check>, String>) -> Vec<Verdict> {
    let mut out = Vec::new();
    if let Some(s) = &located.suspect {
        let evidence = format!(
            "runs with it: {:.1} GB/s busbw; median of its round: {:.1} GB/s",
            s.busbw, s.median
        );
        let checks: &[Check] = doctor.as_deref().unwrap_or_default();
        match checks
            .iter()
            .find(|c| c.status == Status::Fail)
            .or_else(|| checks.first())
        {
            Some(c) => out.push(Verdict {
                suspect: s.name.clone(),
                evidence,
                cause: format!("{}: {}", c.check, c.detail),
                fix: c.fix.clone(),
            }),
            None => out.push(Verdict {
                suspect: s.name.clone(),
                evidence,
                cause: match doctor {
                    Ok(_) => "doctor finds nothing wrong on it: a cable, a switch port or the NIC's firmware".into(),
                    Err(why) => format!("doctor could not check it ({why})"),
                },
                fix: format!(
                    "topo-tune probe --matrix on {}; check its links and counters (ibstat, ethtool -S)",
                    s.name
                ),
            }),
        }
    }
    if let Some(r) = rails {
        if let Some(i) = r.slow {
            out.push(Verdict {
                suspect: format!("rail {i}"),
                evidence: format!(
                    "rail {i}: {} GB/s busbw; median of the rails: {:.1} GB/s",
                    r.busbw[i as usize].map_or_else(|| "failed".into(), |b| format!("{b:.1}")),
                    r.median
                ),
                cause: "one plane of the fabric (GPU/NIC index) is slow on every node: its switch or cabling".into(),
                fix: format!(
                    "check the rail-{i} leaf switch and its ports; `topo-tune doctor` on the nodes for NIC {i}"
                ),
            });
        }
    }
    out
}
