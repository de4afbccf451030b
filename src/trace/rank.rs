//! One rank's trace turned into figures: its collectives (each from the CPU op that issued
//! it — `record_param_comms` inside `c10d::*`, or a kernel that carries the arguments — with
//! its GPU work found through `correlation`, its bytes from the op's arguments, never from a
//! kernel name), and per profiler step the step time, GPU busy time, communication,
//! computation, their overlap and the exposed communication (HTA's method).

use super::intervals::{self, Span};
use super::name::Name;
use super::read::{self, CommArgs, CommOp, GpuClass, OpKind, RawTrace};
use serde::Serialize;
use std::collections::HashMap;

/// One collective as one rank ran it: 64 bytes (a collective-heavy rank keeps hundreds of
/// thousands; names are held once for the process, absent figures are sentinels behind the
/// accessors).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Collective {
    /// `allreduce`, `allgather`, `reducescatter`, `alltoall`, `broadcast`, `reduce`,
    /// `sendrecv`, `barrier`, or the name PyTorch gave.
    pub(crate) kind: Name,
    /// Its process group's name (`""` when the trace does not say).
    pub(crate) pg: Name,
    /// The larger of its input and output, as nccl-tests counts a size; `u64::MAX`: unknown.
    bytes: u64,
    /// 0: unknown.
    group_size: u32,
    /// Its place among the collectives of its kind and process group on this rank, from 0
    /// (NCCL runs one communicator's collectives in the same order on every rank).
    pub(crate) seq: u32,
    /// `u64::MAX`: in no step.
    step: u64,
    /// When the CPU issued it, ns on this host's clock.
    pub(crate) issued_ns: i64,
    /// When its first GPU work started, ns; `i64::MIN`: it ran none.
    gpu_start_ns: i64,
    /// The union of its GPU work, µs (0 when it launched none: one rank).
    pub(crate) gpu_us: f64,
    /// Where its figures come from.
    pub(crate) source: Source,
}

/// Where a collective's figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    RecordParamComms,
    C10d,
    Nccl,
    Kernel,
}

impl Collective {
    pub(crate) fn bytes(&self) -> Option<u64> {
        (self.bytes != u64::MAX).then_some(self.bytes)
    }
    pub(crate) fn group_size(&self) -> Option<u64> {
        (self.group_size != 0).then_some(u64::from(self.group_size))
    }
    pub(crate) fn step(&self) -> Option<u64> {
        (self.step != u64::MAX).then_some(self.step)
    }
    pub(crate) fn gpu_start_ns(&self) -> Option<i64> {
        (self.gpu_start_ns != i64::MIN).then_some(self.gpu_start_ns)
    }
    /// Bytes over GPU time, GB/s.
    pub(crate) fn algbw_gbps(&self) -> Option<f64> {
        self.bytes()
            .filter(|_| self.gpu_us > 0.0)
            .map(|b| b as f64 / (self.gpu_us * 1000.0))
    }
    /// The algorithm bandwidth × nccl-tests' bus factor for its kind and group.
    pub(crate) fn busbw_gbps(&self) -> Option<f64> {
        let f = self.group_size().and_then(|n| bus_factor(self.kind.as_str(), n))?;
        Some(self.algbw_gbps()? * f)
    }
}

/// One step's figures (or the whole trace's, summed over its steps).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct StepFigures {
    /// `N` of `ProfilerStep#N`; `None` for the sum, or a trace without steps.
    pub(crate) step: Option<u64>,
    pub(crate) step_us: f64,
    pub(crate) gpu_busy_us: f64,
    pub(crate) compute_us: f64,
    pub(crate) comm_us: f64,
    /// Communication while computation runs (on another stream).
    pub(crate) overlap_us: f64,
    /// Communication with no computation beside it: `comm − overlap`.
    pub(crate) exposed_us: f64,
    pub(crate) collectives: usize,
}

impl StepFigures {
    pub(crate) fn comm_share(&self) -> f64 {
        share(self.comm_us, self.step_us)
    }
    pub(crate) fn exposed_share(&self) -> f64 {
        share(self.exposed_us, self.step_us)
    }
}

pub(crate) fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}

/// What one rank's trace shows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RankFigures {
    pub(crate) steps: Vec<StepFigures>,
    pub(crate) overall: StepFigures,
    pub(crate) collectives: Vec<Collective>,
    /// Communication kernels no collective op or argument names (their time still counts).
    pub(crate) anonymous_comm_kernels: u64,
    /// GPU work that ran past the end of the step it was launched in (cut there).
    pub(crate) past_step: PastStep,
}

/// GPU work cut at the end of its profiler step: a step's figures count only what ran inside
/// it, so no share of the step exceeds 100 %.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct PastStep {
    /// GPU events that ran past their step's end.
    pub(crate) kernels: u64,
    /// The time they ran past it, µs.
    pub(crate) us: f64,
}

/// A collective's canonical kind from any of PyTorch's spellings (`c10d::_allgather_base_`,
/// `nccl:all_reduce`, `allreduce_coalesced`, `all_to_all`).
pub(crate) fn canonical_kind(name: &str) -> String {
    let n = name
        .trim_start_matches("c10d::")
        .trim_start_matches("nccl:")
        .trim_start_matches("symm_mem::");
    let n = n.trim_matches('_');
    let n = ["_base", "_coalesced", "_into_tensor", "_single", "_tensor"]
        .iter()
        .fold(n.to_string(), |s, cut| s.replace(cut, ""));
    let n: String = n.chars().filter(|c| *c != '_').collect::<String>().to_ascii_lowercase();
    match n.as_str() {
        "alltoallbase" | "alltoall" | "alltoallv" => "alltoall".into(),
        "multimemallreduce" | "oneshotallreduce" | "twoshotallreduce" => "allreduce".into(),
        "send" | "recv" | "sendrecv" | "recvanysource" => "sendrecv".into(),
        _ => n,
    }
}

/// nccl-tests' bus-bandwidth factor for a collective over `n` ranks (PERFORMANCE.md).
pub(crate) fn bus_factor(kind: &str, n: u64) -> Option<f64> {
    if n == 0 {
        return None;
    }
    let r = n as f64;
    Some(match kind {
        "allreduce" => 2.0 * (r - 1.0) / r,
        "allgather" | "reducescatter" | "alltoall" => (r - 1.0) / r,
        "broadcast" | "reduce" | "sendrecv" => 1.0,
        _ => return None,
    })
}

/// An op's bytes from its arguments: `In/Out msg nelems` × dtype, else `Input Dims`. A zero
/// count says nothing (a wait records 0), but shapes of zero elements (`[[0],[0]]`: an
/// all-to-all with nothing to send) are a collective of 0 bytes, not one without a size.
///
/// Most kinds take the larger of input and output (nccl-tests' size: an all-gather's output,
/// a reduce-scatter's input). An all-to-all takes its send side — `In msg nelems`, else the
/// op's send tensor — as nccl-tests'
/// alltoall size is the send buffer, and in an uneven all-to-all each rank's own. `send` is
/// the position of the send tensor among the op's inputs for an all-to-all (`None`: another
/// kind): 0 for `record_param_comms` and a `nccl:*` title, 1 for `c10d::alltoall_base_(output,
/// input, …)`.
fn op_bytes(a: &CommArgs, send: Option<usize>) -> Option<u64> {
    let alltoall = send.is_some();
    let size = a.dtype.as_deref().and_then(read::dtype_size);
    let by_count = match (a.in_nelems, a.out_nelems, size) {
        (Some(i), _, Some(s)) if alltoall => i.checked_mul(s),
        (Some(i), o, Some(s)) => i.max(o.unwrap_or(0)).checked_mul(s),
        (None, Some(o), Some(s)) => o.checked_mul(s),
        _ => None,
    };
    let by_shape = if let Some(i) = send {
        a.input_bytes.get(i).copied().flatten()
    } else {
        a.input_bytes.iter().flatten().copied().max()
    };
    by_count.filter(|b| *b > 0).or(by_shape)
}

/// The outermost collective op on each thread with the ops nested in it.
fn groups(ops: &mut [CommOp]) -> Vec<Vec<usize>> {
    ops.sort_by(|a, b| {
        (a.tid, a.start, std::cmp::Reverse(a.end), a.kind).cmp(&(b.tid, b.start, std::cmp::Reverse(b.end), b.kind))
    });
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut outer: Option<(u64, i64)> = None;
    for (i, op) in ops.iter().enumerate() {
        match outer {
            Some((tid, end)) if tid == op.tid && op.end <= end => {
                if let Some(g) = out.last_mut() {
                    g.push(i);
                }
            }
            _ => {
                outer = Some((op.tid, op.end));
                out.push(vec![i]);
            }
        }
    }
    out
}

/// What a group of nested ops says of its collective.
struct Issued {
    kind: String,
    bytes: Option<u64>,
    group_size: Option<u64>,
    pg: String,
    source: Source,
    /// `bytes` is the send buffer only (from a `nccl:*` title).
    send_only: bool,
    tid: u64,
    start: i64,
    end: i64,
}

fn issued(ops: &[CommOp], members: &[usize]) -> Issued {
    let all: Vec<&CommOp> = members.iter().map(|&i| &ops[i]).collect();
    let rpcs: Vec<&CommOp> = all
        .iter()
        .copied()
        .filter(|o| o.kind == OpKind::RecordParamComms)
        .collect();
    let named = |kind: OpKind| all.iter().find(|o| o.kind == kind).map(|o| canonical_kind(&o.name));
    let kind = rpcs
        .iter()
        .find_map(|o| o.args.collective.as_deref().map(canonical_kind))
        .or_else(|| named(OpKind::C10d))
        .or_else(|| named(OpKind::NcclTitle))
        .unwrap_or_else(|| "unknown".into());
    let alltoall = kind == "alltoall";
    let rpc_bytes: Option<u64> = (!rpcs.is_empty())
        .then(|| {
            rpcs.iter()
                .map(|o| op_bytes(&o.args, alltoall.then_some(0)))
                .sum::<Option<u64>>()
        })
        .flatten();
    let of_kind = |kind: OpKind| {
        all.iter()
            .filter(|o| o.kind == kind)
            .find_map(|o| op_bytes(&o.args, alltoall.then_some(usize::from(kind == OpKind::C10d))))
    };
    // A nested `nccl:*` title carries the send buffer only (ProcessGroupNCCL records its
    // input tensors): an all-gather's message is that times the group (done in `collectives`).
    let (bytes, source, send_only) = match (rpc_bytes, of_kind(OpKind::C10d), of_kind(OpKind::NcclTitle)) {
        (Some(b), _, _) => (Some(b), Source::RecordParamComms, false),
        (None, Some(b), _) => (Some(b), Source::C10d, false),
        (None, None, Some(b)) => (Some(b), Source::Nccl, true),
        (None, None, None) => (
            None,
            if rpcs.is_empty() {
                Source::C10d
            } else {
                Source::RecordParamComms
            },
            false,
        ),
    };
    let first = |f: fn(&CommArgs) -> Option<&String>| all.iter().find_map(|o| f(&o.args).cloned());
    Issued {
        kind,
        bytes,
        group_size: all.iter().find_map(|o| o.args.group_size),
        pg: first(|a| a.pg_name.as_ref()).unwrap_or_default(),
        source: if all.iter().all(|o| o.kind == OpKind::NcclTitle) {
            Source::Nccl
        } else {
            source
        },
        send_only,
        tid: all[0].tid,
        start: all[0].start,
        end: all[0].end,
    }
}

/// Whether a group lies inside a wait span of its thread (`waits` sorted by thread and
/// start): a `record_param_comms` that names no collective there is the wait's own.
fn in_a_wait(waits: &[read::Span], g: &Issued) -> bool {
    let upto = waits.partition_point(|w| (w.tid, w.start) <= (g.tid, g.start));
    // Wait spans nest at most a few deep; the nearest ones that began before are enough.
    waits[..upto]
        .iter()
        .rev()
        .take_while(|w| w.tid == g.tid)
        .take(64)
        .any(|w| g.end <= w.end)
}

/// The step whose CPU span holds `ts`.
fn step_at(steps: &[read::Step], ts: i64) -> Option<usize> {
    let i = steps.partition_point(|s| s.start <= ts);
    let s = steps.get(i.checked_sub(1)?)?;
    (ts < s.end).then_some(i - 1)
}

/// Which collective launched each correlation: the launches on an op's thread within its
/// span (the launches sorted by thread and time here).
fn launches_inside(issued: &[Issued], launches: &mut [read::Launch]) -> HashMap<u64, usize> {
    launches.sort_unstable_by_key(|l| (l.tid, l.ts));
    let mut by = HashMap::new();
    for (gi, g) in issued.iter().enumerate() {
        let from = launches.partition_point(|l| (l.tid, l.ts) < (g.tid, g.start));
        for l in launches[from..].iter().take_while(|l| l.tid == g.tid && l.ts <= g.end) {
            by.insert(l.correlation, gi);
        }
    }
    by
}

/// Figures of one rank.
pub(crate) fn figures(mut t: RawTrace) -> RankFigures {
    t.steps.sort_by_key(|s| (s.start, s.number));
    t.steps.dedup_by_key(|s| s.number);
    let (world, pg_sizes) = group_sizes(&t);
    let mut ops = std::mem::take(&mut t.ops);
    let groups = groups(&mut ops);
    t.waits.sort_unstable_by_key(|w| (w.tid, w.start));
    let mut issued: Vec<Issued> = groups
        .iter()
        .map(|g| issued(&ops, g))
        .filter(|g| g.kind != "wait" && !(g.kind == "unknown" && in_a_wait(&t.waits, g)))
        .collect();
    let launched_by = launches_inside(&issued, &mut t.launches);
    // Then by correlation, to find when each GPU event was launched (HTA's step rule).
    t.launches.sort_unstable_by_key(|l| l.correlation);
    t.gpu.sort_unstable_by_key(|g| (g.start, g.end));
    let mut walk = walk(&t, &mut issued, &launched_by);
    let collectives = collectives(&issued, std::mem::take(&mut walk.work), &t.steps, &pg_sizes, world);
    let whole_trace = whole_span(&t.gpu);
    let steps_out: Vec<StepFigures> = walk
        .per_step
        .into_iter()
        .enumerate()
        .map(|(si, runs)| {
            let (number, span) = match t.steps.get(si) {
                Some(s) => (Some(s.number), s.end - s.start),
                None => (None, whole_trace),
            };
            step_figures(number, span, runs, &walk.compute_all, &collectives)
        })
        .collect();
    // The whole rank as one union, never a sum of the steps' (work launched in one step and
    // running beside the next's would count twice).
    let steps_us = sum(&steps_out);
    let mut overall = step_figures(None, 0, walk.whole, &walk.compute_all, &[]);
    overall.step_us = steps_us.step_us;
    overall.collectives = steps_us.collectives;
    RankFigures {
        steps: steps_out,
        overall,
        collectives,
        anonymous_comm_kernels: walk.anonymous,
        past_step: PastStep {
            kernels: walk.past_step.0,
            us: walk.past_step.1 as f64 / 1000.0,
        },
    }
}

/// The world size, and each process group's size from `distributedInfo.pg_config`.
fn group_sizes(t: &RawTrace) -> (Option<u64>, HashMap<String, u64>) {
    let world = t
        .dist
        .as_ref()
        .and_then(|d| d.world_size)
        .and_then(|w| u64::try_from(w).ok());
    let pgs = t
        .dist
        .iter()
        .flat_map(|d| &d.pg_config)
        .filter_map(|p| {
            let size = p.pg_size.or(Some(p.ranks.len() as u64).filter(|n| *n > 0))?;
            Some((p.pg_name.clone(), size))
        })
        .collect();
    (world, pgs)
}

/// What one pass over the GPU events gathers.
struct Walk {
    /// Each collective's GPU spans.
    work: Vec<Vec<Span>>,
    per_step: Vec<StepRuns>,
    /// The whole rank's, every step's work in one union.
    whole: StepRuns,
    /// Computation on every stream, merged.
    compute_all: Vec<Span>,
    anonymous: u64,
    /// GPU events cut at their step's end, and the nanoseconds cut.
    past_step: (u64, i64),
}

/// Each GPU event (sorted by start), once: its class (comm when a collective launched it),
/// its collective and its step; unions kept as running totals, only communication as spans.
/// `t.launches` is sorted by correlation.
fn walk(t: &RawTrace, issued: &mut Vec<Issued>, launched_by: &HashMap<u64, usize>) -> Walk {
    let launched_at = |c: u64| {
        let i = t.launches.partition_point(|l| l.correlation < c);
        t.launches.get(i).filter(|l| l.correlation == c).map(|l| l.ts)
    };
    let mut w = Walk {
        work: vec![Vec::new(); issued.len()],
        per_step: vec![StepRuns::default(); t.steps.len().max(1)],
        whole: StepRuns::default(),
        compute_all: Vec::new(),
        anonymous: 0,
        past_step: (0, 0),
    };
    for g in &t.gpu {
        let span = (g.start, g.end);
        let by_launch = g.correlation().and_then(|c| launched_by.get(&c).copied());
        let gi = match (by_launch, g.args()) {
            (Some(gi), _) => Some(gi),
            (None, Some(a)) if g.class == GpuClass::Comm => {
                issued.push(kernel_issued(&t.kernel_args[a as usize], g.start));
                w.work.push(Vec::new());
                Some(issued.len() - 1)
            }
            _ => None,
        };
        let class = if gi.is_some() { GpuClass::Comm } else { g.class };
        match gi {
            Some(gi) => w.work[gi].push(span),
            None if class == GpuClass::Comm => w.anonymous += 1,
            None => {}
        }
        if class == GpuClass::Compute {
            intervals::push_sorted(&mut w.compute_all, span);
        }
        let at = g.correlation().and_then(launched_at).unwrap_or(g.start);
        let si = if t.steps.is_empty() {
            Some(0)
        } else {
            step_at(&t.steps, at)
        };
        let Some(si) = si else { continue };
        // Cut at the end of its step (the start stays: the spans stay sorted by it).
        let span = match t.steps.get(si) {
            Some(s) if span.1 > s.end => {
                w.past_step.0 += 1;
                w.past_step.1 += span.1 - span.0.max(s.end);
                (span.0, s.end)
            }
            _ => span,
        };
        if let Some(r) = w.per_step.get_mut(si) {
            r.add(span, class);
        }
        w.whole.add(span, class);
    }
    w
}

/// A collective known only from its kernel's arguments (the op was not recorded).
fn kernel_issued(a: &CommArgs, start: i64) -> Issued {
    Issued {
        kind: a.collective.as_deref().map_or_else(|| "unknown".into(), canonical_kind),
        bytes: op_bytes(
            a,
            (a.collective.as_deref().map(canonical_kind).as_deref() == Some("alltoall")).then_some(0),
        ),
        group_size: a.group_size,
        pg: a.pg_name.clone().unwrap_or_default(),
        source: Source::Kernel,
        send_only: false,
        tid: u64::MAX,
        start,
        end: start,
    }
}

fn whole_span(gpu: &[read::GpuEvent]) -> i64 {
    let lo = gpu.iter().map(|g| g.start).min();
    let hi = gpu.iter().map(|g| g.end).max();
    lo.zip(hi).map_or(0, |(l, h)| h - l)
}

fn collectives(
    issued: &[Issued],
    work: Vec<Vec<Span>>,
    steps: &[read::Step],
    pg_sizes: &HashMap<String, u64>,
    world: Option<u64>,
) -> Vec<Collective> {
    let mut order: Vec<usize> = (0..issued.len()).collect();
    order.sort_by_key(|&i| (issued[i].start, i));
    let mut seq: HashMap<(&str, &str), u32> = HashMap::new();
    let mut out = Vec::with_capacity(order.len());
    for i in order {
        let g = &issued[i];
        let spans = intervals::merge(work[i].clone());
        let ns = intervals::total(&spans);
        let n = g.group_size.or_else(|| pg_sizes.get(&g.pg).copied()).or(world);
        let bytes = match (g.send_only, g.kind.as_str()) {
            (true, "allgather") => g.bytes.zip(n).and_then(|(b, n)| b.checked_mul(n)),
            _ => g.bytes,
        };
        let s = seq.entry((g.pg.as_str(), g.kind.as_str())).or_insert(0);
        let step = if steps.is_empty() {
            None
        } else {
            step_at(steps, g.start).map(|si| steps[si].number)
        };
        out.push(Collective {
            kind: Name::of(&g.kind),
            pg: Name::of(&g.pg),
            bytes: bytes.filter(|b| *b != u64::MAX).unwrap_or(u64::MAX),
            group_size: n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
            seq: *s,
            step: step.unwrap_or(u64::MAX),
            source: g.source,
            issued_ns: g.start,
            gpu_start_ns: spans.first().map_or(i64::MIN, |s| s.0),
            gpu_us: ns as f64 / 1000.0,
        });
        *s += 1;
    }
    out
}

/// One step's GPU time as it is gathered: busy and compute as running unions, communication
/// as merged spans (to intersect with every step's computation).
#[derive(Debug, Clone, Default)]
struct StepRuns {
    busy: intervals::Run,
    compute: intervals::Run,
    comm: Vec<Span>,
}

impl StepRuns {
    /// One GPU span, fed in order of its start.
    fn add(&mut self, span: Span, class: GpuClass) {
        self.busy.add(span);
        match class {
            GpuClass::Comm => intervals::push_sorted(&mut self.comm, span),
            GpuClass::Compute => self.compute.add(span),
            _ => {}
        }
    }
}

fn step_figures(
    number: Option<u64>,
    span_ns: i64,
    runs: StepRuns,
    compute_all: &[Span],
    collectives: &[Collective],
) -> StepFigures {
    let comm_ns = intervals::total(&runs.comm);
    let overlap_ns = intervals::shared(&runs.comm, compute_all);
    let us = |ns: i64| ns as f64 / 1000.0;
    StepFigures {
        step: number,
        step_us: us(span_ns),
        gpu_busy_us: us(runs.busy.total()),
        compute_us: us(runs.compute.total()),
        comm_us: us(comm_ns),
        overlap_us: us(overlap_ns),
        exposed_us: us(comm_ns - overlap_ns),
        collectives: collectives.iter().filter(|c| c.step() == number).count(),
    }
}

/// The steps summed (the rank's figures over every profiled step).
pub(crate) fn sum(steps: &[StepFigures]) -> StepFigures {
    let mut s = StepFigures::default();
    for x in steps {
        s.step_us += x.step_us;
        s.gpu_busy_us += x.gpu_busy_us;
        s.compute_us += x.compute_us;
        s.comm_us += x.comm_us;
        s.overlap_us += x.overlap_us;
        s.exposed_us += x.exposed_us;
        s.collectives += x.collectives;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_every_spelling() {
        for (name, want) in [
            ("c10d::allreduce_", "allreduce"),
            ("nccl:all_reduce", "allreduce"),
            ("allreduce_coalesced", "allreduce"),
            ("c10d::_allgather_base_", "allgather"),
            ("all_gather_into_tensor_coalesced", "allgather"),
            ("c10d::_reduce_scatter_base_", "reducescatter"),
            ("c10d::alltoall_base_", "alltoall"),
            ("all_to_all", "alltoall"),
            ("c10d::broadcast_", "broadcast"),
            ("nccl:send", "sendrecv"),
        ] {
            assert_eq!(canonical_kind(name), want, "{name}");
        }
        assert_eq!(bus_factor("allreduce", 8), Some(1.75));
        assert_eq!(bus_factor("allgather", 4), Some(0.75));
        assert_eq!(bus_factor("allreduce", 1), Some(0.0));
    }

    #[test]
    fn overlap_and_exposure_of_one_step() {
        let doc = r#"{"traceEvents":[
          {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","tid":1,"ts":0,"dur":100},
          {"ph":"X","cat":"cpu_op","name":"c10d::allreduce_","tid":1,"ts":10,"dur":5,"args":{"Input Dims":[[[1024]]],"Input type":["TensorList"]}},
          {"ph":"X","cat":"cpu_op","name":"record_param_comms","tid":1,"ts":11,"dur":3,"args":{"Collective name":"allreduce","In msg nelems":1048576,"Out msg nelems":1048576,"dtype":"Float","Group size":4}},
          {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","tid":1,"ts":12,"dur":1,"args":{"correlation":9}},
          {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","tid":1,"ts":20,"dur":1,"args":{"correlation":10}},
          {"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL","tid":40,"ts":30,"dur":40,"args":{"stream":40,"correlation":9}},
          {"ph":"X","cat":"kernel","name":"sm90_xmma_gemm","tid":7,"ts":50,"dur":40,"args":{"stream":7,"correlation":10}}
        ]}"#;
        let f = figures(read::read(doc.as_bytes()).unwrap());
        let s = &f.steps[0];
        assert_eq!(
            (s.step, s.step_us, s.comm_us, s.compute_us),
            (Some(1), 100.0, 40.0, 40.0)
        );
        assert_eq!((s.overlap_us, s.exposed_us, s.gpu_busy_us), (20.0, 20.0, 60.0));
        let c = &f.collectives[0];
        assert_eq!(
            (c.kind.as_str(), c.bytes(), c.group_size(), c.source),
            ("allreduce", Some(4 << 20), Some(4), Source::RecordParamComms)
        );
        // 4 MiB in 40 µs: 104.9 GB/s algbw, × 2·3/4 bus factor.
        let algbw = (4u64 << 20) as f64 / 40_000.0;
        assert_eq!(c.algbw_gbps(), Some(algbw));
        assert_eq!(c.busbw_gbps(), Some(algbw * 1.5));
        assert_eq!(std::mem::size_of::<Collective>(), 64);
        assert_eq!(f.anonymous_comm_kernels, 0);
    }
}
