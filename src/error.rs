//! The library's top-level error: every module's typed error as a variant. Each module's error
//! classifies itself (`exit::Classify`: its exit code, a stable kind for JSON, a hint); this
//! enum only adds the failures that belong to no module.

use crate::apply::writer::WriteError;
use crate::canary::state::StateError;
use crate::config::ConfigError;
use crate::exit::{self, Class, Classify, ExitCode};
use crate::irq::IrqError;
use crate::model::Failure;
use crate::node::ServeError;
use crate::probe::ProbeError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Irq(#[from] IrqError),
    #[error("{path}: {message}")]
    PlanFile { path: String, message: String },
    /// `--tuning` that cannot be obeyed (unreadable, edited, not what `tune` writes).
    #[error("{path}: {message}")]
    TuningFile { path: String, message: String },
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
    Serve(#[from] ServeError),
    /// A rollout record (`apply`, `status`): missing, unreadable, or its lock held.
    #[error(transparent)]
    State(#[from] StateError),
    /// An error of the layer above (`flow`: a trace, hostfile or sweep `diagnose --trace`
    /// cannot use), which classifies itself; boxed so that this enum names no module above it.
    #[error("{0}")]
    Flow(Box<dyn FlowError>),
}

/// What an error of the application layer is: an error that says its own exit code.
pub(crate) trait FlowError: std::error::Error + Classify + Send + Sync {}

impl<E: std::error::Error + Classify + Send + Sync> FlowError for E {}

impl Classify for Error {
    fn classify(&self) -> Class {
        match self {
            Error::Probe(e) => e.classify(),
            Error::Config(e) => e.classify(),
            Error::Write(e) => e.classify(),
            Error::Irq(e) => e.classify(),
            Error::Serve(e) => e.classify(),
            Error::State(e) => e.classify(),
            Error::Flow(e) => e.classify(),
            Error::Usage(_) => Class::new(exit::USAGE, "usage"),
            Error::PlanFile { .. } => Class::new(exit::DATA_ERROR, "plan_file")
                .hint("make the plan with this version: `topo-tune plan --output-dir DIR`"),
            Error::TuningFile { .. } => Class::new(exit::DATA_ERROR, "tuning_file")
                .hint("give the directory `topo-tune tune --output-dir DIR` wrote, as it wrote it"),
            Error::Reach(_) => Class::new(exit::UNAVAILABLE, "reach"),
            Error::Interrupted { signal } => Class::new(ExitCode::stopped_by(*signal), "interrupted"),
            Error::Output(_) | Error::Io { .. } => Class::new(exit::IO_ERROR, "io"),
            Error::Serialize(_) => {
                Class::new(exit::FAILURE, "internal").hint("this is a bug in topo-tune: please report it")
            }
        }
    }
}

impl Error {
    pub(crate) fn exit_code(&self) -> ExitCode {
        self.classify().code
    }

    /// A stable name for JSON (`error.kind`).
    pub(crate) fn kind(&self) -> &'static str {
        self.classify().kind
    }

    /// A next step for the operator, where there is an obvious one.
    pub(crate) fn hint(&self) -> Option<String> {
        self.classify().hint
    }
}
