//! Which node or rail drags a slow set down: rounds of parallel benchmark runs on disjoint
//! groups, each round's figures judged with robust statistics (median and MAD, not the mean),
//! narrowing to one node in O(log n) rounds. Pure: the caller runs each round and hands back
//! one bus bandwidth per group (`None`: that run failed).

use super::stats::median;
use serde::Serialize;

/// A group is an outlier when its figure is below the round's median by more than both
/// this many scaled MADs and [`MIN_GAP`] of the median (noise of a few percent never accuses).
pub(crate) const MAD_K: f64 = 3.0;
/// The smallest relative gap that counts, whatever the spread.
pub(crate) const MIN_GAP: f64 = 0.10;
/// 1.4826 × MAD estimates σ for normal noise.
const MAD_SCALE: f64 = 1.4826;

/// One round: the groups run together and what each measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Round {
    pub(crate) groups: Vec<Vec<String>>,
    pub(crate) busbw: Vec<Option<f64>>,
    pub(crate) median: f64,
    /// The group judged slow in this round, if any.
    pub(crate) outlier: Option<usize>,
}

/// What localisation found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Located {
    pub(crate) rounds: Vec<Round>,
    /// The node named, with its figure and the round median it is held against.
    pub(crate) suspect: Option<Suspect>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Suspect {
    pub(crate) name: String,
    pub(crate) busbw: f64,
    pub(crate) median: f64,
}

/// Every figure that is low beyond noise, with the median: below `median − max(k·σ̂, gap)`,
/// where σ̂ = 1.4826 × MAD (with two figures, below 80% of the higher). A failed run (`None`)
/// counts as low.
pub(crate) fn low(figures: &[Option<f64>]) -> (f64, Vec<usize>) {
    let known: Vec<f64> = figures.iter().flatten().copied().collect();
    // No figure at all: 0 (every run failed; the caller sees which).
    let m = Some(median(&known)).filter(|m| m.is_finite()).unwrap_or(0.0);
    let limit = if figures.len() < 3 {
        // Two groups have no spread to measure: the lower one must trail the higher by twice
        // the minimum gap.
        known.iter().copied().fold(0.0, f64::max) * (1.0 - 2.0 * MIN_GAP)
    } else {
        let deviations: Vec<f64> = known.iter().map(|x| (x - m).abs()).collect();
        let sigma = MAD_SCALE * median(&deviations);
        m - (MAD_K * sigma).max(MIN_GAP * m)
    };
    let low = figures
        .iter()
        .enumerate()
        .filter(|(_, f)| f.is_none_or(|x| x < limit))
        .map(|(i, _)| i)
        .collect();
    (m, low)
}

/// The index of the one figure that is low beyond noise ([`low`]); `None` when no figure, or
/// more than one, stands out (no single culprit to chase).
pub(crate) fn outlier(figures: &[Option<f64>]) -> (f64, Option<usize>) {
    let (m, low) = low(figures);
    (m, (low.len() == 1).then(|| low[0]))
}

/// Split `items` into `parts` groups of near-equal size, in order.
pub(crate) fn split(items: &[String], parts: usize) -> Vec<Vec<String>> {
    let parts = parts.clamp(1, items.len().max(1));
    let base = items.len() / parts;
    let extra = items.len() % parts;
    let mut out = Vec::with_capacity(parts);
    let mut at = 0;
    for i in 0..parts {
        let len = base + usize::from(i < extra);
        out.push(items[at..at + len].to_vec());
        at += len;
    }
    out
}

/// Runs one round: disjoint groups of hosts at once, one bus bandwidth each (`None`: failed);
/// `None` for the whole round: stop here (the time budget is spent), accusing no one.
pub(crate) type Measure<'a> = dyn FnMut(&[Vec<String>]) -> Option<Vec<Option<f64>>> + 'a;

/// Narrow `hosts` to the node that makes its runs slow. Each round splits every node into
/// groups of equal size — four groups, then pairs — so the slow group is judged against its
/// peers; the slow pair's two nodes are then each paired with a node from a pair that was
/// not slow, which names the one that drags its partner down (a node alone would test its
/// NVLink, not its network). `measure` runs one round (disjoint groups, in parallel).
pub(crate) fn locate(hosts: &[String], measure: &mut Measure<'_>) -> Located {
    let mut rounds = Vec::new();
    let mut judge = |groups: Vec<Vec<String>>, rounds: &mut Vec<Round>| -> Option<usize> {
        let busbw = measure(&groups)?;
        let (median, outlier) = outlier(&busbw);
        rounds.push(Round {
            groups,
            busbw,
            median,
            outlier,
        });
        outlier
    };
    if hosts.len() < 4 {
        return Located { rounds, suspect: None };
    }
    // Groups of a quarter of the nodes, then pairs within the slow quarter's neighbourhood:
    // every node keeps running so each round has peers to compare with.
    // Below eight nodes a quarter would be one node (its NVLink, not its network): pairs first.
    let pairs: Vec<Vec<String>> = hosts.chunks(2).map(<[String]>::to_vec).collect();
    if hosts.len() >= 8 && judge(split(hosts, 4), &mut rounds).is_none() {
        return Located { rounds, suspect: None };
    }
    let slow_pair = judge(pairs.clone(), &mut rounds);
    let Some(p) = slow_pair else {
        return Located { rounds, suspect: None };
    };
    let pair = &pairs[p];
    if pair.len() == 1 {
        let (median, busbw) = rounds
            .last()
            .map_or((0.0, 0.0), |r| (r.median, r.busbw[p].unwrap_or(0.0)));
        return Located {
            rounds,
            suspect: Some(Suspect {
                name: pair[0].clone(),
                busbw,
                median,
            }),
        };
    }
    // Each of the two with a partner known to be good; the rest as references.
    let good: Vec<&String> = hosts.iter().filter(|h| !pair.contains(h)).collect();
    let mut groups: Vec<Vec<String>> = vec![
        vec![pair[0].clone(), good[0].clone()],
        vec![pair[1].clone(), good[1 % good.len()].clone()],
    ];
    groups.extend(
        good[2.min(good.len())..]
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| c.iter().map(|h| (*h).clone()).collect()),
    );
    let last = judge(groups, &mut rounds);
    let suspect = last.filter(|i| *i < 2).map(|i| {
        let r = rounds
            .last()
            .map_or((0.0, 0.0), |r| (r.median, r.busbw[i].unwrap_or(0.0)));
        Suspect {
            name: pair[i].clone(),
            busbw: r.1,
            median: r.0,
        }
    });
    Located { rounds, suspect }
}

/// One round that confirms `suspect` (a node another search named) on other terms, e.g. one
/// rail: it runs beside a node of the set, the rest in pairs as references. `Some` suspect
/// only when its group is the one outlier; `None` rounds: the measure stopped.
pub(crate) fn confirm(hosts: &[String], suspect: &str, measure: &mut Measure<'_>) -> Located {
    let others: Vec<&String> = hosts.iter().filter(|h| *h != suspect).collect();
    let Some(partner) = others.first() else {
        return Located {
            rounds: Vec::new(),
            suspect: None,
        };
    };
    let mut groups = vec![vec![suspect.to_string(), (*partner).clone()]];
    groups.extend(
        others[1..]
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| c.iter().map(|h| (*h).clone()).collect()),
    );
    let Some(busbw) = measure(&groups) else {
        return Located {
            rounds: Vec::new(),
            suspect: None,
        };
    };
    let (median, outlier) = outlier(&busbw);
    let suspect = (outlier == Some(0)).then(|| Suspect {
        name: suspect.to_string(),
        busbw: busbw[0].unwrap_or(0.0),
        median,
    });
    Located {
        rounds: vec![Round {
            groups,
            busbw,
            median,
            outlier,
        }],
        suspect,
    }
}

/// Ring edge `k` joins `order[k]` and `order[(k + 1) % n]`. Rounds of edges that share no
/// node (a node's GPUs serve one run at a time): the even edges, the odd ones, and with an odd
/// count the edge that closes the ring. Fewer than three nodes have no ring to walk.
pub(crate) fn edge_rounds(n: usize) -> Vec<Vec<usize>> {
    if n < 3 {
        return Vec::new();
    }
    let mut rounds = vec![
        (0..n - 1).step_by(2).collect::<Vec<_>>(),
        (1..n - 1).step_by(2).collect(),
    ];
    if n.is_multiple_of(2) {
        // n − 1 is odd and shares no node with the other odd edges.
        rounds[1].push(n - 1);
    } else {
        rounds.push(vec![n - 1]);
    }
    rounds
}

/// What the ring-neighbour runs blame.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum EdgeBlame {
    /// Both of the node's edges are slow: its network (NIC, cable to its switch).
    Node { host: String },
    /// One edge is slow and its two ends are fine elsewhere: what joins them.
    Link { a: String, b: String },
}

/// Judge one figure per ring edge (`busbw[k]` for edge `k`): the low edges ([`low`]), and
/// whom they blame — a node when exactly its two edges are low, a link when exactly one edge
/// is; anything else names no single culprit.
pub(crate) fn blame_edges(order: &[String], busbw: &[Option<f64>]) -> (f64, Vec<usize>, Option<EdgeBlame>) {
    let n = order.len();
    let (m, slow) = low(busbw);
    let blame = match slow.as_slice() {
        [k] => Some(EdgeBlame::Link {
            a: order[*k].clone(),
            b: order[(k + 1) % n].clone(),
        }),
        // Edges k and k+1 share node k+1 (edge n−1 and edge 0 share node 0).
        [i, j] if (i + 1) % n == *j => Some(EdgeBlame::Node {
            host: order[*j].clone(),
        }),
        [0, j] if *j == n - 1 => Some(EdgeBlame::Node { host: order[0].clone() }),
        _ => None,
    };
    (m, slow, blame)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("n{i:02}")).collect()
    }

    /// A fabric where every run makes `bw`, ×`slow` when the slow node takes part, with
    /// deterministic noise of ±`noise` (a different draw per run).
    fn fabric(
        slow_node: Option<&str>,
        slow: f64,
        noise: f64,
        seed: u64,
    ) -> impl FnMut(&[Vec<String>]) -> Vec<Option<f64>> {
        let mut draw = seed;
        let slow_node = slow_node.map(str::to_string);
        move |groups| {
            groups
                .iter()
                .map(|g| {
                    draw = draw.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let u = (draw >> 33) as f64 / (1u64 << 31) as f64 * 2.0 - 1.0;
                    let hit = slow_node.as_ref().is_some_and(|s| g.contains(s));
                    Some(100.0 * if hit { slow } else { 1.0 } * (1.0 + noise * u))
                })
                .collect()
        }
    }

    /// A fabric as a [`Measure`] that never stops.
    fn some(
        mut f: impl FnMut(&[Vec<String>]) -> Vec<Option<f64>>,
    ) -> impl FnMut(&[Vec<String>]) -> Option<Vec<Option<f64>>> {
        move |g| Some(f(g))
    }

    #[test]
    fn one_slow_node_of_sixteen_is_named_within_log2_rounds() {
        for slow in hosts(16) {
            let mut rounds_run = 0;
            let mut f = fabric(Some(&slow), 0.5, 0.03, 7);
            let found = locate(&hosts(16), &mut |g| {
                rounds_run += 1;
                Some(f(g))
            });
            assert_eq!(
                found.suspect.as_ref().map(|s| s.name.as_str()),
                Some(slow.as_str()),
                "{found:#?}"
            );
            // Plus the sweep that showed the set slow: ⌈log2 16⌉ + 1 = 5 rounds at most.
            assert!(rounds_run < 5, "{rounds_run} rounds");
        }
    }

    #[test]
    fn small_sets_start_with_pairs() {
        for n in [4, 5, 6, 7] {
            let slow = format!("n{n:02}");
            let mut f = fabric(Some(&slow), 0.5, 0.02, 3);
            let found = locate(&hosts(n), &mut |g| Some(f(g)));
            assert_eq!(found.suspect.map(|s| s.name), Some(slow), "{n} nodes");
            assert!(found
                .rounds
                .iter()
                .all(|r| r.groups.iter().all(|g| g.len() >= 2 || n % 2 == 1)));
            for seed in 0..20 {
                assert!(
                    locate(&hosts(n), &mut some(fabric(None, 1.0, 0.03, seed)))
                        .suspect
                        .is_none(),
                    "{n} nodes, seed {seed}"
                );
            }
        }
    }

    #[test]
    fn no_slow_node_no_accusation_over_twenty_noisy_repetitions() {
        for seed in 0..20 {
            let found = locate(&hosts(16), &mut some(fabric(None, 1.0, 0.03, seed)));
            assert!(found.suspect.is_none(), "seed {seed}: {found:#?}");
        }
    }

    #[test]
    fn a_slow_rail_stands_out_and_noise_does_not() {
        let mut rails: Vec<Option<f64>> = (0..8).map(|i| Some(100.0 + (i as f64 - 3.5) * 0.8)).collect();
        assert_eq!(outlier(&rails).1, None);
        rails[5] = Some(61.0);
        assert_eq!(outlier(&rails).1, Some(5));
        rails[5] = None;
        assert_eq!(outlier(&rails).1, Some(5), "a rail whose run failed is the suspect");
    }

    #[test]
    fn a_stopped_round_accuses_no_one() {
        let mut f = fabric(Some("n03"), 0.5, 0.0, 1);
        let mut left = 1;
        let found = locate(&hosts(16), &mut |g| {
            left -= 1;
            (left >= 0).then(|| f(g))
        });
        assert_eq!(found.rounds.len(), 1, "the first round ran, the second stopped");
        assert!(found.suspect.is_none(), "{found:#?}");
    }

    #[test]
    fn a_confirming_round_names_the_suspect_only_when_its_run_stands_out() {
        let found = confirm(&hosts(16), "n07", &mut some(fabric(Some("n07"), 0.4, 0.03, 5)));
        assert_eq!(found.rounds.len(), 1);
        assert_eq!(found.rounds[0].groups[0], ["n07", "n01"]);
        assert_eq!(
            found.rounds[0].groups.len(),
            8,
            "the suspect's pair and 7 reference pairs"
        );
        assert_eq!(found.suspect.map(|s| s.name).as_deref(), Some("n07"));
        // Slow elsewhere (another node): the suspect is not confirmed.
        let found = confirm(&hosts(16), "n07", &mut some(fabric(Some("n12"), 0.4, 0.03, 5)));
        assert!(found.suspect.is_none(), "{found:#?}");
        // Nothing slow: not confirmed, over noise.
        for seed in 0..20 {
            assert!(confirm(&hosts(16), "n07", &mut some(fabric(None, 1.0, 0.03, seed)))
                .suspect
                .is_none());
        }
    }

    #[test]
    fn edge_rounds_cover_every_edge_once_without_sharing_a_node() {
        assert!(edge_rounds(2).is_empty());
        for n in 3..=17 {
            let rounds = edge_rounds(n);
            let mut all: Vec<usize> = rounds.concat();
            all.sort_unstable();
            assert_eq!(all, (0..n).collect::<Vec<_>>(), "{n} nodes");
            for r in &rounds {
                let mut ends: Vec<usize> = r.iter().flat_map(|k| [*k, (k + 1) % n]).collect();
                ends.sort_unstable();
                let before = ends.len();
                ends.dedup();
                assert_eq!(ends.len(), before, "{n} nodes: a node in two runs of {r:?}");
            }
            assert!(rounds.len() <= 3);
        }
    }

    /// One figure per edge of an n-node ring: 100, × `slow` on the listed edges, ±2% noise.
    fn edges(n: usize, slow_edges: &[usize], seed: u64) -> Vec<Option<f64>> {
        let mut draw = fabric(None, 1.0, 0.02, seed);
        (0..n)
            .map(|k| {
                let b = draw(&[vec![]])[0].unwrap_or(0.0);
                Some(if slow_edges.contains(&k) { b * 0.5 } else { b })
            })
            .collect()
    }

    #[test]
    fn ring_edges_blame_a_node_a_link_or_no_one() {
        let order = hosts(12);
        for seed in 0..20 {
            // Node k+1 sits between edges k and k+1; node 0 between edges 11 and 0.
            for k in 0..12 {
                let (_, slow, blame) = blame_edges(&order, &edges(12, &[k, (k + 1) % 12], seed));
                assert_eq!(slow.len(), 2);
                assert_eq!(
                    blame,
                    Some(EdgeBlame::Node {
                        host: order[(k + 1) % 12].clone()
                    })
                );
                let (_, _, blame) = blame_edges(&order, &edges(12, &[k], seed));
                assert_eq!(
                    blame,
                    Some(EdgeBlame::Link {
                        a: order[k].clone(),
                        b: order[(k + 1) % 12].clone()
                    })
                );
            }
            assert_eq!(blame_edges(&order, &edges(12, &[], seed)).2, None, "seed {seed}");
            assert_eq!(blame_edges(&order, &edges(12, &[1, 5], seed)).2, None, "two apart");
        }
    }

    #[test]
    fn groups_split_evenly_in_order() {
        let g = split(&hosts(10), 4);
        assert_eq!(g.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 2, 2]);
        assert_eq!(g.concat(), hosts(10));
    }
}
