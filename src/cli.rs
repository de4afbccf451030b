//! Command-line interface (clap). Doc comments here are the `--help` text. Every option that
//! sets policy can also come from a `TOPO_TUNE_*` environment variable (for Ansible's
//! `environment:`).

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Make NCCL fast on the hardware it really runs on: probe GPU/NIC topology, solve ring order
/// and NCCL settings, write the files NCCL reads, roll them out behind a measured canary.
#[derive(Debug, Parser)]
#[command(name = "topo-tune", version, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    /// Output format: `human` (tables) or `json` (one JSON document on stdout).
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Human, env = "TOPO_TUNE_OUTPUT")]
    pub output: OutputFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Human,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Describe one node: GPUs, NVLink, PCIe tree, NICs, NUMA, IRQs (read-only).
    Probe(ProbeArgs),
    /// Probe every node of a cluster, solve the plan and write NCCL's files [not implemented yet].
    Init(PendingArgs),
    /// Solve ring order and NCCL settings from snapshots [not implemented yet].
    Plan(PendingArgs),
    /// Roll a plan out rack by rack behind a measured canary [not implemented yet].
    Apply(PendingArgs),
    /// Pin mlx5 NIC interrupts to CPUs local to the NIC [not implemented yet].
    IrqPin(PendingArgs),
    /// Check the host basics that make NCCL slow [not implemented yet].
    Doctor(PendingArgs),
    /// Show what topo-tune has applied where [not implemented yet].
    Status(PendingArgs),
    /// Restore the files topo-tune replaced [not implemented yet].
    Rollback(PendingArgs),
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Read /sys and /proc under DIR instead of / (a captured or hand-built tree).
    #[arg(
        long,
        value_name = "DIR",
        env = "TOPO_TUNE_FSROOT",
        conflicts_with = "from_hwloc_xml"
    )]
    pub fsroot: Option<PathBuf>,

    /// Build the snapshot from an hwloc XML export (`lstopo --whole-io --of xml FILE`).
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_FROM_HWLOC_XML")]
    pub from_hwloc_xml: Option<PathBuf>,

    /// Print the GPU/NIC path matrix (`nvidia-smi topo -m` classes) instead of the summary;
    /// with `--output json`, add it to the snapshot as `matrix`.
    #[arg(long)]
    pub matrix: bool,

    /// Use recorded NVML answers (JSON) instead of the NVIDIA driver.
    #[arg(long, value_name = "FILE", env = "TOPO_TUNE_NVML_FIXTURE", hide = true)]
    pub nvml_fixture: Option<PathBuf>,
}

/// Arguments of commands that are declared but not built yet: accepted, so that the answer is
/// "not implemented" rather than a usage error about flags that will exist.
#[derive(Debug, Args)]
pub struct PendingArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<String>,
}
