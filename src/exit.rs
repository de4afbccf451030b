//! Exit codes: the one place they are defined. Documented in docs/exit-codes.md; scripts and
//! Ansible rely on them, so a code never changes meaning.

/// Success; for read-only commands, "done and nothing is wrong".
pub const OK: i32 = 0;
/// An unexpected failure inside topo-tune (a bug): report it.
pub const FAILURE: i32 = 1;
/// The command line is wrong (clap's code for usage errors).
pub const USAGE: i32 = 2;
/// `--check` found changes that would be made (reserved for the writing commands).
pub const CHANGES_PENDING: i32 = 3;
/// Some nodes failed while others succeeded (reserved for cluster-wide commands).
pub const PARTIAL_FAILURE: i32 = 4;
/// `doctor` found at least one failing check.
pub const CHECKS_FAILED: i32 = 5;
/// `status`: drift (a file topo-tune wrote was changed or removed), a staged candidate, or an
/// interrupted run on some node.
pub const DRIFT: i32 = 6;
/// `apply`: a wave's measurement said no (a loss, a failed benchmark, no gain where one was
/// required): that wave was rolled back; earlier waves stay promoted.
pub const HALTED: i32 = 7;
/// A cluster run in which no node succeeded: every node failed or was skipped, so nothing was
/// done anywhere (some nodes failing while others succeed is 4).
pub const ALL_FAILED: i32 = 8;
/// The subcommand exists in the interface but is not built yet: nothing was done.
pub const NOT_IMPLEMENTED: i32 = 10;
/// Input data is malformed (XML, JSON, a /sys tree that is not one).
pub const DATA_ERROR: i32 = 65;
/// An input file or directory does not exist.
pub const NO_INPUT: i32 = 66;
/// A required system library or service is unavailable (e.g. hwloc cannot discover).
pub const UNAVAILABLE: i32 = 69;
/// Reading or writing failed at the operating-system level.
pub const IO_ERROR: i32 = 74;
/// Another topo-tune run holds the lock on the files this one would write: try again.
pub const TEMP_FAILURE: i32 = 75;
/// SIGINT (Ctrl-C) stopped a run on the nodes: 128 + 2, as shells report it.
pub const INTERRUPTED: i32 = 130;
/// SIGTERM stopped a run on the nodes: 128 + 15.
pub const TERMINATED: i32 = 143;
/// The command needs privileges it does not have (e.g. moving interrupts as non-root).
pub const NO_PERMISSION: i32 = 77;

/// Every code with its meaning, in order (used by `docs/exit-codes.md` tests).
pub const ALL: &[(i32, &str)] = &[
    (OK, "success"),
    (FAILURE, "unexpected internal failure"),
    (USAGE, "command-line usage error"),
    (CHANGES_PENDING, "--check: changes pending"),
    (PARTIAL_FAILURE, "some nodes failed"),
    (CHECKS_FAILED, "doctor found failing checks"),
    (DRIFT, "status: drift or pending work"),
    (HALTED, "apply: halted and rolled back"),
    (ALL_FAILED, "no node succeeded"),
    (NOT_IMPLEMENTED, "subcommand not implemented yet"),
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
pub fn for_nodes(nodes: usize, ok: usize) -> Option<i32> {
    match (nodes, ok) {
        (n, ok) if ok >= n => None,
        (_, 0) => Some(ALL_FAILED),
        _ => Some(PARTIAL_FAILURE),
    }
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
}
