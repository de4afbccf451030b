//! The library's top-level error: what went wrong, a hint for what to do, and its exit code.

use crate::exit;
use crate::probe::hwloc::HwlocError;
use crate::probe::nvml::DriverError;
use crate::probe::ProbeError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error("`topo-tune {command}` is not implemented yet in this version ({version}); nothing was done")]
    NotImplemented { command: String, version: &'static str },
    #[error("writing output: {0}")]
    Output(#[from] std::io::Error),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Irq(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Probe(p) => match p {
                ProbeError::FsrootMissing(_) | ProbeError::InputMissing(_) => exit::NO_INPUT,
                ProbeError::FsrootNotSysfs { .. } => exit::DATA_ERROR,
                ProbeError::Hwloc(HwlocError::BadXml { .. }) => exit::DATA_ERROR,
                ProbeError::Hwloc(HwlocError::Discovery(_)) => exit::UNAVAILABLE,
                ProbeError::Driver(DriverError::Fixture { .. }) => exit::DATA_ERROR,
                ProbeError::Driver(_) => exit::UNAVAILABLE,
            },
            Error::NotImplemented { .. } => exit::NOT_IMPLEMENTED,
            Error::Output(_) | Error::Io { .. } => exit::IO_ERROR,
            Error::Config(crate::config::ConfigError::Read { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                exit::NO_INPUT
            }
            Error::Config(crate::config::ConfigError::Read { .. }) => exit::IO_ERROR,
            Error::Config(_) => exit::DATA_ERROR,
            Error::Usage(_) => exit::USAGE,
            Error::Irq(_) => exit::DATA_ERROR,
        }
    }

    /// A next step for the operator, where there is an obvious one.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Probe(ProbeError::FsrootNotSysfs { .. }) => {
                Some("--fsroot takes a directory holding sys/ and proc/ laid out like / (see docs/probe.md)".into())
            }
            Error::Probe(ProbeError::Hwloc(HwlocError::BadXml { .. })) => {
                Some("make the file with hwloc 2.x: `lstopo --whole-io --of xml node.xml`".into())
            }
            Error::Probe(ProbeError::Hwloc(HwlocError::Discovery(_))) => {
                Some("topo-tune needs libhwloc 2.x (Debian/Ubuntu: libhwloc15; RHEL: hwloc-libs)".into())
            }
            Error::NotImplemented { .. } => Some("see CHANGELOG.md for what this version can do".into()),
            _ => None,
        }
    }
}
