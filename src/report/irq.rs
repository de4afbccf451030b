//! The table of `irq-pin`: every interrupt of every node, where it is and where it goes.

use super::envelope::{Envelope, NodeStatus, Summary};
use super::fold::{self, View};
use super::{failure_text, table};
use crate::irq::pin::PinReport;
use crate::irq::{IrqPlan, PinAction};
use serde::Serialize;

/// The pins, folded as `doctor` folds its rows: an interrupt row that is the same on many
/// nodes (its IRQ, NIC, vector, placement and action alike) is one row under their host range,
/// and so is a note, a node's summary or a failure; `--per-node` keeps one row per node. A
/// node the summary counts as skipped (a paper node) is said to be skipped, not FAILED.
pub(crate) fn render_pin(e: &Envelope<PinPayload, Option<PinDetail>>, view: View) -> String {
    let mut t = table(&[
        "Host", "IRQ", "NIC", "Name", "Class", "Current", "Target", "Action", "Why",
    ]);
    let rows = e
        .nodes
        .iter()
        .filter_map(|r| Some((r.host.as_str(), r.detail.as_ref()?)))
        .flat_map(|(h, d)| {
            d.plan.pins.iter().map(move |p| {
                (
                    h,
                    vec![
                        p.irq.to_string(),
                        p.nic.clone(),
                        p.name.clone().unwrap_or_default(),
                        format!("{:?}", p.class).to_lowercase(),
                        p.current.as_ref().map_or("?".into(), |c| c.to_string()),
                        p.target.as_ref().map_or("-".into(), |c| c.to_string()),
                        format!("{:?}", p.action).to_lowercase(),
                        p.reason.clone(),
                    ],
                )
            })
        });
    let table_rows = fold::rows(rows, view);
    let any_pins = !table_rows.is_empty();
    for row in table_rows {
        t.add_row(row);
    }
    let detail = |f: fn(&PinDetail) -> Vec<String>| {
        e.nodes
            .iter()
            .filter_map(|r| Some((r.host.as_str(), r.detail.as_ref()?)))
            .flat_map(move |(h, d)| f(d).into_iter().map(move |t| (h, t)))
    };
    let mut lines = String::new();
    for (hosts, n) in fold::lines(detail(|d| d.notes.clone()), view) {
        lines.push_str(&format!("note: {hosts}: {n}\n"));
    }
    if e.nodes.len() > 1 {
        for (hosts, msg) in fold::lines(detail(|d| vec![d.msg.clone()]), view) {
            lines.push_str(&format!("{hosts}: {msg}\n"));
        }
    }
    let failures = e.nodes.iter().filter_map(|r| {
        let f = r.error.as_ref()?;
        let word = if r.status == NodeStatus::Skipped {
            "skipped"
        } else {
            "FAILED"
        };
        Some((r.host.as_str(), format!("{word} {}", failure_text(f))))
    });
    for (hosts, f) in fold::lines(failures, view) {
        lines.push_str(&format!("{hosts}: {f}\n"));
    }
    let table = if any_pins {
        format!("{t}\n")
    } else if e.nodes.iter().all(|r| r.detail.is_none()) {
        String::new()
    } else {
        "no mlx5 NIC interrupts here: nothing to pin (irq-pin places the interrupts of Mellanox/NVIDIA ConnectX NICs driven by mlx5_core)\n".to_string()
    };
    format!("{table}{}{}\n", crate::report::visible(&lines), e.msg)
}

/// One node's pins (its `changed` is the row's).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PinDetail {
    pub(crate) msg: String,
    pub(crate) notes: Vec<String>,
    pub(crate) plan: IrqPlan,
}

impl From<&PinReport> for PinDetail {
    fn from(r: &PinReport) -> Self {
        PinDetail {
            msg: r.msg.clone(),
            notes: r.notes.clone(),
            plan: r.plan.clone(),
        }
    }
}

impl PinDetail {
    pub(crate) fn failed(&self) -> usize {
        self.plan.pins.iter().filter(|p| p.action == PinAction::Failed).count()
    }

    /// Some interrupt is (or, in a dry run, would be) moved.
    pub(crate) fn would_move(&self) -> bool {
        self.plan.pins.iter().any(|p| p.action == PinAction::Set)
    }
}

#[derive(Serialize)]
pub(crate) struct PinPayload {
    pub(crate) dry_run: bool,
    pub(crate) summary: Summary,
}
