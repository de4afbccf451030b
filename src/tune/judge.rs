//! How `tune` decides, with the canary's statistics (`bench::stats`): each round runs a
//! baseline and the candidate back to back on the same nodes, so drift cancels in the pair;
//! per message size the round's gain is `baseline time / candidate time − 1`, and the
//! sign-test interval of its median (no assumption about the noise's shape) decides.
//!
//! **Selection** (`at_sizes`, `winners`, `ranges`): a candidate wins a size when the interval
//! excludes zero in its favour (`low > 0`), the median reaches the gate's threshold, and its
//! P99 is shown not worse by the P99 threshold (the upper end of the P99 ratio's interval
//! stays under it: non-inferiority, not "harm proved"). A channel count is held against its
//! own pair at NCCL's count (`refine`), and replaces it only where it beats it. Adjacent
//! winning sizes of one candidate make one range; a measured size that did not win ends it.
//!
//! **Confirmation** (`Hypothesis`, `confirmed`): selection picks the best of many, so every
//! selected range (and global) is one hypothesis tested again in fresh rounds against NCCL's
//! own choice: per round the range's gain (geometric mean over its sizes), its exact one-sided
//! sign-test p-value, and Holm's step-down over every hypothesis of the run — the family-wise
//! error rate of a tune run is held at `FAMILY_ALPHA`. The reported gain is the replication's.

use super::space::Candidate;
use crate::bench::parse::{BenchRun, SizeFigures};
use crate::bench::stats::{holm, interval_rank, median, median_interval, sign_test_p, Change, Gate};

/// One round of one candidate: NCCL's own run and the candidate's, back to back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pair {
    pub(crate) baseline: BenchRun,
    pub(crate) candidate: BenchRun,
}

/// One message size of one candidate, across its rounds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AtSize {
    pub(crate) size: u64,
    /// Median time, µs.
    pub(crate) baseline_us: f64,
    pub(crate) candidate_us: f64,
    pub(crate) gain: Change,
    /// Non-inferiority of the P99 not shown (the upper end of its ratio's interval at or
    /// above the P99 threshold, or no P99 figure).
    pub(crate) p99_worse: bool,
    /// Harm proved: the P99 ratio's median above the threshold and its interval above zero
    /// (what a global, which applies everywhere, must never show).
    pub(crate) p99_harm: bool,
    pub(crate) wins: bool,
}

fn row(run: &BenchRun, size: u64) -> Option<&SizeFigures> {
    run.rows.iter().find(|r| r.size == size)
}

/// Per round, `f(baseline, candidate)` where both rows exist and are positive.
fn per_round(
    pairs: &[Pair],
    size: u64,
    value: impl Fn(&SizeFigures) -> Option<f64>,
    f: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    pairs
        .iter()
        .filter_map(|p| {
            let b = row(&p.baseline, size).and_then(&value)?;
            let c = row(&p.candidate, size).and_then(&value)?;
            (b > 0.0 && c > 0.0).then(|| f(b, c))
        })
        .collect()
}

/// Every size of the sweep, judged for one candidate.
pub(crate) fn at_sizes(pairs: &[Pair], gate: &Gate) -> Vec<AtSize> {
    let Some(first) = pairs.first() else {
        return Vec::new();
    };
    first
        .baseline
        .rows
        .iter()
        .map(|r| r.size)
        .filter_map(|size| {
            let gains = per_round(pairs, size, |f| Some(f.time_us), |b, c| b / c - 1.0);
            if gains.len() < pairs.len() {
                return None;
            }
            let gain = median_interval(&gains);
            let p99 = per_round(pairs, size, |f| f.p99_us, |b, c| c / b - 1.0);
            // Non-inferiority: the P99 ratio's interval must stay under the threshold; rounds
            // without a P99 figure (no `-I 1`) show nothing, and the flow refuses them.
            let p99_interval = median_interval(&p99);
            let p99_worse = p99.len() < pairs.len() || p99_interval.high >= gate.p99_threshold;
            let p99_harm =
                p99.len() == pairs.len() && p99_interval.median > gate.p99_threshold && p99_interval.low > 0.0;
            let times = |pick: fn(&Pair) -> &BenchRun| {
                median(
                    &pairs
                        .iter()
                        .filter_map(|p| row(pick(p), size).map(|f| f.time_us))
                        .collect::<Vec<_>>(),
                )
            };
            Some(AtSize {
                size,
                baseline_us: times(|p| &p.baseline),
                candidate_us: times(|p| &p.candidate),
                wins: gain.low > 0.0 && gain.median >= gate.threshold && !p99_worse,
                gain,
                p99_worse,
                p99_harm,
            })
        })
        .collect()
}

/// Whether a candidate can no longer win any size once all `planned` rounds are in: at every
/// size, as many rounds as the interval's rank already show no gain (or no figure), so its
/// lower end cannot rise above zero whatever the remaining rounds say. Dropping it then costs
/// no power and saves its remaining runs.
pub(crate) fn cannot_win(pairs: &[Pair], planned: usize) -> bool {
    let Some(first) = pairs.first() else {
        return false;
    };
    let k = interval_rank(planned);
    first.baseline.rows.iter().all(|r| {
        let lost = pairs
            .iter()
            .filter(|p| {
                let b = row(&p.baseline, r.size).map(|f| f.time_us);
                let c = row(&p.candidate, r.size).map(|f| f.time_us);
                !matches!((b, c), (Some(b), Some(c)) if b > 0.0 && c > 0.0 && b / c - 1.0 > 0.0)
            })
            .count();
        lost >= k
    })
}

/// A candidate's judged sizes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Judged {
    pub(crate) candidate: Candidate,
    pub(crate) sizes: Vec<AtSize>,
}

/// The winner of one size: the candidate and its figures against NCCL's own.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Win {
    pub(crate) candidate: Candidate,
    pub(crate) at: AtSize,
}

/// Per size of the sweep (in the sweep's order), the winning candidate or `None` (NCCL's own
/// choice is kept): the largest median gain among the candidates that win it.
pub(crate) fn winners(judged: &[Judged]) -> Vec<(u64, Option<Win>)> {
    let Some(first) = judged.first() else {
        return Vec::new();
    };
    first
        .sizes
        .iter()
        .map(|s| s.size)
        .map(|size| {
            let best = judged
                .iter()
                .filter_map(|j| j.sizes.iter().find(|a| a.size == size && a.wins).map(|a| (j, a)))
                .max_by(|(_, a), (_, b)| a.gain.median.total_cmp(&b.gain.median));
            (
                size,
                best.map(|(j, a)| Win {
                    candidate: j.candidate.clone(),
                    at: a.clone(),
                }),
            )
        })
        .collect()
}

/// Channel counts held against their pair: at each size a pair won, the count that beats the
/// pair itself there (its rounds ran the pair as their baseline) takes the size — the largest
/// median among those that do; where none does, the pair keeps it (the simpler candidate).
pub(crate) fn refine(per_size: &mut [(u64, Option<Win>)], against_pair: &[Judged]) {
    for (size, win) in per_size.iter_mut() {
        let Some(w) = win else { continue };
        let better = against_pair
            .iter()
            .filter(|j| j.candidate.pair().as_ref() == Some(&w.candidate))
            .filter_map(|j| j.sizes.iter().find(|a| a.size == *size && a.wins).map(|a| (j, a)))
            .max_by(|(_, a), (_, b)| a.gain.median.total_cmp(&b.gain.median));
        if let Some((j, _)) = better {
            w.candidate = j.candidate.clone();
        }
    }
}

/// A run of adjacent measured sizes with one winner.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Range {
    pub(crate) candidate: Candidate,
    pub(crate) sizes: Vec<AtSize>,
}

impl Range {
    #[cfg(test)]
    pub(crate) fn min_bytes(&self) -> u64 {
        self.sizes.first().map_or(0, |s| s.size)
    }

    #[cfg(test)]
    pub(crate) fn max_bytes(&self) -> u64 {
        self.sizes.last().map_or(0, |s| s.size)
    }

    pub(crate) fn size_list(&self) -> Vec<u64> {
        self.sizes.iter().map(|s| s.size).collect()
    }
}

/// Adjacent sizes with the same winner merged. A range never reaches past the sizes it was
/// measured at, nor across a measured size it did not win: bytes between two adjacent
/// winning sizes of one range are in it, bytes beyond its first and last are NCCL's.
pub(crate) fn ranges(per_size: &[(u64, Option<Win>)]) -> Vec<Range> {
    let mut out: Vec<Range> = Vec::new();
    let mut open = false;
    for (_, w) in per_size {
        match w {
            Some(w) if open && out.last().is_some_and(|r| r.candidate == w.candidate) => {
                if let Some(r) = out.last_mut() {
                    r.sizes.push(w.at.clone());
                }
            }
            Some(w) => {
                out.push(Range {
                    candidate: w.candidate.clone(),
                    sizes: vec![w.at.clone()],
                });
                open = true;
            }
            None => open = false,
        }
    }
    out
}

/// The family-wise error rate of one tune run's confirmations.
pub(crate) const FAMILY_ALPHA: f64 = 0.05;

/// Fresh rounds that can confirm `hypotheses` at once: a replication that wins every round
/// has the p-value 2⁻ⁿ, and Holm's first step needs it at or under α / hypotheses.
pub(crate) fn confirm_rounds(rounds: usize, hypotheses: usize) -> usize {
    let need = (hypotheses.max(1) as f64 / FAMILY_ALPHA).log2().ceil() as usize;
    rounds.max(need)
}

/// One range's replication: per round, its gain over the range's sizes (geometric mean of
/// `baseline / candidate`), that gain's interval and one-sided sign-test p-value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Replication {
    pub(crate) gain: Change,
    pub(crate) p: f64,
    pub(crate) rounds: usize,
}

pub(crate) fn replicate(fresh: &[Pair], sizes: &[u64]) -> Replication {
    let gains: Vec<f64> = fresh
        .iter()
        .filter_map(|p| {
            let logs: Vec<f64> = sizes
                .iter()
                .filter_map(|s| {
                    let b = row(&p.baseline, *s)?.time_us;
                    let c = row(&p.candidate, *s)?.time_us;
                    (b > 0.0 && c > 0.0).then(|| (b / c).ln())
                })
                .collect();
            (logs.len() == sizes.len() && !logs.is_empty())
                .then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp() - 1.0)
        })
        .collect();
    Replication {
        gain: median_interval(&gains),
        p: if gains.len() == fresh.len() {
            sign_test_p(&gains)
        } else {
            1.0
        },
        rounds: gains.len(),
    }
}

/// Which replications hold, over the whole family: Holm's step-down at `FAMILY_ALPHA`, and a
/// median gain that reaches the threshold.
pub(crate) fn confirmed(reps: &[Replication], gate: &Gate) -> Vec<bool> {
    let ps: Vec<f64> = reps.iter().map(|r| r.p).collect();
    holm(&ps, FAMILY_ALPHA)
        .into_iter()
        .zip(reps)
        .map(|(rejected, r)| rejected && r.gain.median >= gate.threshold && r.gain.low > 0.0)
        .collect()
}

/// A global variable is kept only where it is never significantly slower, at any size of
/// any collective measured, and wins somewhere.
pub(crate) fn global_holds(per_collective: &[Vec<AtSize>]) -> bool {
    let never_slower = per_collective
        .iter()
        .flatten()
        .all(|a| a.gain.high >= 0.0 && !a.p99_harm);
    never_slower && per_collective.iter().flatten().any(|a| a.wins)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::parse::SizeFigures;

    fn run(times: &[(u64, f64)]) -> BenchRun {
        BenchRun {
            rows: times
                .iter()
                .map(|(size, t)| SizeFigures {
                    size: *size,
                    time_us: *t,
                    algbw: *size as f64 / t / 1e3,
                    busbw: *size as f64 / t / 1e3,
                    // As nccl-tests' `-I 1` reports it (the double's 1.9 × the time).
                    p99_us: Some(t * 1.9),
                })
                .collect(),
            ranks: 8,
            nccl_tests_version: None,
        }
    }

    /// `rounds` pairs where the candidate takes `factor(size, round)` of the baseline's time.
    fn pairs(rounds: usize, factor: impl Fn(u64, usize) -> f64) -> Vec<Pair> {
        let sizes = [1u64 << 10, 1 << 16, 1 << 20, 1 << 26];
        (0..rounds)
            .map(|r| Pair {
                baseline: run(&sizes.map(|s| (s, 100.0))),
                candidate: run(&sizes.map(|s| (s, 100.0 * factor(s, r)))),
            })
            .collect()
    }

    #[test]
    fn a_clear_gain_at_some_sizes_wins_those_sizes_only() {
        let gate = Gate::default();
        let p = pairs(6, |s, r| {
            if s >= 1 << 20 {
                0.8 + 0.01 * r as f64
            } else {
                1.0 + 0.002 * r as f64
            }
        });
        let sizes = at_sizes(&p, &gate);
        let won: Vec<u64> = sizes.iter().filter(|a| a.wins).map(|a| a.size).collect();
        assert_eq!(won, vec![1 << 20, 1 << 26]);
        let judged = vec![Judged {
            candidate: Candidate::Global {
                name: "NCCL_BUFFSIZE",
                value: "1".into(),
            },
            sizes,
        }];
        let r = ranges(&winners(&judged));
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].min_bytes(), r[0].max_bytes()), (1 << 20, 1 << 26));
        assert!(r[0].sizes.iter().all(|a| a.gain.low > 0.15));
    }

    #[test]
    fn noise_below_the_threshold_and_one_bad_round_win_nothing() {
        let gate = Gate::default();
        // ±2 %: the median cannot reach the 3 % threshold.
        let noise = pairs(6, |_, r| if r % 2 == 0 { 0.98 } else { 1.02 });
        assert!(at_sizes(&noise, &gate).iter().all(|a| !a.wins));
        // Five rounds 20 % faster, one 5 % slower: the interval reaches below zero.
        let one_bad = pairs(6, |_, r| if r == 3 { 1.05 } else { 0.8 });
        assert!(at_sizes(&one_bad, &gate).iter().all(|a| !a.wins && a.gain.low < 0.0));
    }

    #[test]
    fn a_faster_candidate_with_a_worse_p99_does_not_win() {
        let gate = Gate::default();
        let mut p = pairs(6, |_, _| 0.8);
        for pair in &mut p {
            for r in &mut pair.baseline.rows {
                r.p99_us = Some(100.0);
            }
            for r in &mut pair.candidate.rows {
                r.p99_us = Some(150.0);
            }
        }
        assert!(at_sizes(&p, &gate).iter().all(|a| a.p99_worse && !a.wins));
        // Non-inferiority, not harm proved: a P99 3.5 % worse in one round of six and better
        // in the others is not shown no worse than the 3 % threshold.
        let mut one = pairs(6, |_, _| 0.8);
        for (i, pair) in one.iter_mut().enumerate() {
            for (b, c) in pair.baseline.rows.iter_mut().zip(pair.candidate.rows.iter_mut()) {
                b.p99_us = Some(100.0);
                c.p99_us = Some(if i == 2 { 103.5 } else { 90.0 });
            }
        }
        assert!(at_sizes(&one, &gate)
            .iter()
            .all(|a| a.p99_worse && !a.p99_harm && !a.wins));
        // No P99 figure at all (no `-I 1`): nothing is shown, nothing wins.
        let mut blind = pairs(6, |_, _| 0.8);
        for pair in &mut blind {
            for r in pair.candidate.rows.iter_mut() {
                r.p99_us = None;
            }
        }
        assert!(at_sizes(&blind, &gate).iter().all(|a| !a.wins));
    }

    #[test]
    fn the_best_winner_takes_a_size_and_ranges_split_where_it_changes() {
        let gate = Gate::default();
        let cand = |i: u32| Candidate::Global {
            name: "NCCL_NTHREADS",
            value: i.to_string(),
        };
        let a = Judged {
            candidate: cand(1),
            sizes: at_sizes(&pairs(6, |s, _| if s <= 1 << 16 { 0.7 } else { 0.9 }), &gate),
        };
        let b = Judged {
            candidate: cand(2),
            sizes: at_sizes(&pairs(6, |s, _| if s <= 1 << 16 { 0.9 } else { 0.6 }), &gate),
        };
        let r = ranges(&winners(&[a, b]));
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].candidate.clone(), r[0].min_bytes(), r[0].max_bytes()),
            (cand(1), 1 << 10, 1 << 16)
        );
        assert_eq!(
            (r[1].candidate.clone(), r[1].min_bytes(), r[1].max_bytes()),
            (cand(2), 1 << 20, 1 << 26)
        );
    }

    #[test]
    fn a_replication_is_one_test_of_the_range_and_the_family_is_held_by_holm() {
        let gate = Gate::default();
        let sizes = [1u64 << 10, 1 << 16];
        // Fresh rounds: 20 % faster at the range's sizes every round.
        let fresh = pairs(6, |s, _| if s <= 1 << 16 { 0.8 } else { 1.0 });
        let rep = replicate(&fresh, &sizes);
        assert_eq!(rep.p, 1.0 / 64.0);
        assert!((rep.gain.median - 0.25).abs() < 1e-9, "{rep:?}");
        // Over the sizes it did not win, the same rounds replicate nothing.
        let none = replicate(&fresh, &[1 << 20, 1 << 26]);
        assert_eq!(none.p, 1.0, "no round faster: {none:?}");
        // One hypothesis: 6 unanimous rounds hold. Four at once need more rounds than 6.
        assert_eq!(confirmed(std::slice::from_ref(&rep), &gate), vec![true]);
        assert_eq!(confirmed(&vec![rep.clone(); 4], &gate), vec![false; 4]);
        assert_eq!(confirm_rounds(6, 4), 7);
        let seven = replicate(&pairs(7, |_, _| 0.8), &sizes);
        assert_eq!(confirmed(&vec![seven; 4], &gate), vec![true; 4]);
        // A gain under the threshold is not kept, however unanimous.
        let small = replicate(&pairs(6, |_, _| 0.99), &sizes);
        assert_eq!(confirmed(&[small], &gate), vec![false]);
        // A global that is significantly slower anywhere is not kept, however it wins elsewhere.
        let mixed = at_sizes(&pairs(6, |s, _| if s <= 1 << 16 { 0.8 } else { 1.1 }), &gate);
        assert!(!global_holds(&[mixed]));
        assert!(global_holds(&[at_sizes(&pairs(6, |_, _| 0.8), &gate)]));
    }

    /// A channel count that is no better than its pair never takes a size from it; one that
    /// beats the pair where the pair won does.
    #[test]
    fn a_channel_count_takes_a_size_only_where_it_beats_its_pair() {
        use crate::tune::{Algo, Proto};
        let gate = Gate::default();
        let pair = Candidate::Choice {
            algo: Algo::Ring,
            proto: Proto::Ll128,
            channels: None,
        };
        let with = |n: u32| Candidate::Choice {
            algo: Algo::Ring,
            proto: Proto::Ll128,
            channels: Some(n),
        };
        let judged = vec![Judged {
            candidate: pair.clone(),
            sizes: at_sizes(&pairs(6, |_, _| 0.7), &gate),
        }];
        let mut per_size = winners(&judged);
        // Against the pair: ×4 the same (noise), ×8 10 % faster at 1 MiB and up.
        let against = vec![
            Judged {
                candidate: with(4),
                sizes: at_sizes(&pairs(6, |_, r| if r % 2 == 0 { 0.99 } else { 1.01 }), &gate),
            },
            Judged {
                candidate: with(8),
                sizes: at_sizes(&pairs(6, |s, _| if s >= 1 << 20 { 0.9 } else { 1.0 }), &gate),
            },
        ];
        refine(&mut per_size, &against);
        let r = ranges(&per_size);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!((r[0].candidate.clone(), r[0].max_bytes()), (pair, 1 << 16));
        assert_eq!((r[1].candidate.clone(), r[1].min_bytes()), (with(8), 1 << 20));
    }

    /// A candidate slower at every size in its first round can never win with 6 rounds (the
    /// interval's lower end is the smallest gain): it is dropped; one faster somewhere is not.
    #[test]
    fn a_candidate_that_cannot_win_any_more_is_known_after_one_round() {
        let slower = pairs(1, |_, _| 1.2);
        assert!(cannot_win(&slower, 6));
        let somewhere = pairs(1, |s, _| if s == 1 << 20 { 0.9 } else { 1.2 });
        assert!(!cannot_win(&somewhere, 6));
        // With 20 rounds the interval's rank is higher: one lost round is not enough.
        assert!(!cannot_win(&slower, 20));
        assert!(cannot_win(&pairs(6, |_, _| 1.2), 20));
        // Whatever cannot_win says, the full rounds agree: nothing is won.
        let gate = Gate::default();
        assert!(at_sizes(&pairs(6, |_, r| if r == 0 { 1.2 } else { 0.8 }), &gate)
            .iter()
            .all(|a| !a.wins));
    }

    /// Two winning ranges of one candidate around a size it lost stay two ranges.
    #[test]
    fn a_range_never_spans_a_measured_size_that_did_not_win() {
        let gate = Gate::default();
        let judged = vec![Judged {
            candidate: Candidate::Global {
                name: "NCCL_NTHREADS",
                value: "256".into(),
            },
            sizes: at_sizes(&pairs(6, |s, _| if s == 1 << 16 { 1.1 } else { 0.8 }), &gate),
        }];
        let r = ranges(&winners(&judged));
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!((r[0].max_bytes(), r[1].min_bytes()), (1 << 10, 1 << 20));
    }

    proptest::proptest! {
        /// Whatever the rounds say, no size is won (and no range made) whose interval does
        /// not exclude zero in the candidate's favour by the threshold.
        #[test]
        fn no_range_rests_on_an_interval_that_spans_zero(
            f in proptest::collection::vec(proptest::collection::vec(0.5f64..1.5, 24), 1..4),
            rounds in 6usize..9,
        ) {
            let gate = Gate::default();
            let judged: Vec<Judged> = f
                .iter()
                .enumerate()
                .map(|(c, factors)| Judged {
                    candidate: Candidate::Global { name: "NCCL_NTHREADS", value: c.to_string() },
                    sizes: at_sizes(
                        &pairs(rounds, |s, r| factors[(s.trailing_zeros() as usize / 4 + r * 4) % 24]),
                        &gate,
                    ),
                })
                .collect();
            for r in ranges(&winners(&judged)) {
                for a in &r.sizes {
                    proptest::prop_assert!(a.gain.low > 0.0 && a.gain.median >= gate.threshold, "{a:?}");
                }
            }
        }
    }
}
