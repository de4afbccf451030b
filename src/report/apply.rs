//! Tables of `apply`: per wave its nodes, the size table (baseline vs candidate, change with
//! its interval, P99 for small sizes), the crossover, and the decision with its numbers.

use super::envelope::Envelope;
use super::table;
use crate::bench::stats::{Change, Metric, Verdict};
use crate::canary::state::{Phase, Rollout};
use serde::Serialize;

/// One node's row of `apply`.
#[derive(Debug, Default, Serialize)]
pub(crate) struct ApplyDetail {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) wave: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) wave_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) phase: Option<Phase>,
    /// The run the promotion recorded on this node (what `rollback` undoes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) run_id: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct ApplyPayload {
    /// The whole record: options, waves, every round's figures, every decision.
    pub(crate) rollout: Rollout,
    pub(crate) state_file: String,
}

fn change(c: &Change) -> String {
    format!(
        "{:+.1}% [{:+.1} .. {:+.1}]",
        c.median * 100.0,
        c.low * 100.0,
        c.high * 100.0
    )
}

pub(crate) use crate::model::size::show as size;

pub(crate) fn verdict_table(v: &Verdict) -> String {
    let bw = match v.metric {
        Metric::Busbw => "busbw",
        Metric::Algbw => "algbw",
    };
    let mut t = table(&[
        "Size",
        &format!("Baseline {bw} GB/s"),
        &format!("Candidate {bw} GB/s"),
        "Change [interval]",
        "P99 base us",
        "P99 cand us",
        "P99 change",
    ]);
    for r in &v.sizes {
        let opt = |x: Option<f64>| x.map_or_else(|| "-".into(), |x| format!("{x:.2}"));
        t.add_row(vec![
            size(r.size),
            format!("{:.2}", r.baseline_bw),
            format!("{:.2}", r.candidate_bw),
            r.bw_change.as_ref().map_or_else(|| "-".into(), change),
            opt(r.baseline_p99_us),
            opt(r.candidate_p99_us),
            r.p99_change.as_ref().map_or_else(|| "-".into(), change),
        ]);
    }
    let cross = |c: Option<u64>| c.map_or_else(|| "-".into(), size);
    let mut out = format!(
        "{t}\nlatency/bandwidth crossover (half of peak {bw}): baseline {}, candidate {}\n",
        cross(v.crossover_baseline),
        cross(v.crossover_candidate)
    );
    for n in &v.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out.push_str(&format!(
        "decision: {} — {} ({} rounds)\n",
        serde_json::to_value(v.decision)
            .ok()
            .and_then(|d| d.as_str().map(str::to_string))
            .unwrap_or_default(),
        v.reason,
        v.rounds
    ));
    out
}

pub(crate) fn render_apply<N: Serialize>(e: &Envelope<ApplyPayload, N>) -> String {
    let r = &e.payload.rollout;
    let mut out = String::new();
    if let Some(t) = &r.tuning {
        out.push_str(&format!(
            "tuning of {} ({}), judged on the canary before any wave:\n",
            t.tuning.set,
            t.file.display()
        ));
        for j in &t.judged {
            let gain = j
                .gain
                .as_ref()
                .map_or_else(|| "not measured".into(), crate::tune::tuning::interval);
            let word = if j.holds { "holds" } else { "dropped" };
            out.push_str(&format!("  {}: {gain}: {word}\n", j.rule));
        }
        out.push('\n');
    }
    for (i, w) in r.waves.iter().enumerate() {
        let phase = serde_json::to_value(w.phase)
            .ok()
            .and_then(|p| p.as_str().map(str::to_string))
            .unwrap_or_default();
        out.push_str(&format!(
            "wave {} {} ({} node(s): {}): {phase}\n",
            i + 1,
            w.name,
            w.hosts.len(),
            w.hosts.join(",")
        ));
        if let Some(v) = &w.verdict {
            out.push_str(&verdict_table(v));
        }
        if let Some(o) = &w.outcome {
            out.push_str(&format!("outcome: {o}\n"));
        }
        if !w.unfinished.is_empty() {
            let left: Vec<String> = w.unfinished.iter().map(|(h, why)| format!("{h}: {why}")).collect();
            out.push_str(&format!("not finished on: {}\n", left.join("; ")));
        }
        for (h, f) in &w.failures {
            out.push_str(&format!("FAILED {h}: {f}\n"));
        }
        let caveats: std::collections::BTreeSet<&String> = w.staged.values().flat_map(|s| &s.caveats).collect();
        for c in caveats {
            out.push_str(&format!("caveat: {c}\n"));
        }
        out.push('\n');
    }
    for (h, why) in &r.untouched {
        out.push_str(&format!("untouched {h}: {why}\n"));
    }
    out.push_str(&e.msg);
    out.push('\n');
    out
}
