//! `diagnose`'s table: per size the time, bus bandwidth and P99; then the fit, the cliff,
//! the flat range, the crossover, and the prediction it is held against.

use super::apply::size;
use super::envelope::{Envelope, NoDetail};
use super::table;
use crate::bench::locate::{Round, Suspect};
use crate::bench::parse::SizeFigures;
use crate::bench::sweep::Findings;
use crate::irq::doctor::Check;
use serde::Serialize;
use std::fmt::Write as _;

/// What the planner predicts for the swept nodes.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Prediction {
    pub busbw_gbps: f64,
    pub latency_us: f64,
}

#[derive(Debug, Serialize)]
pub struct DiagnosePayload {
    pub ranks: u32,
    pub sizes: Vec<SizeFigures>,
    pub findings: Findings,
    pub predicted: Prediction,
    pub ceiling_fraction: f64,
    pub below_ceiling: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub localisation: Option<Localisation>,
}

/// Rounds of runs that narrowed the set, per-rail figures, and what doctor says.
#[derive(Debug, Serialize)]
pub struct Localisation {
    pub rounds: Vec<Round>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspect: Option<Suspect>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rails: Option<Rails>,
    /// The suspect's failing and warning checks.
    pub doctor: Vec<Check>,
    pub verdicts: Vec<Verdict>,
}

#[derive(Debug, Serialize)]
pub struct Rails {
    pub busbw: Vec<Option<f64>>,
    pub median: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow: Option<u32>,
}

/// One line of the final table.
#[derive(Debug, Serialize)]
pub struct Verdict {
    pub suspect: String,
    pub evidence: String,
    pub cause: String,
    pub fix: String,
}

pub fn render(e: &Envelope<DiagnosePayload, NoDetail>) -> String {
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
    match &f.fit {
        Some(fit) => {
            let _ = writeln!(
                out,
                "alpha-beta fit: latency {:.2} us, bandwidth {:.2} GB/s algbw = {:.2} GB/s busbw (rms error {:.1}%); predicted: latency {:.2} us, busbw {:.2} GB/s",
                fit.alpha_us,
                fit.algbw_gbps,
                fit.busbw_gbps,
                fit.rms_relative_error * 100.0,
                p.predicted.latency_us,
                p.predicted.busbw_gbps
            );
        }
        None => out.push_str("alpha-beta fit: too few sizes to fit\n"),
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

fn localisation(out: &mut String, l: &Localisation) {
    for (i, r) in l.rounds.iter().enumerate() {
        let figures: Vec<String> = r
            .groups
            .iter()
            .zip(&r.busbw)
            .map(|(g, b)| {
                let b = b.map_or_else(|| "failed".into(), |b| format!("{b:.1}"));
                format!("{}={b}", crate::emit::slurm::compress(g))
            })
            .collect();
        let _ = writeln!(
            out,
            "round {}: median {:.1} GB/s{}: {}",
            i + 1,
            r.median,
            r.outlier.map_or_else(String::new, |o| format!(
                ", slow: {}",
                crate::emit::slurm::compress(&r.groups[o])
            )),
            figures.join("  ")
        );
    }
    if let Some(r) = &l.rails {
        let figures: Vec<String> = r
            .busbw
            .iter()
            .enumerate()
            .map(|(i, b)| format!("{i}={}", b.map_or_else(|| "failed".into(), |b| format!("{b:.1}"))))
            .collect();
        let _ = writeln!(out, "rails: median {:.1} GB/s: {}", r.median, figures.join("  "));
    }
    if l.verdicts.is_empty() {
        out.push_str("no outlier: no node or rail is slower than its peers\n");
        return;
    }
    let mut t = table(&["Suspect", "Evidence", "Likely cause", "Fix"]);
    for v in &l.verdicts {
        t.add_row(vec![
            v.suspect.clone(),
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
