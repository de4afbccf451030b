//! The table of `irq-pin`: every interrupt of every node, where it is and where it goes.

use super::envelope::Envelope;
use super::envelope::Summary;
use super::{failure_text, table};
use crate::irq::pin::PinReport;
use crate::irq::{IrqPlan, PinAction};
use serde::Serialize;

pub(crate) fn render_pin(e: &Envelope<PinPayload, Option<PinDetail>>) -> String {
    let mut t = table(&[
        "Host", "IRQ", "NIC", "Name", "Class", "Current", "Target", "Action", "Why",
    ]);
    let mut notes = String::new();
    let mut failures = String::new();
    for r in &e.nodes {
        if let Some(f) = &r.error {
            failures.push_str(&format!("{}: FAILED {}\n", r.host, failure_text(f)));
        }
        let Some(d) = &r.detail else { continue };
        for p in &d.plan.pins {
            t.add_row(vec![
                r.host.clone(),
                p.irq.to_string(),
                p.nic.clone(),
                p.name.clone().unwrap_or_default(),
                format!("{:?}", p.class).to_lowercase(),
                p.current.as_ref().map_or("?".into(), |c| c.to_string()),
                p.target.as_ref().map_or("-".into(), |c| c.to_string()),
                format!("{:?}", p.action).to_lowercase(),
                p.reason.clone(),
            ]);
        }
        for n in &d.notes {
            notes.push_str(&format!("note: {}: {n}\n", r.host));
        }
        if e.nodes.len() > 1 {
            notes.push_str(&format!("{}: {}\n", r.host, d.msg));
        }
    }
    let any_pins = e
        .nodes
        .iter()
        .filter_map(|r| r.detail.as_ref())
        .any(|d| !d.plan.pins.is_empty());
    let table = if any_pins {
        format!("{t}\n")
    } else {
        "no mlx5 NIC interrupts here: nothing to pin (irq-pin places the interrupts of Mellanox/NVIDIA ConnectX NICs driven by mlx5_core)\n".to_string()
    };
    format!("{table}{notes}{failures}{}\n", e.msg)
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
