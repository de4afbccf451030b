//! The table of `doctor`: one row per check and node, with the fix.

use super::envelope::Envelope;
use super::envelope::Summary;
use super::{failure_text, table};
use crate::irq::doctor::Check;
use crate::irq::doctor::Status;
use crate::node::calls::DoctorReport;
use serde::Serialize;

pub fn render(e: &Envelope<DoctorPayload, Option<DoctorDetail>>) -> String {
    let mut t = table(&["Host", "Check", "Status", "Detail", "Fix"]);
    for r in &e.nodes {
        if let Some(f) = &r.error {
            t.add_row(vec![
                r.host.clone(),
                "-".into(),
                "FAIL".into(),
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
    format!("{t}\n{}\n", e.msg)
}

/// One node's checks.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorDetail {
    pub checks: Vec<Check>,
}

impl From<&DoctorReport> for DoctorDetail {
    fn from(r: &DoctorReport) -> Self {
        DoctorDetail {
            checks: r.checks.clone(),
        }
    }
}

#[derive(Serialize)]
pub struct DoctorPayload {
    pub summary: Summary,
}
