//! The library's top-level error: every module's typed error as a variant, each with its exit
//! code (docs/exit-codes.md), a stable kind for JSON, and a hint for what to do.

use crate::apply::tree::TreeError;
use crate::apply::writer::WriteError;
use crate::canary::state::StateError;
use crate::config::ConfigError;
use crate::exit;
use crate::irq::IrqError;
use crate::model::Failure;
use crate::node::ServeError;
use crate::probe::hwloc::HwlocError;
use crate::probe::nvml::DriverError;
use crate::probe::ProbeError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Usage(String),
    #[error("`topo-tune {command}` is not implemented yet in this version ({version}); nothing was done")]
    NotImplemented { command: String, version: &'static str },
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Irq(#[from] IrqError),
    #[error("{path}: {message}")]
    PlanFile { path: String, message: String },
    /// The fan-out could not start at all (no runtime, binary unreadable, no control dir).
    #[error("{0}")]
    Reach(Failure),
    /// SIGINT or SIGTERM during a run on the nodes: it was stopped cleanly.
    #[error("interrupted by signal {signal}: node work cancelled, ssh masters closed, nothing left behind")]
    Interrupted { signal: i32 },
    #[error("writing output: {0}")]
    Output(#[from] std::io::Error),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("serialising the result: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error(transparent)]
    Serve(#[from] crate::node::ServeError),
    /// A rollout record (`apply`, `status`): missing, unreadable, or its lock held.
    #[error(transparent)]
    State(#[from] crate::canary::state::StateError),
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Probe(p) => probe_code(p),
            Error::NotImplemented { .. } => exit::NOT_IMPLEMENTED,
            Error::Output(_) | Error::Io { .. } => exit::IO_ERROR,
            Error::Config(ConfigError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                exit::NO_INPUT
            }
            Error::Config(ConfigError::Read { source, .. })
                if matches!(
                    source.kind(),
                    std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData
                ) =>
            {
                exit::DATA_ERROR
            }
            Error::Config(ConfigError::Read { .. }) => exit::IO_ERROR,
            Error::Config(_) | Error::PlanFile { .. } => exit::DATA_ERROR,
            Error::Usage(_) => exit::USAGE,
            Error::Write(WriteError::Tree(TreeError::Io { .. })) => exit::IO_ERROR,
            Error::Write(WriteError::Tree(TreeError::Locked { .. }) | WriteError::Staged { .. }) => exit::TEMP_FAILURE,
            Error::Write(_) => exit::DATA_ERROR,
            Error::Irq(IrqError::NotRoot) => exit::NO_PERMISSION,
            Error::Irq(IrqError::Probe(p)) => probe_code(p),
            Error::Irq(IrqError::Io { .. }) | Error::Irq(IrqError::Write(TreeError::Io { .. })) => exit::IO_ERROR,
            Error::Irq(IrqError::Write(TreeError::Locked { .. })) => exit::TEMP_FAILURE,
            Error::Irq(IrqError::Write(_)) | Error::Irq(IrqError::BadCpus { .. }) => exit::DATA_ERROR,
            Error::Irq(IrqError::Unsafe { .. }) => exit::FAILURE,
            Error::Irq(IrqError::NoLocalCpus { .. }) => exit::DATA_ERROR,
            Error::Irq(IrqError::ReservedOutside { .. }) => exit::USAGE,
            Error::Reach(_) => exit::UNAVAILABLE,
            Error::Interrupted { signal } => 128 + signal,
            Error::Serialize(_) | Error::Serve(ServeError::Report(_)) => exit::FAILURE,
            Error::Serve(ServeError::Stdin(_)) => exit::IO_ERROR,
            Error::Serve(_) => exit::USAGE,
            Error::State(StateError::Tree(TreeError::Locked { .. })) => exit::TEMP_FAILURE,
            Error::State(StateError::Tree(TreeError::Io { .. })) => exit::IO_ERROR,
            // A record that is a link, not a file, not text or too large is bad data.
            Error::State(StateError::Tree(_)) => exit::DATA_ERROR,
            Error::State(StateError::Unknown { .. }) => exit::NO_INPUT,
            Error::State(StateError::Invalid { .. }) => exit::DATA_ERROR,
        }
    }

    /// A stable name for JSON (`error.kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Probe(_) | Error::Irq(IrqError::Probe(_)) => "probe",
            Error::Config(_) => "config",
            Error::Usage(_) => "usage",
            Error::NotImplemented { .. } => "not_implemented",
            Error::Write(_) => "write",
            Error::Irq(IrqError::NotRoot) => "not_root",
            Error::Irq(_) => "irq",
            Error::PlanFile { .. } => "plan_file",
            Error::Reach(_) => "reach",
            Error::Interrupted { .. } => "interrupted",
            Error::Output(_) | Error::Io { .. } => "io",
            Error::Serialize(_) | Error::Serve(ServeError::Report(_)) => "internal",
            Error::Serve(_) => "usage",
            Error::State(_) => "state",
        }
    }

    /// A next step for the operator, where there is an obvious one.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Probe(p) | Error::Irq(IrqError::Probe(p)) => probe_hint(p),
            Error::NotImplemented { .. } => Some("see CHANGELOG.md for what this version can do".into()),
            Error::Irq(IrqError::NotRoot) => Some("run as root (sudo), or add --dry-run to see the plan".into()),
            Error::Irq(IrqError::NoLocalCpus { .. }) => {
                Some("reserve fewer CPUs (--reserve-cpus or cluster.yaml reserved_cpus)".into())
            }
            Error::Write(WriteError::Invalid { .. }) => Some("fix or remove the named line, then run again".into()),
            Error::PlanFile { .. } => Some("make the plan with this version: `topo-tune plan --output-dir DIR`".into()),
            Error::Serialize(_) => Some("this is a bug in topo-tune: please report it".into()),
            _ => None,
        }
    }
}

fn probe_code(p: &ProbeError) -> i32 {
    match p {
        ProbeError::FsrootMissing(_) | ProbeError::InputMissing(_) => exit::NO_INPUT,
        ProbeError::FsrootNotSysfs { .. } => exit::DATA_ERROR,
        ProbeError::Hwloc(HwlocError::BadXml { .. }) => exit::DATA_ERROR,
        ProbeError::Hwloc(HwlocError::Discovery(_)) => exit::UNAVAILABLE,
        ProbeError::Driver(DriverError::Fixture { .. }) => exit::DATA_ERROR,
        ProbeError::Driver(_) => exit::UNAVAILABLE,
        ProbeError::NcclTopo(_) | ProbeError::NotATopology { .. } | ProbeError::Unreadable { .. } => exit::DATA_ERROR,
    }
}

fn probe_hint(p: &ProbeError) -> Option<String> {
    match p {
        ProbeError::FsrootNotSysfs { .. } => {
            Some("--fsroot takes a directory holding sys/ and proc/ laid out like / (see docs/probe.md)".into())
        }
        ProbeError::Hwloc(HwlocError::BadXml { .. }) => {
            Some("make the file with hwloc 2.x: `lstopo --whole-io --of xml node.xml`".into())
        }
        ProbeError::Hwloc(HwlocError::Discovery(_)) => {
            Some("topo-tune needs libhwloc 2.x (Debian/Ubuntu: libhwloc15; RHEL: hwloc-libs)".into())
        }
        ProbeError::NotATopology { .. } => Some(
            "give an hwloc export (`lstopo --whole-io --of xml node.xml`) or an NCCL topology file (`NCCL_TOPO_DUMP_FILE=node.xml`)".into(),
        ),
        ProbeError::NcclTopo(_) => {
            Some("see docs/probe.md for what topo-tune reads from an NCCL topology file".into())
        }
        _ => None,
    }
}
