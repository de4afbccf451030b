//! `diagnose --trace`'s tables: per rank the step, communication, overlap and exposure; the
//! message sizes and where the time goes; bandwidth against the sweep; who arrives last; and
//! the verdict.

use super::apply::size;
use super::diagnose::DoctorOn;
use super::envelope::{Envelope, NoDetail};
use super::table;
use crate::trace::TraceReport;
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Debug, Serialize)]
pub(crate) struct TracePayload {
    pub(crate) trace: TraceReport,
    /// doctor on the straggler's host, when the cluster was given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) doctor: Vec<DoctorOn>,
}

fn pct(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

fn ms(us: f64) -> String {
    format!("{:.2}", us / 1000.0)
}

pub(crate) fn render(e: &Envelope<TracePayload, NoDetail>) -> String {
    let r = &e.payload.trace;
    let mut out = String::new();
    out.push_str(&ranks_table(r));
    out.push_str(&sizes_table(r));
    if !r.bandwidth.is_empty() {
        let mut t = table(&[
            "Collective",
            "Size",
            "Count",
            "Job busbw GB/s",
            "nccl-tests busbw GB/s",
            "Job / nccl-tests",
        ]);
        for b in &r.bandwidth {
            t.add_row(vec![
                b.kind.clone(),
                size(b.size),
                b.count.to_string(),
                format!("{:.1}", b.job_busbw_gbps),
                format!("{:.1}", b.sweep_busbw_gbps),
                format!("{:.2}", b.ratio),
            ]);
        }
        let _ = writeln!(out, "\nagainst {}:\n{t}", r.sweep.as_deref().unwrap_or("the sweep"));
    }
    out.push_str(&skew_text(r));
    let _ = writeln!(out, "\nverdict: {}", r.verdict);
    out
}

fn ranks_table(r: &TraceReport) -> String {
    let mut t = table(&[
        "Rank",
        "Host",
        "Steps",
        "Step ms",
        "GPU busy ms",
        "Comm ms",
        "Overlapped",
        "Exposed ms",
        "Comm share",
        "Exposed share",
        "Collectives",
    ]);
    for k in &r.ranks {
        let o = &k.overall;
        t.add_row(vec![
            k.rank.to_string(),
            k.host.clone().unwrap_or_else(|| "-".into()),
            k.steps.len().to_string(),
            ms(o.step_us),
            ms(o.gpu_busy_us),
            ms(o.comm_us),
            pct(crate::trace::rank::share(o.overlap_us, o.comm_us)),
            ms(o.exposed_us),
            pct(k.comm_share),
            pct(k.exposed_share),
            k.collectives.to_string(),
        ]);
    }
    let mut out = format!("{t}\n");
    for k in &r.ranks {
        let mut notes = Vec::new();
        if k.skipped.total() > 0 {
            notes.push(format!(
                "{} event(s) skipped ({} without ts/dur, {} with a negative or invalid time)",
                k.skipped.total(),
                k.skipped.no_time,
                k.skipped.bad_time
            ));
        }
        if k.collectives_without_size > 0 {
            notes.push(format!(
                "{} collective(s) without a size (the profiler recorded no shapes for them)",
                k.collectives_without_size
            ));
        }
        if k.anonymous_comm_kernels > 0 {
            notes.push(format!(
                "{} NCCL kernel(s) no collective op launched (counted as communication, no size)",
                k.anonymous_comm_kernels
            ));
        }
        if !notes.is_empty() {
            let _ = writeln!(out, "rank {} ({}): {}", k.rank, k.file, notes.join("; "));
        }
    }
    out
}

fn sizes_table(r: &TraceReport) -> String {
    let s = &r.sizes;
    let mut t = table(&[
        "Collective",
        "Count",
        "GPU ms",
        "Under limit",
        "Under-limit GPU ms",
        "No size",
    ]);
    for k in &s.kinds {
        t.add_row(vec![
            k.kind.clone(),
            k.count.to_string(),
            ms(k.gpu_us),
            k.small.to_string(),
            ms(k.small_gpu_us),
            k.unknown_size.to_string(),
        ]);
    }
    let mut h = table(&["Size from", "to", "Count", "GPU ms"]);
    for b in &s.histogram {
        h.add_row(vec![
            size(b.from_bytes),
            size(b.to_bytes),
            b.count.to_string(),
            ms(b.gpu_us),
        ]);
    }
    format!(
        "\nby collective (limit {}{}):\n{t}\nmessage sizes (every rank):\n{h}\nunder {}: {} of communication time, {} of collectives\n",
        size(s.small_below),
        if s.small_from == "sweep" { ", the sweep's crossover" } else { "" },
        size(s.small_below),
        pct(s.small_time_share),
        pct(s.small_count_share)
    )
}

fn skew_text(r: &TraceReport) -> String {
    let k = &r.skew;
    if k.matched == 0 {
        return "\nrank skew: no collective matched across two or more ranks with GPU time\n".into();
    }
    let mut t = table(&["Rank", "Host", "Last to arrive", "Share", "Others wait, mean us"]);
    for l in &k.ranks {
        t.add_row(vec![
            l.rank.to_string(),
            l.host.clone().unwrap_or_else(|| "-".into()),
            l.last.to_string(),
            pct(l.last_share),
            format!("{:.1}", l.mean_late_us),
        ]);
    }
    let mut out = format!(
        "\nrank skew: {} collective(s) matched across ranks, {} with a clear last arrival{}:\n{t}\n",
        k.matched,
        k.judged,
        if k.mismatched > 0 {
            format!(", {} mismatched (the traces disagree)", k.mismatched)
        } else {
            String::new()
        }
    );
    for h in &k.within_host {
        let _ = writeln!(
            out,
            "{}: {} ranks start a collective within {:.1} us of each other (median; max {:.1} us)",
            h.host, h.ranks, h.median_spread_us, h.max_spread_us
        );
    }
    out
}
