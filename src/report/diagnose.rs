//! `diagnose`'s table: per size the time, bus bandwidth and P99; then the fit, the cliff,
//! the flat range, the crossover, and the prediction it is held against.

use super::apply::size;
use super::envelope::{Envelope, NoDetail};
use super::table;
use crate::bench::locate::{EdgeBlame, Round, Suspect};
use crate::bench::parse::SizeFigures;
use crate::bench::sweep::Findings;
use crate::doctor::Check;
use serde::Serialize;
use std::fmt::Write as _;

/// What the planner predicts for the swept nodes.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Prediction {
    pub(crate) busbw_gbps: f64,
    pub(crate) latency_us: f64,
    /// The ceiling rests on a figure that is not the nodes' own (an assumed NIC rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) assumed: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct DiagnosePayload {
    /// Ranks the sweep ran, as nccl-tests reports them.
    pub(crate) ranks: u32,
    /// Nodes × GPUs per node: what the sweep should have run.
    pub(crate) expected_ranks: u32,
    pub(crate) sizes: Vec<SizeFigures>,
    pub(crate) findings: Findings,
    pub(crate) predicted: Prediction,
    pub(crate) ceiling_fraction: f64,
    pub(crate) below_ceiling: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) localisation: Option<Localisation>,
}

/// The localisation steps' runs and what they found, what doctor says, the final table.
#[derive(Debug, Serialize)]
pub(crate) struct Localisation {
    pub(crate) budget: BudgetUse,
    /// Each node alone with its GPUs (no network), all at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) interiors: Option<Interiors>,
    /// The bisection of the node set (groups, then pairs, then re-pairs).
    pub(crate) rounds: Vec<Round>,
    /// The node the bisection named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) suspect: Option<Suspect>,
    /// sendrecv_perf between each pair of ring neighbours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) edges: Option<Edges>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rails: Option<Rails>,
    /// Steps not run, and why.
    pub(crate) skipped: Vec<String>,
    /// What doctor says on each suspect node.
    pub(crate) doctor: Vec<DoctorOn>,
    pub(crate) verdicts: Vec<Verdict>,
}

impl Localisation {
    /// Whether any step ran runs to compare (on one GPU of one node, none can).
    pub(crate) fn compared(&self) -> bool {
        self.interiors.is_some() || !self.rounds.is_empty() || self.edges.is_some() || self.rails.is_some()
    }

    /// What an empty verdict table means: nothing stood out, or nothing was compared.
    pub(crate) fn no_verdict(&self) -> &'static str {
        if self.compared() {
            "no outlier: no node, NIC, link or rail is slower than its peers"
        } else {
            "nothing to compare: every localisation step needs more nodes or GPUs (see what was not run)"
        }
    }
}

/// `--budget` and what the runs took.
#[derive(Debug, Serialize)]
pub(crate) struct BudgetUse {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) limit_s: Option<u64>,
    /// Seconds from the sweep's start to the last run's end.
    pub(crate) spent_s: f64,
    /// The step the budget cut short (nothing after it ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stopped_at: Option<String>,
}

/// The intra-node-only round: one run per node with its GPUs.
#[derive(Debug, Serialize)]
pub(crate) struct Interiors {
    pub(crate) gpus: u32,
    /// The round number, the sweep being round 1.
    pub(crate) round: usize,
    pub(crate) figures: Round,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) slow: Option<Suspect>,
}

/// The ring-neighbour runs: one figure per ring edge.
#[derive(Debug, Serialize)]
pub(crate) struct Edges {
    /// The round that completed them.
    pub(crate) round: usize,
    pub(crate) edges: Vec<EdgeFigure>,
    pub(crate) median: f64,
    /// Indices of the edges judged slow.
    pub(crate) low: Vec<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) blame: Option<EdgeBlame>,
}

#[derive(Debug, Serialize)]
pub(crate) struct EdgeFigure {
    pub(crate) a: String,
    pub(crate) b: String,
    pub(crate) busbw: Option<f64>,
}

/// One run per rail (one GPU per node, every node), all at once.
#[derive(Debug, Serialize)]
pub(crate) struct Rails {
    pub(crate) round: usize,
    pub(crate) busbw: Vec<Option<f64>>,
    pub(crate) median: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) slow: Option<u32>,
    /// The bisection of the node set on the slow rail alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) nic: Option<NicSearch>,
}

#[derive(Debug, Serialize)]
pub(crate) struct NicSearch {
    pub(crate) rail: u32,
    pub(crate) rounds: Vec<Round>,
    /// The node whose NIC on that rail is slow, and the round that named it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) suspect: Option<Suspect>,
    pub(crate) round: usize,
}

/// doctor's failing and warning checks on one suspect, or why it could not check.
#[derive(Debug, Serialize)]
pub(crate) struct DoctorOn {
    pub(crate) host: String,
    pub(crate) checks: Vec<Check>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

/// What a verdict accuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SuspectKind {
    /// A node's network side: every run across nodes with it is slow.
    Node,
    /// A node's inside (NVLink, PCIe): slow even alone.
    NodeInside,
    /// One NIC: one rail, one node.
    Nic,
    /// What joins two ring neighbours.
    Link,
    /// One rail on every node: its switch plane.
    Rail,
}

impl SuspectKind {
    pub(crate) fn words(self) -> &'static str {
        match self {
            SuspectKind::Node => "the slow node",
            SuspectKind::NodeInside => "the slow inside of a node",
            SuspectKind::Nic => "the slow NIC",
            SuspectKind::Link => "the slow link",
            SuspectKind::Rail => "the slow rail",
        }
    }
}

/// One line of the final table.
#[derive(Debug, Serialize)]
pub(crate) struct Verdict {
    pub(crate) kind: SuspectKind,
    pub(crate) suspect: String,
    /// The round that named it, the sweep being round 1.
    pub(crate) round: usize,
    pub(crate) evidence: String,
    pub(crate) cause: String,
    pub(crate) fix: String,
}

pub(crate) fn render(e: &Envelope<DiagnosePayload, NoDetail>) -> String {
    let p = &e.payload;
    let mut t = table(&["Size", "Time us", "busbw GB/s", "P99 us"]);
    for r in &p.sizes {
        t.add_row(vec![
            size(r.size),
            format!("{:.2}", r.time_us),
            format!("{:.2}", r.busbw),
            r.p99_us.map_or_else(|| "-".into(), |v| format!("{v:.2}")),
        ]);
    }
    let f = &p.findings;
    let mut out = format!("{} rank(s) on {} node(s)\n{t}\n", p.ranks, e.nodes.len());
    let predicted = if p.predicted.busbw_gbps > 0.0 {
        format!(
            "predicted by the planner's ring/Simple model: latency {:.2} us (an upper bound: NCCL takes LL/LL128 or a tree for small messages), busbw {:.2} GB/s at 1 GiB",
            p.predicted.latency_us, p.predicted.busbw_gbps
        )
    } else {
        "no prediction (the planner's model is of rings of two or more ranks)".to_string()
    };
    match &f.fit {
        Some(fit) => {
            let _ = writeln!(
                out,
                "alpha-beta fit: latency {:.2} us, bandwidth {:.2} GB/s algbw = {:.2} GB/s busbw (rms error {:.1}%); {predicted}",
                fit.alpha_us,
                fit.algbw_gbps,
                fit.busbw_gbps,
                fit.rms_relative_error * 100.0,
            );
        }
        None => {
            let _ = writeln!(out, "alpha-beta fit: too few sizes to fit; {predicted}");
        }
    }
    match &f.cliff {
        Some(c) => {
            let _ = writeln!(
                out,
                "cliff: busbw falls {:.0}% from {} ({:.2} GB/s) to {} ({:.2} GB/s)",
                c.drop * 100.0,
                size(c.from_size),
                c.from_busbw,
                size(c.to_size),
                c.to_busbw
            );
        }
        None => out.push_str("cliff: none below 1 MiB (busbw never falls between adjacent sizes)\n"),
    }
    if let Some(s) = f.flat_until {
        let _ = writeln!(out, "time is flat (latency-bound) up to {}", size(s));
    }
    if let Some(s) = f.crossover {
        let _ = writeln!(out, "latency/bandwidth crossover (half of peak busbw): {}", size(s));
    }
    if let Some(l) = &p.localisation {
        localisation(&mut out, l);
    }
    let _ = writeln!(out, "{}", e.msg);
    out
}

fn figure(b: Option<f64>) -> String {
    b.map_or_else(|| "failed".into(), |b| format!("{b:.1}"))
}

/// One round as `group=busbw` pairs, the slow group named.
fn round_line(out: &mut String, label: &str, r: &Round) {
    let figures: Vec<String> = r
        .groups
        .iter()
        .zip(&r.busbw)
        .map(|(g, b)| format!("{}={}", crate::emit::slurm::compress(g), figure(*b)))
        .collect();
    let slow = r.outlier.map_or_else(String::new, |o| {
        format!(", slow: {}", crate::emit::slurm::compress(&r.groups[o]))
    });
    let _ = writeln!(
        out,
        "{label}: median {:.1} GB/s{slow}: {}",
        r.median,
        figures.join("  ")
    );
}

fn localisation(out: &mut String, l: &Localisation) {
    if let Some(i) = &l.interiors {
        round_line(out, &format!("each node alone ({} GPUs)", i.gpus), &i.figures);
    }
    for (i, r) in l.rounds.iter().enumerate() {
        round_line(out, &format!("bisection {}", i + 1), r);
    }
    if let Some(e) = &l.edges {
        let figures: Vec<String> = e
            .edges
            .iter()
            .map(|x| format!("{}–{}={}", x.a, x.b, figure(x.busbw)))
            .collect();
        let _ = writeln!(
            out,
            "ring neighbours (sendrecv): median {:.1} GB/s: {}",
            e.median,
            figures.join("  ")
        );
    }
    if let Some(r) = &l.rails {
        let figures: Vec<String> = r
            .busbw
            .iter()
            .enumerate()
            .map(|(i, b)| format!("{i}={}", figure(*b)))
            .collect();
        let _ = writeln!(out, "rails: median {:.1} GB/s: {}", r.median, figures.join("  "));
        if let Some(n) = &r.nic {
            for (i, round) in n.rounds.iter().enumerate() {
                round_line(out, &format!("rail {}, node by node, round {}", n.rail, i + 1), round);
            }
        }
    }
    for s in &l.skipped {
        let _ = writeln!(out, "not run: {s}");
    }
    if let Some(step) = &l.budget.stopped_at {
        let _ = writeln!(
            out,
            "budget: {} s spent ({:.0} s used); stopped at {step}",
            l.budget.limit_s.unwrap_or_default(),
            l.budget.spent_s
        );
    }
    if l.verdicts.is_empty() {
        let _ = writeln!(out, "{}", l.no_verdict());
        return;
    }
    let mut t = table(&["Suspect", "Round", "Evidence", "Likely cause", "Fix"]);
    for v in &l.verdicts {
        t.add_row(vec![
            v.suspect.clone(),
            v.round.to_string(),
            v.evidence.clone(),
            v.cause.clone(),
            v.fix.clone(),
        ]);
    }
    let _ = writeln!(out, "{t}");
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_nccl_tests_steps() {
        assert_eq!(super::size(8), "8 B");
        assert_eq!(super::size(64 << 10), "64 KiB");
        assert_eq!(super::size(4 << 30), "4 GiB");
        assert_eq!(super::size(1000), "1000 B");
    }
}
