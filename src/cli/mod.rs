//! Command-line interface (clap). Doc comments here are the `--help` text. Values are typed
//! here (CPU lists, sizes, bounded numbers), so commands never parse flags again. Every option
//! that sets policy can also come from a `TOPO_TUNE_*` environment variable (for Ansible's
//! `environment:`).

mod resolve;

use crate::config::MAX_FORKS;
use crate::irq::pin::IrqbalancePolicy;
use crate::model::CpuList;
use clap::builder::RangedU64ValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// `0.1.0 (commit 1a2b3c4d5e6f)`: the version and the git commit it was built from.
pub(crate) const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("TOPO_TUNE_COMMIT"), ")");

/// Make NCCL fast on the hardware it really runs on: probe GPU/NIC topology, solve ring order
/// and NCCL settings, write the files NCCL reads, roll them out behind a measured canary.
#[derive(Debug, Parser)]
#[command(name = "topo-tune", version = VERSION, propagate_version = true, max_term_width = 100)]
pub(crate) struct Cli {
    /// Output format: `human` (tables) or `json` (one JSON document on stdout).
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Human, env = "TOPO_TUNE_OUTPUT")]
    pub(crate) output: OutputFormat,

    /// No progress bar on fan-outs (there is none anyway off a terminal or under --output json).
    #[arg(long, global = true, env = "TOPO_TUNE_NO_PROGRESS", value_parser = env_bool)]
    pub(crate) no_progress: bool,

    /// More log on stderr: -v what happens per node, -vv each ssh step, -vvv everything.
    /// RUST_LOG (e.g. `topo_tune::transport=debug`) overrides it.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub(crate) verbose: u8,

    /// Errors only on stderr (no warnings).
    #[arg(short, long, global = true)]
    pub(crate) quiet: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    Human,
    Json,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Describe one node: GPUs, NVLink, PCIe tree, NICs, NUMA, IRQs (read-only).
    Probe(ProbeArgs),
    /// Probe every node (or those --nodes selects), plan, and write the NCCL files the plan
    /// gives each node.
    Init(InitArgs),
    /// Solve intra-node rings, the node order and NCCL settings; predict what they are worth.
    Plan(PlanArgs),
    /// Roll a plan out wave by wave behind a measured canary: stage, benchmark baseline vs
    /// candidate on the same nodes, promote a proven change, roll back by itself otherwise.
    Apply(ApplyArgs),
    /// Pin mlx5 NIC interrupts to CPUs local to the NIC, away from training CPUs.
    IrqPin(IrqPinArgs),
    /// Check the host basics that make NCCL slow: one table, a fix for each finding.
    Doctor(DoctorArgs),
    /// Show what topo-tune has applied where: per node the last run, drift, staged
    /// candidates and the rollout wave it belongs to.
    Status(StatusArgs),
    /// Undo topo-tune's last run (an `init`, or a wave `apply` promoted) on every node, or on
    /// those --nodes selects: the files it replaced restored, the ones it created removed.
    Rollback(RollbackArgs),
    /// Sweep all-reduce over message sizes on a set of nodes (the cluster's benchmark
    /// command) and read it: α–β fit, small-message cliff, crossover, and the large-message
    /// figure against the planner's prediction for those nodes; when slower, name the slow
    /// node, node inside, NIC, link or rail in rounds of parallel runs, with doctor's cause.
    Diagnose(DiagnoseArgs),
    /// Measure which NCCL choices win on this cluster, per collective, message size and job
    /// shape, on one set of nodes (NCCL's own choice against each candidate, interleaved,
    /// confirmed in fresh rounds); write tuning.json and the tuner plugin's nccl-tuner.csv.
    Tune(TuneArgs),
    /// Read the fabric from the wires (`ibnetdiscover`, AWS's instance topology): switches by
    /// level, hosts and their ports, leaf groups and rails, what is miscabled, missing or slow;
    /// the cluster.yaml section that states it, and where cluster.yaml disagrees.
    Fabric(FabricArgs),
    /// Print a shell completion script: `topo-tune completions bash > /etc/bash_completion.d/topo-tune`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `topo-tune man > /usr/local/share/man/man1/topo-tune.1`.
    Man,
    /// Node side of every cluster command: one request (JSON on stdin), one report out.
    #[command(hide = true)]
    Node(NodeArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ProbeArgs {
    /// Read /sys and /proc under DIR instead of / (a captured or hand-built tree).
    #[arg(
        long,
        value_name = "DIR",
        env = "TOPO_TUNE_FSROOT",
        conflicts_with_all = ["from_hwloc_xml", "from_nccl_topo"]
    )]
    pub(crate) fsroot: Option<PathBuf>,

    /// Build the snapshot from an hwloc XML export (`lstopo --whole-io --of xml FILE`); an
    /// NCCL topology file given here is recognised by its root element and read as such.
    #[arg(
        long,
        value_name = "FILE",
        env = "TOPO_TUNE_FROM_HWLOC_XML",
        conflicts_with = "from_nccl_topo"
    )]
    pub(crate) from_hwloc_xml: Option<PathBuf>,

    /// Build the snapshot from an NCCL topology file (the `NCCL_TOPO_FILE` /
    /// `NCCL_TOPO_DUMP_FILE` format): see what topo-tune reads from it.
    #[arg(long, value_name = "FILE")]
    pub(crate) from_nccl_topo: Option<PathBuf>,

    /// Print the GPU/NIC path matrix (`nvidia-smi topo -m` classes) instead of the summary;
    /// with `--output json`, add it to the snapshot as `matrix`.
    #[arg(long)]
    pub(crate) matrix: bool,

    /// Use recorded NVML answers (JSON) instead of the NVIDIA driver.
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_NVML_FIXTURE", hide = true)]
    pub(crate) nvml_fixture: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    #[command(flatten)]
    pub(crate) gather: GatherArgs,

    #[command(flatten)]
    pub(crate) select: NodesArgs,

    #[command(flatten)]
    pub(crate) tuning: TuningArgs,

    /// One row per node and file, as before output was folded (identical nodes are shown
    /// once, under a host range, by default).
    #[arg(long)]
    pub(crate) per_node: bool,

    /// Apply this plan (`topo-tune plan --output-dir DIR` wrote DIR/plan.json) exactly, instead
    /// of planning again: the reviewed change set, nothing else. The nodes are still probed
    /// (or read from --from-probes): every setting is checked against their own facts.
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_PLAN", conflicts_with = "collect_only")]
    pub(crate) plan: Option<PathBuf>,

    /// Stop after collecting snapshots: write `DIR/<host>/snapshot.json`, write nothing on the
    /// nodes.
    #[arg(long, env = "TOPO_TUNE_COLLECT_ONLY", value_parser = env_bool)]
    pub(crate) collect_only: bool,

    /// Write under `DIR/<host>/` (mirroring /etc) instead of the nodes' real paths; with
    /// `--collect-only`, where the snapshots go.
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_OUTPUT_DIR")]
    pub(crate) output_dir: Option<PathBuf>,

    /// Change nothing; report what would change and exit 3 if anything would.
    #[arg(long, env = "TOPO_TUNE_CHECK", value_parser = env_bool)]
    pub(crate) check: bool,

    /// The same as --check: across topo-tune, --dry-run means "do everything but change
    /// anything, report what would change, exit 3 if something would" (as irq-pin --dry-run).
    #[arg(long, env = "TOPO_TUNE_DRY_RUN", value_parser = env_bool)]
    pub(crate) dry_run: bool,

    /// Show a unified diff of every file that changes (or would, with --check).
    #[arg(long, env = "TOPO_TUNE_DIFF", value_parser = env_bool)]
    pub(crate) diff: bool,

    /// Validate the cluster description and list the nodes that would be contacted, and how;
    /// contact nothing.
    #[arg(long, conflicts_with_all = ["check", "dry_run", "collect_only", "plan"])]
    pub(crate) list: bool,
}

impl InitArgs {
    /// `--check` or its synonym `--dry-run`.
    pub(crate) fn checking(&self) -> bool {
        self.check || self.dry_run
    }
}

pub(crate) use crate::model::size::ByteSize;

#[derive(Debug, Args)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    pub(crate) gather: GatherArgs,

    /// All-reduce size the predictions are for (bytes, or with K/M/G/T: binary units).
    #[arg(long, value_name = "SIZE", default_value = "1G", env = "TOPO_TUNE_MESSAGE_SIZE")]
    pub(crate) message_size: ByteSize,

    /// Write plan.json (what `init --plan` applies), hostfile, slurm-hostfile,
    /// torchrun-node-ranks.txt and per-class nccl-graph-*.xml (only where the solved ring
    /// beats index order) into DIR.
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_OUTPUT_DIR")]
    pub(crate) output_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum IrqbalanceArg {
    /// Say that irqbalance will undo the pins; change nothing about it.
    Warn,
    /// Add `--banmod=mlx5` to irqbalance's config and restart it (never stops it).
    Ban,
}

impl From<IrqbalanceArg> for IrqbalancePolicy {
    fn from(a: IrqbalanceArg) -> Self {
        match a {
            IrqbalanceArg::Warn => IrqbalancePolicy::Warn,
            IrqbalanceArg::Ban => IrqbalancePolicy::Ban,
        }
    }
}

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 done (or nothing to move); 3 --dry-run with moves pending; 4 some interrupt\n\
or node could not be moved; 8 no node could; 65 an impossible reserved set or a record that is\n\
not topo-tune's; 77 not root. docs/irq.md."
)]
pub(crate) struct IrqPinArgs {
    /// Read and write /sys and /proc under DIR instead of / (a test or captured tree).
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_FSROOT")]
    pub(crate) fsroot: Option<PathBuf>,

    /// CPUs the training processes own (kernel list); they and their hyper-thread siblings
    /// get no NIC interrupt. Default: cluster.yaml's reserved_cpus with --cluster-config.
    #[arg(long, value_name = "LIST", env = "TOPO_TUNE_RESERVE_CPUS")]
    pub(crate) reserve_cpus: Option<CpuList>,

    /// Pin on every node of this cluster (over ssh, or here for `transport: local`), with its
    /// reserved_cpus unless --reserve-cpus is given. Only from the command line: a
    /// TOPO_TUNE_CLUSTER_CONFIG in the environment never turns a local run cluster-wide.
    #[arg(long, value_name = "FILE", conflicts_with = "fsroot")]
    pub(crate) cluster_config: Option<PathBuf>,

    /// Pin on every node of the cluster TOPO_TUNE_CLUSTER_CONFIG names (the explicit way to
    /// use that variable here).
    #[arg(long, conflicts_with_all = ["fsroot", "cluster_config"])]
    pub(crate) cluster: bool,

    #[command(flatten)]
    pub(crate) select: NodesArgs,

    #[command(flatten)]
    pub(crate) reach: ReachArgs,

    /// Move control vectors too (onto the NIC-local, non-reserved CPUs).
    #[arg(long)]
    pub(crate) include_control: bool,

    /// One row per node and interrupt (rows alike on many nodes are folded under a host range
    /// by default).
    #[arg(long)]
    pub(crate) per_node: bool,

    /// Print the plan; change nothing; exit 3 when some interrupt would move (with --restore:
    /// would be put back).
    #[arg(long, env = "TOPO_TUNE_DRY_RUN", value_parser = env_bool)]
    pub(crate) dry_run: bool,

    /// What to do when irqbalance runs: warn (default) or ban mlx5 in its config and restart it.
    #[arg(long, value_enum, default_value_t = IrqbalanceArg::Warn)]
    pub(crate) irqbalance: IrqbalanceArg,

    /// Also install a systemd unit (and a udev rule for driver reloads) that pins again at boot.
    #[arg(long)]
    pub(crate) install: bool,

    /// Undo: put every interrupt back where it was before irq-pin first moved it, byte for
    /// byte (recorded in /etc/topo-tune/irq-pin.before.json before anything changed), and
    /// irqbalance's config as it was; remove the boot unit. With --dry-run, what would change.
    #[arg(long, conflicts_with_all = ["install", "include_control", "reserve_cpus"])]
    pub(crate) restore: bool,
}

#[derive(Debug, Args)]
#[command(after_long_help = crate::doctor::checks_help())]
pub(crate) struct DoctorArgs {
    /// Read /sys and /proc under DIR instead of /.
    #[arg(
        long,
        value_name = "DIR",
        env = "TOPO_TUNE_FSROOT",
        conflicts_with = "cluster_config"
    )]
    pub(crate) fsroot: Option<PathBuf>,

    /// Check every node of this cluster (over ssh, or locally for `transport: local`). Only
    /// from the command line, as for irq-pin.
    #[arg(long, value_name = "FILE")]
    pub(crate) cluster_config: Option<PathBuf>,

    /// Check every node of the cluster TOPO_TUNE_CLUSTER_CONFIG names.
    #[arg(long, conflicts_with_all = ["fsroot", "cluster_config"])]
    pub(crate) cluster: bool,

    #[command(flatten)]
    pub(crate) select: NodesArgs,

    /// One row per node and check (identical nodes are folded under a host range by default).
    #[arg(long)]
    pub(crate) per_node: bool,

    #[command(flatten)]
    pub(crate) reach: ReachArgs,

    /// Reserved training CPUs, as for irq-pin.
    #[arg(long, value_name = "LIST", env = "TOPO_TUNE_RESERVE_CPUS")]
    pub(crate) reserve_cpus: Option<CpuList>,

    /// Also write the results as Prometheus metrics to DIR/topo_tune_doctor.prom (for
    /// node-exporter's textfile collector; replaced atomically). docs/doctor-metrics.md.
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_TEXTFILE")]
    pub(crate) textfile: Option<PathBuf>,

    /// The NCCL version jobs use (e.g. 2.21.5), for the checks that depend on it when the
    /// node's loader finds no libnccl.so.2 (NCCL inside a PyTorch wheel); cluster.yaml's
    /// `nccl_version` stands in with --cluster-config.
    #[arg(long, value_name = "X.Y.Z")]
    pub(crate) nccl_version: Option<crate::model::NcclVersion>,

    /// Use recorded NVML answers (JSON) instead of the NVIDIA driver, for this machine's
    /// checks (tests of a --fsroot tree).
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_NVML_FIXTURE", hide = true)]
    pub(crate) nvml_fixture: Option<PathBuf>,
}

/// `apply`: exactly one of --canary SEL, --all, --resume ID.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["canary", "all", "resume"])))]
#[command(
    after_help = "How a wave goes: the candidate files are staged in /etc/nccl/topo-tune/candidate/ (live\n\
files untouched); cluster.yaml's benchmark.command (default: nccl-tests all_reduce_perf under\n\
mpirun) runs --rounds times with the live /etc/nccl.conf and with the candidate (NCCL_CONF_FILE),\n\
interleaved; the rule promotes on a gain or no significant change and halts on a significant\n\
loss beyond --threshold (or when one cannot be ruled out). --max-fail N is per wave: more than\n\
N nodes failing to stage or promote fails the wave. Every step is recorded in the state\n\
directory: `apply --resume ID` continues, `topo-tune status` shows where each node stands.\n\
The rule with a worked example, the benchmark template and a runbook: docs/apply.md.\n\n\
Exit codes: 0 rolled out (or the canary, with --canary-only); 7 a wave was halted by its\n\
measurement and rolled back; 4 nodes failed beyond --max-fail; 75 another rollout runs."
)]
pub(crate) struct ApplyArgs {
    #[command(flatten)]
    pub(crate) gather: GatherArgs,

    #[command(flatten)]
    pub(crate) tuning: TuningArgs,

    /// The first wave: a rack name (nodes labelled `rack: NAME`), `KEY=VALUE` on any label,
    /// or hosts (`gpu[001-016]`, `a,b`). Measured before anything else is touched.
    #[arg(long, value_name = "SEL", conflicts_with_all = ["all", "resume"])]
    pub(crate) canary: Option<String>,

    /// Roll out to every node without a canary first (each wave is still measured).
    #[arg(long, conflicts_with = "resume")]
    pub(crate) all: bool,

    /// Continue rollout ID (as recorded in the state directory) where it stopped.
    #[arg(long, value_name = "ID")]
    pub(crate) resume: Option<String>,

    /// Stop after the canary wave (promoted if proven).
    #[arg(long, requires = "canary")]
    pub(crate) canary_only: bool,

    /// Nodes per wave after the canary (default: one wave per rack, in fabric order).
    #[arg(long, value_name = "N",
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    pub(crate) wave_size: Option<usize>,

    /// Benchmark rounds per wave, each one baseline and one candidate run, interleaved
    /// (A B, B A, …); 6 to 50 (default: benchmark.rounds, else 6).
    #[arg(long, value_name = "N",
          value_parser = RangedU64ValueParser::<u32>::new().range(6..=50))]
    pub(crate) rounds: Option<u32>,

    /// Halt when large-message bandwidth drops by more than PCT percent, significantly
    /// (default: benchmark.threshold_pct, else 3).
    #[arg(long, value_name = "PCT")]
    pub(crate) threshold: Option<f64>,

    /// Halt when small-message P99 time grows by more than PCT percent, significantly
    /// (default: benchmark.p99_threshold_pct, else 3).
    #[arg(long, value_name = "PCT")]
    pub(crate) p99_threshold: Option<f64>,

    /// Promote only on a significant gain ("no significant change" halts).
    #[arg(long)]
    pub(crate) require_gain: bool,

    /// Apply this reviewed plan (`plan --output-dir` wrote it) instead of planning again; the
    /// nodes are still probed (or read from --from-probes) for the checks.
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_PLAN")]
    pub(crate) plan: Option<PathBuf>,

    /// Work under `DIR/<host>/` (mirroring /etc) instead of the nodes' real paths.
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_OUTPUT_DIR")]
    pub(crate) output_dir: Option<PathBuf>,

    /// Where rollout records live (default: $XDG_STATE_HOME/topo-tune, else
    /// ~/.local/state/topo-tune).
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_STATE_DIR")]
    pub(crate) state_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 every node as recorded (a deliberate rollback included); 6 drift, a staged\n\
candidate or an interrupted run somewhere; 4 some nodes could not be read, 8 none could; 65 a\n\
rollout record could not be read or believed."
)]
pub(crate) struct StatusArgs {
    /// The cluster description (docs/cluster-yaml.md).
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_CLUSTER_CONFIG")]
    pub(crate) cluster_config: PathBuf,

    /// Read under `DIR/<host>/` (what `init`/`apply --output-dir DIR` wrote).
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_OUTPUT_DIR")]
    pub(crate) output_dir: Option<PathBuf>,

    /// Where rollout records live (as for `apply`).
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_STATE_DIR")]
    pub(crate) state_dir: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) select: NodesArgs,

    /// One row per node (identical nodes are folded under a host range by default).
    #[arg(long)]
    pub(crate) per_node: bool,

    #[command(flatten)]
    pub(crate) reach: ReachArgs,
}

#[derive(Debug, Args)]
pub(crate) struct DiagnoseArgs {
    /// The cluster description (docs/cluster-yaml.md): its nodes are swept; with `--trace`,
    /// the straggler's host is doctored when it is one of them.
    #[arg(
        long,
        value_name = "FILE",
        env = "TOPO_TUNE_CLUSTER_CONFIG",
        required_unless_present = "trace"
    )]
    pub(crate) cluster_config: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) source: NodeSourceArgs,

    /// Read the job's PyTorch profiler traces instead of sweeping: files (`.json` or
    /// `.json.gz`, one per rank) or directories of them. How much of a step is
    /// communication, how much exposed, at which sizes, and which rank arrives last
    /// (docs/diagnose.md).
    /// With `--nodes`, the sweep is measured on those nodes first and the job held against it.
    #[arg(long, value_name = "PATH", num_args = 1.., conflicts_with_all = ["budget", "localise"])]
    pub(crate) trace: Vec<PathBuf>,

    /// With --trace: an nccl-tests all_reduce_perf run (`-J` JSON or its text) to hold the
    /// job's bandwidth against; its crossover says which messages are small.
    #[arg(long, value_name = "FILE", requires = "trace", conflicts_with = "nodes")]
    pub(crate) sweep: Option<PathBuf>,

    /// With --trace: an mpirun hostfile (`host slots=N`) mapping ranks to hosts in order.
    #[arg(long, value_name = "FILE", requires = "trace")]
    pub(crate) hostfile: Option<PathBuf>,

    /// With --trace: ranks per host (the hostfile's default slots; without a hostfile,
    /// ranks are grouped into `node0`, `node1`, …).
    #[arg(long, value_name = "N", requires = "trace", value_parser = RangedU64ValueParser::<u32>::new().range(1..=4096))]
    pub(crate) ranks_per_node: Option<u32>,

    #[command(flatten)]
    pub(crate) select: NodesArgs,

    /// Paper nodes' files under `DIR/<host>/` (as `init --output-dir`): the live config the
    /// sweep runs with.
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_OUTPUT_DIR")]
    pub(crate) output_dir: Option<PathBuf>,

    /// Cap on all benchmark runs together, seconds: the sweep and every localisation round.
    /// Localisation stops, accusing no one further, when it is spent; each run also stops at
    /// cluster.yaml's benchmark.timeout.
    #[arg(long, value_name = "S", value_parser = RangedU64ValueParser::<u64>::new().range(1..=86_400))]
    pub(crate) budget: Option<u64>,

    /// Say "slow" when the large-message busbw is below this fraction of the prediction.
    #[arg(long, value_name = "F", default_value_t = 0.8, value_parser = fraction)]
    pub(crate) ceiling_fraction: f64,

    /// Look for the slow node, NIC, link or rail even when the set meets the prediction (by
    /// default only when it does not).
    #[arg(long)]
    pub(crate) localise: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("capture").required(true).args(["from_ibnetdiscover", "from_aws_topology"])))]
#[command(
    after_help = "Exit codes: 0 read, nothing failing; 5 a failing finding (a port on another rail's leaf,\n\
no LID, two ports claiming one host); 65 a capture that cannot be read (its line named); 66 no such file.\n\
docs/fabric.md."
)]
pub(crate) struct FabricArgs {
    /// `ibnetdiscover`'s output (infiniband-diags), saved to a file. A fabric of several
    /// planes: the flag once per plane's capture, or a directory holding one file per plane.
    #[arg(long, value_name = "FILE|DIR")]
    pub(crate) from_ibnetdiscover: Vec<PathBuf>,

    /// `aws ec2 describe-instance-topology` output (JSON): each instance a host on its
    /// bottom-level network node.
    #[arg(long, value_name = "FILE", conflicts_with = "from_ibnetdiscover")]
    pub(crate) from_aws_topology: Option<PathBuf>,

    /// Host names for ports whose node description names none: `<guid> <hostname>` lines
    /// (opensm's node-name map, `0x<guid> "name"`, works as is).
    #[arg(long, value_name = "FILE")]
    pub(crate) guid_map: Option<PathBuf>,

    /// Host names for an AWS answer's instances: `<instance-id> <hostname>` lines (with
    /// --cluster-config, nodes labelled `instance_id` are mapped too).
    #[arg(long, value_name = "FILE", requires = "from_aws_topology")]
    pub(crate) host_map: Option<PathBuf>,

    /// Compare with this cluster.yaml: hosts the wires group otherwise than its racks, typed
    /// hosts the wires do not show.
    #[arg(long, value_name = "FILE")]
    pub(crate) cluster_config: Option<PathBuf>,

    /// Write fabric.yaml (the cluster.yaml `fabric:` section and each host's rack) into DIR.
    #[arg(long, value_name = "DIR")]
    pub(crate) output_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct TuneArgs {
    #[command(flatten)]
    pub(crate) gather: GatherArgs,

    /// The set to measure on (a rack, `KEY=VALUE`, or hosts, as `apply --canary`).
    #[arg(long, value_name = "SEL")]
    pub(crate) canary: String,

    /// Collectives to tune, comma-separated: all_reduce, all_gather, reduce_scatter, alltoall.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "all_reduce,all_gather,reduce_scatter,alltoall", value_parser = collective)]
    pub(crate) collectives: Vec<crate::tune::Collective>,

    /// Cap on every benchmark run together, seconds; what it leaves unmeasured is reported.
    #[arg(long, value_name = "S", value_parser = RangedU64ValueParser::<u64>::new().range(1..=604_800))]
    pub(crate) budget: Option<u64>,

    /// Rounds per candidate, 6 to 50 (default: cluster.yaml's benchmark.rounds, else 6).
    #[arg(long, value_name = "N", value_parser = RangedU64ValueParser::<u32>::new().range(6..=50))]
    pub(crate) rounds: Option<u32>,

    /// Where tuning.json and nccl-tuner.csv go.
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_OUTPUT_DIR")]
    pub(crate) output_dir: PathBuf,

    /// Paper nodes: their NCCL files under `DIR/<host>/` (as `init --output-dir DIR` wrote
    /// them), the live config NCCL's own choice runs with, and where each run's files are
    /// staged.
    #[arg(long, value_name = "DIR")]
    pub(crate) node_files: Option<PathBuf>,

    /// topo-tune's NCCL tuner plugin, copied to every node of the set: every candidate is
    /// measured through it (default: libnccl_tuner_topo_tune.so beside this binary).
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_TUNER_PLUGIN")]
    pub(crate) tuner_plugin: Option<PathBuf>,

    /// Where rollout records and locks live (as for `apply`: tune holds the cluster's lock).
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_STATE_DIR")]
    pub(crate) state_dir: Option<PathBuf>,
}

fn collective(value: &str) -> Result<crate::tune::Collective, ValueError> {
    crate::tune::Collective::parse(value).ok_or_else(|| {
        ValueError(format!(
            "{value:?} is not a collective: all_reduce, all_gather, reduce_scatter or alltoall"
        ))
    })
}

/// Why a flag's value is not one it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ValueError(pub(crate) String);

fn fraction(value: &str) -> Result<f64, ValueError> {
    match value.parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
        _ => Err(ValueError(format!("{value:?} is not a fraction in (0, 1]"))),
    }
}

#[derive(Debug, Args)]
pub(crate) struct RollbackArgs {
    /// The cluster description (docs/cluster-yaml.md).
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_CLUSTER_CONFIG")]
    pub(crate) cluster_config: PathBuf,

    /// Roll back under `DIR/<host>/` (what `init --output-dir DIR` wrote).
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_OUTPUT_DIR")]
    pub(crate) output_dir: Option<PathBuf>,

    /// Undo this run (its id, as `init` and `status` show it), and only if it is the last one
    /// recorded. Without it, the last run is undone once: a second `rollback` undoes nothing
    /// older unless named here.
    #[arg(long, value_name = "ID")]
    pub(crate) run: Option<String>,

    #[command(flatten)]
    pub(crate) select: NodesArgs,

    /// One row per node and file (identical nodes are folded under a host range by default).
    #[arg(long)]
    pub(crate) per_node: bool,

    #[command(flatten)]
    pub(crate) reach: ReachArgs,
}

#[derive(Debug, Args)]
pub(crate) struct NodeArgs {
    /// What to do: probe, write, rollback, irq-pin, doctor (the request is JSON on stdin).
    pub(crate) kind: String,
    /// Root of the paths written (`/` on a node; tests point a pretend node elsewhere).
    #[arg(long, default_value = "/", env = "TOPO_TUNE_WRITE_ROOT")]
    pub(crate) root: PathBuf,
    /// Read /sys and /proc under DIR instead of /.
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_FSROOT")]
    pub(crate) fsroot: Option<PathBuf>,
    /// Describe the machine from an hwloc export instead.
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_FROM_HWLOC_XML")]
    pub(crate) from_hwloc_xml: Option<PathBuf>,
}

/// A tuning rolled out with the files (`init`, `apply`).
#[derive(Debug, Args)]
pub(crate) struct TuningArgs {
    /// Roll out this tuning (`topo-tune tune --output-dir DIR` wrote DIR; its tuning.json is
    /// fine too): its rules file to /etc/nccl/nccl-tuner.csv, topo-tune's tuner plugin beside
    /// the state directory, both named in the drop-in, its kept globals with their evidence —
    /// on the nodes of the hardware and NCCL it was measured on.
    #[arg(long, value_name = "DIR|FILE", env = "TOPO_TUNE_TUNING")]
    pub(crate) tuning: Option<PathBuf>,

    /// topo-tune's NCCL tuner plugin the tuning's rules are read by (default:
    /// libnccl_tuner_topo_tune.so beside this binary).
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_TUNER_PLUGIN")]
    pub(crate) tuner_plugin: Option<PathBuf>,
}

/// Which of the cluster's nodes a command works on: declared once, for every command that
/// takes `--nodes` (`init`, `rollback`, `status`, `doctor`, `irq-pin`, `diagnose`).
#[derive(Debug, Args)]
pub(crate) struct NodesArgs {
    /// Only these nodes: terms joined by commas — a rack name or range (`rack-[1-2]`),
    /// `KEY=VALUE` on a label, hosts (`gpu[001-016]`), `all`; `!TERM` leaves a term's nodes out
    /// (`rack-1,!gpu007`; every other node: `all,!gpu007`). The grammar of `apply --canary`.
    /// Empty is refused, never "every node". Default: TOPO_TUNE_NODES where the command works on
    /// a cluster (set but empty: refused too), else every node.
    #[arg(long, value_name = "SEL")]
    pub(crate) nodes: Option<String>,
}

/// How nodes are reached (every command that fans out over a cluster).
#[derive(Debug, Args)]
pub(crate) struct ReachArgs {
    /// Nodes worked on at once, 1 to 1024 (default: ssh.forks, else 64).
    #[arg(long, value_name = "N", env = "TOPO_TUNE_FORKS",
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_FORKS as u64))]
    pub(crate) forks: Option<usize>,

    /// Stop starting new nodes once more than N have failed (the rest are reported skipped).
    #[arg(long, value_name = "N", env = "TOPO_TUNE_MAX_FAIL")]
    pub(crate) max_fail: Option<usize>,

    /// Seconds to wait for an ssh connection, 1 to 600 (default: ssh.connect_timeout, else 10).
    #[arg(long, value_name = "S", env = "TOPO_TUNE_CONNECT_TIMEOUT",
          value_parser = RangedU64ValueParser::<u64>::new().range(1..=600))]
    pub(crate) connect_timeout: Option<u64>,

    /// Seconds any one remote command may run, 1 to 86400 (default: ssh.command_timeout, else 120).
    #[arg(long, value_name = "S", env = "TOPO_TUNE_COMMAND_TIMEOUT",
          value_parser = RangedU64ValueParser::<u64>::new().range(1..=86_400))]
    pub(crate) command_timeout: Option<u64>,

    /// The topo-tune binary to copy to nodes (default: this one).
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_REMOTE_BINARY")]
    pub(crate) remote_binary: Option<PathBuf>,

    /// Delay every simulated node by this many milliseconds (benchmarks of the fan-out).
    #[arg(long, value_name = "MS", hide = true, default_value_t = 0,
          value_parser = RangedU64ValueParser::<u64>::new().range(0..=60_000))]
    pub(crate) simulate_latency_ms: u64,
}

/// Where snapshots come from and how nodes are reached (shared by `init` and `plan`).
#[derive(Debug, Args)]
pub(crate) struct GatherArgs {
    /// The cluster description (docs/cluster-yaml.md).
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_CLUSTER_CONFIG")]
    pub(crate) cluster_config: PathBuf,

    /// The fabric as `topo-tune fabric --output-dir` discovered it (DIR/fabric.yaml): its
    /// `fabric:` section replaces cluster.yaml's, its hosts' racks the typed ones.
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_FABRIC")]
    pub(crate) fabric: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) nodes: NodeSourceArgs,
}

/// Where a cluster's facts come from besides cluster.yaml: earlier probes, or the nodes.
#[derive(Debug, Args)]
pub(crate) struct NodeSourceArgs {
    /// Take snapshots from `DIR/<host>.json` (or `DIR/<host>/snapshot.json`, e.g. an earlier
    /// `init --collect-only --output-dir`) instead of reaching the nodes (see examples/).
    #[arg(long, value_name = "DIR", env = "TOPO_TUNE_FROM_PROBES")]
    pub(crate) from_probes: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) reach: ReachArgs,
}

/// `--output json` as the user asked for it, read without clap (for usage errors, where clap
/// could not parse the line).
pub(crate) fn wants_json(args: &[std::ffi::OsString]) -> bool {
    let mut it = args.iter().filter_map(|a| a.to_str());
    while let Some(a) = it.next() {
        if a == "--output=json" || (a == "--output" && it.next() == Some("json")) {
            return true;
        }
    }
    std::env::var("TOPO_TUNE_OUTPUT").is_ok_and(|v| v == "json")
}

/// The cluster a node-local command (`irq-pin`, `doctor`) acts on: `--cluster-config`, or
/// with `--cluster` the file `TOPO_TUNE_CLUSTER_CONFIG` names; `None`: this machine only.
pub(crate) fn local_command_scope(
    cluster_config: Option<&std::path::Path>,
    cluster: bool,
    env_value: Option<std::ffi::OsString>,
) -> Result<Option<PathBuf>, ValueError> {
    match (cluster_config, cluster) {
        (Some(p), _) => Ok(Some(p.to_path_buf())),
        (None, false) => Ok(None),
        (None, true) => env_value
            .filter(|v| !v.is_empty())
            .map(|v| Some(PathBuf::from(v)))
            .ok_or_else(|| {
                ValueError(
                    "--cluster needs TOPO_TUNE_CLUSTER_CONFIG set to a cluster.yaml (or give --cluster-config FILE)"
                        .into(),
                )
            }),
    }
}

/// A boolean flag's environment variable as Ansible and shells write it: `1/0`, `yes/no`,
/// `true/false`, `on/off` in any case; empty is unset (false). Anything else is an error,
/// never a guess.
fn env_bool(value: &str) -> Result<bool, ValueError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "no" | "n" | "false" | "f" | "off" => Ok(false),
        "1" | "yes" | "y" | "true" | "t" | "on" => Ok(true),
        other => Err(ValueError(format!(
            "{other:?} is not a boolean (1/0, yes/no, true/false, on/off)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let p = |t: &str| t.parse::<ByteSize>().map(|b| b.0);
        assert_eq!(p("1G"), Ok(1 << 30));
        assert_eq!(p("256M"), Ok(256 << 20));
        assert_eq!(p("8"), Ok(8));
        assert_eq!(p("4GiB"), Ok(4 << 30));
        assert!(p("1X").is_err());
        assert!(p("G").is_err());
        assert!(p("0").is_err());
        assert!(p("99999999999T").is_err());
    }

    #[test]
    fn the_interface_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
