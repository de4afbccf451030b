//! `tune`'s output: per collective and shape, each size range with NCCL's own time and the
//! rule that beat it (its gain and interval), or "NCCL's own choice kept"; the globals kept
//! with their evidence; disqualified candidates, loudly; what the budget left untried. JSON:
//! the tuning (as tuning.json holds it) and every trial's figures.

use super::envelope::{Envelope, NoDetail};
use super::table;
use crate::tune::tuning::{bytes, interval, Trial, Tuning};
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Debug, Serialize)]
pub(crate) struct TunePayload {
    pub(crate) tuning: Tuning,
    pub(crate) files: Vec<String>,
    pub(crate) benchmark_rounds: usize,
    pub(crate) seconds: f64,
    pub(crate) trials: Vec<Trial>,
}

/// Said beside a written rules file: the same CSV loaded by NCCL's example plugin does not
/// run as measured.
pub(crate) const EXAMPLE_PLUGIN: &str = "note: load nccl-tuner.csv with topo-tune's plugin (libnccl_tuner_topo_tune.so), which it was measured through; NCCL's example plugin runs every collective it has no rule for on one channel, and crashed on its own sample file in NCCL 2.29.2 (NVIDIA/nccl#1974)";

/// The one-line summary.
pub(crate) fn summary(o: &TunePayload) -> String {
    let t = &o.tuning;
    format!(
        "tune on {} ({} node(s)): {} rule(s), {} global(s) kept, {} disqualified, {} not tried; {} runs in {:.0} s",
        t.set,
        t.hosts.len(),
        t.rules.len(),
        t.globals.len(),
        t.disqualified.len(),
        t.not_tried.len(),
        o.benchmark_rounds,
        o.seconds
    )
}

fn range(lo: u64, hi: u64) -> String {
    if lo == hi {
        bytes(lo)
    } else {
        format!("{}–{}", bytes(lo), bytes(hi))
    }
}

pub(crate) fn render(e: &Envelope<TunePayload, NoDetail>) -> String {
    let t = &e.payload.tuning;
    let mut out = String::new();
    let mut rows = table(&[
        "Collective",
        "Shape",
        "Sizes",
        "NCCL's own µs",
        "Tuned",
        "Tuned µs",
        "Gain [interval]",
    ]);
    for r in &t.rules {
        rows.add_row(vec![
            r.collective.perf().to_string(),
            r.shape
                .map_or_else(|| "any (held at every shape)".into(), |s| s.to_string()),
            range(r.min_bytes, r.max_bytes),
            format!("{:.1}", r.nccl_us),
            format!(
                "{}/{}{}",
                r.algorithm.csv(),
                r.protocol.csv(),
                r.channels.map(|c| format!(" ×{c} channels")).unwrap_or_default()
            ),
            format!("{:.1}", r.tuned_us),
            match &r.verified {
                Some(v) => format!("{} (as written {:+.1}%)", interval(&r.gain), v.median * 100.0),
                None => interval(&r.gain),
            },
        ]);
    }
    for k in t.kept.iter().filter(|k| !k.sizes.is_empty()) {
        let (lo, hi) = (
            k.sizes.iter().min().copied().unwrap_or(0),
            k.sizes.iter().max().copied().unwrap_or(0),
        );
        rows.add_row(vec![
            k.collective.perf().to_string(),
            k.shape.to_string(),
            format!("{} size(s) in {}", k.sizes.len(), range(lo, hi)),
            "-".into(),
            "NCCL's own choice kept".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    let _ = writeln!(out, "{rows}");
    for g in &t.globals {
        let _ = writeln!(out, "kept {}={}: {}", g.name, g.value, g.why);
    }
    for d in &t.disqualified {
        let loud = if d.kind == "wrong_values" {
            "DISQUALIFIED (wrong results)"
        } else {
            "disqualified"
        };
        let _ = writeln!(
            out,
            "{loud}: {} {} at {}: {}",
            d.collective.perf(),
            d.candidate,
            d.shape,
            d.why
        );
    }
    if !t.not_tried.is_empty() {
        let _ = writeln!(out, "not tried (--budget): {}", t.not_tried.join("; "));
    }
    for d in &t.dropped {
        let _ = writeln!(out, "dropped: {d}");
    }
    for f in &e.payload.files {
        let _ = writeln!(out, "written: {f}");
    }
    if !t.rules.is_empty() {
        let _ = writeln!(out, "{EXAMPLE_PLUGIN}");
    }
    let _ = writeln!(out, "{}", e.msg);
    out
}
