//! `topo-tune status`: per node, what topo-tune wrote there (the manifest's last run and files
//! with their sha256), whether the live files still match, what is staged, and which rollout
//! wave the node belongs to with its last decision (from the state directory).

use super::reach::{on_nodes, write_jobs};
use super::{finish, Done};
use crate::canary::state::{self, Rollout, Store};
use crate::cli::{OutputFormat, StatusArgs};
use crate::config::Inventory;
use crate::error::Error;
use crate::exit;
use crate::node::calls::State;
use crate::report::envelope::{Envelope, NodeRow, NodeStatus, Summary};
use crate::report::status::{render_status, RolloutRef, StatusDetail, StatusPayload};

pub fn run(args: &StatusArgs, output: OutputFormat) -> Result<Done, Error> {
    let inv = Inventory::load(&args.cluster_config)?;
    let dir = args.state_dir.clone().unwrap_or_else(state::default_dir);
    let rollouts = if dir.is_dir() {
        Store::open(&dir)?.all()
    } else {
        Vec::new()
    };
    // This cluster's rollouts, newest first: paths compared once, not once per node.
    let canonical = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let cluster = canonical(&inv.path);
    let rollouts: Vec<&Rollout> = rollouts
        .iter()
        .rev()
        .filter(|r| canonical(&r.cluster_config) == cluster)
        .collect();
    let jobs = write_jobs(&inv, args.output_dir.as_deref(), |_| State {});
    let outcomes = on_nodes(&inv, &args.reach, output, jobs)?;
    let rows: Vec<NodeRow<StatusDetail>> = outcomes
        .iter()
        .map(|o| {
            let rollout = rollout_of(&rollouts, &o.host);
            NodeRow::from_outcome(
                o,
                |s| {
                    (
                        false,
                        StatusDetail {
                            drift: s.drift(),
                            state: Some(s.clone()),
                            rollout: rollout.clone(),
                        },
                    )
                },
                || StatusDetail {
                    rollout: rollout.clone(),
                    ..StatusDetail::default()
                },
            )
        })
        .collect();
    let summary = Summary::of(&rows);
    let unsettled = rows
        .iter()
        .filter(|r| {
            r.detail
                .state
                .as_ref()
                .is_some_and(|s| s.drift() || s.pending || s.staged.is_some())
        })
        .count();
    let exit_code = if summary.failed > 0 {
        exit::for_nodes(summary.nodes - summary.skipped, summary.ok).unwrap_or(exit::PARTIAL_FAILURE)
    } else if unsettled > 0 {
        exit::DRIFT
    } else {
        exit::OK
    };
    let msg = format!(
        "status: {} node(s): {} as recorded, {unsettled} with drift or pending work, {} unreadable, {} skipped",
        summary.nodes,
        rows.iter().filter(|r| r.status == NodeStatus::Ok).count() - unsettled,
        summary.failed,
        summary.skipped
    );
    let envelope = Envelope {
        command: "status",
        changed: false,
        failed: exit_code != exit::OK,
        msg,
        exit_code,
        nodes: rows,
        payload: StatusPayload {
            state_dir: dir.display().to_string(),
            summary,
        },
    };
    finish(output, envelope, render_status)
}

/// The latest of this cluster's rollouts (newest first) that has `host` in a wave.
fn rollout_of(rollouts: &[&Rollout], host: &str) -> Option<RolloutRef> {
    rollouts.iter().find_map(|r| {
        let (i, w) = r
            .waves
            .iter()
            .enumerate()
            .find(|(_, w)| w.hosts.iter().any(|h| h == host))?;
        Some(RolloutRef {
            id: r.id.clone(),
            status: r.status,
            wave: i + 1,
            wave_name: w.name.clone(),
            phase: w.phase,
            decision: w.verdict.as_ref().map(|v| v.decision),
            large_change: w.verdict.as_ref().map(|v| v.large),
            outcome: w.outcome.clone(),
        })
    })
}
