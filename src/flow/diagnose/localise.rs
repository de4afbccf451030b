//! `diagnose`'s localisation steps, each a few rounds of runs at once: every node alone
//! (its inside), the bisection of the node set (a node's network), sendrecv between ring
//! neighbours (a link), one run per rail and, on a slow rail, the named node checked on it
//! or the rail's bisection (one NIC, or the rail). Each step says why when it does not run.

use crate::bench::locate::{self, Located, Round, Suspect};
use crate::config::benchmark::sendrecv_command;
use crate::error::Error;
use crate::flow::measure::{Bench, Bencher, Run};
use crate::report::diagnose::{EdgeFigure, Edges, Interiors, NicSearch, Rails};

/// What the steps found, before doctor and the verdicts.
pub(crate) struct Found {
    pub(crate) interiors: Option<Interiors>,
    pub(crate) located: Located,
    /// The round in which the bisection ended.
    pub(crate) located_round: usize,
    pub(crate) edges: Option<Edges>,
    pub(crate) rails: Option<Rails>,
    pub(crate) skipped: Vec<String>,
}

pub(crate) fn localise<B: Bencher>(b: &mut Bench<B>, order: &[String], gpus: u32) -> Result<Found, Error> {
    let mut skipped = Vec::new();
    let interiors = interiors(b, order, gpus, &mut skipped)?;
    if order.len() < 4 {
        skipped.push("bisection: fewer than four nodes make no two pairs to compare".into());
    }
    let (located, located_round) = bisect(b, order, gpus, None)?;
    let edges = if located.suspect.is_some() {
        skipped.push("ring-neighbour runs: not needed, the bisection named a node".into());
        None
    } else {
        ring_neighbours(b, order, gpus, &mut skipped)?
    };
    let named = located.suspect.as_ref().map(|s| s.name.clone());
    let rails = rails(b, order, gpus, named.as_deref(), &mut skipped)?;
    Ok(Found {
        interiors,
        located,
        located_round,
        edges,
        rails,
        skipped,
    })
}

/// Each node alone with its GPUs, all at once: its NVLink and PCIe, no network.
fn interiors<B: Bencher>(
    b: &mut Bench<B>,
    order: &[String],
    gpus: u32,
    skipped: &mut Vec<String>,
) -> Result<Option<Interiors>, Error> {
    if gpus < 2 {
        skipped.push("intra-node runs: one GPU per node has no path inside the node".into());
        return Ok(None);
    }
    if order.len() < 2 {
        skipped.push("intra-node runs: the sweep of one node was one".into());
        return Ok(None);
    }
    let command = b.command();
    let groups: Vec<Vec<String>> = order.iter().map(|h| vec![h.clone()]).collect();
    let runs: Vec<Run<'_>> = groups
        .iter()
        .map(|g| Run {
            template: &command,
            hosts: g,
            gpus,
            rail: None,
            staged: None,
        })
        .collect();
    let Some(busbw) = b.figures("the intra-node runs", &runs)? else {
        return Ok(None);
    };
    let (median, outlier) = locate::outlier(&busbw);
    let slow = outlier.map(|i| Suspect {
        name: order[i].clone(),
        busbw: busbw[i].unwrap_or(0.0),
        median,
    });
    Ok(Some(Interiors {
        gpus,
        round: b.rounds,
        figures: Round {
            groups,
            busbw,
            median,
            outlier,
        },
        slow,
    }))
}

/// A `crate::bench::locate` search run for real: every group the search asks for is a run of the
/// cluster's command — every GPU of each node, or (`rail`) one GPU per node on that rail —
/// all at once. Returns what the search found and the round it ended in; a run that could
/// not be started at all is the error.
fn search<B: Bencher>(
    b: &mut Bench<B>,
    step: &str,
    gpus: u32,
    rail: Option<u32>,
    how: impl FnOnce(&mut locate::Measure<'_>) -> Located,
) -> Result<(Located, usize), Error> {
    let command = b.command();
    let mut failed = None;
    let located = how(&mut |groups| {
        let runs: Vec<Run<'_>> = groups
            .iter()
            .map(|g| Run {
                template: &command,
                hosts: g,
                gpus: if rail.is_some() { 1 } else { gpus },
                rail,
                staged: None,
            })
            .collect();
        b.figures(step, &runs).unwrap_or_else(|e| {
            failed.get_or_insert(e);
            None
        })
    });
    match failed {
        Some(e) => Err(e),
        None => Ok((located, b.rounds)),
    }
}

/// The bisection of the set: every GPU of each node, or (`rail`) one GPU per node on it.
fn bisect<B: Bencher>(
    b: &mut Bench<B>,
    order: &[String],
    gpus: u32,
    rail: Option<u32>,
) -> Result<(Located, usize), Error> {
    let step = match rail {
        Some(r) => format!("the bisection on rail {r}"),
        None => "the bisection".to_string(),
    };
    search(b, &step, gpus, rail, |m| locate::locate(order, m))
}

/// The slow NIC on rail `rail`: the node already `named` confirmed in one round, else (not
/// named, or not confirmed) the rail's own bisection.
fn nic_search<B: Bencher>(
    b: &mut Bench<B>,
    order: &[String],
    rail: u32,
    named: Option<&str>,
) -> Result<NicSearch, Error> {
    let mut rounds = Vec::new();
    if let Some(host) = named {
        let step = format!("the check of {host} on rail {rail}");
        let (found, round) = search(b, &step, 1, Some(rail), |m| locate::confirm(order, host, m))?;
        rounds = found.rounds;
        if found.suspect.is_some() || b.stopped.is_some() {
            return Ok(NicSearch {
                rail,
                rounds,
                suspect: found.suspect,
                round,
            });
        }
    }
    let (found, round) = bisect(b, order, 1, Some(rail))?;
    rounds.extend(found.rounds);
    Ok(NicSearch {
        rail,
        rounds,
        suspect: found.suspect,
        round,
    })
}

/// sendrecv_perf between each pair of ring neighbours, edges that share no node at once:
/// two or three rounds whatever the set's size.
fn ring_neighbours<B: Bencher>(
    b: &mut Bench<B>,
    order: &[String],
    gpus: u32,
    skipped: &mut Vec<String>,
) -> Result<Option<Edges>, Error> {
    let n = order.len();
    if n < 3 {
        skipped.push("ring-neighbour runs: fewer than three nodes make no ring to walk".into());
        return Ok(None);
    }
    let Some(template) = sendrecv_command(&b.command()) else {
        skipped.push(
            "ring-neighbour runs: benchmark.command does not name all_reduce_perf (diagnose runs sendrecv_perf in its place)"
                .into(),
        );
        return Ok(None);
    };
    let pairs: Vec<Vec<String>> = (0..n)
        .map(|k| vec![order[k].clone(), order[(k + 1) % n].clone()])
        .collect();
    let mut busbw = vec![None; n];
    for round in locate::edge_rounds(n) {
        let runs: Vec<Run<'_>> = round
            .iter()
            .map(|&k| Run {
                template: &template,
                hosts: &pairs[k],
                gpus,
                rail: None,
                staged: None,
            })
            .collect();
        let Some(figures) = b.figures("the ring-neighbour runs", &runs)? else {
            return Ok(None);
        };
        for (k, f) in round.iter().zip(figures) {
            busbw[*k] = f;
        }
    }
    let (median, low, blame) = locate::blame_edges(order, &busbw);
    Ok(Some(Edges {
        round: b.rounds,
        edges: pairs
            .into_iter()
            .zip(busbw)
            .map(|(mut p, busbw)| {
                let second = p.pop().unwrap_or_default();
                let first = p.pop().unwrap_or_default();
                EdgeFigure {
                    a: first,
                    b: second,
                    busbw,
                }
            })
            .collect(),
        median,
        low,
        blame,
    }))
}

/// One run per rail, one GPU per node on every node, all at once; on a slow rail, the node
/// the bisection `named` checked on that rail in one round, else the bisection of the nodes
/// on that rail alone: one NIC, or the whole rail.
fn rails<B: Bencher>(
    b: &mut Bench<B>,
    order: &[String],
    gpus: u32,
    named: Option<&str>,
    skipped: &mut Vec<String>,
) -> Result<Option<Rails>, Error> {
    let why_not = if gpus < 2 {
        Some("per-rail runs: one GPU per node is one rail, which the sweep measured")
    } else if order.len() < 2 {
        Some("per-rail runs: one node has no network to split into rails")
    } else if !b.command().contains("{rail}") {
        Some("per-rail runs: benchmark.command has no {rail} placeholder (e.g. CUDA_VISIBLE_DEVICES={rail})")
    } else {
        None
    };
    if let Some(why) = why_not {
        skipped.push(why.into());
        return Ok(None);
    }
    let command = b.command();
    let runs: Vec<Run<'_>> = (0..gpus)
        .map(|r| Run {
            template: &command,
            hosts: order,
            gpus: 1,
            rail: Some(r),
            staged: None,
        })
        .collect();
    let Some(busbw) = b.figures("the per-rail runs", &runs)? else {
        return Ok(None);
    };
    let round = b.rounds;
    let (median, slow) = locate::outlier(&busbw);
    let slow = slow.and_then(|i| u32::try_from(i).ok());
    let nic = match slow {
        Some(r) if order.len() >= 4 => Some(nic_search(b, order, r, named)?),
        _ => None,
    };
    Ok(Some(Rails {
        round,
        busbw,
        median,
        slow,
        nic,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::paper::{Paper, Slow};
    use super::*;
    use crate::bench::locate::EdgeBlame;
    use crate::flow::measure::Bench;

    fn hosts(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("gpu-{i:02}")).collect()
    }

    fn found(slow: Vec<Slow>, n: usize, seed: u64) -> Found {
        let mut b = Bench::new(Paper::new(slow, 0.03, seed));
        localise(&mut b, &hosts(n), 8).unwrap()
    }

    #[test]
    fn a_slow_network_is_named_by_the_bisection() {
        let f = found(vec![Slow::Node("gpu-11".into(), 0.5)], 16, 1);
        assert_eq!(f.located.suspect.map(|s| s.name).as_deref(), Some("gpu-11"));
        assert!(f.interiors.unwrap().slow.is_none(), "its inside is fine");
        assert!(f.edges.is_none(), "not needed: the bisection named it");
    }

    #[test]
    fn a_slow_inside_is_named_by_each_node_alone() {
        let f = found(vec![Slow::Inside("gpu-09".into(), 0.5)], 16, 2);
        assert_eq!(f.interiors.unwrap().slow.map(|s| s.name).as_deref(), Some("gpu-09"));
        // Every run with its GPUs is slow, the bisection's too: the verdict puts both
        // findings on its inside (flow::diagnose::verdict).
        assert_eq!(f.located.suspect.map(|s| s.name).as_deref(), Some("gpu-09"));
    }

    #[test]
    fn a_slow_link_between_ring_neighbours_is_named_by_their_edge() {
        let f = found(vec![Slow::Link("gpu-06".into(), "gpu-07".into(), 0.5)], 12, 3);
        assert!(f.located.suspect.is_none());
        let blame = f.edges.unwrap().blame;
        assert_eq!(
            blame,
            Some(EdgeBlame::Link {
                a: "gpu-06".into(),
                b: "gpu-07".into()
            })
        );
    }

    #[test]
    fn a_slow_nic_is_named_on_its_rail_and_a_slow_rail_names_no_node() {
        let f = found(vec![Slow::Nic("gpu-06".into(), 3, 0.5)], 16, 4);
        assert_eq!(f.located.suspect.map(|s| s.name).as_deref(), Some("gpu-06"));
        let rails = f.rails.unwrap();
        assert_eq!(rails.slow, Some(3));
        assert_eq!(rails.nic.unwrap().suspect.map(|s| s.name).as_deref(), Some("gpu-06"));
        let f = found(vec![Slow::Rail(5, 0.5)], 16, 5);
        let rails = f.rails.unwrap();
        assert_eq!(rails.slow, Some(5));
        assert!(rails.nic.unwrap().suspect.is_none(), "the rail's switch, no one node");
    }

    #[test]
    fn three_percent_of_noise_accuses_no_one() {
        for seed in 0..20 {
            let f = found(Vec::new(), 16, seed);
            assert!(f.located.suspect.is_none(), "seed {seed}");
            assert!(f.interiors.unwrap().slow.is_none(), "seed {seed}");
            assert!(f.rails.unwrap().slow.is_none(), "seed {seed}");
            assert!(f.edges.unwrap().blame.is_none(), "seed {seed}");
        }
    }

    #[test]
    fn a_spent_budget_stops_every_step_after_it() {
        let mut b = Bench::new(Paper::new(vec![Slow::Node("gpu-03".into(), 0.5)], 0.0, 0));
        b.stopped = Some("the sweep".into());
        let f = localise(&mut b, &hosts(8), 8).unwrap();
        assert!(f.located.suspect.is_none(), "nothing ran, no one accused");
        assert_eq!(b.rounds, 0);
    }
}
