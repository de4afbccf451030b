//! How `tune` decides, with the canary's statistics (`bench::stats`): each round runs NCCL's
//! own choice and the candidate back to back on the same nodes, so drift cancels in the
//! pair; per message size the round's gain is `baseline time / candidate time − 1`, and the
//! sign-test interval of its median (no assumption about the noise's shape) decides.
//!
//! A candidate **wins a size** only when the interval excludes zero in its favour
//! (`low > 0`), the median gain reaches the gate's threshold, and its P99 time (nccl-tests
//! `-I 1`) is not significantly worse by more than the P99 threshold. Among the winners of a
//! size the largest median gain is taken; adjacent sizes with the same winner make one range.
//! Everything else keeps NCCL's own choice. Selection picks the best of many candidates, so
//! a winner is **confirmed** in fresh rounds before it is kept (`confirm`): a win that was
//! luck does not survive a second, independent measurement.

use super::space::Candidate;
use crate::bench::parse::{BenchRun, SizeFigures};
use crate::bench::stats::{median, median_interval, Change, Gate};

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
    pub(crate) p99_worse: bool,
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
            let p99_worse = p99.len() == pairs.len() && {
                let i = median_interval(&p99);
                i.median > gate.p99_threshold && i.low > 0.0
            };
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
            })
        })
        .collect()
}

/// A candidate's judged sizes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Judged {
    pub(crate) candidate: Candidate,
    pub(crate) sizes: Vec<AtSize>,
}

/// The winner of one size: the candidate (index into the judged list) and its figures.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Win {
    pub(crate) candidate: usize,
    pub(crate) at: AtSize,
}

/// Per size of the sweep (in the sweep's order), the winning candidate or `None` (NCCL's own
/// choice is kept).
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
                .enumerate()
                .filter_map(|(i, j)| j.sizes.iter().find(|a| a.size == size && a.wins).map(|a| (i, a)))
                .max_by(|(_, a), (_, b)| a.gain.median.total_cmp(&b.gain.median));
            (
                size,
                best.map(|(i, a)| Win {
                    candidate: i,
                    at: a.clone(),
                }),
            )
        })
        .collect()
}

/// A run of adjacent sizes with one winner.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Range {
    pub(crate) candidate: usize,
    pub(crate) sizes: Vec<AtSize>,
}

#[cfg(test)]
impl Range {
    pub(crate) fn min_bytes(&self) -> u64 {
        self.sizes.first().map_or(0, |s| s.size)
    }

    pub(crate) fn max_bytes(&self) -> u64 {
        self.sizes.last().map_or(0, |s| s.size)
    }

    /// The range's weakest size: the gain that holds everywhere in it.
    pub(crate) fn weakest(&self) -> Option<&AtSize> {
        self.sizes.iter().min_by(|a, b| a.gain.low.total_cmp(&b.gain.low))
    }
}

/// Adjacent sizes with the same winner merged. A range never reaches past the sizes it was
/// measured at: bytes between two measured sizes of one range are in it, bytes beyond its
/// first and last measured size are NCCL's.
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
                    candidate: w.candidate,
                    sizes: vec![w.at.clone()],
                });
                open = true;
            }
            None => open = false,
        }
    }
    out
}

/// A range confirmed by fresh rounds: the sizes that won again, as ranges again (a size that
/// did not win a second time goes back to NCCL).
pub(crate) fn confirm(range: &Range, fresh: &[Pair], gate: &Gate) -> Vec<Range> {
    let again = at_sizes(fresh, gate);
    let kept: Vec<(u64, Option<Win>)> = range
        .sizes
        .iter()
        .map(|s| {
            let w = again.iter().find(|a| a.size == s.size && a.wins).map(|a| Win {
                candidate: range.candidate,
                at: a.clone(),
            });
            (s.size, w)
        })
        .collect();
    ranges(&kept)
}

/// A global variable is kept only where it is never significantly slower, at any size of
/// any collective measured, and wins somewhere.
pub(crate) fn global_holds(per_collective: &[Vec<AtSize>]) -> bool {
    let never_slower = per_collective
        .iter()
        .flatten()
        .all(|a| a.gain.high >= 0.0 && !a.p99_worse);
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
                    p99_us: None,
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
        assert!(r[0].weakest().unwrap().gain.low > 0.15);
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
            (r[0].candidate, r[0].min_bytes(), r[0].max_bytes()),
            (0, 1 << 10, 1 << 16)
        );
        assert_eq!(
            (r[1].candidate, r[1].min_bytes(), r[1].max_bytes()),
            (1, 1 << 20, 1 << 26)
        );
    }

    #[test]
    fn a_win_that_does_not_hold_in_fresh_rounds_goes_back_to_nccl() {
        let gate = Gate::default();
        let first = at_sizes(&pairs(6, |_, _| 0.8), &gate);
        let range = Range {
            candidate: 0,
            sizes: first.clone(),
        };
        // Fresh rounds: the gain holds at the two small sizes only.
        let fresh = pairs(6, |s, _| if s <= 1 << 16 { 0.8 } else { 1.0 });
        let kept = confirm(&range, &fresh, &gate);
        assert_eq!(kept.len(), 1);
        assert_eq!((kept[0].min_bytes(), kept[0].max_bytes()), (1 << 10, 1 << 16));
        // A global that is significantly slower anywhere is not kept, however it wins elsewhere.
        let mixed = at_sizes(&pairs(6, |s, _| if s <= 1 << 16 { 0.8 } else { 1.1 }), &gate);
        assert!(!global_holds(&[mixed]));
        assert!(global_holds(&[first]));
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
