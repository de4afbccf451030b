//! `diagnose --trace`: a job's own PyTorch profiler traces read for how much of a training
//! step is communication, how much of it is exposed, which message sizes it goes to, how fast
//! each size runs against nccl-tests, and which rank the others wait for. The reader streams
//! (`read`), each rank is reduced to figures (`rank`), the ranks are compared (`job`). Pure:
//! readers in, a report out; opening files, threads and doctor are the flow's.

pub(crate) mod intervals;
pub(crate) mod job;
pub(crate) mod name;
pub(crate) mod rank;
pub(crate) mod read;
pub(crate) mod scan;

use crate::bench::parse::SizeFigures;
use serde::Serialize;

/// One rank's trace, read, with where it came from.
pub(crate) struct RankTrace {
    pub(crate) rank: u32,
    pub(crate) file: String,
    /// Its host, from a hostfile.
    pub(crate) host: Option<String>,
    /// The ranks that share its clock: its host, or `node<k>` by `--ranks-per-node`.
    pub(crate) group: Option<String>,
    pub(crate) world_size: Option<i64>,
    pub(crate) nccl_version: Option<String>,
    /// Its process groups as `distributedInfo.pg_config` lists them: name and size.
    pub(crate) groups: Vec<(String, Option<u64>)>,
    pub(crate) events: u64,
    pub(crate) skipped: read::Skipped,
    pub(crate) figures: rank::RankFigures,
}

/// Most process groups kept per rank (a job has a handful; a trace may list thousands).
const MAX_GROUPS: usize = 4096;

/// Why a set of traces is not one job's: what two files disagree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TwoJobs {
    pub(crate) first: String,
    pub(crate) second: String,
    pub(crate) what: String,
}

impl std::fmt::Display for TwoJobs {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        if self.first == self.second {
            write!(f, "{} is not a trace of this job: {}", self.first, self.what)
        } else {
            write!(
                f,
                "{} and {} are not one job's traces: {}",
                self.first, self.second, self.what
            )
        }
    }
}

impl std::error::Error for TwoJobs {}

/// The ranks are one job's: the same world size, NCCL version and process groups (a group
/// both list has one size), and every rank inside its world. Ranks that do not say are not
/// judged on what they do not say.
pub(crate) fn one_job(ranks: &[RankTrace]) -> Result<(), TwoJobs> {
    let two = |a: &RankTrace, b: &RankTrace, what: String| TwoJobs {
        first: a.file.clone(),
        second: b.file.clone(),
        what,
    };
    for r in ranks {
        if let Some(w) = r.world_size.filter(|w| i64::from(r.rank) >= *w) {
            return Err(two(r, r, format!("rank {} in a world of {w}", r.rank)));
        }
    }
    let first_with = |f: &dyn Fn(&RankTrace) -> bool| ranks.iter().find(|r| f(r));
    if let Some(a) = first_with(&|r| r.world_size.is_some()) {
        if let Some(b) = first_with(&|r| r.world_size.is_some_and(|w| Some(w) != a.world_size)) {
            let (x, y) = (a.world_size.unwrap_or(0), b.world_size.unwrap_or(0));
            return Err(two(a, b, format!("world size {x} and {y}")));
        }
    }
    if let Some(a) = first_with(&|r| r.nccl_version.is_some()) {
        if let Some(b) = first_with(&|r| r.nccl_version.is_some() && r.nccl_version != a.nccl_version) {
            let v = |r: &RankTrace| r.nccl_version.clone().unwrap_or_default();
            return Err(two(a, b, format!("NCCL {} and {}", v(a), v(b))));
        }
    }
    let mut sizes: std::collections::HashMap<&str, (&RankTrace, u64)> = std::collections::HashMap::new();
    for r in ranks {
        for (name, size) in &r.groups {
            let Some(size) = *size else { continue };
            match sizes.get(name.as_str()) {
                Some((a, n)) if *n != size => {
                    return Err(two(a, r, format!("process group `{name}` of {n} and of {size} ranks")));
                }
                Some(_) => {}
                None => {
                    sizes.insert(name, (r, size));
                }
            }
        }
    }
    Ok(())
}

impl RankTrace {
    /// Reduce a read trace to its figures (the events are dropped here).
    pub(crate) fn new(
        rank: u32,
        file: String,
        host: Option<String>,
        group: Option<String>,
        raw: read::RawTrace,
    ) -> Self {
        let dist = raw.dist.clone().unwrap_or_default();
        let (events, skipped) = (raw.events, raw.skipped.clone());
        RankTrace {
            rank,
            file,
            group: group.or_else(|| host.clone()),
            host,
            world_size: dist.world_size,
            nccl_version: dist.nccl_version,
            groups: dist
                .pg_config
                .iter()
                .take(MAX_GROUPS)
                .map(|g| {
                    let size = g
                        .pg_size
                        .or_else(|| (!g.ranks.is_empty()).then_some(g.ranks.len() as u64));
                    (g.pg_name.clone(), size)
                })
                .collect(),
            events,
            skipped,
            figures: rank::figures(raw),
        }
    }
}

/// An nccl-tests all-reduce sweep to hold the job against.
pub(crate) struct SweepRef {
    pub(crate) file: String,
    pub(crate) rows: Vec<SizeFigures>,
    pub(crate) ranks: u32,
}

/// One rank in the report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RankReport {
    pub(crate) rank: u32,
    pub(crate) file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) world_size: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) nccl_version: Option<String>,
    pub(crate) events: u64,
    pub(crate) skipped: read::Skipped,
    pub(crate) overall: rank::StepFigures,
    pub(crate) comm_share: f64,
    pub(crate) exposed_share: f64,
    pub(crate) steps: Vec<rank::StepFigures>,
    pub(crate) collectives: usize,
    pub(crate) collectives_without_size: usize,
    pub(crate) anonymous_comm_kernels: u64,
    pub(crate) past_step: rank::PastStep,
}

/// What the traces say.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TraceReport {
    pub(crate) ranks: Vec<RankReport>,
    pub(crate) job: job::JobShares,
    pub(crate) sizes: job::Sizes,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sweep: Option<String>,
    pub(crate) bandwidth: Vec<job::Bandwidth>,
    pub(crate) skew: job::Skew,
    /// The verdict's parts, as figures (`report::trace` puts them into words for the table
    /// and the JSON's `findings` and `verdict`).
    #[serde(skip)]
    pub(crate) findings: Vec<job::Finding>,
}

/// The report of a job's ranks (in rank order), against a sweep when one is given.
pub(crate) fn analyse(ranks: &[RankTrace], sweep: Option<&SweepRef>) -> TraceReport {
    let inputs: Vec<job::RankIn> = ranks
        .iter()
        .map(|r| job::RankIn {
            rank: r.rank,
            host: r.host.as_deref(),
            group: r.group.as_deref(),
            figures: &r.figures,
        })
        .collect();
    let crossover = sweep.and_then(|s| crate::bench::sweep::findings(&s.rows, s.ranks).crossover);
    let (small_below, small_from) = match crossover {
        Some(c) => (c, "sweep"),
        None => (job::SMALL_DEFAULT, "default"),
    };
    let transfer = job::transfers(&inputs);
    let sizes = job::sizes(&inputs, &transfer, small_below, small_from);
    let bandwidth = sweep.map(|s| job::bandwidth(&inputs, &s.rows)).unwrap_or_default();
    let skew = job::skew(&inputs);
    let shares = job::shares(&inputs);
    let findings = job::verdict(&shares, &sizes, &bandwidth, &skew, &inputs);
    TraceReport {
        ranks: ranks.iter().map(rank_report).collect(),
        job: shares,
        findings,
        sizes,
        sweep: sweep.map(|s| s.file.clone()),
        bandwidth,
        skew,
    }
}

fn rank_report(r: &RankTrace) -> RankReport {
    let f = &r.figures;
    RankReport {
        rank: r.rank,
        file: r.file.clone(),
        host: r.host.clone(),
        world_size: r.world_size,
        nccl_version: r.nccl_version.clone(),
        events: r.events,
        skipped: r.skipped.clone(),
        comm_share: f.overall.comm_share(),
        exposed_share: f.overall.exposed_share(),
        overall: f.overall.clone(),
        steps: f.steps.clone(),
        collectives: f.collectives.len(),
        collectives_without_size: f.collectives.iter().filter(|c| c.bytes().is_none()).count(),
        anonymous_comm_kernels: f.anonymous_comm_kernels,
        past_step: f.past_step,
    }
}
