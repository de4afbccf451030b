//! The table of `doctor`: one row per check and node, with the fix.

use super::envelope::Summary;
use super::envelope::{Envelope, NodeStatus};
use super::{failure_text, table};
use crate::irq::doctor::Check;
use crate::irq::doctor::Status;
use crate::node::calls::DoctorReport;
use serde::Serialize;

pub(crate) fn render(e: &Envelope<DoctorPayload, Option<DoctorDetail>>) -> String {
    let mut t = table(&["Host", "Check", "Status", "Detail", "Fix"]);
    for r in &e.nodes {
        if let Some(f) = &r.error {
            // Not reached (or only on paper) is not a failing check.
            let st = if r.status == NodeStatus::Skipped {
                "skip"
            } else {
                "NOT CHECKED"
            };
            t.add_row(vec![
                r.host.clone(),
                "-".into(),
                st.into(),
                failure_text(f),
                String::new(),
            ]);
        }
        let Some(d) = &r.detail else { continue };
        for c in &d.checks {
            let st = match c.status {
                Status::Pass => "pass",
                Status::Skip => "skip",
                Status::Warn => "WARN",
                Status::Fail => "FAIL",
            };
            t.add_row(vec![
                r.host.clone(),
                c.check.clone(),
                st.into(),
                c.detail.clone(),
                c.fix.clone(),
            ]);
        }
    }
    let metrics = e
        .payload
        .textfile
        .as_ref()
        .map_or_else(String::new, |p| format!("metrics written to {p}\n"));
    format!("{t}\n{metrics}{}\n", e.msg)
}

/// One node's checks.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DoctorDetail {
    pub(crate) checks: Vec<Check>,
}

impl From<&DoctorReport> for DoctorDetail {
    fn from(r: &DoctorReport) -> Self {
        DoctorDetail {
            checks: r.checks.clone(),
        }
    }
}

#[derive(Serialize)]
pub(crate) struct DoctorPayload {
    pub(crate) summary: Summary,
    /// Where `--textfile` wrote the metrics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) textfile: Option<String>,
}
