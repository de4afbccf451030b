//! The table of `doctor`: one row per check and node, with the fix.

use super::envelope::Summary;
use super::envelope::{Envelope, NodeStatus};
use super::fold::{self, View};
use super::{failure_text, table};
use crate::doctor::Check;
use crate::doctor::Status;
use crate::node::calls::DoctorReport;
use serde::Serialize;

/// The table (one row per check, folded over the nodes where it reads the same), then every
/// warning and failure in full with its fix: what to read first, then what to do.
pub(crate) fn render(e: &Envelope<DoctorPayload, Option<DoctorDetail>>, view: View) -> String {
    let mut t = table(&["Host", "Check", "Status", "Finding"]);
    let mut cells: Vec<(&str, Vec<String>)> = Vec::new();
    let mut todo: Vec<(&str, String)> = Vec::new();
    for r in &e.nodes {
        if let Some(f) = &r.error {
            // Not reached (or only on paper) is not a failing check.
            let st = if r.status == NodeStatus::Skipped {
                "skip"
            } else {
                "NOT CHECKED"
            };
            cells.push((&r.host, vec!["-".into(), st.into(), failure_text(f)]));
        }
        let Some(d) = &r.detail else { continue };
        for c in &d.checks {
            let st = status_word(c.status);
            cells.push((&r.host, vec![c.check.clone(), st.into(), headline(&c.detail)]));
            if matches!(c.status, Status::Warn | Status::Fail) {
                let mut text = format!("{} {st}\n  {}\n", c.check, c.detail);
                if let Some(fix) = &c.fix {
                    text.push_str(&format!("  fix: {fix}\n"));
                }
                todo.push((&r.host, text));
            }
        }
    }
    for row in fold::rows(cells, view) {
        t.add_row(row);
    }
    let todo: String = fold::lines(todo, view)
        .into_iter()
        .map(|(hosts, text)| format!("{hosts} {text}"))
        .collect();
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
    /// What the node runs (NCCL, driver, CUDA, kernel, NIC firmware), as cluster-consistency
    /// compares it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) versions: Option<crate::doctor::consistency::Versions>,
}

impl From<&DoctorReport> for DoctorDetail {
    fn from(r: &DoctorReport) -> Self {
        DoctorDetail {
            checks: r.checks.clone(),
            versions: r.versions.clone(),
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
