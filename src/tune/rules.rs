//! From confirmed ranges to rules and kept globals: one rule per confirmed range of one
//! candidate, written for the shape it was confirmed at — or for any shape where the same
//! candidate was confirmed over the same sizes at every shape measured (and its reason says
//! so); a global kept only where it was never slower and its replication held.

use super::judge::{self, AtSize, Replication};
use super::space::Candidate;
use super::tuning::{self, Global, Rule};
use super::{Collective, Shape};
use crate::bench::stats::Change;

/// One range confirmed at one collective and shape: its candidate, the fresh rounds' figures
/// at its sizes, and its replication.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ConfirmedRange {
    pub(crate) candidate: Candidate,
    pub(crate) sizes: Vec<AtSize>,
    pub(crate) rep: Replication,
}

impl ConfirmedRange {
    fn size_list(&self) -> Vec<u64> {
        self.sizes.iter().map(|a| a.size).collect()
    }
}

/// One collective at one shape: the sizes measured and the ranges confirmed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AtShape {
    pub(crate) collective: Collective,
    pub(crate) shape: Shape,
    pub(crate) sweep: Vec<u64>,
    pub(crate) ranges: Vec<ConfirmedRange>,
}

impl AtShape {
    /// The measured sizes no confirmed range covers: NCCL's own choice there.
    pub(crate) fn kept(&self) -> Vec<u64> {
        self.sweep
            .iter()
            .copied()
            .filter(|s| !self.ranges.iter().any(|r| r.sizes.iter().any(|a| a.size == *s)))
            .collect()
    }
}

/// How many hypotheses the confirmation held at once (for the reason text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Family(pub(crate) usize);

/// Rules from every collective's confirmed ranges at every shape.
pub(crate) fn rules(at: &[AtShape], shapes: &[Shape], family: Family, set: &str) -> Vec<Rule> {
    let mut collectives: Vec<Collective> = Vec::new();
    for a in at {
        if !collectives.contains(&a.collective) {
            collectives.push(a.collective);
        }
    }
    let mut out = Vec::new();
    for c in collectives {
        let per: Vec<&AtShape> = at.iter().filter(|a| a.collective == c).collect();
        let everywhere = |r: &ConfirmedRange| -> Option<Vec<&ConfirmedRange>> {
            if shapes.len() < 2 || per.len() != shapes.len() {
                return None;
            }
            per.iter()
                .map(|a| {
                    a.ranges
                        .iter()
                        .find(|o| o.candidate == r.candidate && o.size_list() == r.size_list())
                })
                .collect()
        };
        let mut common: Vec<(Candidate, Vec<u64>)> = Vec::new();
        if let Some(first) = per.first() {
            for r in &first.ranges {
                if let Some(all) = everywhere(r) {
                    let weakest = all.iter().min_by(|a, b| a.rep.gain.low.total_cmp(&b.rep.gain.low));
                    let what = format!(
                        "the same winner over the same sizes at every shape measured ({}); applied to any shape",
                        list(shapes)
                    );
                    out.extend(weakest.and_then(|w| rule(c, None, w, family, set, &what)));
                    common.push((r.candidate.clone(), r.size_list()));
                }
            }
        }
        for a in &per {
            for r in &a.ranges {
                if common.iter().any(|(k, s)| *k == r.candidate && *s == r.size_list()) {
                    continue;
                }
                out.extend(rule(c, Some(a.shape), r, family, set, &format!("at {} only", a.shape)));
            }
        }
    }
    out
}

fn list(shapes: &[Shape]) -> String {
    shapes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("; ")
}

/// One confirmed range as a rule: its bounds are its first and last measured size (the bytes
/// between two adjacent winning measured sizes are in it), its gain the replication's.
fn rule(
    c: Collective,
    shape: Option<Shape>,
    r: &ConfirmedRange,
    family: Family,
    set: &str,
    what: &str,
) -> Option<Rule> {
    let Candidate::Choice { algo, proto, channels } = &r.candidate else {
        return None;
    };
    let weakest = r.sizes.iter().min_by(|a, b| a.gain.low.total_cmp(&b.gain.low))?;
    let (lo, hi) = (r.sizes.first()?.size, r.sizes.last()?.size);
    Some(Rule {
        collective: c,
        min_bytes: lo,
        max_bytes: hi,
        algorithm: *algo,
        protocol: *proto,
        channels: *channels,
        shape,
        gain: r.rep.gain,
        nccl_us: weakest.baseline_us,
        tuned_us: weakest.candidate_us,
        verified: None,
        why: format!(
            "measured on {set}: {} over {}–{} in {} fresh rounds (sign test p = {:.4}, Holm over {} hypotheses), {what}",
            tuning::interval(&r.rep.gain),
            tuning::bytes(lo),
            tuning::bytes(hi),
            r.rep.rounds,
            r.rep.p,
            family.0,
        ),
    })
}

/// What one global showed: its judged sizes in the search at every collective and shape, and
/// each replication it ran with the fresh rounds' figures at every size.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GlobalEvidence {
    pub(crate) candidate: Candidate,
    pub(crate) search: Vec<Vec<AtSize>>,
    pub(crate) confirmations: Vec<(bool, Replication, Vec<AtSize>)>,
}

/// The globals kept: never significantly slower at any size of any collective and shape in
/// the search and in every replication, and confirmed (the family's test) at least once;
/// each with its best replication as evidence.
pub(crate) fn globals(evidence: &[GlobalEvidence], set: &str) -> Vec<Global> {
    let mut out = Vec::new();
    for e in evidence {
        let Candidate::Global { name, value } = &e.candidate else {
            continue;
        };
        let never_slower = judge::global_holds(&e.search)
            && e.confirmations
                .iter()
                .all(|(_, _, at)| at.iter().all(|a| a.gain.high >= 0.0 && !a.p99_harm));
        let best = e
            .confirmations
            .iter()
            .filter(|(ok, _, _)| *ok)
            .map(|(_, r, _)| r)
            .max_by(|a, b| a.gain.low.total_cmp(&b.gain.low));
        if let (true, Some(b)) = (never_slower, best) {
            out.push(Global {
                name: (*name).into(),
                value: value.clone(),
                gain: b.gain,
                why: format!(
                    "measured on {set}: {} where it won, in {} fresh rounds (sign test p = {:.4}); never slower at any size measured",
                    tuning::interval(&b.gain),
                    b.rounds,
                    b.p
                ),
            });
        }
    }
    out
}

/// The weakest of two verifications of one rule (it is checked at every shape it applies to).
pub(crate) fn weaker(a: Option<Change>, b: Change) -> Change {
    match a {
        Some(a) if a.low <= b.low => a,
        _ => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::{Algo, Proto};

    fn at(size: u64) -> AtSize {
        let gain = Change {
            median: 0.2,
            low: 0.15,
            high: 0.25,
            confidence: 0.969,
        };
        AtSize {
            size,
            baseline_us: 10.0,
            candidate_us: 8.0,
            gain,
            p99_worse: false,
            p99_harm: false,
            wins: true,
        }
    }

    fn confirmed(c: &Candidate, sizes: &[u64]) -> ConfirmedRange {
        ConfirmedRange {
            candidate: c.clone(),
            sizes: sizes.iter().map(|s| at(*s)).collect(),
            rep: Replication {
                gain: at(0).gain,
                p: 1.0 / 64.0,
                rounds: 6,
            },
        }
    }

    fn shape(nodes: u32) -> Shape {
        Shape {
            nodes,
            ranks: nodes * 8,
        }
    }

    /// Two collectives at two shapes, as `tune`'s default run on two nodes measures them
    /// (shape-major): one rule per collective and range — before, each collective was made
    /// once per shape and the tuning refused as overlapping after the whole run.
    #[test]
    fn two_collectives_at_two_shapes_make_one_rule_each() {
        let ring = Candidate::Choice {
            algo: Algo::Ring,
            proto: Proto::Ll128,
            channels: None,
        };
        let shapes = [shape(1), shape(2)];
        let at_shapes: Vec<AtShape> = shapes
            .iter()
            .flat_map(|s| {
                [Collective::AllReduce, Collective::AllGather].map(|c| AtShape {
                    collective: c,
                    shape: *s,
                    sweep: vec![1024, 4096, 16384],
                    ranges: vec![confirmed(&ring, &[1024, 4096])],
                })
            })
            .collect();
        let made = rules(&at_shapes, &shapes, Family(4), "rack-1");
        let got: Vec<(Collective, Option<Shape>, u64, u64)> = made
            .iter()
            .map(|r| (r.collective, r.shape, r.min_bytes, r.max_bytes))
            .collect();
        assert_eq!(
            got,
            vec![
                (Collective::AllReduce, None, 1024, 4096),
                (Collective::AllGather, None, 1024, 4096)
            ]
        );
        assert!(made[0].why.contains("Holm over 4 hypotheses"), "{}", made[0].why);
        assert_eq!(at_shapes[0].kept(), vec![16384]);
    }

    /// The same candidate over other sizes at the other shape is not "the same winner": a
    /// rule per shape, never one for shapes it was not confirmed at.
    #[test]
    fn a_winner_that_differs_by_shape_is_written_per_shape() {
        let ring = Candidate::Choice {
            algo: Algo::Ring,
            proto: Proto::Simple,
            channels: Some(8),
        };
        let shapes = [shape(1), shape(2)];
        let at_shapes = vec![
            AtShape {
                collective: Collective::AllReduce,
                shape: shapes[0],
                sweep: vec![1024, 4096],
                ranges: vec![confirmed(&ring, &[1024, 4096])],
            },
            AtShape {
                collective: Collective::AllReduce,
                shape: shapes[1],
                sweep: vec![1024, 4096],
                ranges: vec![confirmed(&ring, &[4096])],
            },
        ];
        let made = rules(&at_shapes, &shapes, Family(2), "rack-1");
        assert_eq!(made.len(), 2);
        assert_eq!(
            (made[0].shape, made[0].min_bytes, made[0].channels),
            (Some(shapes[0]), 1024, Some(8))
        );
        assert_eq!((made[1].shape, made[1].min_bytes), (Some(shapes[1]), 4096));
    }
}
