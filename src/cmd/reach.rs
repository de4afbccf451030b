//! Resolve, once, how a command reaches its nodes: flags over cluster.yaml over defaults,
//! and the progress bar its fan-out drives.

use crate::cli::{OutputFormat, ReachArgs};
use crate::config::{Inventory, NodeSpec};
use crate::error::Error;
use crate::model::NodeOutcome;
use crate::node::{self, machine_target, Call, NodeJob, Reach};
use crate::transport::fanout::FanOutOptions;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

/// `--no-progress` (or TOPO_TUNE_NO_PROGRESS), set once at start-up.
static NO_PROGRESS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub(crate) fn set_no_progress(off: bool) {
    NO_PROGRESS.store(off, std::sync::atomic::Ordering::Relaxed);
}

/// A progress bar on stderr for every fan-out (init, plan, doctor, irq-pin, rollback, status,
/// apply), with elapsed time and ETA; hidden off a terminal, under `--output json`, and with
/// `--no-progress`.
pub(crate) fn progress_bar(len: usize, output: OutputFormat) -> indicatif::ProgressBar {
    if output != OutputFormat::Human
        || NO_PROGRESS.load(std::sync::atomic::Ordering::Relaxed)
        || !std::io::stderr().is_terminal()
    {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} nodes, ETA {eta} {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

pub(crate) fn resolve(args: &ReachArgs, inv: &Inventory, bar: &indicatif::ProgressBar) -> Reach {
    let bar = bar.clone();
    Reach {
        fan: FanOutOptions {
            forks: args.forks.unwrap_or(inv.ssh.forks),
            max_fail: args.max_fail,
        },
        connect_timeout: Duration::from_secs(args.connect_timeout.unwrap_or(inv.ssh.connect_timeout_s)),
        command_timeout: Duration::from_secs(args.command_timeout.unwrap_or(inv.ssh.command_timeout_s)),
        remote_binary: args.remote_binary.clone(),
        simulated_latency: Duration::from_millis(args.simulate_latency_ms),
        progress: Arc::new(move |host: &str, ok: bool| {
            bar.inc(1);
            if !ok {
                bar.set_message(format!("(last failure: {host})"));
            }
        }),
        cancel: crate::runner::Cancel::default(),
    }
}

/// Run each job's call where its node lives, with a progress bar on a terminal.
pub(crate) fn on_nodes<C: Call>(
    inv: &Inventory,
    args: &ReachArgs,
    output: OutputFormat,
    jobs: Vec<NodeJob<C>>,
) -> Result<Vec<NodeOutcome<C::Answer>>, Error> {
    run_jobs(inv, args, output, jobs, None, None)
}

/// Benchmark runs (`apply`'s canary, `diagnose`'s rounds): as [`on_nodes`], but the remote
/// command is the benchmark, so its own `timeout_s` governs, with room to report; `label`
/// names the round on the progress bar.
pub(crate) fn benchmarks_on_nodes<C: Call>(
    inv: &Inventory,
    args: &ReachArgs,
    output: OutputFormat,
    jobs: Vec<NodeJob<C>>,
    timeout_s: u64,
    label: Option<String>,
) -> Result<Vec<NodeOutcome<C::Answer>>, Error> {
    run_jobs(inv, args, output, jobs, Some(timeout_s), label)
}

fn run_jobs<C: Call>(
    inv: &Inventory,
    args: &ReachArgs,
    output: OutputFormat,
    jobs: Vec<NodeJob<C>>,
    bench_timeout_s: Option<u64>,
    label: Option<String>,
) -> Result<Vec<NodeOutcome<C::Answer>>, Error> {
    let bar = progress_bar(jobs.len(), output);
    if let Some(label) = label {
        bar.set_message(label);
    }
    let mut reach = resolve(args, inv, &bar);
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

/// The training CPUs interrupts stay off: `--reserve-cpus`, else cluster.yaml's
/// `reserved_cpus`, else none.
pub(crate) fn reserved_cpus(flag: Option<&crate::model::CpuList>, inv: &Inventory) -> crate::model::CpuList {
    flag.or(inv.reserved_cpus.as_ref()).cloned().unwrap_or_default()
}

/// Where `irq-pin` and `doctor` act: `--cluster-config`, or with `--cluster` the cluster
/// `TOPO_TUNE_CLUSTER_CONFIG` names, else this machine (`None`).
pub(crate) fn local_scope(
    cluster_config: Option<&std::path::Path>,
    cluster: bool,
) -> Result<Option<std::path::PathBuf>, Error> {
    crate::cli::local_command_scope(cluster_config, cluster, std::env::var_os("TOPO_TUNE_CLUSTER_CONFIG"))
        .map_err(Error::Usage)
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
                Some(d) => crate::model::files::host_dir(d, &first.host).map_err(Error::Usage)?,
                None => std::path::PathBuf::from("/"),
            },
            ..NodeEnv::live()
        }),
    })
}
