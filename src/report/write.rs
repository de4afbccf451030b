//! Tables of `init` (settings, then files) and `rollback`.

use super::envelope::Summary;
use super::envelope::{Envelope, NodeRow};
use super::fold::{self, View};
use super::{failure_text, table};
use crate::apply::writer::FileReport;
use crate::model::Setting;
use serde::Serialize;

fn files_table(rows: &[NodeRow<WriteDetail>], view: View) -> (String, String) {
    let mut t = table(&["Host", "Status", "File", "Action", "Why"]);
    let mut cells: Vec<(&str, Vec<String>)> = Vec::new();
    let mut diffs: Vec<(&str, String)> = Vec::new();
    for r in rows {
        if let Some(f) = &r.error {
            cells.push((&r.host, vec!["FAILED".into(), "-".into(), "-".into(), failure_text(f)]));
        }
        for f in &r.detail.files {
            let action = format!("{:?}", f.action).to_lowercase();
            cells.push((&r.host, vec!["ok".into(), f.path.clone(), action, f.reason.clone()]));
            if let Some(d) = &f.diff {
                diffs.push((&r.host, format!("{}\n{d}", f.path)));
            }
        }
    }
    for row in fold::rows(cells, view) {
        t.add_row(row);
    }
    let diffs = fold::lines(diffs, view)
        .into_iter()
        .map(|(hosts, d)| format!("--- {hosts} {d}"))
        .collect();
    (t.to_string(), diffs)
}

pub(crate) fn render_init(e: &Envelope<WritePayload, WriteDetail>, view: View) -> String {
    let mut settings = table(&["Host", "Setting", "Why"]);
    let cells = e.nodes.iter().flat_map(|r| {
        r.detail.settings.iter().map(move |s| {
            (
                r.host.as_str(),
                vec![format!("{}={}", s.name, s.value), s.reason.clone()],
            )
        })
    });
    for row in fold::rows(cells, view) {
        settings.add_row(row);
    }
    let (files, diffs) = files_table(&e.nodes, view);
    let warnings = e
        .nodes
        .iter()
        .flat_map(|r| r.detail.warnings.iter().map(move |w| (r.host.as_str(), w.clone())));
    let warnings: String = fold::lines(warnings, view)
        .into_iter()
        .map(|(hosts, w)| format!("WARNING {hosts}: {}\n", crate::report::visible(&w)))
        .collect();
    format!(
        "{settings}\n{}\n{files}\n{diffs}\n{warnings}{}\n",
        left_out(&e.nodes),
        e.msg
    )
}

/// Why settings were left out: one line per reason, for the nodes that share it
/// (`p5en-[01-08]: EFA devices: …`). `topo-tune plan` shows the same per class.
fn left_out(rows: &[NodeRow<WriteDetail>]) -> String {
    let mut by_reason: Vec<(&str, Vec<String>)> = Vec::new();
    for r in rows {
        for why in &r.detail.left_out {
            match by_reason.iter_mut().find(|(w, _)| *w == why.as_str()) {
                Some((_, hosts)) => hosts.push(r.host.clone()),
                None => by_reason.push((why.as_str(), vec![r.host.clone()])),
            }
        }
    }
    by_reason
        .into_iter()
        .map(|(why, hosts)| format!("left out on {}: {why}\n", crate::emit::slurm::compress(&hosts)))
        .collect()
}

pub(crate) fn render_rollback(e: &Envelope<RollbackPayload, WriteDetail>, view: View) -> String {
    let (files, _) = files_table(&e.nodes, view);
    let notes = e
        .nodes
        .iter()
        .filter_map(|n| n.detail.note.as_ref().map(|note| (n.host.as_str(), note.clone())));
    let notes: String = fold::lines(notes, view)
        .into_iter()
        .map(|(hosts, note)| format!("{hosts}: {}\n", crate::report::visible(&note)))
        .collect();
    format!("{files}\n\n{notes}{}\n", e.msg)
}

/// One node's row of `init`: what it was told and what changed.
#[derive(Debug, Default, Serialize)]
pub(crate) struct WriteDetail {
    pub(crate) transport: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) settings: Vec<Setting>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) left_out: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) files: Vec<FileReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) run_id: Option<String>,
    /// Why nothing was done (`rollback` with nothing newer to undo).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
    /// `rollback --run ID` that undid nothing on the node: left there, or never ran it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) run_not_undone: Option<crate::apply::writer::RunNotUndone>,
    /// What the operator's own NCCL files do that the plan's never would (they are kept),
    /// and why a node is not given the tuning.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
    /// `--tuning`: this node's files carry it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) tuned: bool,
}

/// `--tuning`: which tuning, and how many nodes were given it.
#[derive(Debug, Serialize)]
pub(crate) struct TuningGiven {
    pub(crate) file: String,
    pub(crate) set: String,
    pub(crate) given: usize,
}

#[derive(Debug, Serialize)]
pub(crate) struct WritePayload {
    /// `--check`: something would change.
    pub(crate) pending: bool,
    pub(crate) check: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) plan_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tuning: Option<TuningGiven>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) output_dir: Option<String>,
    pub(crate) summary: Summary,
}

#[derive(Serialize)]
pub(crate) struct RollbackPayload {
    pub(crate) output_dir: Option<String>,
    pub(crate) summary: Summary,
    /// With `--run ID`: where the run was undone and where it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) run: Option<RunUndone>,
}

/// `rollback --run ID` over the nodes: the nodes that undid it, those that hold it under a
/// newer run, those that could not be asked (each may hold it), and those that never ran it.
#[derive(Debug, Default, Serialize)]
pub(crate) struct RunUndone {
    pub(crate) id: String,
    pub(crate) restored: Vec<String>,
    pub(crate) left: Vec<String>,
    pub(crate) not_reached: Vec<String>,
    pub(crate) not_there: usize,
}

impl RunUndone {
    /// Sorted from the rows: a row with the run's id undid it; the node says left or absent;
    /// a failed or skipped row was not reached.
    pub(crate) fn of(id: &str, rows: &[NodeRow<WriteDetail>]) -> RunUndone {
        let mut out = RunUndone {
            id: id.to_string(),
            ..RunUndone::default()
        };
        for r in rows {
            use crate::apply::writer::RunNotUndone;
            if r.detail.run_id.as_deref() == Some(id) {
                out.restored.push(r.host.clone());
            } else if r.error.is_some() {
                out.not_reached.push(r.host.clone());
            } else if r.detail.run_not_undone == Some(RunNotUndone::Left) {
                out.left.push(r.host.clone());
            } else {
                out.not_there += 1;
            }
        }
        out
    }

    /// Every node that ran it was restored.
    pub(crate) fn whole(&self) -> bool {
        self.left.is_empty() && self.not_reached.is_empty()
    }

    pub(crate) fn sentence(&self) -> String {
        format!(
            "run {}: restored on {} node(s); not undone on {} that hold it under a newer run{}; {} not reached (each may hold it){}; {} never ran it",
            self.id,
            self.restored.len(),
            self.left.len(),
            listed(&self.left),
            self.not_reached.len(),
            listed(&self.not_reached),
            self.not_there
        )
    }
}

fn listed(hosts: &[String]) -> String {
    if hosts.is_empty() {
        String::new()
    } else {
        format!(" ({})", crate::emit::slurm::compress(hosts))
    }
}
