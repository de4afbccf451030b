//! The table of `doctor`: one row per check and node, with the fix.

use super::envelope::Envelope;
use super::{failure_text, table};
use crate::cmd::doctor::{DoctorDetail, DoctorPayload};
use crate::irq::doctor::Status;

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
