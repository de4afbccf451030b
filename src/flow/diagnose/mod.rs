//! The diagnose engine: one all-reduce sweep on a set of nodes through the benchmark
//! runner, read for its α–β fit, small-message cliff, flat range and crossover, and held
//! against what the planner predicts for the same nodes; when slower, localised (`localise`,
//! through a [`super::measure::Bencher`]) to a node, its inside, a NIC, a link or a rail, each suspect
//! doctored and judged (`verdict`).

mod localise;
#[cfg(test)]
mod paper;
pub(in crate::flow) mod verdict;

use super::gather::Ask;
use super::measure::{nodes, Bench, Bencher};
use super::plan::gather_and_plan;
use super::reach::{machine_jobs, on_nodes};
use super::settings::{DiagnoseSettings, ReachSettings};
use crate::bench::parse::{BenchRun, SizeFigures};
use crate::bench::sweep::{self, Findings};
use crate::config::Inventory;
use crate::doctor::{DoctorRequest, Status};
use crate::error::Error;
use crate::model::plan::NodeClass;
use crate::node::calls::Doctor;
use crate::report::diagnose::{BudgetUse, DiagnosePayload, DoctorOn, Localisation, Prediction, Verdict};
use crate::report::Printer;

/// What a diagnosis found: the set in ring order, everything measured and judged, its
/// summary line, and whether the benchmark measured the set it was given.
pub(crate) struct Diagnosis {
    pub(crate) order: Vec<String>,
    pub(crate) payload: DiagnosePayload,
    pub(crate) msg: String,
    pub(crate) set_measured: bool,
}

/// The sweep on the selected nodes, read and held against the plan's prediction; localised
/// when slower (or asked), each suspect doctored and judged.
pub(crate) fn diagnose(s: &DiagnoseSettings, printer: &Printer) -> Result<Diagnosis, Error> {
    crate::flow::preflight::benchmark_runnable(&s.gather.inv)?;
    let (planned, order, gpus) = prepare(s, printer)?;
    let mut bench = node_bench(s, printer);
    let run = bench.sweep(&order, gpus)?;
    let findings = sweep::findings(&run.rows, run.ranks);
    let predicted = Prediction {
        busbw_gbps: planned.plan.predicted.solved.busbw_gbps,
        latency_us: planned.plan.predicted.solved.latency_us,
        assumed: planned.plan.predicted.solved.assumed.clone(),
    };
    // A command that does not spread over {hosts} measures some other set: its figures are
    // shown, but neither held against the model nor localised from.
    let expected_ranks = order.len() as u32 * gpus;
    let set_measured = run.ranks == expected_ranks;
    let below =
        set_measured && predicted.busbw_gbps > 0.0 && findings.large_busbw < s.ceiling_fraction * predicted.busbw_gbps;
    let localisation = if set_measured && (below || s.localise) {
        let found = localise::localise(&mut bench, &order, gpus)?;
        Some(judged(&bench, found, s, printer, &planned.plan.node_classes)?)
    } else {
        None
    };
    let mut msg = if set_measured {
        summary(&findings, &predicted, s.ceiling_fraction, below)
    } else {
        another_set(run.ranks, order.len(), gpus)
    };
    if let Some(l) = &localisation {
        msg.push_str(&accused(l));
    }
    let mut rows: Vec<SizeFigures> = run.rows.clone();
    rows.sort_by_key(|r| r.size);
    Ok(Diagnosis {
        order,
        payload: DiagnosePayload {
            ranks: run.ranks,
            expected_ranks,
            sizes: rows,
            findings,
            predicted,
            ceiling_fraction: s.ceiling_fraction,
            below_ceiling: below,
            localisation,
        },
        msg,
        set_measured,
    })
}

/// The plan for the selected nodes: their order (the plan's, else the selection's) and the
/// GPUs per node the benchmark runs.
fn prepare(s: &DiagnoseSettings, printer: &Printer) -> Result<(crate::flow::plan::Planned, Vec<String>, u32), Error> {
    let planned = gather_and_plan(&s.gather, printer, crate::flow::PREDICTION_BYTES, Ask::Snapshot)?;
    let gpus = gpus_per_node(&s.gather.inv, &planned.plan.node_classes);
    let order = if planned.plan.node_order.is_empty() {
        s.hosts.clone()
    } else {
        planned.plan.node_order.clone()
    };
    Ok((planned, order, gpus))
}

fn node_bench<'a>(s: &'a DiagnoseSettings, printer: &'a Printer) -> Bench<nodes::NodeBencher<'a>> {
    Bench::new(nodes::NodeBencher::new(
        &s.gather.inv,
        &s.gather.reach,
        printer,
        s.output_dir.as_deref(),
        s.budget,
        "diagnose",
    ))
}

/// The sweep alone, on the selected nodes in the plan's order (`diagnose --trace --nodes`:
/// the job's traces are held against it). A run over another set than asked is refused.
pub(in crate::flow) fn measured_sweep(s: &DiagnoseSettings, printer: &Printer) -> Result<BenchRun, Error> {
    let (_, order, gpus) = prepare(s, printer)?;
    let run = node_bench(s, printer).sweep(&order, gpus)?;
    let expected = order.len() as u32 * gpus;
    if run.ranks != expected {
        return Err(Error::from(crate::flow::trace_error::TraceError::SweepElsewhere(
            another_set(run.ranks, order.len(), gpus),
        )));
    }
    Ok(run)
}

/// One line: the verdict with its numbers.
fn summary(f: &Findings, p: &Prediction, fraction: f64, below: bool) -> String {
    if p.busbw_gbps <= 0.0 {
        return format!(
            "diagnose: large-message busbw {:.1} GB/s; no prediction to hold it against (the model predicts rings across nodes: sweep two or more)",
            f.large_busbw
        );
    }
    let basis = match &p.assumed {
        Some(a) => format!(" ({a})"),
        None => String::new(),
    };
    let large = format!(
        "large-message busbw {:.1} GB/s vs {:.1} GB/s predicted{basis}",
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

/// cluster.yaml's `benchmark.gpus_per_node`, else the fewest GPUs of a class that has any.
pub(in crate::flow) fn gpus_per_node(inv: &Inventory, classes: &[NodeClass]) -> u32 {
    inv.benchmark
        .gpus_per_node
        .or_else(|| classes.iter().filter(|c| c.gpus > 0).map(|c| c.gpus as u32).min())
        .unwrap_or(1)
        .max(1)
}

/// The summary when the sweep ran another set than the one asked for.
fn another_set(ran: u32, nodes: usize, gpus: u32) -> String {
    let why = crate::bench::parse::off_the_set(ran, nodes, gpus).unwrap_or_default();
    format!("diagnose: {why}; its figures are not held against the prediction nor localised from")
}

/// The summary's tail: each culprit named, else that none stands out; and a cut budget.
fn accused(l: &Localisation) -> String {
    let mut out: String = l
        .verdicts
        .iter()
        .map(|v| format!("; {}: {}", v.kind.words(), v.suspect))
        .collect();
    if l.verdicts.is_empty() {
        out.push_str("; ");
        out.push_str(l.no_verdict());
    }
    if let Some(step) = &l.budget.stopped_at {
        out.push_str(&format!(
            "; --budget {} s spent: stopped at {step}",
            l.budget.limit_s.unwrap_or_default()
        ));
    }
    out
}

/// Doctor every suspect node the steps found, and judge.
fn judged<B: Bencher>(
    bench: &Bench<B>,
    found: localise::Found,
    s: &DiagnoseSettings,
    printer: &Printer,
    classes: &[NodeClass],
) -> Result<Localisation, Error> {
    let (limit_s, spent_s) = bench.bencher.budget();
    let budget = BudgetUse {
        limit_s,
        spent_s,
        stopped_at: bench.stopped.clone(),
    };
    let doctor = doctor_on(&s.gather.inv, &s.gather.reach, &verdict::suspect_hosts(&found), printer)?;
    let ceiling = |host: &str| {
        classes
            .iter()
            .find(|c| c.gpus > 1 && c.hosts.iter().any(|h| h == host))
            .map(|c| c.ring.bottleneck_gbps)
    };
    let verdicts: Vec<Verdict> = verdict::verdicts(&found, &doctor, &ceiling);
    Ok(Localisation {
        budget,
        interiors: found.interiors,
        rounds: found.located.rounds,
        suspect: found.located.suspect,
        edges: found.edges,
        rails: found.rails,
        skipped: found.skipped,
        doctor,
        verdicts,
    })
}

/// `doctor` on the suspect nodes at once: each one's failing and warning checks, or why it
/// could not be checked.
pub(in crate::flow) fn doctor_on(
    inv: &Inventory,
    reach: &ReachSettings,
    hosts: &[String],
    printer: &Printer,
) -> Result<Vec<DoctorOn>, Error> {
    if hosts.is_empty() {
        return Ok(Vec::new());
    }
    let mut some = inv.clone();
    some.nodes.retain(|n| hosts.contains(&n.host));
    let reserved = some.reserved_cpus.clone().unwrap_or_default();
    let jobs = machine_jobs(&some, |_| {
        Doctor(DoctorRequest {
            reserved: reserved.clone(),
            nccl_version: some.nccl_version,
        })
    });
    Ok(on_nodes(&some, reach, printer, jobs)?
        .into_iter()
        .map(|o| match o.result {
            Ok(r) => DoctorOn {
                host: o.host,
                checks: r
                    .checks
                    .into_iter()
                    .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
                    .collect(),
                error: None,
            },
            Err(f) => DoctorOn {
                host: o.host,
                checks: Vec::new(),
                error: Some(f.message),
            },
        })
        .collect())
}
