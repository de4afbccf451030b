//! The table of `status`: one row per node.

use super::envelope::{Envelope, NodeRow, Summary};
use super::fold::{self, View};
use super::{failure_text, table};
use crate::apply::stage::{LiveState, NodeState};
use crate::bench::stats::{Change, Decision};
use crate::canary::state::{Phase, RolloutStatus, Unreadable};
use serde::Serialize;

/// Where a node stands in the latest rollout that touched it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RolloutRef {
    pub(crate) id: String,
    pub(crate) status: RolloutStatus,
    pub(crate) wave: usize,
    pub(crate) wave_name: String,
    pub(crate) phase: Phase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) decision: Option<Decision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) large_change: Option<Change>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) outcome: Option<String>,
    /// What this node says against the record (its promoted run undone since).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) on_node: Option<String>,
    /// The promoted run was undone since by `topo-tune rollback` (recorded: not drift).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rolled_back: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct StatusDetail {
    /// A file topo-tune wrote was changed or removed since.
    pub(crate) drift: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) state: Option<NodeState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rollout: Option<RolloutRef>,
    /// The live tuning was measured on another NCCL than the node runs: what to say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tune_again: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct StatusPayload {
    pub(crate) state_dir: String,
    pub(crate) summary: Summary,
    /// This cluster's rollouts that stopped before their end (`apply --resume ID`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) unfinished: Vec<String>,
    /// Records in the state directory that could not be read or are not believed, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) unreadable_records: Vec<Unreadable>,
}

fn name<T: Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|x| x.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn files(s: &NodeState) -> String {
    let bad: Vec<String> = s
        .files
        .iter()
        .filter(|f| f.live != LiveState::Matches)
        .map(|f| format!("{} {}", f.path, name(f.live)))
        .collect();
    if bad.is_empty() {
        format!("{} match", s.files.len())
    } else {
        bad.join(", ")
    }
}

/// The live tuning in a few words: its rules, its digest, and what is wrong with it.
fn tuning(s: &NodeState) -> String {
    let Some(t) = &s.tuning else { return "-".into() };
    let mut words = format!("{} rule(s) {}", t.rules, t.sha256.get(..12).unwrap_or_default());
    if let Some(v) = t.measured_on {
        words.push_str(&format!(", NCCL {v}"));
    }
    if t.refused > 0 {
        words.push_str(&format!(", {} line(s) refused", t.refused));
    }
    if !t.plugin_present {
        words.push_str(", plugin missing");
    }
    if let Some(why) = t.stale() {
        words.push_str(&format!(" ({why})"));
    }
    words
}

fn rollout(r: &RolloutRef) -> String {
    let decision = r.decision.map(name).unwrap_or_else(|| "-".into());
    let change = r
        .large_change
        .map(|c| format!(" {:+.1}%", c.median * 100.0))
        .unwrap_or_default();
    let undone = match (&r.on_node, &r.rolled_back) {
        (Some(_), _) => " (undone here since)",
        (None, Some(_)) => " (rolled back here since)",
        (None, None) => "",
    };
    format!(
        "{} wave {} ({}): {}, {decision}{change}{undone}",
        r.id,
        r.wave,
        r.wave_name,
        name(r.phase)
    )
}

/// A node's row, without its host.
fn row(r: &NodeRow<StatusDetail>) -> Vec<String> {
    let ro = r.detail.rollout.as_ref().map_or_else(|| "-".into(), rollout);
    match (&r.error, &r.detail.state) {
        (Some(f), _) => vec!["-".into(), failure_text(f), "-".into(), "-".into(), ro],
        (None, Some(s)) => {
            let run = match (&s.last_run, s.pending) {
                (Some(id), true) => format!("{id} (interrupted)"),
                (Some(id), false) => id.clone(),
                (None, _) => "never written".into(),
            };
            let staged = s
                .staged
                .as_ref()
                .map_or_else(|| "-".into(), |st| format!("candidate of {}", st.rollout));
            vec![run, files(s), tuning(s), staged, ro]
        }
        (None, None) => vec!["-".into(), "-".into(), "-".into(), "-".into(), ro],
    }
}

pub(crate) fn render_status(e: &Envelope<StatusPayload, StatusDetail>, view: View) -> String {
    let mut t = table(&["Host", "Last run", "Files", "Tuning", "Staged", "Rollout"]);
    for r in fold::rows(e.nodes.iter().map(|r| (r.host.as_str(), row(r))), view) {
        t.add_row(r);
    }
    format!("{t}\n\n{}\n", e.msg)
}
