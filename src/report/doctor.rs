//! The table of `doctor`: one row per check and node, with the fix.

use super::envelope::Summary;
use super::envelope::{Envelope, NodeStatus};
use super::{failure_text, table};
use crate::doctor::Check;
use crate::doctor::Status;
use crate::node::calls::DoctorReport;
use serde::Serialize;

/// The table (one row per check and node, each finding's headline), then every warning and
/// failure in full with its fix: what to read first, then what to do.
pub(crate) fn render(e: &Envelope<DoctorPayload, Option<DoctorDetail>>) -> String {
    let mut t = table(&["Host", "Check", "Status", "Finding"]);
    let mut todo = String::new();
    for r in &e.nodes {
        if let Some(f) = &r.error {
            // Not reached (or only on paper) is not a failing check.
            let st = if r.status == NodeStatus::Skipped {
                "skip"
            } else {
                "NOT CHECKED"
            };
            t.add_row(vec![r.host.clone(), "-".into(), st.into(), failure_text(f)]);
        }
        let Some(d) = &r.detail else { continue };
        for c in &d.checks {
            let st = status_word(c.status);
            t.add_row(vec![r.host.clone(), c.check.clone(), st.into(), headline(&c.detail)]);
            if matches!(c.status, Status::Warn | Status::Fail) {
                todo.push_str(&format!("{} {} {st}\n  {}\n", r.host, c.check, c.detail));
                if let Some(fix) = &c.fix {
                    todo.push_str(&format!("  fix: {fix}\n"));
                }
            }
        }
    }
    let metrics = e
        .payload
        .textfile
        .as_ref()
        .map_or_else(String::new, |p| format!("metrics written to {p}\n"));
    let todo = if todo.is_empty() { todo } else { format!("\n{todo}") };
    format!("{t}\n{todo}{metrics}{}\n", e.msg)
}

fn status_word(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Skip => "skip",
        Status::Warn => "WARN",
        Status::Fail => "FAIL",
    }
}

/// A check's first finding, and how many more it has (findings are joined by "; ").
fn headline(detail: &str) -> String {
    let mut parts = detail.split("; ");
    let first = parts.next().unwrap_or_default();
    match parts.count() {
        0 => first.to_string(),
        more => format!("{first} (+{more} more)"),
    }
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
