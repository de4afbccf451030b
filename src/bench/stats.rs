//! The canary's decision rule: interleaved baseline/candidate rounds in, a verdict with its
//! numbers out. Each round pairs one baseline and one candidate run made back to back on the
//! same nodes, so drift (clocks, other jobs, thermals) cancels in the pair's ratio. The
//! interval of the median ratio is the sign-test one (order statistics, exact binomial
//! coverage): no assumption about the shape of the noise, no random resampling (the same
//! figures always give the same decision), and one outlier round cannot move it much.
//! Pure: figures in, verdict out.

use super::parse::{BenchRun, SizeFigures};
use crate::model::Refusal;
use serde::{Deserialize, Serialize};

/// One round: the baseline run and the candidate run, made back to back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Round {
    pub(crate) baseline: BenchRun,
    pub(crate) candidate: BenchRun,
}

/// The thresholds of the rule (docs/apply.md).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Gate {
    /// Halt when large-message bandwidth drops by more than this fraction (0.03 = 3%).
    pub(crate) threshold: f64,
    /// Halt when small-message P99 time grows by more than this fraction.
    pub(crate) p99_threshold: f64,
    /// Sizes up to this are "small" (their P99 time is gated).
    pub(crate) small_max: u64,
    /// Sizes from this up are "large" (their bandwidth is gated).
    pub(crate) large_min: u64,
    /// Promote only on a significant gain.
    pub(crate) require_gain: bool,
}

impl Gate {
    /// The ranges cluster.yaml and the flags allow, for a gate read back from a record.
    pub(crate) fn check(&self) -> Result<(), Refusal> {
        let pct = |v: f64| v.is_finite() && v > 0.0 && v <= 0.5;
        if !pct(self.threshold) || !pct(self.p99_threshold) {
            return Err(Refusal("the thresholds are fractions in (0, 0.5]".into()));
        }
        if self.small_max > 1 << 40 || self.large_min > 1 << 40 {
            return Err(Refusal("small_max and large_min are sizes up to 1 TiB".into()));
        }
        Ok(())
    }
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            threshold: 0.03,
            p99_threshold: 0.03,
            small_max: 64 << 10,
            large_min: 64 << 20,
            require_gain: false,
        }
    }
}

/// Which bandwidth is compared: bus bandwidth, except with one rank, where it is 0 by
/// definition (factor 2(n-1)/n) and algorithm bandwidth (size / time) is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Metric {
    Busbw,
    Algbw,
}

impl Metric {
    fn of(self, f: &SizeFigures) -> f64 {
        match self {
            Metric::Busbw => f.busbw,
            Metric::Algbw => f.algbw,
        }
    }
}

/// The median of candidate/baseline − 1 over rounds, with its interval (fractions).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Change {
    pub(crate) median: f64,
    pub(crate) low: f64,
    pub(crate) high: f64,
    /// Coverage of [low, high] (≥ 0.95 with 6 or more rounds).
    pub(crate) confidence: f64,
}

/// One message size across rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SizeRow {
    pub(crate) size: u64,
    /// Median bandwidth (the verdict's metric), GB/s.
    pub(crate) baseline_bw: f64,
    pub(crate) candidate_bw: f64,
    /// (max − min) / median across rounds, as a fraction.
    pub(crate) baseline_spread: f64,
    pub(crate) candidate_spread: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) bw_change: Option<Change>,
    /// Small sizes: median P99 time (µs) and its change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) baseline_p99_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) candidate_p99_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) p99_change: Option<Change>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Decision {
    /// Large-message bandwidth is significantly better: promote.
    Gain,
    /// The interval spans zero: promote (unless a gain is required), and say it is not a win.
    NoSignificantChange,
    /// Large-message bandwidth dropped by more than the threshold, significantly: halt.
    Regression,
    /// Small-message P99 time grew by more than its threshold, significantly: halt.
    LatencyRegression,
    /// A loss larger than the threshold cannot be ruled out (the interval reaches past it):
    /// halt; more rounds narrow the interval.
    Inconclusive,
    /// `--require-gain` and no significant gain: halt.
    NoGain,
}

impl Decision {
    pub(crate) fn promotes(self) -> bool {
        matches!(self, Decision::Gain | Decision::NoSignificantChange)
    }
}

/// The verdict on a wave, with every number it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Verdict {
    pub(crate) decision: Decision,
    pub(crate) reason: String,
    pub(crate) metric: Metric,
    pub(crate) rounds: usize,
    /// Large messages: bandwidth change (geometric mean over the large sizes, per round).
    pub(crate) large: Change,
    pub(crate) large_sizes: Vec<u64>,
    /// Small messages: P99 time change (or mean time without `-I 1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) small: Option<Change>,
    pub(crate) small_uses_p99: bool,
    pub(crate) sizes: Vec<SizeRow>,
    /// The latency/bandwidth crossover of each variant: the smallest size reaching half the
    /// peak bandwidth (Hockney's n½).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) crossover_baseline: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) crossover_candidate: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) notes: Vec<String>,
}

/// Why the rounds give no verdict.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum VerdictError {
    #[error("no rounds to judge")]
    NoRounds,
    #[error("round {round}: the baseline and candidate runs measured different sizes")]
    SizesDiffer { round: usize },
    #[error("no message size with a non-zero bandwidth in every run")]
    NoLargeSizes,
}

pub(crate) fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// P(X ≤ k) for X ~ Binomial(n, 1/2).
fn binomial_cdf_half(n: usize, k: usize) -> f64 {
    let mut term = 0.5f64.powi(n as i32);
    let mut sum = term;
    for i in 0..k.min(n) {
        term *= (n - i) as f64 / (i + 1) as f64;
        sum += term;
    }
    sum
}

/// The exact one-sided sign-test p-value that the values' median is above zero: P(X ≥ k)
/// for X ~ Binomial(n, 1/2), k the positive values among the n non-zero ones (ties drop out,
/// as the sign test drops them). 1 when there is nothing to count.
pub(crate) fn sign_test_p(xs: &[f64]) -> f64 {
    let n = xs.iter().filter(|x| x.is_finite() && **x != 0.0).count();
    let k = xs.iter().filter(|x| x.is_finite() && **x > 0.0).count();
    if n == 0 {
        return 1.0;
    }
    if k == 0 {
        return 1.0;
    }
    (1.0 - binomial_cdf_half(n, k - 1)).max(0.5f64.powi(n as i32))
}

/// Holm's step-down over a family of p-values at level `alpha`: which hypotheses are rejected
/// (the family-wise error rate held at `alpha` whatever the dependence between them).
pub(crate) fn holm(ps: &[f64], alpha: f64) -> Vec<bool> {
    let mut order: Vec<usize> = (0..ps.len()).collect();
    order.sort_by(|a, b| ps[*a].total_cmp(&ps[*b]));
    let mut out = vec![false; ps.len()];
    let m = ps.len();
    for (rank, i) in order.into_iter().enumerate() {
        if ps[i] <= alpha / (m - rank) as f64 {
            out[i] = true;
        } else {
            break;
        }
    }
    out
}

/// The rank of the interval's ends among `n` sorted values: [x₍ₖ₎, x₍ₙ₊₁₋ₖ₎]. So the lower end
/// is above zero only while fewer than k values are at or below zero.
pub(crate) fn interval_rank(n: usize) -> usize {
    let mut k = 1;
    while k < n / 2 && 2.0 * binomial_cdf_half(n, k) <= 0.05 {
        k += 1;
    }
    k
}

/// The median with its distribution-free interval: [x₍ₖ₎, x₍ₙ₊₁₋ₖ₎] for the largest k whose
/// two tails hold at most 5% (the sign test's interval); with fewer than 6 values the widest
/// interval [min, max] is given with its lower coverage.
pub(crate) fn median_interval(xs: &[f64]) -> Change {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return Change {
            median: f64::NAN,
            low: f64::NAN,
            high: f64::NAN,
            confidence: 0.0,
        };
    }
    let k = interval_rank(n);
    Change {
        median: median(&v),
        low: v[k - 1],
        high: v[n - k],
        confidence: 1.0 - 2.0 * binomial_cdf_half(n, k - 1),
    }
}

fn geomean(xs: &[f64]) -> f64 {
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

fn spread(xs: &[f64]) -> f64 {
    let m = median(xs);
    let (lo, hi) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(*x), b.max(*x)));
    if m > 0.0 {
        (hi - lo) / m
    } else {
        0.0
    }
}

/// Per-round changes (candidate/baseline − 1) of `value` over `sizes`, geometric mean over
/// sizes; sizes where either side is 0 are left out.
fn round_changes(rounds: &[Round], sizes: &[u64], value: impl Fn(&SizeFigures) -> Option<f64>) -> Vec<f64> {
    rounds
        .iter()
        .filter_map(|r| {
            let ratios: Vec<f64> = sizes
                .iter()
                .filter_map(|s| {
                    let b = r.baseline.rows.iter().find(|f| f.size == *s).and_then(&value)?;
                    let c = r.candidate.rows.iter().find(|f| f.size == *s).and_then(&value)?;
                    (b > 0.0 && c > 0.0).then(|| c / b)
                })
                .collect();
            (!ratios.is_empty()).then(|| geomean(&ratios) - 1.0)
        })
        .collect()
}

/// Judge the rounds of one wave.
pub(crate) fn judge(rounds: &[Round], gate: &Gate) -> Result<Verdict, VerdictError> {
    let first = rounds.first().ok_or(VerdictError::NoRounds)?;
    let sizes: Vec<u64> = first.baseline.rows.iter().map(|f| f.size).collect();
    for (i, r) in rounds.iter().enumerate() {
        let same = |run: &BenchRun| run.rows.iter().map(|f| f.size).eq(sizes.iter().copied());
        if !same(&r.baseline) || !same(&r.candidate) {
            return Err(VerdictError::SizesDiffer { round: i + 1 });
        }
    }
    let mut notes = Vec::new();
    let ranks = first.baseline.ranks.max(first.candidate.ranks);
    let metric = if ranks > 1 {
        Metric::Busbw
    } else {
        notes.push("one rank: busbw is 0 by definition, so algbw (size / time) and time are compared".into());
        Metric::Algbw
    };
    let bw = |f: &SizeFigures| Some(metric.of(f));
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let large_min = gate.large_min.min(largest);
    if large_min < gate.large_min {
        notes.push(format!(
            "the sweep ends at {largest} B, below the large-message floor of {} B: the largest size is gated",
            gate.large_min
        ));
    }
    let large_sizes: Vec<u64> = sizes.iter().copied().filter(|s| *s >= large_min).collect();
    let large_changes = round_changes(rounds, &large_sizes, bw);
    if large_changes.len() < rounds.len() {
        return Err(VerdictError::NoLargeSizes);
    }
    let large = median_interval(&large_changes);
    let small_sizes: Vec<u64> = sizes.iter().copied().filter(|s| *s <= gate.small_max).collect();
    let has_p99 = rounds.iter().all(|r| {
        [&r.baseline, &r.candidate]
            .iter()
            .all(|run| run.rows.iter().all(|f| f.p99_us.is_some()))
    });
    if !has_p99 && !small_sizes.is_empty() {
        notes.push("no per-iteration timings (nccl-tests -I 1): small sizes are gated on mean time".into());
    }
    let small_value = |f: &SizeFigures| if has_p99 { f.p99_us } else { Some(f.time_us) };
    let small_changes = round_changes(rounds, &small_sizes, small_value);
    let small = (!small_changes.is_empty()).then(|| median_interval(&small_changes));
    let (decision, reason) = decide(&large, small.as_ref(), gate, metric);
    let rows = size_rows(rounds, &sizes, metric, gate, has_p99);
    let crossover = |pick: fn(&SizeRow) -> f64| crossover(&rows, pick);
    Ok(Verdict {
        decision,
        reason,
        metric,
        rounds: rounds.len(),
        large,
        large_sizes,
        small,
        small_uses_p99: has_p99,
        crossover_baseline: crossover(|r| r.baseline_bw),
        crossover_candidate: crossover(|r| r.candidate_bw),
        sizes: rows,
        notes,
    })
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

fn interval(c: &Change) -> String {
    format!(
        "{} [{} .. {}] ({:.1}% interval)",
        pct(c.median),
        pct(c.low),
        pct(c.high),
        c.confidence * 100.0
    )
}

/// The rule itself (docs/apply.md), with the sentence that explains it.
fn decide(large: &Change, small: Option<&Change>, gate: &Gate, metric: Metric) -> (Decision, String) {
    let what = match metric {
        Metric::Busbw => "large-message busbw",
        Metric::Algbw => "large-message algbw",
    };
    let t = gate.threshold;
    if large.median < -t && large.high < 0.0 {
        return (
            Decision::Regression,
            format!("{what} {}: a loss beyond the {} threshold", interval(large), pct(-t)),
        );
    }
    if let Some(s) = small.filter(|s| s.median > gate.p99_threshold && s.low > 0.0) {
        return (
            Decision::LatencyRegression,
            format!(
                "small-message P99 time {}: worse than the {} threshold",
                interval(s),
                pct(gate.p99_threshold)
            ),
        );
    }
    if large.low < -t {
        return (
            Decision::Inconclusive,
            format!(
                "{what} {}: a loss beyond {} cannot be ruled out; more --rounds narrow the interval",
                interval(large),
                pct(-t)
            ),
        );
    }
    if large.low > 0.0 {
        return (
            Decision::Gain,
            format!("{what} {}: a significant gain", interval(large)),
        );
    }
    let why = format!(
        "{what} {}: no significant change (the interval spans zero)",
        interval(large)
    );
    if gate.require_gain {
        (
            Decision::NoGain,
            format!("{why}; --require-gain asks for a significant gain"),
        )
    } else {
        (Decision::NoSignificantChange, why)
    }
}

fn size_rows(rounds: &[Round], sizes: &[u64], metric: Metric, gate: &Gate, has_p99: bool) -> Vec<SizeRow> {
    sizes
        .iter()
        .map(|&s| {
            let pick = |run: &BenchRun| run.rows.iter().find(|f| f.size == s).cloned();
            let base: Vec<SizeFigures> = rounds.iter().filter_map(|r| pick(&r.baseline)).collect();
            let cand: Vec<SizeFigures> = rounds.iter().filter_map(|r| pick(&r.candidate)).collect();
            let bw = |v: &[SizeFigures]| v.iter().map(|f| metric.of(f)).collect::<Vec<f64>>();
            let bw_changes = round_changes(rounds, &[s], |f| Some(metric.of(f)));
            let small = has_p99 && s <= gate.small_max;
            let p99 = |v: &[SizeFigures]| median(&v.iter().filter_map(|f| f.p99_us).collect::<Vec<_>>());
            let p99_changes = round_changes(rounds, &[s], |f| f.p99_us);
            SizeRow {
                size: s,
                baseline_bw: median(&bw(&base)),
                candidate_bw: median(&bw(&cand)),
                baseline_spread: spread(&bw(&base)),
                candidate_spread: spread(&bw(&cand)),
                bw_change: (bw_changes.len() == rounds.len()).then(|| median_interval(&bw_changes)),
                baseline_p99_us: small.then(|| p99(&base)),
                candidate_p99_us: small.then(|| p99(&cand)),
                p99_change: (small && p99_changes.len() == rounds.len()).then(|| median_interval(&p99_changes)),
            }
        })
        .collect()
}

/// Smallest size whose bandwidth reaches half the peak: below it latency dominates.
fn crossover(rows: &[SizeRow], pick: fn(&SizeRow) -> f64) -> Option<u64> {
    half_peak(rows, |r| r.size, pick)
}

/// The size of the first row (rows in size order) whose bandwidth reaches half the peak;
/// `None` when no bandwidth is positive.
pub(crate) fn half_peak<T>(rows: &[T], size: fn(&T) -> u64, bw: fn(&T) -> f64) -> Option<u64> {
    let peak = rows.iter().map(bw).fold(0.0, f64::max);
    (peak > 0.0)
        .then(|| rows.iter().find(|r| bw(r) >= peak / 2.0).map(size))
        .flatten()
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_sign_test_counts_signs_exactly_and_holm_steps_down() {
        assert_eq!(sign_test_p(&[0.1; 6]), 1.0 / 64.0);
        // 5 of 6 positive: P(X ≥ 5) = 7/64.
        assert!((sign_test_p(&[0.1, 0.2, 0.1, 0.3, 0.1, -0.1]) - 7.0 / 64.0).abs() < 1e-12);
        assert_eq!(sign_test_p(&[-0.1; 6]), 1.0);
        assert_eq!(sign_test_p(&[0.0, 0.1, 0.2]), 0.25, "a tie drops out");
        assert_eq!(sign_test_p(&[]), 1.0);
        // Holm at 5 %: 0.01 ≤ 0.05/3, 0.02 ≤ 0.05/2, 0.04 ≤ 0.05 — all three; then one fails
        // its step and so do the larger ones.
        assert_eq!(holm(&[0.04, 0.01, 0.02], 0.05), vec![true, true, true]);
        assert_eq!(holm(&[0.04, 0.01, 0.03], 0.05), vec![false, true, false]);
        assert_eq!(
            holm(&[1.0 / 64.0; 4], 0.05),
            vec![false; 4],
            "6 rounds carry 3 hypotheses, not 4"
        );
    }
    use super::*;

    /// A run over 8 B..1 GiB (×4) with bandwidth `bw(size)` and P99 `p99(size)`.
    fn run(ranks: u32, scale: f64, p99_scale: f64) -> BenchRun {
        let rows = (0..14)
            .map(|i| {
                let size = 8u64 << (2 * i);
                // α–β: 10 µs latency, 400 GB/s peak.
                let time_us = (10.0 + size as f64 / 400e3) / scale;
                let algbw = size as f64 / time_us / 1e3;
                SizeFigures {
                    size,
                    time_us,
                    algbw,
                    busbw: if ranks > 1 { algbw * 1.75 } else { 0.0 },
                    p99_us: Some(time_us * 1.3 * p99_scale),
                }
            })
            .collect();
        BenchRun {
            nccl_tests_version: Some("2.19.6".into()),
            ranks,
            rows,
        }
    }

    /// Rounds whose candidate is `gain` faster, each run perturbed by the given noise.
    fn rounds(ranks: u32, gain: f64, noise: &[(f64, f64)]) -> Vec<Round> {
        noise
            .iter()
            .map(|(nb, nc)| Round {
                baseline: run(ranks, 1.0 + nb, 1.0),
                candidate: run(ranks, (1.0 + gain) * (1.0 + nc), 1.0),
            })
            .collect()
    }

    /// ±2% noise, deterministic, both signs on both sides.
    const NOISE: [(f64, f64); 6] = [
        (0.015, -0.015),
        (-0.01, 0.015),
        (0.0, -0.005),
        (-0.02, 0.02),
        (0.015, -0.01),
        (0.005, 0.0),
    ];

    #[test]
    fn a_real_gain_is_promoted() {
        let v = judge(&rounds(16, 0.08, &NOISE), &Gate::default()).unwrap();
        assert_eq!(v.decision, Decision::Gain, "{}", v.reason);
        assert!(v.large.low > 0.03 && v.large.median > 0.06, "{:?}", v.large);
        assert_eq!(v.metric, Metric::Busbw);
    }

    #[test]
    fn a_five_percent_loss_is_halted() {
        let v = judge(&rounds(16, -0.05, &NOISE), &Gate::default()).unwrap();
        assert_eq!(v.decision, Decision::Regression, "{}", v.reason);
        assert!(!v.decision.promotes());
    }

    #[test]
    fn one_percent_inside_two_percent_noise_is_no_significant_change() {
        for ranks in [1, 16] {
            let v = judge(&rounds(ranks, 0.01, &NOISE), &Gate::default()).unwrap();
            assert_eq!(v.decision, Decision::NoSignificantChange, "{}", v.reason);
            assert!(v.large.low < 0.0 && v.large.high > 0.0);
            let strict = Gate {
                require_gain: true,
                ..Gate::default()
            };
            assert_eq!(
                judge(&rounds(ranks, 0.01, &NOISE), &strict).unwrap().decision,
                Decision::NoGain
            );
        }
    }

    #[test]
    fn a_loss_the_interval_cannot_exclude_is_inconclusive() {
        // Wild noise: −4% median but an interval from about −20% to +10%.
        let wild = [
            (0.2, 0.0),
            (-0.1, 0.0),
            (0.0, 0.05),
            (0.1, -0.1),
            (0.05, 0.0),
            (0.0, 0.02),
        ];
        let v = judge(&rounds(16, -0.04, &wild), &Gate::default()).unwrap();
        assert_eq!(v.decision, Decision::Inconclusive, "{}", v.reason);
    }

    #[test]
    fn worse_small_message_p99_is_halted_even_with_equal_bandwidth() {
        let mut r = rounds(16, 0.0, &[(0.0, 0.0); 6]);
        for round in &mut r {
            round.candidate = run(16, 1.0, 1.10);
        }
        let v = judge(&r, &Gate::default()).unwrap();
        assert_eq!(v.decision, Decision::LatencyRegression, "{}", v.reason);
        assert!(v.small_uses_p99);
    }

    #[test]
    fn one_rank_compares_algbw_and_says_so() {
        let v = judge(&rounds(1, 0.08, &NOISE), &Gate::default()).unwrap();
        assert_eq!(v.metric, Metric::Algbw);
        assert_eq!(v.decision, Decision::Gain);
        assert!(v.notes.iter().any(|n| n.contains("one rank")));
    }

    #[test]
    fn the_interval_has_its_stated_coverage() {
        let c = median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!((c.low, c.high, c.median), (1.0, 6.0, 3.5));
        assert!((c.confidence - (1.0 - 2.0 / 64.0)).abs() < 1e-12);
        let c = median_interval(&(1..=20).map(f64::from).collect::<Vec<_>>());
        // n = 20: k = 6 (P(X ≤ 5) = 0.0207 ≤ 0.025).
        assert_eq!((c.low, c.high), (6.0, 15.0));
        assert!(c.confidence >= 0.95);
    }

    #[test]
    fn crossover_is_the_half_peak_size() {
        let v = judge(&rounds(16, 0.0, &[(0.0, 0.0); 6]), &Gate::default()).unwrap();
        // 10 µs × 400 GB/s = 4 MB is where time doubles: half the peak bandwidth.
        assert_eq!(v.crossover_baseline, Some(8 << 20));
        assert_eq!(v.crossover_baseline, v.crossover_candidate);
    }

    #[test]
    fn mismatched_sweeps_are_refused() {
        let mut r = rounds(16, 0.0, &[(0.0, 0.0); 6]);
        r[2].candidate.rows.pop();
        assert_eq!(judge(&r, &Gate::default()), Err(VerdictError::SizesDiffer { round: 3 }));
    }
}
