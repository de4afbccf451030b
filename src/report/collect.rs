//! Tables of `init --collect-only` and `init --dry-run`.

use super::envelope::Summary;
use super::envelope::{Envelope, NodeStatus};
use super::{failure_text, table};
use crate::model::Deploy;
use serde::Serialize;
use std::collections::BTreeMap;

fn status_text(s: NodeStatus) -> &'static str {
    match s {
        NodeStatus::Ok => "ok",
        NodeStatus::Failed => "FAILED",
        NodeStatus::Skipped => "SKIPPED",
        NodeStatus::Pending => "pending",
    }
}

pub(crate) fn render_collect(e: &Envelope<CollectPayload, CollectDetail>) -> String {
    let mut t = table(&["Host", "Via", "Status", "Time", "Binary", "Detail"]);
    for r in &e.nodes {
        let d = &r.detail;
        let detail = match (&r.error, &d.snapshot) {
            (Some(f), _) => failure_text(f),
            (None, Some(p)) => format!("{p}{}", if r.changed { " (changed)" } else { "" }),
            _ => String::new(),
        };
        let binary = match d.deploy {
            Some(Deploy::Uploaded) => "uploaded",
            Some(Deploy::Reused) => "reused",
            _ => "-",
        };
        let time = d
            .duration_ms
            .map_or("-".into(), |ms| format!("{:.1}s", ms as f64 / 1000.0));
        t.add_row(vec![
            r.host.clone(),
            d.transport.to_string(),
            status_text(r.status).to_string(),
            time,
            binary.to_string(),
            detail,
        ]);
    }
    format!("{t}\n{}\n", e.msg)
}

pub(crate) fn render_list(e: &Envelope<CollectPayload, CollectDetail>) -> String {
    let mut t = table(&["Host", "Via", "Declared at", "Labels"]);
    for r in &e.nodes {
        let d = &r.detail;
        let labels: Vec<String> = d.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        t.add_row(vec![
            r.host.clone(),
            d.transport.to_string(),
            d.declared_at.clone().unwrap_or_default(),
            labels.join(","),
        ]);
    }
    format!("{t}\n{}\n", e.msg)
}

/// One node's row of `init --collect-only` (and `--dry-run`).
#[derive(Debug, Default, Serialize)]
pub(crate) struct CollectDetail {
    pub(crate) transport: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) deploy: Option<Deploy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) snapshot: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) declared_at: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) labels: BTreeMap<String, String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct CollectPayload {
    /// `init --list`: nothing was contacted.
    pub(crate) list: bool,
    pub(crate) output_dir: Option<String>,
    pub(crate) summary: Summary,
}
