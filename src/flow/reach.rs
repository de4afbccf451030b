//! Reaching the nodes with resolved settings: one call per node through the one fan-out, its
//! progress bar from the printer, the benchmark's own timeout where a call is a benchmark.

use super::settings::ReachSettings;
use crate::config::{Inventory, NodeSpec};
use crate::error::Error;
use crate::model::NodeOutcome;
use crate::node::{self, machine_target, Call, NodeJob, Reach};
use crate::report::Printer;
use crate::transport::fanout::FanOutOptions;
use std::sync::Arc;
use std::time::Duration;

/// The node layer's reach: the settings, and a progress bar the fan-out drives.
fn node_reach(s: &ReachSettings, bar: &indicatif::ProgressBar) -> Reach {
    let bar = bar.clone();
    Reach {
        fan: FanOutOptions {
            forks: s.forks,
            max_fail: s.max_fail,
        },
        connect_timeout: s.connect_timeout,
        command_timeout: s.command_timeout,
        remote_binary: s.remote_binary.clone(),
        simulated_latency: s.simulated_latency,
        progress: Arc::new(move |host: &str, ok: bool| {
            bar.inc(1);
            if !ok {
                bar.set_message(format!("(last failure: {host})"));
            }
        }),
        cancel: s.cancel.clone(),
    }
}

/// Run each job's call where its node lives, with a progress bar when the printer shows one.
pub(crate) fn on_nodes<C: Call>(
    inv: &Inventory,
    reach: &ReachSettings,
    printer: &Printer,
    jobs: Vec<NodeJob<C>>,
) -> Result<Vec<NodeOutcome<C::Answer>>, Error> {
    run_jobs(inv, reach, printer, jobs, None, None)
}

/// Benchmark runs (`apply`'s canary, `diagnose`'s rounds): as [`on_nodes`], but the remote
/// command is the benchmark, so its own `timeout_s` governs, with room to report; `label`
/// names the round on the progress bar.
pub(crate) fn benchmarks_on_nodes<C: Call>(
    inv: &Inventory,
    reach: &ReachSettings,
    printer: &Printer,
    jobs: Vec<NodeJob<C>>,
    timeout_s: u64,
    label: Option<String>,
) -> Result<Vec<NodeOutcome<C::Answer>>, Error> {
    run_jobs(inv, reach, printer, jobs, Some(timeout_s), label)
}

fn run_jobs<C: Call>(
    inv: &Inventory,
    reach: &ReachSettings,
    printer: &Printer,
    jobs: Vec<NodeJob<C>>,
    bench_timeout_s: Option<u64>,
    label: Option<String>,
) -> Result<Vec<NodeOutcome<C::Answer>>, Error> {
    let bar = printer.nodes_bar(jobs.len());
    if let Some(label) = label {
        bar.set_message(label);
    }
    let mut reach = node_reach(reach, &bar);
    if let Some(t) = bench_timeout_s {
        reach.command_timeout = reach.command_timeout.max(Duration::from_secs(t + 30));
    }
    let outcomes = node::run(inv, &reach, jobs).map_err(|e| match e {
        node::RunError::Failed(f) => Error::Reach(f),
        node::RunError::Interrupted(signal) => Error::Interrupted { signal },
    })?;
    bar.finish_and_clear();
    Ok(outcomes)
}

/// One call per inventory node, on the machine itself (ssh, here, or paper).
pub(crate) fn machine_jobs<C>(inv: &Inventory, call: impl Fn(&NodeSpec) -> C) -> Vec<NodeJob<C>> {
    inv.nodes
        .iter()
        .map(|n| NodeJob {
            node: n.clone(),
            target: machine_target(n),
            call: call(n),
        })
        .collect()
}

/// One call per inventory node, where its files are (`DIR/<host>` with `--output-dir`).
pub(crate) fn write_jobs<C>(
    inv: &Inventory,
    output_dir: Option<&std::path::Path>,
    call: impl Fn(&NodeSpec) -> C,
) -> Vec<NodeJob<C>> {
    inv.nodes
        .iter()
        .map(|n| NodeJob {
            node: n.clone(),
            target: node::write_target(n, output_dir),
            call: call(n),
        })
        .collect()
}

/// Where a benchmark run starts: on the controller (its files under `DIR/<first host>` with
/// `--output-dir`, else `/`), or on the run's first node.
pub(crate) fn bench_target(
    first: &NodeSpec,
    runs_on: crate::config::benchmark::RunsOn,
    output_dir: Option<&std::path::Path>,
) -> Result<crate::transport::Target, Error> {
    use crate::config::benchmark::RunsOn;
    use crate::transport::{NodeEnv, Target};
    Ok(match runs_on {
        RunsOn::FirstNode => node::write_target(first, output_dir),
        RunsOn::Controller => Target::Here(NodeEnv {
            write_root: match output_dir {
                Some(d) => crate::model::files::host_dir(d, &first.host).map_err(|e| Error::Usage(e.0))?,
                None => std::path::PathBuf::from("/"),
            },
            ..NodeEnv::live()
        }),
    })
}
