//! Where every node stands (`status`): what each node says of its files, beside this
//! cluster's rollout records — the records that cannot be read or believed listed, never
//! skipped.

use super::reach::{on_nodes, write_jobs};
use super::settings::StatusSettings;
use crate::apply::stage::NodeState;
use crate::canary::state::{Phase, Rollout, RolloutStatus, Store, Unreadable};
use crate::canary::vet;
use crate::config::Inventory;
use crate::error::Error;
use crate::node::calls::State;
use crate::report::envelope::NodeRow;
use crate::report::status::{RolloutRef, StatusDetail};
use crate::report::Printer;

/// What `status` found: a row per node, this cluster's unfinished rollouts, the records not read.
pub(crate) struct Standing {
    pub(crate) rows: Vec<NodeRow<StatusDetail>>,
    pub(crate) unfinished: Vec<String>,
    pub(crate) unreadable: Vec<Unreadable>,
}

pub(crate) fn standing(s: &StatusSettings, printer: &Printer) -> Result<Standing, Error> {
    let (rollouts, unreadable) = records(&s.inv, &s.state_dir)?;
    let mine: Vec<&Rollout> = rollouts.iter().collect();
    let unfinished: Vec<String> = mine.iter().filter(|r| unfinished(r)).map(|r| r.id.clone()).collect();
    let jobs = write_jobs(&s.inv, s.output_dir.as_deref(), |_| State {
        tuning: Some(crate::node::calls::TuningAsk {
            nccl_version: s.inv.nccl_version,
        }),
    });
    let outcomes = on_nodes(&s.inv, &s.reach, printer, jobs)?;
    let rows = outcomes
        .iter()
        .map(|o| {
            let here = o.result.as_ref().ok();
            let rollout = rollout_of(&mine, &o.host, here);
            NodeRow::from_outcome(
                o,
                |st| {
                    (
                        false,
                        StatusDetail {
                            drift: st.drift(),
                            tune_again: st.tuning.as_ref().and_then(|t| t.stale()),
                            state: Some(st.clone()),
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
    Ok(Standing {
        rows,
        unfinished,
        unreadable,
    })
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
                reason: why.0,
            }),
        }
    }
    Ok((mine, unreadable))
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
        let gone = node.filter(|s| wrote && !s.runs.contains(&w.run_id)).filter(|s| {
            let replaced = s.runs.last().is_some_and(|last| last.as_str() > w.run_id.as_str());
            !replaced
        });
        // `topo-tune rollback` records what it undid: that is the operator's decision, as
        // recorded, not drift; anything else took the promoted files away unrecorded.
        let deliberate = gone.is_some_and(|s| s.undone.as_deref() == Some(w.run_id.as_str()));
        let on_node = gone.filter(|_| !deliberate).map(|_| {
            format!(
                "this wave's run {} was undone here since it was promoted (the node's files are not the promoted ones)",
                w.run_id
            )
        });
        let rolled_back = deliberate.then(|| {
            format!(
                "this wave's run {} was rolled back here since (topo-tune rollback)",
                w.run_id
            )
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
            rolled_back,
        })
    })
}
