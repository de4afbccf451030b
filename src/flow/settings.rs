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
pub(crate) struct ReachSettings {
    pub(crate) forks: usize,
    pub(crate) max_fail: Option<usize>,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    /// The binary deployed to ssh nodes (default: this one).
    pub(crate) remote_binary: Option<PathBuf>,
    /// Extra delay per simulated node (benchmarks of the fan-out itself).
    pub(crate) simulated_latency: Duration,
    /// Cancelled when a signal ends a run on the nodes.
    pub(crate) cancel: Cancel,
}

/// Where snapshots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// Each node is asked (ssh, here, paper).
    Nodes,
    /// `--from-probes DIR`: files another engine gathered.
    Probes(PathBuf),
}

/// The cluster, how its nodes are reached, and where their facts come from.
#[derive(Debug, Clone)]
pub(crate) struct GatherSettings {
    pub(crate) inv: Inventory,
    pub(crate) reach: ReachSettings,
    pub(crate) source: Source,
}

impl GatherSettings {
    pub(crate) fn probes_dir(&self) -> Option<&std::path::Path> {
        match &self.source {
            Source::Probes(dir) => Some(dir),
            Source::Nodes => None,
        }
    }
}

/// What `init` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InitMode {
    /// Probe, plan (or read `--plan`) and write.
    Write,
    /// `--collect-only`: the snapshots, nothing planned or written.
    CollectOnly,
    /// `--list`: what would be contacted, and how; nothing contacted.
    List,
}

/// `init`.
#[derive(Debug, Clone)]
pub(crate) struct InitSettings {
    pub(crate) mode: InitMode,
    pub(crate) gather: GatherSettings,
    /// A reviewed plan to apply instead of planning again.
    pub(crate) plan: Option<PathBuf>,
    /// `--tuning`: a tuning rolled out with the files.
    pub(crate) tuning: Option<super::tuned::TuningGiven>,
    pub(crate) output_dir: Option<PathBuf>,
    /// `--check` or `--dry-run`: write nothing.
    pub(crate) check: bool,
    pub(crate) diff: bool,
    /// `--per-node`: the tables unfolded.
    pub(crate) per_node: bool,
}

/// `plan`.
#[derive(Debug, Clone)]
pub(crate) struct PlanSettings {
    pub(crate) gather: GatherSettings,
    pub(crate) message_bytes: u64,
    pub(crate) output_dir: Option<PathBuf>,
}

/// `apply`: a new rollout, or one resumed.
#[derive(Debug, Clone)]
pub(crate) struct ApplySettings {
    pub(crate) gather: GatherSettings,
    pub(crate) state_dir: PathBuf,
    pub(crate) plan: Option<PathBuf>,
    pub(crate) output_dir: Option<PathBuf>,
    /// `--tuning`: a tuning the canary judges and the waves roll out.
    pub(crate) tuning: Option<super::tuned::TuningGiven>,
    /// The plugin a resumed rollout's tuning is read by (its sha256 is recorded).
    pub(crate) tuner_plugin: PathBuf,
    pub(crate) start: Start,
}

/// How a rollout begins.
#[derive(Debug, Clone)]
pub(crate) enum Start {
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
pub(crate) struct NewRollout {
    pub(crate) canary: Option<String>,
    pub(crate) wave_size: Option<usize>,
    pub(crate) canary_only: bool,
    pub(crate) max_fail: usize,
    pub(crate) rounds: u32,
    pub(crate) gate: Gate,
}

/// The flags given with `--resume`, as given.
#[derive(Debug, Clone, Default)]
pub(crate) struct Given {
    pub(crate) output_dir: Option<PathBuf>,
    pub(crate) rounds: Option<u32>,
    /// Percentages, as on the command line.
    pub(crate) threshold: Option<f64>,
    pub(crate) p99_threshold: Option<f64>,
    pub(crate) require_gain: bool,
    pub(crate) wave_size: Option<usize>,
    pub(crate) max_fail: Option<usize>,
    pub(crate) plan: bool,
    pub(crate) from_probes: bool,
    pub(crate) tuning: bool,
}

/// `status`.
#[derive(Debug, Clone)]
pub(crate) struct StatusSettings {
    /// Cut to `--nodes` (the nodes left out set aside).
    pub(crate) inv: Inventory,
    pub(crate) per_node: bool,
    pub(crate) reach: ReachSettings,
    pub(crate) state_dir: PathBuf,
    pub(crate) output_dir: Option<PathBuf>,
}

/// `rollback`.
#[derive(Debug, Clone)]
pub(crate) struct RollbackSettings {
    /// Cut to `--nodes` (the nodes left out set aside).
    pub(crate) inv: Inventory,
    pub(crate) per_node: bool,
    pub(crate) reach: ReachSettings,
    pub(crate) output_dir: Option<PathBuf>,
    pub(crate) run: Option<String>,
}

/// Where `doctor` and `irq-pin` act.
#[derive(Debug, Clone)]
pub(crate) enum Scope {
    /// This machine, or a `--fsroot` tree.
    Here { fsroot: Option<PathBuf> },
    /// Every node of a cluster.
    Cluster { inv: Box<Inventory>, reach: ReachSettings },
}

/// `doctor`.
#[derive(Debug, Clone)]
pub(crate) struct DoctorSettings {
    /// With a cluster, cut to `--nodes`.
    pub(crate) scope: Scope,
    pub(crate) per_node: bool,
    /// `--reserve-cpus`, else cluster.yaml's `reserved_cpus`, else none.
    pub(crate) reserved: CpuList,
    pub(crate) textfile: Option<PathBuf>,
    /// `--nccl-version`, else cluster.yaml's `nccl_version`: the NCCL jobs use where a node's
    /// loader finds none.
    pub(crate) nccl_version: Option<crate::model::NcclVersion>,
    /// Recorded NVML answers for this machine's checks (`--nvml-fixture`, hidden).
    pub(crate) nvml_fixture: Option<PathBuf>,
}

/// `irq-pin`.
#[derive(Debug, Clone)]
pub(crate) struct IrqPinSettings {
    pub(crate) scope: Scope,
    pub(crate) request: crate::irq::pin::PinRequest,
    pub(crate) per_node: bool,
}

/// `probe`: which machine, and whether the path matrix is shown.
#[derive(Debug, Clone)]
pub(crate) struct ProbeSettings {
    pub(crate) request: crate::probe::ProbeRequest,
    pub(crate) matrix: bool,
}

/// `topo-tune node KIND`: the call asked of this node, and where its files are.
#[derive(Debug, Clone)]
pub(crate) struct NodeSettings {
    pub(crate) kind: String,
    pub(crate) env: crate::transport::NodeEnv,
}

/// What `diagnose` does: a sweep on nodes, or the job's traces read.
#[derive(Debug, Clone)]
pub(crate) enum DiagnoseMode {
    Sweep(Box<DiagnoseSettings>),
    Trace(Box<TraceSettings>),
}

/// What `diagnose --trace` was asked.
#[derive(Debug, Clone)]
pub(crate) struct TraceSettings {
    pub(crate) paths: Vec<PathBuf>,
    pub(crate) sweep: Option<PathBuf>,
    pub(crate) hostfile: Option<PathBuf>,
    pub(crate) ranks_per_node: Option<u32>,
    /// `--nodes`: measure the sweep on them first (instead of `--sweep FILE`).
    pub(crate) measure: Option<DiagnoseSettings>,
    /// The cluster, when `--cluster-config` is given: the straggler's host is doctored.
    pub(crate) cluster: Option<(Inventory, ReachSettings)>,
    /// Traces read at once.
    pub(crate) workers: usize,
}

/// `diagnose`.
#[derive(Debug, Clone)]
pub(crate) struct DiagnoseSettings {
    /// Cut to `--nodes` (the whole cluster without it).
    pub(crate) gather: GatherSettings,
    /// The selected hosts, in inventory order.
    pub(crate) hosts: Vec<String>,
    pub(crate) output_dir: Option<PathBuf>,
    /// `--budget`: every benchmark run together.
    pub(crate) budget: Option<Duration>,
    pub(crate) ceiling_fraction: f64,
    pub(crate) localise: bool,
}

/// `tune`.
#[derive(Debug, Clone)]
pub(crate) struct TuneSettings {
    /// Cut to the set (`--canary SEL`).
    pub(crate) gather: GatherSettings,
    /// The selector as given (`rack-1`), and its hosts in inventory order.
    pub(crate) set: String,
    pub(crate) hosts: Vec<String>,
    pub(crate) collectives: Vec<crate::tune::Collective>,
    /// `--budget`: every benchmark run together.
    pub(crate) budget: Option<Duration>,
    /// Rounds per candidate (cluster.yaml's `benchmark.rounds`, or `--rounds`).
    pub(crate) rounds: u32,
    pub(crate) gate: Gate,
    /// Paper nodes: where their files are (the nodes' own otherwise).
    pub(crate) output_dir: Option<PathBuf>,
    /// Where `tuning.json` and `nccl-tuner.csv` go.
    pub(crate) tuning_dir: PathBuf,
    /// topo-tune's tuner plugin on this machine (copied to every node of the set).
    pub(crate) plugin: PathBuf,
    /// The cluster.yaml whose rollout lock `tune` holds, and where the locks live.
    pub(crate) cluster_config: PathBuf,
    pub(crate) state_dir: PathBuf,
}

/// Where `fabric` reads the wires.
#[derive(Debug, Clone)]
pub(crate) enum FabricSource {
    /// One capture per plane (a directory: each file in it).
    Ibnetdiscover(Vec<PathBuf>),
    AwsTopology(PathBuf),
}

/// `fabric`.
#[derive(Debug, Clone)]
pub(crate) struct FabricSettings {
    pub(crate) source: FabricSource,
    pub(crate) guid_map: Option<PathBuf>,
    /// `--host-map`: an AWS answer's instance ids → host names.
    pub(crate) host_map: Option<PathBuf>,
    /// `--cluster-config`: what the discovered fabric is held against.
    pub(crate) cluster: Option<Inventory>,
    pub(crate) output_dir: Option<PathBuf>,
}
