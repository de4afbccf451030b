//! Why `diagnose --trace` could not use its input — a trace, the hostfile, the sweep — and
//! what that means for the exit code: a missing file or directory is no input, one that cannot
//! be opened an I/O error, the rest bad data. The trace readers are pure and know nothing of
//! exit codes; the flow that opens the files classifies what went wrong.

use crate::exit::{self, Class};

/// Why `diagnose --trace` could not read its input; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TraceError {
    #[error("{file}: {source}")]
    Open { file: String, source: std::io::Error },
    #[error("{file}: {source}")]
    Read {
        file: String,
        source: crate::trace::read::ReadError,
    },
    #[error("{file}: which rank it is is unknown: `distributedInfo.rank` is missing and the file name has no rank (name it rank-N.json, or export it with torch.distributed initialised)")]
    NoRank { file: String },
    #[error("{first} and {second} both claim rank {rank}: one job's traces, one file per rank")]
    SameRank { rank: u32, first: String, second: String },
    /// Files that disagree on the job (world size, NCCL, process groups): two jobs' traces.
    #[error("{0} (give one job's ranks)")]
    TwoJobs(#[from] crate::trace::TwoJobs),
    #[error("{file}: the traces hold more than {limit} collectives together (diagnose keeps 64 bytes of each): read fewer ranks, or profile fewer steps")]
    TooManyCollectives { limit: usize, file: String },
    #[error("{path}: no .json or .json.gz trace in it")]
    NoTraces { path: String },
    #[error("more than {0} trace files: refused")]
    TooManyFiles(usize),
    #[error("{file}:{line}: {message}")]
    Hostfile { file: String, line: usize, message: String },
    #[error("{file}: not an nccl-tests sweep: {message}")]
    Sweep { file: String, message: String },
    /// `--nodes`: the benchmark ran on another set than the nodes asked for.
    #[error("the sweep on --nodes measured another set: {0}")]
    SweepElsewhere(String),
}

impl crate::exit::Classify for TraceError {
    fn classify(&self) -> Class {
        match self {
            TraceError::Open { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Class::new(exit::NO_INPUT, "trace")
            }
            TraceError::Open { .. } => Class::new(exit::IO_ERROR, "trace"),
            TraceError::NoTraces { .. } => Class::new(exit::NO_INPUT, "trace"),
            _ => Class::new(exit::DATA_ERROR, "trace").hint(
                "give one PyTorch profiler trace per rank (torch.profiler's export_chrome_trace, .json or .json.gz)",
            ),
        }
    }
}

impl From<TraceError> for crate::error::Error {
    fn from(e: TraceError) -> Self {
        crate::error::Error::Flow(Box::new(e))
    }
}
