//! Exit codes: the one place they are defined, and how an error says which one it ends a
//! command with ([`Classify`]). Documented in docs/exit-codes.md; scripts and Ansible rely on
//! them, so a code never changes meaning. A leaf: every module's error may classify itself.

use serde::Serialize;

/// A process exit code with a documented meaning (shown as its number in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ExitCode(i32);

impl ExitCode {
    /// The number the process exits with.
    pub const fn code(self) -> i32 {
        self.0
    }

    /// A signal that stopped a run cleanly: 128 + its number, as shells report it.
    pub fn stopped_by(signal: i32) -> ExitCode {
        match signal {
            2 => INTERRUPTED,
            15 => TERMINATED,
            _ => FAILURE,
        }
    }
}

impl std::fmt::Display for ExitCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Success; for read-only commands, "done and nothing is wrong".
pub const OK: ExitCode = ExitCode(0);
/// An unexpected failure inside topo-tune (a bug): report it.
pub const FAILURE: ExitCode = ExitCode(1);
/// The command line is wrong (clap's code for usage errors).
pub const USAGE: ExitCode = ExitCode(2);
/// `--check` found changes that would be made (reserved for the writing commands).
pub const CHANGES_PENDING: ExitCode = ExitCode(3);
/// Some nodes failed while others succeeded (reserved for cluster-wide commands).
pub const PARTIAL_FAILURE: ExitCode = ExitCode(4);
/// `doctor` found at least one failing check.
pub const CHECKS_FAILED: ExitCode = ExitCode(5);
/// `status`: drift (a file topo-tune wrote was changed or removed), a staged candidate, or an
/// interrupted run on some node.
pub const DRIFT: ExitCode = ExitCode(6);
/// `apply`: a wave's measurement said no (a loss, a failed benchmark, no gain where one was
/// required): that wave was rolled back; earlier waves stay promoted.
pub const HALTED: ExitCode = ExitCode(7);
/// A cluster run in which no node succeeded: every node failed or was skipped, so nothing was
/// done anywhere (some nodes failing while others succeed is 4).
pub const ALL_FAILED: ExitCode = ExitCode(8);
/// Input data is malformed (XML, JSON, a /sys tree that is not one).
pub const DATA_ERROR: ExitCode = ExitCode(65);
/// An input file or directory does not exist.
pub const NO_INPUT: ExitCode = ExitCode(66);
/// A required system library or service is unavailable (e.g. hwloc cannot discover).
pub const UNAVAILABLE: ExitCode = ExitCode(69);
/// Reading or writing failed at the operating-system level.
pub const IO_ERROR: ExitCode = ExitCode(74);
/// Another topo-tune run holds the lock on the files this one would write: try again.
pub const TEMP_FAILURE: ExitCode = ExitCode(75);
/// SIGINT (Ctrl-C) stopped a run on the nodes: 128 + 2, as shells report it.
pub const INTERRUPTED: ExitCode = ExitCode(130);
/// SIGTERM stopped a run on the nodes: 128 + 15.
pub const TERMINATED: ExitCode = ExitCode(143);
/// The command needs privileges it does not have (e.g. moving interrupts as non-root).
pub const NO_PERMISSION: ExitCode = ExitCode(77);

/// Every code with its meaning, in order (used by `docs/exit-codes.md` tests).
pub const ALL: &[(ExitCode, &str)] = &[
    (OK, "success"),
    (FAILURE, "unexpected internal failure"),
    (USAGE, "command-line usage error"),
    (CHANGES_PENDING, "--check: changes pending"),
    (PARTIAL_FAILURE, "some nodes failed"),
    (CHECKS_FAILED, "doctor found failing checks"),
    (DRIFT, "status: drift or pending work"),
    (HALTED, "apply: halted and rolled back"),
    (ALL_FAILED, "no node succeeded"),
    (DATA_ERROR, "malformed input data"),
    (NO_INPUT, "input file or directory missing"),
    (UNAVAILABLE, "required library or service unavailable"),
    (IO_ERROR, "operating-system I/O error"),
    (TEMP_FAILURE, "another run holds the lock: try again"),
    (NO_PERMISSION, "needs root"),
    (INTERRUPTED, "stopped by SIGINT, cleanly"),
    (TERMINATED, "stopped by SIGTERM, cleanly"),
];

/// A cluster run's code from how many nodes it was to act on and how many succeeded: `None`
/// when all did (the command then says 0, 3, 5 …), else [`ALL_FAILED`] or [`PARTIAL_FAILURE`].
pub fn for_nodes(nodes: usize, ok: usize) -> Option<ExitCode> {
    match (nodes, ok) {
        (n, ok) if ok >= n => None,
        (_, 0) => Some(ALL_FAILED),
        _ => Some(PARTIAL_FAILURE),
    }
}

/// What an error says of itself at the edge: the code the command exits with, a stable kind
/// for JSON (`error.kind`), and the next step when there is an obvious one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    pub code: ExitCode,
    pub kind: &'static str,
    pub hint: Option<String>,
}

impl Class {
    pub fn new(code: ExitCode, kind: &'static str) -> Class {
        Class { code, kind, hint: None }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Class {
        self.hint = Some(hint.into());
        self
    }
}

/// Implemented by every module's error: it decides its own class, so the top-level error
/// never matches into another module's variants.
pub trait Classify {
    fn classify(&self) -> Class;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_some_or_all_nodes_failing_are_three_codes() {
        assert_eq!(for_nodes(0, 0), None, "nothing to act on is not a failure");
        assert_eq!(for_nodes(3, 3), None);
        assert_eq!(for_nodes(3, 2), Some(PARTIAL_FAILURE));
        assert_eq!(for_nodes(3, 0), Some(ALL_FAILED));
        assert_eq!(for_nodes(1, 0), Some(ALL_FAILED));
    }

    #[test]
    fn a_code_is_its_number_in_json_and_signals_are_128_plus() {
        assert_eq!(serde_json::to_string(&DATA_ERROR).unwrap(), "65");
        assert_eq!(ExitCode::stopped_by(2), INTERRUPTED);
        assert_eq!(ExitCode::stopped_by(15).code(), 143);
    }
}
