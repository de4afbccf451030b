//! `diagnose --trace`'s tables: per rank the step, communication, overlap and exposure; the
//! message sizes and where the time goes; bandwidth against the sweep; who arrives last; and
//! the verdict.

use super::apply::size;
use super::diagnose::DoctorOn;
use super::envelope::{Envelope, NoDetail};
use super::table;
use crate::model::size::show as show_bytes;
use crate::trace::job::{DoctorSaid, Finding};
use crate::trace::TraceReport;
use serde::{Serialize, Serializer};
use std::fmt::Write as _;

#[derive(Debug, Serialize)]
pub(crate) struct TracePayload {
    #[serde(serialize_with = "with_words")]
    pub(crate) trace: TraceReport,
    /// doctor on the straggler's host, when the cluster was given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) doctor: Vec<DoctorOn>,
}

/// The report with its findings in words (`findings`) and joined (`verdict`), as
/// diagnose-trace.schema.json has them.
fn with_words<S: Serializer>(r: &TraceReport, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Worded<'a> {
        #[serde(flatten)]
        report: &'a TraceReport,
        findings: Vec<String>,
        verdict: String,
    }
    let findings: Vec<String> = r.findings.iter().map(sentence).collect();
    let verdict = findings.join("; ");
    Worded {
        report: r,
        findings,
        verdict,
    }
    .serialize(s)
}

/// The verdict in one line: every finding, in order.
pub(crate) fn verdict(r: &TraceReport) -> String {
    r.findings.iter().map(sentence).collect::<Vec<_>>().join("; ")
}

fn whole_pct(f: f64) -> String {
    format!("{:.0}%", f * 100.0)
}

/// Plural of a collective kind for a sentence: `all-reduces`.
fn plural(kind: &str) -> String {
    match kind {
        "allreduce" => "all-reduces".into(),
        "allgather" => "all-gathers".into(),
        "reducescatter" => "reduce-scatters".into(),
        "alltoall" => "all-to-alls".into(),
        "broadcast" => "broadcasts".into(),
        "sendrecv" => "sends/receives".into(),
        k => format!("{k}s"),
    }
}

/// One finding as the sentence an operator reads.
pub(crate) fn sentence(f: &Finding) -> String {
    match f {
        Finding::NoCollectives => "no collective in the traces: the job does not communicate through torch.distributed, or the profiler did not record its ops (record_shapes, CPU activity)".into(),
        Finding::NoGpuWork { collectives, one_rank } => format!(
            "{collectives} collectives found through their CPU ops, none ran GPU work{}",
            if *one_rank {
                ": one rank (group size 1), NCCL moves no data; the figures show the job's collective pattern only"
            } else {
                ""
            }
        ),
        Finding::Comm { share, exposed } => {
            format!("communication {} of the step, {} exposed", whole_pct(*share), whole_pct(*exposed))
        }
        Finding::SmallMessages {
            share,
            by_time,
            kind,
            below,
            from_sweep,
        } => format!(
            "{} of it{} in {} under {}{}: {}",
            whole_pct(*share),
            if *by_time { "" } else { " (by count)" },
            kind.as_deref().map_or_else(|| "collectives".into(), plural),
            show_bytes(*below),
            if *from_sweep {
                format!(" (latency-bound on this fabric below {})", show_bytes(*below))
            } else {
                String::new()
            },
            small_message_advice(kind.as_deref())
        ),
        Finding::SlowSize {
            kind,
            size,
            job_gbps,
            sweep_gbps,
        } => format!(
            "{} of {} runs at {job_gbps:.1} GB/s busbw in the job, {sweep_gbps:.1} GB/s in nccl-tests: contention or a wait inside the job",
            kind.replace("allreduce", "all-reduce"),
            show_bytes(*size),
        ),
        Finding::Straggler {
            rank,
            host,
            last_share,
            judged,
            waiting_us,
            transfer_us,
        } => format!(
            "rank {rank}{} arrives last in {} of {judged} matched collectives ({} ms of kernel time waiting for the last rank, {} ms transferring): {}",
            host.as_deref().map(|h| format!(" ({h})")).unwrap_or_default(),
            whole_pct(*last_share),
            ms(*waiting_us),
            ms(*transfer_us),
            host.as_deref().map_or_else(
                || "name its host (--hostfile) and run doctor there".to_string(),
                |h| format!("doctor on {h}"),
            )
        ),
        Finding::UnissuedComm { kernels } => format!(
            "{kernels} communication kernel(s) ran with no CPU op issuing them (a CUDA-graph replay, or a collective outside torch.distributed): counted as communication by their names, their collectives and sizes unknown"
        ),
        Finding::PastStep { kernels, us, ranks } => format!(
            "{kernels} GPU event(s) on {ranks} rank(s) ran past the end of the profiler step that launched them ({} ms cut): each step counts only what ran inside it; the step ends on the CPU before its GPU work (no synchronisation at the step's end)",
            ms(*us)
        ),
        Finding::CommIsSmall => "communication is a small part of the step: tuning the fabric will not pay here; the time is compute or input".into(),
        Finding::Doctor { host, said } => doctor_sentence(host, said),
    }
}

fn doctor_sentence(host: &str, said: &DoctorSaid) -> String {
    const OTHERWISE: &str = "look at its GPUs and NICs (topo-tune probe --matrix)";
    match said {
        DoctorSaid::Cause {
            phrase,
            check,
            detail,
            fix,
        } => format!(
            "{phrase} on {host} ({check}): {detail} (fix: {})",
            fix.as_deref().unwrap_or_default()
        ),
        DoctorSaid::Nothing => format!("doctor finds nothing wrong on {host}: {OTHERWISE}"),
        DoctorSaid::CouldNot(why) => format!("doctor could not check {host} ({why}); {OTHERWISE}"),
    }
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
    let _ = writeln!(out, "\nverdict: {}", verdict(r));
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
                "{} communication kernel(s) no collective op launched (counted as communication, no size)",
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
        "Waiting ms",
        "Under limit",
        "Under-limit transfer ms",
        "No size",
    ]);
    for k in &s.kinds {
        t.add_row(vec![
            k.kind.clone(),
            k.count.to_string(),
            ms(k.gpu_us),
            ms(k.waiting_us),
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

/// What makes small collectives fewer and larger: DDP's gradient buckets feed its
/// all-reduces only (torch DistributedDataParallel `bucket_cap_mb`); FSDP's all-gathers and
/// reduce-scatters follow its wrapping; an all-to-all's size is the model's (MoE dispatch,
/// embedding exchange) — no bucket touches it.
fn small_message_advice(kind: Option<&str>) -> &'static str {
    match kind {
        Some("allreduce") => "raise DDP's bucket size (bucket_cap_mb) or fuse gradients",
        Some("allgather" | "reducescatter") => "wrap larger FSDP units (fewer, larger all-gathers and reduce-scatters)",
        Some(_) => "batch them into fewer, larger calls (a bucket size does not touch them)",
        None => "fuse them into fewer, larger calls (for DDP's all-reduces: bucket_cap_mb)",
    }
}
