//! `topo-tune status`: per node, what topo-tune wrote there (the manifest's last run and files
//! with their sha256), whether the live files still match, what is staged, and which rollout
//! wave the node belongs to with its last decision (from the state directory).

use super::reach::{on_nodes, write_jobs};
use super::{finish, Done};
use crate::apply::stage::NodeState;
use crate::canary::state::{self, Phase, Rollout, RolloutStatus, Store, Unreadable};
use crate::canary::vet;
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
    let (rollouts, unreadable) = records(&inv, &dir)?;
    let mine: Vec<&Rollout> = rollouts.iter().collect();
    let unfinished: Vec<String> = mine.iter().filter(|r| unfinished(r)).map(|r| r.id.clone()).collect();
    let jobs = write_jobs(&inv, args.output_dir.as_deref(), |_| State {});
    let outcomes = on_nodes(&inv, &args.reach, output, jobs)?;
    let rows: Vec<NodeRow<StatusDetail>> = outcomes
        .iter()
        .map(|o| {
            let here = o.result.as_ref().ok();
            let rollout = rollout_of(&mine, &o.host, here);
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
            let undone = r.detail.rollout.as_ref().is_some_and(|ro| ro.on_node.is_some());
            undone
                || r.detail
                    .state
                    .as_ref()
                    .is_some_and(|s| s.drift() || s.pending || s.staged.is_some())
        })
        .count();
    let exit_code = if summary.failed > 0 {
        exit::for_nodes(summary.nodes - summary.skipped, summary.ok).unwrap_or(exit::PARTIAL_FAILURE)
    } else if !unreadable.is_empty() {
        exit::DATA_ERROR
    } else if unsettled > 0 || !unfinished.is_empty() {
        exit::DRIFT
    } else {
        exit::OK
    };
    let msg = message(&rows, &summary, unsettled, &unfinished, &unreadable);
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
            unfinished,
            unreadable_records: unreadable,
        },
    };
    finish(output, envelope, render_status)
}

/// This cluster's rollouts, newest first (paths compared once, not once per node), and the
/// records that are not read: unreadable, or not holding what topo-tune would write.
fn records(inv: &Inventory, dir: &std::path::Path) -> Result<(Vec<Rollout>, Vec<Unreadable>), Error> {
    let (rollouts, mut unreadable) = if dir.is_dir() {
        Store::open(dir)?.all()?
    } else {
        (Vec::new(), Vec::new())
    };
    let canonical = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let cluster = canonical(&inv.path);
    let mut mine = Vec::new();
    for r in rollouts
        .into_iter()
        .rev()
        .filter(|r| canonical(&r.cluster_config) == cluster)
    {
        match vet::check(&r, inv) {
            Ok(()) => mine.push(r),
            Err(why) => unreadable.push(Unreadable {
                path: dir
                    .join("rollouts")
                    .join(format!("{}.json", r.id))
                    .display()
                    .to_string(),
                reason: why,
            }),
        }
    }
    Ok((mine, unreadable))
}

fn message(
    rows: &[NodeRow<StatusDetail>],
    summary: &Summary,
    unsettled: usize,
    unfinished: &[String],
    unreadable: &[Unreadable],
) -> String {
    let mut msg = format!(
        "status: {} node(s): {} as recorded, {unsettled} with drift or pending work, {} unreadable, {} skipped",
        summary.nodes,
        rows.iter().filter(|r| r.status == NodeStatus::Ok).count() - unsettled.min(summary.ok),
        summary.failed,
        summary.skipped
    );
    if !unfinished.is_empty() {
        msg.push_str(&format!(
            "; unfinished rollout(s): {} (`topo-tune apply --resume ID` goes on)",
            unfinished.join(", ")
        ));
    }
    for u in unreadable {
        msg.push_str(&format!("; record {} not read: {}", u.path, u.reason));
    }
    msg
}

/// A rollout that stopped before its end: still running (killed, or a staged copy left), or
/// a rollback that did not finish.
fn unfinished(r: &Rollout) -> bool {
    r.status == RolloutStatus::Running || r.waves.iter().any(|w| w.phase == Phase::RollingBack)
}

/// The latest of this cluster's rollouts (newest first) that has `host` in a wave, and what
/// the node says of it: a promoted wave whose run the node no longer records, and that no
/// later run replaced, was undone there since (a rollback outside the rollout).
fn rollout_of(rollouts: &[&Rollout], host: &str, node: Option<&NodeState>) -> Option<RolloutRef> {
    rollouts.iter().find_map(|r| {
        let (i, w) = r
            .waves
            .iter()
            .enumerate()
            .find(|(_, w)| w.hosts.iter().any(|h| h == host))?;
        let wrote = w.phase == Phase::Promoted && w.changed.iter().any(|h| h == host);
        let on_node = node.filter(|s| wrote && !s.runs.contains(&w.run_id)).and_then(|s| {
            let replaced = s.runs.last().is_some_and(|last| last.as_str() > w.run_id.as_str());
            (!replaced).then(|| {
                format!(
                    "this wave's run {} was undone here since it was promoted (the node's files are not the promoted ones)",
                    w.run_id
                )
            })
        });
        Some(RolloutRef {
            id: r.id.clone(),
            status: r.status,
            wave: i + 1,
            wave_name: w.name.clone(),
            phase: w.phase,
            decision: w.verdict.as_ref().map(|v| v.decision),
            large_change: w.verdict.as_ref().map(|v| v.large),
            outcome: w.outcome.clone(),
            on_node,
        })
    })
}
