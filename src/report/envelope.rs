//! The one JSON contract: every command's `--output json` is an [`Envelope`] — `command`,
//! `changed`, `failed`, `msg`, `exit_code`, `nodes` (one row per node, a failure read the
//! same way everywhere: `error: {kind, message}`) — plus the command's own payload at the
//! top level. Schemas: docs/schema/. Built from typed structs only.

use crate::model::{Failure, NodeOutcome};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub(crate) struct Envelope<P: Serialize, N: Serialize> {
    pub(crate) command: &'static str,
    pub(crate) changed: bool,
    pub(crate) failed: bool,
    pub(crate) msg: String,
    pub(crate) exit_code: crate::exit::ExitCode,
    pub(crate) nodes: Vec<NodeRow<N>>,
    #[serde(flatten)]
    pub(crate) payload: P,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum NodeStatus {
    Ok,
    Failed,
    /// Not acted on, with the reason in `error` (a simulated node, `--max-fail` spent).
    Skipped,
    /// A dry run: would be acted on, was not contacted.
    Pending,
}

#[derive(Debug, Serialize)]
pub(crate) struct NodeRow<N: Serialize> {
    pub(crate) host: String,
    pub(crate) status: NodeStatus,
    pub(crate) changed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<Failure>,
    #[serde(flatten)]
    pub(crate) detail: N,
}

impl<N: Serialize> NodeRow<N> {
    pub(crate) fn ok(host: &str, changed: bool, detail: N) -> Self {
        NodeRow {
            host: host.to_string(),
            status: NodeStatus::Ok,
            changed,
            error: None,
            detail,
        }
    }

    /// A failed (or, for skip-kinds, skipped) node.
    pub(crate) fn failed(host: &str, error: Failure, detail: N) -> Self {
        use crate::model::FailureKind;
        let status = match error.kind {
            FailureKind::Skipped | FailureKind::Simulated => NodeStatus::Skipped,
            _ => NodeStatus::Failed,
        };
        NodeRow {
            host: host.to_string(),
            status,
            changed: false,
            error: Some(error),
            detail,
        }
    }

    /// A row from a node's outcome: its answer becomes `detail` (and says whether it changed
    /// anything), a failure becomes `error` with `detail` from `empty`.
    pub(crate) fn from_outcome<T>(
        o: &NodeOutcome<T>,
        ok: impl FnOnce(&T) -> (bool, N),
        empty: impl FnOnce() -> N,
    ) -> Self {
        match &o.result {
            Ok(a) => {
                let (changed, detail) = ok(a);
                NodeRow::ok(&o.host, changed, detail)
            }
            Err(f) => NodeRow::failed(&o.host, f.clone(), empty()),
        }
    }
}

/// Node rows with nothing of their own.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct NoDetail {}

/// The top-level error, in the same envelope (also for usage errors under `--output json`).
#[derive(Debug, Serialize)]
pub(crate) struct ErrorPayload {
    pub(crate) error: ErrorDetail,
}

#[derive(Debug, Serialize)]
pub(crate) struct ErrorDetail {
    pub(crate) kind: &'static str,
    pub(crate) message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hint: Option<String>,
}

/// Counts of a fan-out, for messages and summaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Summary {
    pub(crate) nodes: usize,
    pub(crate) ok: usize,
    pub(crate) failed: usize,
    pub(crate) skipped: usize,
    pub(crate) changed: usize,
}

impl Summary {
    pub(crate) fn of<N: Serialize>(rows: &[NodeRow<N>]) -> Summary {
        let count = |s: NodeStatus| rows.iter().filter(|r| r.status == s).count();
        Summary {
            nodes: rows.len(),
            ok: count(NodeStatus::Ok),
            failed: count(NodeStatus::Failed),
            skipped: count(NodeStatus::Skipped),
            changed: rows.iter().filter(|r| r.changed).count(),
        }
    }

    /// 8 when no node succeeded, 4 when some did not, `None` when all did.
    pub(crate) fn failure_exit(&self) -> Option<crate::exit::ExitCode> {
        crate::exit::for_nodes(self.nodes, self.ok)
    }

    /// The same, where a node that exists only on paper is not one to act on (`doctor`,
    /// `irq-pin`: nothing to check or pin there, so it is neither a success nor a failure).
    pub(crate) fn failure_exit_beside_paper<N: Serialize>(&self, rows: &[NodeRow<N>]) -> Option<crate::exit::ExitCode> {
        let paper = rows.iter().filter(|r| r.on_paper()).count();
        crate::exit::for_nodes(self.nodes - paper, self.ok)
    }
}

impl<N: Serialize> NodeRow<N> {
    /// Skipped because the node is simulated.
    pub(crate) fn on_paper(&self) -> bool {
        self.error
            .as_ref()
            .is_some_and(|e| e.kind == crate::model::FailureKind::Simulated)
    }
}

/// Pretty JSON with a final newline; a value that cannot be serialised is an error, never an
/// empty document.
pub(crate) fn to_json<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(value).map(|t| t + "\n")
}
