//! The job across its ranks: collectives matched between ranks (process group and order, as
//! TraceLens groups them) to find who arrives last, the message-size histogram and the share
//! of communication in small messages, the bandwidth each size achieves against an
//! nccl-tests sweep, and the verdict line. Pure: figures in, figures and sentences out.

use super::name::Name;
use super::rank::{share, Collective, RankFigures};
use crate::bench::parse::SizeFigures;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Below this, a collective is "small" unless a sweep says where latency stops ruling.
pub(crate) const SMALL_DEFAULT: u64 = 1 << 20;
/// A share of communication time in small messages at or above this is named as the tax.
const SMALL_TAX: f64 = 0.3;
/// A size whose job bandwidth is below this fraction of nccl-tests' is named.
const SLOW_FRACTION: f64 = 0.5;
/// A rank last in at least this share of the matched collectives is the straggler.
const STRAGGLER_SHARE: f64 = 0.5;
/// Fewer matched collectives than this accuse no one.
const STRAGGLER_MIN: usize = 3;
/// Below this communication share (and this exposed share) tuning the fabric cannot pay.
const SMALL_COMM: f64 = 0.10;
const SMALL_EXPOSED: f64 = 0.05;

/// One rank as the job sees it.
pub(crate) struct RankIn<'a> {
    pub(crate) rank: u32,
    pub(crate) host: Option<&'a str>,
    /// The ranks on one clock (a host, or a `--ranks-per-node` group).
    pub(crate) group: Option<&'a str>,
    pub(crate) figures: &'a RankFigures,
}

/// One power-of-two size range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SizeBucket {
    pub(crate) from_bytes: u64,
    pub(crate) to_bytes: u64,
    pub(crate) count: u64,
    pub(crate) gpu_us: f64,
}

/// Collectives of one kind, every rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct KindFigures {
    pub(crate) kind: String,
    pub(crate) count: u64,
    pub(crate) gpu_us: f64,
    /// Of `gpu_us`, the time ranks' kernels waited for the last rank to arrive (in a
    /// collective matched across ranks: each one's kernel time less the last arriver's).
    pub(crate) waiting_us: f64,
    pub(crate) small: u64,
    /// The small ones' transfer time (their GPU time less the waiting).
    pub(crate) small_gpu_us: f64,
    pub(crate) unknown_size: u64,
}

/// Where the bytes go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Sizes {
    /// "Small" means below this many bytes.
    pub(crate) small_below: u64,
    /// `default` (1 MiB) or `sweep` (its crossover: the smallest size reaching half its peak).
    pub(crate) small_from: &'static str,
    pub(crate) histogram: Vec<SizeBucket>,
    pub(crate) kinds: Vec<KindFigures>,
    /// Share of communication GPU time that is the transfer of collectives below
    /// `small_below` (waiting for the last rank is not their cost: fewer, larger messages
    /// would not shorten it).
    pub(crate) small_time_share: f64,
    /// Share of collectives (by count) below `small_below`.
    pub(crate) small_count_share: f64,
    pub(crate) unknown_size: u64,
}

/// The job's bandwidth at one sweep size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Bandwidth {
    pub(crate) kind: String,
    pub(crate) size: u64,
    pub(crate) count: u64,
    /// Their GPU time together, µs.
    pub(crate) gpu_us: f64,
    /// Median bus bandwidth of the job's collectives nearest this size.
    pub(crate) job_busbw_gbps: f64,
    pub(crate) sweep_busbw_gbps: f64,
    pub(crate) ratio: f64,
}

/// How late one rank arrives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Lateness {
    pub(crate) rank: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) host: Option<String>,
    /// Matched collectives in which it was the last to arrive.
    pub(crate) last: u64,
    pub(crate) last_share: f64,
    /// Mean of (longest kernel − its own) over the matched collectives, µs: how long the
    /// others waited for it.
    pub(crate) mean_late_us: f64,
}

/// Start-time spread among the ranks of one host (one clock), µs; `host` is the hostfile's
/// name or the `node<k>` group of `--ranks-per-node`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct HostSpread {
    pub(crate) host: String,
    pub(crate) ranks: usize,
    pub(crate) median_spread_us: f64,
    pub(crate) max_spread_us: f64,
}

/// Rank skew across the matched collectives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Skew {
    /// Collectives found on two or more ranks at the same place (process group, kind, order).
    pub(crate) matched: u64,
    /// …of which one rank's kernel was clearly the shortest (it arrived last).
    pub(crate) judged: u64,
    /// Same place in a group and kind, different sizes: the traces disagree (sampled, cut,
    /// or from different jobs); not judged.
    pub(crate) mismatched: u64,
    pub(crate) ranks: Vec<Lateness>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) straggler: Option<u32>,
    pub(crate) within_host: Vec<HostSpread>,
}

fn bucket_of(bytes: u64) -> u32 {
    63 - bytes.max(1).leading_zeros()
}

/// The size histogram and the small-message share; `transfer[rank][collective]` is each
/// collective's own transfer time ([`transfers`]).
pub(crate) fn sizes(ranks: &[RankIn], transfer: &[Vec<f64>], small_below: u64, small_from: &'static str) -> Sizes {
    // Keyed by the power of two below the size; `None` (first) holds the 0-byte collectives
    // (an all-to-all with nothing to send), shown as 0 to 1 B.
    let mut histogram: BTreeMap<Option<u32>, SizeBucket> = BTreeMap::new();
    let mut kinds: BTreeMap<String, KindFigures> = BTreeMap::new();
    let (mut time, mut small_time, mut count, mut small_count, mut unknown) = (0.0, 0.0, 0u64, 0u64, 0u64);
    let mine = ranks.iter().enumerate().flat_map(|(ri, r)| {
        r.figures
            .collectives
            .iter()
            .enumerate()
            .map(move |(ci, c)| (c, transfer.get(ri).and_then(|t| t.get(ci)).copied().unwrap_or(c.gpu_us)))
    });
    for (c, transfer_us) in mine {
        let k = kinds.entry(c.kind.as_str().to_string()).or_insert_with(|| KindFigures {
            kind: c.kind.as_str().to_string(),
            count: 0,
            gpu_us: 0.0,
            waiting_us: 0.0,
            small: 0,
            small_gpu_us: 0.0,
            unknown_size: 0,
        });
        k.count += 1;
        k.gpu_us += c.gpu_us;
        k.waiting_us += c.gpu_us - transfer_us;
        let Some(bytes) = c.bytes() else {
            k.unknown_size += 1;
            unknown += 1;
            continue;
        };
        count += 1;
        time += c.gpu_us;
        let b = (bytes > 0).then(|| bucket_of(bytes));
        let e = histogram.entry(b).or_insert_with(|| SizeBucket {
            from_bytes: b.map_or(0, |b| 1 << b),
            to_bytes: b.map_or(1, |b| 1u64.checked_shl(b + 1).unwrap_or(u64::MAX)),
            count: 0,
            gpu_us: 0.0,
        });
        e.count += 1;
        e.gpu_us += c.gpu_us;
        if bytes < small_below {
            small_count += 1;
            small_time += transfer_us;
            k.small += 1;
            k.small_gpu_us += transfer_us;
        }
    }
    Sizes {
        small_below,
        small_from,
        histogram: histogram.into_values().collect(),
        kinds: kinds.into_values().collect(),
        small_time_share: share(small_time, time),
        small_count_share: share(small_count as f64, count as f64),
        unknown_size: unknown,
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The job's all-reduce bandwidth at each size of an all-reduce sweep: collectives within a
/// factor of 2 of the sweep's size, over more than one rank.
pub(crate) fn bandwidth(ranks: &[RankIn], sweep: &[SizeFigures]) -> Vec<Bandwidth> {
    let mut near: BTreeMap<usize, (Vec<f64>, f64)> = BTreeMap::new();
    for c in ranks.iter().flat_map(|r| &r.figures.collectives) {
        let (Some(bytes), Some(busbw)) = (c.bytes(), c.busbw_gbps()) else {
            continue;
        };
        if c.kind.as_str() != "allreduce" || c.group_size().unwrap_or(0) < 2 || busbw <= 0.0 {
            continue;
        }
        let distance = |row: &SizeFigures| ((bytes as f64).log2() - (row.size.max(1) as f64).log2()).abs();
        let best = (0..sweep.len()).min_by(|&a, &b| distance(&sweep[a]).total_cmp(&distance(&sweep[b])));
        if let Some(i) = best.filter(|&i| distance(&sweep[i]) <= 1.0) {
            let e = near.entry(i).or_default();
            e.0.push(busbw);
            e.1 += c.gpu_us;
        }
    }
    near.into_iter()
        .filter(|(i, _)| sweep[*i].busbw > 0.0)
        .filter_map(|(i, (v, gpu_us))| {
            let count = v.len() as u64;
            let job = median(v)?;
            Some(Bandwidth {
                kind: "allreduce".into(),
                size: sweep[i].size,
                count,
                gpu_us,
                job_busbw_gbps: job,
                sweep_busbw_gbps: sweep[i].busbw,
                ratio: job / sweep[i].busbw,
            })
        })
        .collect()
}

/// Whether two ranks' collectives at one place are the same collective: one group size, and
/// one size (all-to-all sizes differ between ranks by design: uneven splits).
fn same_collective(a: &Collective, b: &Collective) -> bool {
    a.group_size() == b.group_size()
        && (a.kind.as_str() == "alltoall" || a.bytes().is_none() || b.bytes().is_none() || a.bytes() == b.bytes())
}

/// Each rank's collective at one place (process group, kind, order), as its rank's and its
/// own index.
type Placed = BTreeMap<(Name, Name, u32), Vec<(u32, u32)>>;

/// Each collective's own transfer time, µs (`[rank][collective]`): in a collective matched
/// across ranks, the last arriver's kernel time — the others' kernels are longer by the time
/// they waited for it; a collective no other rank matches keeps its whole time (nothing
/// tells its waiting apart).
pub(crate) fn transfers(ranks: &[RankIn]) -> Vec<Vec<f64>> {
    let mut out: Vec<Vec<f64>> = ranks
        .iter()
        .map(|r| r.figures.collectives.iter().map(|c| c.gpu_us).collect())
        .collect();
    let mut by_key: Placed = BTreeMap::new();
    for (ri, r) in ranks.iter().enumerate() {
        for (ci, c) in r.figures.collectives.iter().enumerate() {
            // Indices, not references: 8 bytes a collective while the job is matched.
            by_key
                .entry((c.pg, c.kind, c.seq))
                .or_default()
                .push((ri as u32, ci as u32));
        }
    }
    let at = |(ri, ci): (u32, u32)| &ranks[ri as usize].figures.collectives[ci as usize];
    for members in by_key.values().filter(|m| m.len() >= 2) {
        let first = at(members[0]);
        if members.iter().any(|m| !same_collective(first, at(*m))) {
            continue;
        }
        let timed: Vec<(u32, u32)> = members.iter().copied().filter(|m| at(*m).gpu_us > 0.0).collect();
        if timed.len() < 2 {
            continue;
        }
        let shortest = timed.iter().map(|m| at(*m).gpu_us).fold(f64::INFINITY, f64::min);
        for (ri, ci) in timed {
            out[ri as usize][ci as usize] = shortest;
        }
    }
    out
}

/// Each rank's collective at one place (process group, kind, order), with its rank's index.
type Matched<'a> = BTreeMap<(Name, Name, u32), Vec<(usize, &'a Collective)>>;

/// Collectives matched across ranks and who arrives last. The last to arrive at a collective
/// waits least: its kernel is the shortest, the others' longer by how long they waited. Kernel
/// durations need no common clock; start times are compared only among ranks of one host.
pub(crate) fn skew(ranks: &[RankIn]) -> Skew {
    let mut by_key: Matched = BTreeMap::new();
    for (ri, r) in ranks.iter().enumerate() {
        for c in &r.figures.collectives {
            by_key.entry((c.pg, c.kind, c.seq)).or_default().push((ri, c));
        }
    }
    let mut tally = Tally::new(ranks.len());
    let mut spreads: HashMap<&str, (usize, Vec<f64>)> = HashMap::new();
    for members in by_key.values().filter(|m| m.len() >= 2) {
        if let Some(timed) = tally.judge(members) {
            host_spreads(ranks, &timed, &mut spreads);
        }
    }
    let lateness: Vec<Lateness> = ranks
        .iter()
        .enumerate()
        .map(|(i, r)| Lateness {
            rank: r.rank,
            host: r.host.map(str::to_string),
            last: tally.last[i],
            last_share: share(tally.last[i] as f64, tally.judged as f64),
            mean_late_us: share(tally.late_sum[i], tally.seen[i] as f64),
        })
        .collect();
    let straggler = lateness
        .iter()
        .max_by_key(|l| l.last)
        .filter(|l| tally.judged as usize >= STRAGGLER_MIN && l.last_share >= STRAGGLER_SHARE)
        .map(|l| l.rank);
    Skew {
        matched: tally.matched,
        judged: tally.judged,
        mismatched: tally.mismatched,
        ranks: lateness,
        straggler,
        within_host: within_host(spreads),
    }
}

/// Per rank: how often it arrived last, and how long the others waited for it.
struct Tally {
    last: Vec<u64>,
    late_sum: Vec<f64>,
    seen: Vec<u64>,
    matched: u64,
    judged: u64,
    mismatched: u64,
}

impl Tally {
    fn new(ranks: usize) -> Self {
        Tally {
            last: vec![0; ranks],
            late_sum: vec![0.0; ranks],
            seen: vec![0; ranks],
            matched: 0,
            judged: 0,
            mismatched: 0,
        }
    }

    /// One collective as the ranks ran it: the members that ran GPU work, when two or more did
    /// and the ranks agree on what it was.
    fn judge<'m, 'a>(&mut self, members: &'m [(usize, &'a Collective)]) -> Option<Vec<&'m (usize, &'a Collective)>> {
        let first = members[0].1;
        if members.iter().any(|(_, c)| !same_collective(first, c)) {
            self.mismatched += 1;
            return None;
        }
        let timed: Vec<&(usize, &Collective)> = members.iter().filter(|(_, c)| c.gpu_us > 0.0).collect();
        if timed.len() < 2 {
            return None;
        }
        self.matched += 1;
        let longest = timed.iter().map(|(_, c)| c.gpu_us).fold(0.0, f64::max);
        let shortest = timed.iter().map(|(_, c)| c.gpu_us).fold(f64::INFINITY, f64::min);
        for (ri, c) in &timed {
            self.late_sum[*ri] += longest - c.gpu_us;
            self.seen[*ri] += 1;
        }
        if longest - shortest >= (0.05 * longest).max(10.0) {
            self.judged += 1;
            if let Some((ri, _)) = timed.iter().min_by(|a, b| a.1.gpu_us.total_cmp(&b.1.gpu_us)) {
                self.last[*ri] += 1;
            }
        }
        Some(timed)
    }
}

fn within_host(spreads: HashMap<&str, (usize, Vec<f64>)>) -> Vec<HostSpread> {
    let mut out: Vec<HostSpread> = spreads
        .into_iter()
        .filter_map(|(host, (n, v))| {
            let max = v.iter().copied().fold(0.0, f64::max);
            Some(HostSpread {
                host: host.to_string(),
                ranks: n,
                median_spread_us: median(v)?,
                max_spread_us: max,
            })
        })
        .collect();
    out.sort_by(|a, b| a.host.cmp(&b.host));
    out
}

/// Per host, the spread of GPU start times among its ranks in one collective.
fn host_spreads<'a>(
    ranks: &[RankIn<'a>],
    timed: &[&(usize, &Collective)],
    out: &mut HashMap<&'a str, (usize, Vec<f64>)>,
) {
    let mut starts: HashMap<&str, Vec<i64>> = HashMap::new();
    for (ri, c) in timed {
        if let (Some(h), Some(s)) = (ranks[*ri].group, c.gpu_start_ns()) {
            starts.entry(h).or_default().push(s);
        }
    }
    for (h, s) in starts.into_iter().filter(|(_, s)| s.len() >= 2) {
        let spread = (s.iter().max().copied().unwrap_or(0) - s.iter().min().copied().unwrap_or(0)) as f64 / 1000.0;
        let e = out.entry(h).or_insert((0, Vec::new()));
        e.0 = e.0.max(s.len());
        e.1.push(spread);
    }
}

/// What the job's figures come to, overall and per rank (shares of the step).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct JobShares {
    pub(crate) comm_share: f64,
    pub(crate) exposed_share: f64,
    /// Overlapped share of communication time (HTA's `comm_comp_overlap_pctg` / 100).
    pub(crate) overlap_share: f64,
    pub(crate) comm_us: f64,
    pub(crate) step_us: f64,
    pub(crate) collectives: usize,
}

pub(crate) fn shares(ranks: &[RankIn]) -> JobShares {
    let n = ranks.len().max(1) as f64;
    let mean = |f: &dyn Fn(&RankFigures) -> f64| ranks.iter().map(|r| f(r.figures)).sum::<f64>() / n;
    JobShares {
        comm_share: mean(&|f| f.overall.comm_share()),
        exposed_share: mean(&|f| f.overall.exposed_share()),
        overlap_share: mean(&|f| share(f.overall.overlap_us, f.overall.comm_us)),
        comm_us: ranks.iter().map(|r| r.figures.overall.comm_us).sum(),
        step_us: ranks.iter().map(|r| r.figures.overall.step_us).sum(),
        collectives: ranks.iter().map(|r| r.figures.collectives.len()).sum(),
    }
}

/// One part of the verdict, as figures: `report::trace` says it in words. The parts come in
/// the order an operator acts on them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Finding {
    /// No collective at all in the traces.
    NoCollectives,
    /// Communication kernels that no CPU op issued (a CUDA-graph replay replays kernels
    /// without their ops): counted as communication, their collectives and sizes unknown.
    UnissuedComm { kernels: u64 },
    /// Collectives found through their CPU ops, none with GPU work; `one_rank` when every group
    /// has one rank (NCCL moves no data).
    NoGpuWork { collectives: usize, one_rank: bool },
    /// Communication's share of the step, and the share exposed (not overlapped by compute).
    Comm { share: f64, exposed: f64 },
    /// The small-message tax: `share` of communication (of its time, else of its count) goes to
    /// messages under `below` bytes, most of it in collectives of `kind`.
    SmallMessages {
        share: f64,
        by_time: bool,
        kind: Option<String>,
        below: u64,
        /// `below` is this fabric's latency-bound limit, read from the sweep.
        from_sweep: bool,
    },
    /// The size where the most time is lost to running slower than nccl-tests does.
    SlowSize {
        kind: String,
        size: u64,
        job_gbps: f64,
        sweep_gbps: f64,
    },
    /// A rank the others wait for.
    Straggler {
        rank: u32,
        host: Option<String>,
        last_share: f64,
        judged: u64,
        /// Every rank's kernel time spent waiting for the last to arrive, µs, and the
        /// transfers themselves.
        waiting_us: f64,
        transfer_us: f64,
    },
    /// GPU work that ran past the end of the profiler step it was launched in, on `ranks`
    /// ranks: cut there (the step's figures count only what ran inside it).
    PastStep { kernels: u64, us: f64, ranks: usize },
    /// Communication is too small a part of the step for the fabric to matter.
    CommIsSmall,
    /// doctor on the straggler's host (added by the flow that can reach it).
    Doctor { host: String, said: DoctorSaid },
}

/// What doctor said of a host.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DoctorSaid {
    /// Its most telling failing (or warning) check.
    Cause {
        phrase: String,
        check: String,
        detail: String,
        fix: Option<String>,
    },
    /// Nothing wrong.
    Nothing,
    /// It could not look, and why.
    CouldNot(String),
}

/// The verdict's parts, in the order an operator acts on them.
pub(crate) fn verdict(j: &JobShares, sizes: &Sizes, bw: &[Bandwidth], skew: &Skew, ranks: &[RankIn]) -> Vec<Finding> {
    let unissued: u64 = ranks.iter().map(|r| r.figures.anonymous_comm_kernels).sum();
    if j.collectives == 0 && (unissued == 0 || j.comm_us == 0.0) {
        return vec![Finding::NoCollectives];
    }
    let mut out = Vec::new();
    if j.comm_us == 0.0 {
        let one_rank = ranks
            .iter()
            .all(|r| r.figures.collectives.iter().all(|c| c.group_size().unwrap_or(1) <= 1));
        out.push(Finding::NoGpuWork {
            collectives: j.collectives,
            one_rank,
        });
    } else {
        out.push(Finding::Comm {
            share: j.comm_share,
            exposed: j.exposed_share,
        });
    }
    if unissued > 0 {
        out.push(Finding::UnissuedComm { kernels: unissued });
    }
    let past: Vec<&super::rank::PastStep> = ranks
        .iter()
        .map(|r| &r.figures.past_step)
        .filter(|p| p.kernels > 0)
        .collect();
    if !past.is_empty() {
        out.push(Finding::PastStep {
            kernels: past.iter().map(|p| p.kernels).sum(),
            us: past.iter().map(|p| p.us).sum(),
            ranks: past.len(),
        });
    }
    out.extend(small_messages(j, sizes));
    let lost = |b: &Bandwidth| b.gpu_us * (1.0 - b.ratio);
    if let Some(b) = bw
        .iter()
        .filter(|b| b.ratio < SLOW_FRACTION)
        .max_by(|a, b| lost(a).total_cmp(&lost(b)))
    {
        out.push(Finding::SlowSize {
            kind: b.kind.clone(),
            size: b.size,
            job_gbps: b.job_busbw_gbps,
            sweep_gbps: b.sweep_busbw_gbps,
        });
    }
    if let Some(r) = skew.straggler.and_then(|s| skew.ranks.iter().find(|l| l.rank == s)) {
        out.push(Finding::Straggler {
            rank: r.rank,
            host: r.host.clone(),
            last_share: r.last_share,
            judged: skew.judged,
            waiting_us: sizes.kinds.iter().map(|k| k.waiting_us).sum(),
            transfer_us: sizes.kinds.iter().map(|k| k.gpu_us - k.waiting_us).sum(),
        });
    }
    if j.comm_us > 0.0 && j.comm_share < SMALL_COMM && j.exposed_share < SMALL_EXPOSED {
        out.push(Finding::CommIsSmall);
    }
    out
}

fn small_messages(j: &JobShares, sizes: &Sizes) -> Option<Finding> {
    let by_time = j.comm_us > 0.0;
    let share = if by_time {
        sizes.small_time_share
    } else {
        sizes.small_count_share
    };
    if share < SMALL_TAX {
        return None;
    }
    let kind = sizes
        .kinds
        .iter()
        .max_by(|a, b| {
            let key = |k: &KindFigures| if by_time { k.small_gpu_us } else { k.small as f64 };
            key(a).total_cmp(&key(b))
        })
        .map(|k| k.kind.clone());
    Some(Finding::SmallMessages {
        share,
        by_time,
        kind,
        below: sizes.small_below,
        from_sweep: sizes.small_from == "sweep",
    })
}
