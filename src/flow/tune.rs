//! `topo-tune tune`: on one set of nodes, measure NCCL's own choice against every candidate
//! (`tune::space`) per collective, per message size and per job shape (one node, then the
//! whole set), keep what wins and holds in fresh rounds (`tune::judge`), and write
//! `tuning.json` and `nccl-tuner.csv`. Runs go through diagnose's engine (`Bench` over a
//! `Bencher`: rounds on the nodes through the benchmark runner, one `--budget` for all).
//!
//! A round runs NCCL's own choice once, then each candidate, in an order rotated from round
//! to round (so a candidate is not always the one furthest from its baseline); each
//! candidate is paired with its round's baseline.

use super::diagnose::bench::{Bench, Bencher, Run};
use super::diagnose::runs::NodeBencher;
use super::gather::Ask;
use super::plan::gather_and_plan;
use super::settings::TuneSettings;
use crate::apply::tree::Tree;
use crate::apply::writer::WriteError;
use crate::bench::parse::BenchRun;
use crate::bench::stats::Gate;
use crate::error::Error;
use crate::model::plan::{Plan, PortTransport};
use crate::model::{Failure, FailureKind};
use crate::report::Printer;
use crate::runner::FailedRun;
use crate::tune::judge::{self, AtSize, Judged, Pair, Range};
use crate::tune::space::{self, Candidate, Facts};
use crate::tune::tuning::{self, Disqualified, Global, Kept, Rule, Trial, TrialSize, Tuning, TUNING_SCHEMA};
use crate::tune::{Collective, Shape};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What `tune` did: the tuning, where it was written, and every candidate's figures.
pub(crate) struct TuneOutcome {
    pub(crate) tuning: Tuning,
    pub(crate) trials: Vec<Trial>,
    pub(crate) files: Vec<PathBuf>,
    pub(crate) changed: bool,
    pub(crate) runs: usize,
    pub(crate) seconds: f64,
}

/// Where one shape runs.
struct Place {
    shape: Shape,
    hosts: Vec<String>,
    gpus: u32,
}

/// Everything measured so far, shared by the phases.
struct Search<B: Bencher> {
    bench: Bench<B>,
    gate: Gate,
    rounds: usize,
    trials: Vec<Trial>,
    disqualified: Vec<Disqualified>,
    not_tried: Vec<String>,
}

pub(crate) fn tune(s: &TuneSettings, printer: &Printer) -> Result<TuneOutcome, Error> {
    super::preflight::benchmark_runnable(&s.gather.inv)?;
    let planned = gather_and_plan(&s.gather, printer, crate::flow::PREDICTION_BYTES, Ask::Snapshot)?;
    let gpus = super::diagnose::gpus_per_node(&s.gather.inv, &planned.plan.node_classes);
    let order = if planned.plan.node_order.is_empty() {
        s.hosts.clone()
    } else {
        planned.plan.node_order.clone()
    };
    let facts = facts_of(&planned.plan, gpus, order.len() as u32);
    let bencher = NodeBencher::new(
        &s.gather.inv,
        &s.gather.reach,
        printer,
        s.output_dir.as_deref(),
        s.budget,
    );
    let mut search = Search {
        bench: Bench::new(bencher),
        gate: s.gate,
        rounds: s.rounds as usize,
        trials: Vec::new(),
        disqualified: Vec::new(),
        not_tried: Vec::new(),
    };
    let places = places(&order, gpus);
    let mut per_shape = Vec::new();
    let mut global_sizes: BTreeMap<String, Vec<Vec<AtSize>>> = BTreeMap::new();
    let mut kept = Vec::new();
    for place in &places {
        for &c in &s.collectives {
            let f = Facts {
                nodes: place.shape.nodes,
                ..facts.clone()
            };
            let found = search.collective(c, place, &f)?;
            for (label, sizes) in found.globals {
                global_sizes.entry(label).or_default().push(sizes);
            }
            kept.push(Kept {
                collective: c,
                shape: place.shape,
                sizes: found.kept,
            });
            per_shape.push((c, place.shape, found.ranges));
        }
    }
    let rules = rules_across_shapes(&per_shape, &places, &s.set);
    let globals = kept_globals(&global_sizes, &facts, &s.set);
    let tuning = Tuning {
        schema: TUNING_SCHEMA,
        set: s.set.clone(),
        hosts: order.clone(),
        shapes: places.iter().map(|p| p.shape).collect(),
        collectives: s.collectives.clone(),
        rules,
        globals,
        kept,
        disqualified: search.disqualified,
        not_tried: search.not_tried,
    };
    let (files, changed) = write(&tuning, &s.tuning_dir)?;
    let (_, seconds) = search.bench.bencher.budget();
    Ok(TuneOutcome {
        tuning,
        trials: search.trials,
        files,
        changed,
        runs: search.bench.rounds,
        seconds,
    })
}

/// The shapes measured: one node (all its GPUs), then the whole set when it has more nodes.
fn places(order: &[String], gpus: u32) -> Vec<Place> {
    let mut out = vec![Place {
        shape: Shape { nodes: 1, ranks: gpus },
        hosts: order.iter().take(1).cloned().collect(),
        gpus,
    }];
    if order.len() > 1 {
        out.push(Place {
            shape: Shape {
                nodes: order.len() as u32,
                ranks: order.len() as u32 * gpus,
            },
            hosts: order.to_vec(),
            gpus,
        });
    }
    out
}

/// What the plan says of the nodes that chooses candidates: RDMA ports NCCL uses, and an
/// NVSwitch board (NVLink between every pair of 8 or more GPUs: NVLS can run).
fn facts_of(plan: &Plan, gpus: u32, nodes: u32) -> Facts {
    let rdma = plan
        .nccl
        .classes
        .iter()
        .any(|c| c.gpu_ports.iter().any(|p| p.transport == PortTransport::Verbs));
    let nvswitch = gpus >= 8
        && plan.node_classes.iter().all(|c| {
            c.nvlink.as_ref().is_some_and(|n| {
                n.links
                    .iter()
                    .enumerate()
                    .all(|(i, row)| row.iter().enumerate().all(|(j, l)| i == j || *l > 0))
            })
        });
    Facts {
        rdma,
        roce_v2_gid: None,
        nvswitch,
        gpus_per_node: gpus,
        nodes,
    }
}

/// What one collective at one shape gave: its confirmed ranges (with their candidates), the
/// globals' judged sizes, and the sizes NCCL keeps.
struct Found {
    ranges: Vec<(Candidate, Range)>,
    globals: Vec<(String, Vec<AtSize>)>,
    kept: Vec<u64>,
}

impl<B: Bencher> Search<B> {
    fn collective(&mut self, c: Collective, place: &Place, f: &Facts) -> Result<Found, Error> {
        let choices = space::choices(c, f);
        let globals = space::globals(f);
        let mut first: Vec<Candidate> = choices.clone();
        first.extend(globals.iter().cloned());
        let mut judged = self.measure(c, place, &first, "search")?;
        let global_judged: Vec<Judged> = judged.iter().filter(|j| is_global(&j.candidate)).cloned().collect();
        judged.retain(|j| !is_global(&j.candidate));
        let won_pairs = pairs_that_won(&judged);
        let channel_candidates: Vec<Candidate> = won_pairs
            .iter()
            .flat_map(|(a, p)| space::channel_choices(*a, *p))
            .collect();
        if !channel_candidates.is_empty() {
            judged.extend(self.measure(c, place, &channel_candidates, "channels")?);
        }
        let ranges = judge::ranges(&judge::winners(&judged));
        let confirmed = self.confirm(c, place, &judged, &ranges)?;
        let globals = self.confirm_globals(c, place, &global_judged)?;
        let won: Vec<u64> = confirmed
            .iter()
            .flat_map(|(_, r)| r.sizes.iter().map(|s| s.size))
            .collect();
        let kept = judged
            .first()
            .map(|j| j.sizes.iter().map(|s| s.size).filter(|s| !won.contains(s)).collect())
            .unwrap_or_default();
        Ok(Found {
            ranges: confirmed,
            globals,
            kept,
        })
    }

    /// Every candidate over `rounds` rounds, each one's sizes judged and recorded.
    fn measure(
        &mut self,
        c: Collective,
        place: &Place,
        cands: &[Candidate],
        phase: &'static str,
    ) -> Result<Vec<Judged>, Error> {
        let pairs = self.pairs(c, place, cands, phase)?;
        let mut judged = Vec::new();
        for (cand, pairs) in cands.iter().zip(pairs) {
            let Some(pairs) = pairs else { continue };
            let sizes = judge::at_sizes(&pairs, &self.gate);
            self.trials
                .push(trial(c, place.shape, cand, phase, pairs.len(), &sizes));
            judged.push(Judged {
                candidate: cand.clone(),
                sizes,
            });
        }
        Ok(judged)
    }

    /// Every candidate over `rounds` rounds: its pairs, or `None` — a candidate whose run
    /// fails is disqualified (and not run again), one the budget leaves short is not tried.
    fn pairs(
        &mut self,
        c: Collective,
        place: &Place,
        cands: &[Candidate],
        phase: &'static str,
    ) -> Result<Vec<Option<Vec<Pair>>>, Error> {
        let command = self.bench.command();
        let template = match crate::config::benchmark::perf_command(&command, c.perf()) {
            Some(t) => t,
            // A command that runs one fixed binary measures all-reduce or nothing else.
            None if c == Collective::AllReduce => command,
            None => {
                return Err(Error::Usage(format!(
                    "tune --collectives {}: benchmark.command names neither {{collective}} nor all_reduce_perf, so it cannot run {}_perf",
                    c.perf(),
                    c.perf()
                )))
            }
        };
        let mut pairs: Vec<Vec<Pair>> = vec![Vec::new(); cands.len()];
        let mut out = vec![false; cands.len()];
        'rounds: for round in 0..self.rounds {
            let step = format!(
                "tune {} on {}: {phase} round {}/{}",
                c.perf(),
                place.shape,
                round + 1,
                self.rounds
            );
            let Some(baseline) = self.one(&template, place, &BTreeMap::new(), &step)? else {
                break 'rounds;
            };
            let baseline = baseline.map_err(|e| failed(format!("NCCL's own choice ({}) failed: {}", c.perf(), e.0)))?;
            for k in 0..cands.len() {
                let i = (k + round) % cands.len();
                if out[i] {
                    continue;
                }
                let step = format!("{step}: {}", cands[i].label());
                match self.one(&template, place, &cands[i].settings(), &step)? {
                    None => break 'rounds,
                    Some(Ok(run)) => pairs[i].push(Pair {
                        baseline: baseline.clone(),
                        candidate: run,
                    }),
                    Some(Err(e)) => {
                        out[i] = true;
                        self.disqualify(&cands[i], c, place.shape, &e);
                    }
                }
            }
        }
        let mut done = Vec::new();
        for (i, p) in pairs.into_iter().enumerate() {
            if out[i] {
                done.push(None);
            } else if p.len() < self.rounds {
                self.not_tried.push(format!(
                    "{} {} at {} ({phase})",
                    c.perf(),
                    cands[i].label(),
                    place.shape
                ));
                done.push(None);
            } else {
                done.push(Some(p));
            }
        }
        Ok(done)
    }

    /// One run: its figures, its failure, or `None` when the budget is spent.
    fn one(
        &mut self,
        template: &str,
        place: &Place,
        settings: &BTreeMap<String, String>,
        step: &str,
    ) -> Result<Option<Result<BenchRun, FailedRun>>, Error> {
        let run = Run {
            template,
            hosts: &place.hosts,
            gpus: place.gpus,
            rail: None,
            settings,
        };
        Ok(self.bench.runs(step, &[run])?.and_then(|mut v| v.pop()))
    }

    fn disqualify(&mut self, cand: &Candidate, c: Collective, shape: Shape, e: &FailedRun) {
        let wrong = e.wrong_values();
        tracing::warn!(
            "tune: {} {} at {shape} {}: {}",
            c.perf(),
            cand.label(),
            if wrong {
                "DISQUALIFIED, wrong results"
            } else {
                "disqualified"
            },
            e.0
        );
        self.disqualified.push(Disqualified {
            candidate: cand.label(),
            collective: c,
            shape,
            kind: if wrong { "wrong_values" } else { "failed" }.into(),
            why: e.0.chars().take(400).collect(),
        });
    }

    /// The winners measured again in fresh rounds; each range kept where it wins again.
    fn confirm(
        &mut self,
        c: Collective,
        place: &Place,
        judged: &[Judged],
        ranges: &[Range],
    ) -> Result<Vec<(Candidate, Range)>, Error> {
        let mut cands: Vec<Candidate> = ranges.iter().map(|r| judged[r.candidate].candidate.clone()).collect();
        cands.sort();
        cands.dedup();
        if cands.is_empty() {
            return Ok(Vec::new());
        }
        let fresh = self.pairs(c, place, &cands, "confirm")?;
        let mut out = Vec::new();
        for r in ranges {
            let cand = &judged[r.candidate].candidate;
            let Some(pairs) = cands.iter().position(|x| x == cand).and_then(|i| fresh[i].as_ref()) else {
                continue;
            };
            let again = judge::at_sizes(pairs, &self.gate);
            self.trials
                .push(trial(c, place.shape, cand, "confirm", pairs.len(), &again));
            out.extend(
                judge::confirm(r, pairs, &self.gate)
                    .into_iter()
                    .map(|r| (cand.clone(), r)),
            );
        }
        Ok(out)
    }

    /// The globals that won somewhere and were never slower, measured again.
    fn confirm_globals(
        &mut self,
        c: Collective,
        place: &Place,
        judged: &[Judged],
    ) -> Result<Vec<(String, Vec<AtSize>)>, Error> {
        let cands: Vec<Candidate> = judged
            .iter()
            .filter(|j| judge::global_holds(std::slice::from_ref(&j.sizes)))
            .map(|j| j.candidate.clone())
            .collect();
        if cands.is_empty() {
            return Ok(judged.iter().map(|j| (j.candidate.label(), j.sizes.clone())).collect());
        }
        let fresh = self.pairs(c, place, &cands, "confirm")?;
        let mut out: Vec<(String, Vec<AtSize>)> = judged
            .iter()
            .filter(|j| !cands.contains(&j.candidate))
            .map(|j| (j.candidate.label(), j.sizes.clone()))
            .collect();
        for (cand, pairs) in cands.iter().zip(fresh) {
            if let Some(p) = pairs {
                let again = judge::at_sizes(&p, &self.gate);
                self.trials
                    .push(trial(c, place.shape, cand, "confirm", p.len(), &again));
                out.push((cand.label(), again));
            }
        }
        Ok(out)
    }
}

fn is_global(c: &Candidate) -> bool {
    matches!(c, Candidate::Global { .. })
}

/// The pairs that won some size (their channel counts are tried next).
fn pairs_that_won(judged: &[Judged]) -> Vec<(crate::tune::Algo, crate::tune::Proto)> {
    let mut out = Vec::new();
    for r in judge::ranges(&judge::winners(judged)) {
        if let Candidate::Choice { algo, proto, .. } = judged[r.candidate].candidate {
            if !out.contains(&(algo, proto)) {
                out.push((algo, proto));
            }
        }
    }
    out
}

fn trial(c: Collective, shape: Shape, cand: &Candidate, phase: &'static str, rounds: usize, sizes: &[AtSize]) -> Trial {
    Trial {
        collective: c,
        shape,
        candidate: cand.label(),
        phase,
        rounds,
        sizes: sizes
            .iter()
            .map(|a| TrialSize {
                size: a.size,
                nccl_us: a.baseline_us,
                candidate_us: a.candidate_us,
                gain: a.gain,
                p99_worse: a.p99_worse,
                wins: a.wins,
            })
            .collect(),
    }
}

fn failed(why: String) -> Error {
    Error::Reach(Failure::new(FailureKind::BenchmarkFailed, why))
}

/// One collective at one shape: its confirmed ranges, each with its candidate.
type ShapeRanges = (Collective, Shape, Vec<(Candidate, Range)>);

/// The sizes where one candidate won at one shape, by collective.
type Wins<'a> = BTreeMap<u64, (&'a Candidate, &'a AtSize)>;

/// Rules from the confirmed ranges of every shape: where the same candidate won the same
/// size at every shape measured, one rule for any shape (said so); elsewhere a rule for the
/// shape it was measured at only.
fn rules_across_shapes(per_shape: &[ShapeRanges], places: &[Place], set: &str) -> Vec<Rule> {
    let shapes: Vec<Shape> = places.iter().map(|p| p.shape).collect();
    let mut rules = Vec::new();
    let mut collectives: Vec<Collective> = per_shape.iter().map(|(c, _, _)| *c).collect();
    collectives.dedup();
    for c in collectives {
        let wins: Vec<(Shape, Wins)> = per_shape
            .iter()
            .filter(|(x, _, _)| *x == c)
            .map(|(_, shape, ranges)| {
                let w: Wins = ranges
                    .iter()
                    .flat_map(|(cand, r)| r.sizes.iter().map(move |a| (a.size, (cand, a))))
                    .collect();
                (*shape, w)
            })
            .collect();
        let everywhere = |size: u64, cand: &Candidate| {
            shapes.len() > 1 && wins.iter().all(|(_, w)| w.get(&size).is_some_and(|(x, _)| *x == cand))
        };
        // Any shape: sizes of the first shape whose winner held at every shape.
        if let Some((_, first)) = wins.first() {
            let common: Vec<(u64, &Candidate, AtSize)> = first
                .iter()
                .filter(|(size, (cand, _))| everywhere(**size, cand))
                .filter_map(|(size, (cand, _))| Some((*size, *cand, weakest_at(&wins, *size)?)))
                .collect();
            let what = format!(
                "the same winner at every shape measured ({}); applied to any shape",
                list(&shapes)
            );
            rules.extend(to_rules(c, None, &common, set, &what));
        }
        for (shape, w) in &wins {
            let own: Vec<(u64, &Candidate, AtSize)> = w
                .iter()
                .filter(|(size, (cand, _))| !everywhere(**size, cand))
                .map(|(size, (cand, a))| (*size, *cand, (*a).clone()))
                .collect();
            rules.extend(to_rules(c, Some(*shape), &own, set, &format!("at {shape} only")));
        }
    }
    rules
}

fn list(shapes: &[Shape]) -> String {
    shapes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("; ")
}

/// A size's figures at the shape where its gain is weakest.
fn weakest_at(wins: &[(Shape, Wins)], size: u64) -> Option<AtSize> {
    wins.iter()
        .filter_map(|(_, w)| w.get(&size).map(|(_, a)| (*a).clone()))
        .min_by(|a, b| a.gain.low.total_cmp(&b.gain.low))
}

/// Adjacent sizes with one candidate, as rules.
fn to_rules(
    c: Collective,
    shape: Option<Shape>,
    sizes: &[(u64, &Candidate, AtSize)],
    set: &str,
    what: &str,
) -> Vec<Rule> {
    let mut groups: Vec<(&Candidate, Vec<&AtSize>)> = Vec::new();
    for (_, cand, at) in sizes {
        match groups.last_mut() {
            Some((last, v)) if *last == *cand => v.push(at),
            _ => groups.push((cand, vec![at])),
        }
    }
    groups
        .into_iter()
        .filter_map(|(cand, v)| {
            let Candidate::Choice { algo, proto, channels } = cand else {
                return None;
            };
            let weakest = v.iter().min_by(|a, b| a.gain.low.total_cmp(&b.gain.low))?;
            let (lo, hi) = (v.first()?.size, v.last()?.size);
            Some(Rule {
                collective: c,
                min_bytes: lo,
                max_bytes: hi,
                algorithm: *algo,
                protocol: *proto,
                channels: *channels,
                shape,
                gain: weakest.gain,
                nccl_us: weakest.baseline_us,
                tuned_us: weakest.candidate_us,
                why: format!(
                    "measured on {set}: {} at {} (its weakest size, {}–{}), {what}",
                    tuning::interval(&weakest.gain),
                    tuning::bytes(weakest.size),
                    tuning::bytes(lo),
                    tuning::bytes(hi)
                ),
            })
        })
        .collect()
}

/// The globals kept: never significantly slower at any size of any collective and shape in
/// their confirming rounds, and a win somewhere; each with its best range as evidence.
fn kept_globals(judged: &BTreeMap<String, Vec<Vec<AtSize>>>, facts: &Facts, set: &str) -> Vec<Global> {
    let mut out = Vec::new();
    for cand in space::globals(facts) {
        let Candidate::Global { name, value } = &cand else {
            continue;
        };
        let Some(all) = judged.get(&cand.label()) else { continue };
        if !judge::global_holds(all) {
            continue;
        }
        let best = all
            .iter()
            .flatten()
            .filter(|a| a.wins)
            .max_by(|a, b| a.gain.low.total_cmp(&b.gain.low));
        if let Some(b) = best {
            out.push(Global {
                name: (*name).into(),
                value: value.clone(),
                gain: b.gain,
                why: format!(
                    "measured on {set}: {} at {}; never slower at any size measured",
                    tuning::interval(&b.gain),
                    tuning::bytes(b.size)
                ),
            });
        }
    }
    out
}

/// `tuning.json` and `nccl-tuner.csv` under `dir` (the safe writer: temp, fsync, rename, only
/// when different); the CSV re-read with the plugin's own parser before it is written.
fn write(t: &Tuning, dir: &std::path::Path) -> Result<(Vec<PathBuf>, bool), Error> {
    tuning::review(t).map_err(|r| failed(format!("the tuning made does not hold up: {}", r.0)))?;
    let csv = tuning::csv(t);
    tuning::check_csv(t, &csv).map_err(|r| failed(r.0))?;
    let json = serde_json::to_string_pretty(t)? + "\n";
    let tree = Tree::open(dir).map_err(WriteError::from)?;
    let mut changed = tree
        .write("tuning.json", json.as_bytes(), 0o644)
        .map_err(WriteError::from)?;
    changed |= tree
        .write("nccl-tuner.csv", csv.as_bytes(), 0o644)
        .map_err(WriteError::from)?;
    Ok((vec![dir.join("tuning.json"), dir.join("nccl-tuner.csv")], changed))
}
