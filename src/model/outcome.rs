//! What became of one node's work, in words every command shares: its answer or its typed
//! failure, how it was reached, and the stable failure kinds (`nodes[].error.kind` in every
//! command's JSON). Plain data.

use serde::{Deserialize, Serialize};

/// Why a node produced no answer. Stable snake_case names: they appear in every command's
/// JSON as `nodes[].error.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Nothing listens on the ssh port.
    ConnectRefused,
    /// No answer within the connect timeout.
    ConnectTimeout,
    /// The name does not resolve.
    UnknownHost,
    /// The host key is not in known_hosts (strict checking: never accepted blindly).
    HostKeyUnknown,
    /// The host key differs from known_hosts: refused before anything was sent.
    HostKeyChanged,
    /// The server refused our credentials.
    AuthRejected,
    /// Other ssh connection failure.
    SshFailed,
    /// A remote command ran past the command timeout.
    CommandTimeout,
    /// The node lacks a library the probe needs (libhwloc, libudev, glibc).
    MissingLibrary,
    /// The probe binary cannot run there (architecture).
    WrongPlatform,
    /// The probe on the node failed.
    ProbeFailed,
    /// The answer is not what the protocol says.
    BadAnswer,
    /// The answer is larger than the limit.
    AnswerTooLarge,
    /// Copying the binary failed or did not verify.
    DeployFailed,
    /// The simulated node's source could not be read.
    SimulationFailed,
    /// A snapshot from `--from-probes` is missing or malformed.
    ProbeFileMissing,
    /// Not tried: the `--max-fail` budget was spent.
    Skipped,
    /// A simulated node exists only on paper: there is nothing to write or check.
    Simulated,
    /// The plan or the rules give this node nothing to write (not probed, a refused setting).
    NotPlanned,
    /// Writing or rolling back the node's files failed.
    WriteFailed,
    /// The node's own files stop the write (e.g. a foreign nccl.conf line NCCL would misread).
    InvalidInput,
    /// No earlier run to roll back.
    NothingToRollBack,
    /// Another topo-tune run holds the node's lock (its holder is named).
    Locked,
    /// Moving interrupts failed or is impossible with the reserved CPUs.
    IrqFailed,
    /// The node-side command needs root.
    NotRoot,
    /// The canary's benchmark could not start on the node (`apply`).
    BenchmarkFailed,
    /// A bug in topo-tune.
    Internal,
}

impl FailureKind {
    /// The name used in JSON and tables.
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// A node's failure: what kind, and a message an operator can act on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

/// The most of a node's failure message that is kept (a node's text is bounded like every
/// other answer).
pub(crate) const MAX_FAILURE_TEXT: usize = 4096;

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
        }
    }

    /// The failure with its message cut to [`MAX_FAILURE_TEXT`] bytes (at a character).
    pub fn bounded(mut self) -> Self {
        if self.message.len() > MAX_FAILURE_TEXT {
            let mut end = MAX_FAILURE_TEXT;
            while !self.message.is_char_boundary(end) {
                end -= 1;
            }
            self.message.truncate(end);
            self.message.push_str(" … (cut)");
        }
        self
    }
}

/// What happened to the topo-tune binary on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Deploy {
    /// Copied this run (checksum verified).
    Uploaded,
    /// Already there with the right checksum.
    Reused,
    /// No binary needed (local, simulated, from files).
    NotNeeded,
}

/// One node's result and how it was reached.
#[derive(Debug, Clone)]
pub(crate) struct NodeOutcome<T> {
    pub host: String,
    pub transport: &'static str,
    pub duration: std::time::Duration,
    /// Connection attempts made (a refused or timed-out connect is retried once).
    pub attempts: u32,
    pub deploy: Option<Deploy>,
    pub result: Result<T, Failure>,
}

impl<T> NodeOutcome<T> {
    /// The same outcome with its answer turned into another (a failure stays as it is).
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> NodeOutcome<U> {
        NodeOutcome {
            host: self.host,
            transport: self.transport,
            duration: self.duration,
            attempts: self.attempts,
            deploy: self.deploy,
            result: self.result.map(f),
        }
    }
}

/// Why an answer from a node (or a file read on its behalf) is refused at the trust
/// boundary: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadAnswer(pub String);

/// Why an input topo-tune reads back — a plan, a rollout record, a benchmark section — is not
/// obeyed: what it holds that topo-tune would not have written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refusal(pub String);
