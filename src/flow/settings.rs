//! What each command family needs, resolved once from its flags, cluster.yaml and the
//! defaults (`cli::resolve` writes each precedence rule there, once). Plain data: the flows
//! take these, never a clap type.

use crate::bench::stats::Gate;
use crate::config::Inventory;
use crate::model::CpuList;
use crate::runner::Cancel;
use std::path::PathBuf;
use std::time::Duration;

/// How nodes are reached: `--forks` over `ssh.forks` over 64, and so on.
#[derive(Debug, Clone)]
pub struct ReachSettings {
    pub forks: usize,
    pub max_fail: Option<usize>,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// The binary deployed to ssh nodes (default: this one).
    pub remote_binary: Option<PathBuf>,
    /// Extra delay per simulated node (benchmarks of the fan-out itself).
    pub simulated_latency: Duration,
    /// Cancelled when a signal ends a run on the nodes.
    pub cancel: Cancel,
}

/// Where snapshots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Each node is asked (ssh, here, paper).
    Nodes,
    /// `--from-probes DIR`: files another engine gathered.
    Probes(PathBuf),
}

/// The cluster, how its nodes are reached, and where their facts come from.
#[derive(Debug, Clone)]
pub struct GatherSettings {
    pub inv: Inventory,
    pub reach: ReachSettings,
    pub source: Source,
}

impl GatherSettings {
    pub fn probes_dir(&self) -> Option<&std::path::Path> {
        match &self.source {
            Source::Probes(dir) => Some(dir),
            Source::Nodes => None,
        }
    }
}

/// `init`.
#[derive(Debug, Clone)]
pub struct InitSettings {
    pub gather: GatherSettings,
    /// A reviewed plan to apply instead of planning again.
    pub plan: Option<PathBuf>,
    pub output_dir: Option<PathBuf>,
    /// `--check` or `--dry-run`: write nothing.
    pub check: bool,
    pub diff: bool,
}

/// `plan`.
#[derive(Debug, Clone)]
pub struct PlanSettings {
    pub gather: GatherSettings,
    pub message_bytes: u64,
    pub output_dir: Option<PathBuf>,
}

/// `apply`: a new rollout, or one resumed.
#[derive(Debug, Clone)]
pub struct ApplySettings {
    pub gather: GatherSettings,
    pub state_dir: PathBuf,
    pub plan: Option<PathBuf>,
    pub output_dir: Option<PathBuf>,
    pub start: Start,
}

/// How a rollout begins.
#[derive(Debug, Clone)]
pub enum Start {
    New(NewRollout),
    /// `--resume ID`, with every flag the operator gave that a resume does not take (refused
    /// unless it repeats the recorded value).
    Resume {
        id: String,
        given: Given,
    },
}

/// A new rollout's choices (flags over cluster.yaml's `benchmark:` over defaults).
#[derive(Debug, Clone)]
pub struct NewRollout {
    pub canary: Option<String>,
    pub wave_size: Option<usize>,
    pub canary_only: bool,
    pub max_fail: usize,
    pub rounds: u32,
    pub gate: Gate,
}

/// The flags given with `--resume`, as given.
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub output_dir: Option<PathBuf>,
    pub rounds: Option<u32>,
    /// Percentages, as on the command line.
    pub threshold: Option<f64>,
    pub p99_threshold: Option<f64>,
    pub require_gain: bool,
    pub wave_size: Option<usize>,
    pub max_fail: Option<usize>,
    pub plan: bool,
    pub from_probes: bool,
}

/// `status`.
#[derive(Debug, Clone)]
pub struct StatusSettings {
    pub inv: Inventory,
    pub reach: ReachSettings,
    pub state_dir: PathBuf,
    pub output_dir: Option<PathBuf>,
}

/// `rollback`.
#[derive(Debug, Clone)]
pub struct RollbackSettings {
    pub inv: Inventory,
    pub reach: ReachSettings,
    pub output_dir: Option<PathBuf>,
    pub run: Option<String>,
}

/// Where `doctor` and `irq-pin` act.
#[derive(Debug, Clone)]
pub enum Scope {
    /// This machine, or a `--fsroot` tree.
    Here { fsroot: Option<PathBuf> },
    /// Every node of a cluster.
    Cluster { inv: Box<Inventory>, reach: ReachSettings },
}

/// `doctor`.
#[derive(Debug, Clone)]
pub struct DoctorSettings {
    pub scope: Scope,
    /// `--reserve-cpus`, else cluster.yaml's `reserved_cpus`, else none.
    pub reserved: CpuList,
    pub textfile: Option<PathBuf>,
}

/// `irq-pin`.
#[derive(Debug, Clone)]
pub struct IrqPinSettings {
    pub scope: Scope,
    pub request: crate::irq::pin::PinRequest,
}

/// `diagnose`.
#[derive(Debug, Clone)]
pub struct DiagnoseSettings {
    /// Cut to `--nodes` (the whole cluster without it).
    pub gather: GatherSettings,
    /// The selected hosts, in inventory order.
    pub hosts: Vec<String>,
    pub output_dir: Option<PathBuf>,
    /// `--budget`: every benchmark run together.
    pub budget: Option<Duration>,
    pub ceiling_fraction: f64,
    pub localise: bool,
}
