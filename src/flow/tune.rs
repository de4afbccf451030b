//! `topo-tune tune`: on one set of nodes, measure NCCL's own choice against every candidate
//! (`tune::space`) per collective, per message size and per job shape (one node, then the
//! whole set), select what wins, confirm it in fresh rounds as one family of hypotheses
//! (`tune::judge`), make the rules (`tune::rules`), measure the written file once more as it
//! will run, and write `tuning.json` and `nccl-tuner.csv`. Runs go through diagnose's engine
//! (`Bench` over a `Bencher`: rounds on the nodes through the benchmark runner, one
//! `--budget` for all).
//!
//! Every candidate is measured through the mechanism that will apply it: topo-tune's tuner
//! plugin and a rules file made for the candidate (a choice), or a config file with the
//! variable (a global), staged under one directory per run on every node of the set
//! (`apply::tune_stage`) and removed at the end — never `NCCL_ALGO`/`NCCL_PROTO` or the
//! channel variables, which NCCL applies otherwise than it applies a plugin's choice.
//!
//! A round runs the baseline once (NCCL's own choice; for channel counts, their pair), then
//! each candidate, in an order rotated from round to round (so a candidate is not always the
//! one furthest from its baseline); each candidate is paired with its round's baseline.

use super::gather::Ask;
use super::measure::nodes::NodeBencher;
use super::measure::{Bench, Bencher, Run};
use super::plan::gather_and_plan;
use super::settings::TuneSettings;
use crate::apply::tree::Tree;
use crate::apply::tune_stage::{PluginCopy, RunFiles, StagedRef};
use crate::apply::writer::WriteError;
use crate::bench::parse::BenchRun;
use crate::bench::stats::{Change, Gate};
use crate::error::Error;
use crate::model::plan::{Plan, PortTransport};
use crate::model::{Failure, FailureKind};
use crate::node::calls::TuneStage;
use crate::report::Printer;
use crate::runner::FailedRun;
use crate::tune::judge::{self, AtSize, Judged, Pair, Range, Replication};
use crate::tune::rules::{self, AtShape, ConfirmedRange, Family, GlobalEvidence};
use crate::tune::space::{self, Candidate, Facts};
use crate::tune::tuning::{self, Disqualified, Kept, Trial, TrialSize, Tuning, TUNING_SCHEMA};
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

/// One thing a round measures against its baseline: a name and the files its runs read.
#[derive(Clone)]
struct Arm {
    label: String,
    files: RunFiles,
}

impl Arm {
    fn of(c: Collective, k: &Candidate) -> Arm {
        let (vars, rules) = k.files(c);
        Arm {
            label: k.label(),
            files: RunFiles::new(vars, rules),
        }
    }
}

/// One round's runs: the baseline's, and each arm's that ran (by index).
type RoundRuns = (BenchRun, Vec<(usize, BenchRun)>);

/// What every run of one phase shares: the collective, its command, where it runs, the
/// baseline's and the arms' staged files.
struct Lane<'a> {
    collective: Collective,
    template: &'a str,
    place: &'a Place,
    base_ref: Option<&'a StagedRef>,
    staged: &'a [StagedRef],
    arms: &'a [Arm],
}

/// Everything measured so far, shared by the phases.
struct Search<'p, B: Bencher> {
    bench: Bench<B>,
    printer: &'p Printer,
    /// The search's planned runs (said before the first run), and whether its pace was said.
    planned: usize,
    told: bool,
    /// This run's id: the directory of its files on every node.
    run: String,
    /// Every host of the set: where the run's files are staged.
    hosts: Vec<String>,
    /// The plugin, until it has been staged once.
    plugin: Option<PluginCopy>,
    /// The NCCL the set runs and its hardware (what the tuning was measured on).
    nccl_version: Option<crate::model::NcclVersion>,
    hardware: String,
    gate: Gate,
    rounds: usize,
    trials: Vec<Trial>,
    disqualified: Vec<Disqualified>,
    not_tried: Vec<String>,
}

pub(crate) fn tune(s: &TuneSettings, printer: &Printer) -> Result<TuneOutcome, Error> {
    super::preflight::benchmark_runnable(&s.gather.inv)?;
    let plugin = super::preflight::tuner_plugin(&s.plugin)?;
    // One tune or rollout of a cluster at a time: the run files of another would be removed.
    let store = crate::canary::state::Store::open(&s.state_dir)?;
    let _lock = store.lock(&s.cluster_config)?;
    super::preflight::tuning_dir_writable(&s.tuning_dir).map_err(WriteError::from)?;
    let planned = gather_and_plan(&s.gather, printer, crate::flow::PREDICTION_BYTES, Ask::Snapshot)?;
    // What the tuning is measured on: the set's NCCL (its nodes', else cluster.yaml's).
    let nccl_version = planned.plan.nccl.classes.iter().find_map(|c| c.nccl_version);
    let gpus = super::diagnose::gpus_per_node(&s.gather.inv, &planned.plan.node_classes);
    let order = if planned.plan.node_order.is_empty() {
        s.hosts.clone()
    } else {
        planned.plan.node_order.clone()
    };
    // A set of mixed hardware measures an average no rule fits, and its tuning could go to
    // no node: refused before the first run.
    let hardware = crate::tune::hardware::common(&planned.plan, &order).map_err(|why| {
        Error::Usage(format!(
            "tune --canary {}: the set is not one kind of node ({}); tune each kind on its own",
            s.set, why.0
        ))
    })?;
    let facts = facts_of(&planned.plan, gpus, order.len() as u32);
    let bencher = NodeBencher::new(
        &s.gather.inv,
        &s.gather.reach,
        printer,
        s.output_dir.as_deref(),
        s.budget,
        "tune",
    );
    let planned = planned_runs(s, &order, gpus, &facts);
    printer.line(&format!(
        "tune: {planned} runs planned for the search ({} collective(s), every candidate and NCCL's own, {} rounds, at {} shape(s)); a candidate that can no longer win is dropped early",
        s.collectives.len(),
        s.rounds,
        places(&order, gpus).len()
    ));
    let mut search = Search {
        bench: Bench::new(bencher),
        printer,
        planned,
        told: false,
        nccl_version,
        hardware,
        run: crate::apply::writer::run_id(),
        hosts: order.clone(),
        plugin: Some(PluginCopy::of(&plugin)),
        gate: s.gate,
        rounds: s.rounds as usize,
        trials: Vec::new(),
        disqualified: Vec::new(),
        not_tried: Vec::new(),
    };
    let made = search.everything(s, &order, gpus, &facts);
    // The run's files go whatever happened (a failed removal is said, never hides the result).
    if let Err(e) = search.bench.bencher.unstage(&order, &search.run) {
        tracing::warn!("tune: removing the run's files: {e}");
    }
    let mut tuning = made?;
    tuning.disqualified = std::mem::take(&mut search.disqualified);
    tuning.not_tried = std::mem::take(&mut search.not_tried);
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

/// What the canary judges a tuning with (`apply --tuning`): the canary's hosts that may have
/// it, in ring order, the plugin, and the rollout's gate and rounds.
pub(crate) struct CanaryJudge<'a> {
    pub(crate) gather: &'a super::settings::GatherSettings,
    pub(crate) plan: &'a Plan,
    pub(crate) hosts: Vec<String>,
    pub(crate) output_dir: Option<&'a std::path::Path>,
    pub(crate) plugin: Option<PluginCopy>,
    pub(crate) gate: Gate,
    pub(crate) rounds: usize,
}

/// The canary's word: the tuning with only what held, and a verdict per rule and global.
pub(crate) struct CanaryVerdict {
    pub(crate) kept: Tuning,
    pub(crate) judged: Vec<crate::canary::state::RuleJudged>,
}

/// One hypothesis of the canary's family: a rule (by index) or the globals (`None`) over
/// the sizes it governs at one collective and shape.
struct CanaryHypothesis {
    rule: Option<usize>,
    replication: Replication,
}

/// Judge a tuning on the canary with tune's own decision rule: the tuning as written (its
/// rules file through the plugin, its globals) against NCCL's own, in fresh interleaved
/// rounds at every collective and shape of the canary it touches; each rule one hypothesis
/// over its sizes, the globals one over the sizes no rule governs, Holm over them all. A rule
/// holds only where it was confirmed at every shape it applies to; a shape-specific rule the
/// canary cannot run is not measured, so it does not hold.
pub(crate) fn judge_on_canary(j: &CanaryJudge, t: &Tuning, printer: &Printer) -> Result<CanaryVerdict, Error> {
    let inv = &j.gather.inv;
    let gpus = super::diagnose::gpus_per_node(inv, &j.plan.node_classes);
    let places: Vec<Place> = places(&j.hosts, gpus)
        .into_iter()
        .filter(|p| !t.globals.is_empty() || t.rules.iter().any(|r| r.shape.is_none_or(|s| s == p.shape)))
        .collect();
    let bencher = NodeBencher::new(inv, &j.gather.reach, printer, j.output_dir, None, "apply");
    let mut search = Search {
        bench: Bench::new(bencher),
        printer,
        planned: 0,
        told: true,
        nccl_version: t.nccl_version,
        hardware: t.hardware.clone().unwrap_or_default(),
        run: crate::apply::writer::run_id(),
        hosts: j.hosts.clone(),
        plugin: j.plugin.clone(),
        gate: j.gate,
        rounds: j.rounds,
        trials: Vec::new(),
        disqualified: Vec::new(),
        not_tried: Vec::new(),
    };
    let measured = search.canary_family(t, &places);
    if let Err(e) = search.bench.bencher.unstage(&j.hosts, &search.run) {
        tracing::warn!("apply: removing the canary's run files: {e}");
    }
    let family = measured?;
    Ok(verdict(t, &family, &j.gate, &j.hosts))
}

/// The tuning with what held, and every rule's and the globals' word.
fn verdict(t: &Tuning, family: &[CanaryHypothesis], gate: &Gate, hosts: &[String]) -> CanaryVerdict {
    let reps: Vec<Replication> = family.iter().map(|h| h.replication.clone()).collect();
    let confirmed = judge::confirmed(&reps, gate);
    let word = |which: Option<usize>| {
        let mine: Vec<(&CanaryHypothesis, bool)> = family
            .iter()
            .zip(confirmed.iter().copied())
            .filter(|(h, _)| h.rule == which)
            .collect();
        let gain = mine
            .iter()
            .fold(None, |g, (h, _)| Some(rules::weaker(g, h.replication.gain)));
        (gain, !mine.is_empty() && mine.iter().all(|(_, ok)| *ok))
    };
    let on = format!("the canary ({})", hosts.join(","));
    let mut kept = t.clone();
    let mut judged = Vec::new();
    kept.rules.clear();
    for (i, r) in t.rules.iter().enumerate() {
        let (gain, holds) = word(Some(i));
        let name = format!(
            "{} {}–{} {}/{}{}",
            r.collective.perf(),
            tuning::bytes(r.min_bytes),
            tuning::bytes(r.max_bytes),
            r.algorithm.csv(),
            r.protocol.csv(),
            r.shape.map(|s| format!(" at {s}")).unwrap_or_default()
        );
        if holds {
            kept.rules.push(r.clone());
        } else {
            kept.dropped.push(format!("{name}: did not hold on {on}"));
        }
        judged.push(crate::canary::state::RuleJudged {
            rule: name,
            gain,
            holds,
        });
    }
    if !t.globals.is_empty() {
        let (gain, holds) = word(None);
        let name: Vec<String> = t.globals.iter().map(|g| format!("{}={}", g.name, g.value)).collect();
        if !holds {
            kept.globals.clear();
            kept.dropped.push(format!("{}: did not hold on {on}", name.join(" ")));
        }
        judged.push(crate::canary::state::RuleJudged {
            rule: name.join(" "),
            gain,
            holds,
        });
    }
    CanaryVerdict { kept, judged }
}

impl<B: Bencher> Search<'_, B> {
    /// The tuning as written against NCCL's own at every collective and place it touches:
    /// one replication per rule (and for the globals) there.
    fn canary_family(&mut self, t: &Tuning, places: &[Place]) -> Result<Vec<CanaryHypothesis>, Error> {
        let vars: BTreeMap<String, String> = t.globals.iter().map(|g| (g.name.clone(), g.value.clone())).collect();
        let csv = crate::tune::onto::has_rules(t).then(|| tuning::csv(t));
        let arm = Arm {
            label: "the tuning as written".into(),
            files: RunFiles::new(vars, csv),
        };
        let applies = |c: Collective, p: &Place| -> Vec<usize> {
            (0..t.rules.len())
                .filter(|i| t.rules[*i].collective == c && t.rules[*i].shape.is_none_or(|s| s == p.shape))
                .collect()
        };
        let mut lanes = Vec::new();
        for p in places {
            for &c in &t.collectives {
                let rules = applies(c, p);
                if !rules.is_empty() || (!t.globals.is_empty() && c.csv().is_some()) {
                    lanes.push((c, p, rules));
                }
            }
        }
        let count: usize = lanes
            .iter()
            .map(|(_, _, r)| r.len() + usize::from(!t.globals.is_empty()))
            .sum();
        let rounds = judge::confirm_rounds(self.rounds, count.max(1));
        let mut family = Vec::new();
        for (c, place, rules) in lanes {
            let fresh = self.pairs(c, place, std::slice::from_ref(&arm), "canary", rounds, None)?;
            let Some(Some(pairs)) = fresh.into_iter().next() else {
                return Err(failed(format!(
                    "the tuning as written did not run on the canary ({} at {}): nothing is promoted",
                    c.perf(),
                    place.shape
                )));
            };
            self.trials.push(trial(
                c,
                place.shape,
                &arm.label,
                "canary",
                pairs.len(),
                &judge::at_sizes(&pairs, &self.gate),
            ));
            let sweep: Vec<u64> = pairs
                .first()
                .map(|p| p.baseline.rows.iter().map(|r| r.size).collect())
                .unwrap_or_default();
            let within = |r: &tuning::Rule| -> Vec<u64> {
                sweep
                    .iter()
                    .copied()
                    .filter(|s| (r.min_bytes..=r.max_bytes).contains(s))
                    .collect()
            };
            for &i in &rules {
                family.push(CanaryHypothesis {
                    rule: Some(i),
                    replication: judge::replicate(&pairs, &within(&t.rules[i])),
                });
            }
            if !t.globals.is_empty() {
                let free: Vec<u64> = sweep
                    .iter()
                    .copied()
                    .filter(|s| !rules.iter().any(|&i| within(&t.rules[i]).contains(s)))
                    .collect();
                let sizes = if free.is_empty() { sweep.clone() } else { free };
                family.push(CanaryHypothesis {
                    rule: None,
                    replication: judge::replicate(&pairs, &sizes),
                });
            }
        }
        Ok(family)
    }
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

/// What selection found for one collective at one shape.
struct Selected {
    collective: Collective,
    place: usize,
    sweep: Vec<u64>,
    ranges: Vec<Range>,
    /// Every global's judged sizes (the never-slower evidence), and those that won somewhere
    /// and were never slower, with the sizes they won.
    globals: Vec<Judged>,
    global_wins: Vec<(Candidate, Vec<u64>)>,
}

/// One hypothesis of the confirmation family: a candidate over the sizes it was selected at.
struct Hypothesis {
    selected: usize,
    candidate: Candidate,
    sizes: Vec<u64>,
}

impl<B: Bencher> Search<'_, B> {
    /// Select at every collective and shape, confirm every selection as one family, make
    /// the tuning and measure it as written.
    fn everything(&mut self, s: &TuneSettings, order: &[String], gpus: u32, facts: &Facts) -> Result<Tuning, Error> {
        let places = places(order, gpus);
        let mut selected = Vec::new();
        for (i, place) in places.iter().enumerate() {
            for &c in &s.collectives {
                let f = Facts {
                    nodes: place.shape.nodes,
                    ..facts.clone()
                };
                selected.push(self.select(c, i, place, &f)?);
            }
        }
        let (at, evidence, family) = self.confirm(&places, &selected)?;
        let shapes: Vec<Shape> = places.iter().map(|p| p.shape).collect();
        let mut tuning = Tuning {
            schema: TUNING_SCHEMA,
            set: s.set.clone(),
            hosts: order.to_vec(),
            nccl_version: self.nccl_version,
            hardware: Some(self.hardware.clone()),
            shapes: shapes.clone(),
            collectives: s.collectives.clone(),
            rules: rules::rules(&at, &shapes, family, &s.set),
            globals: rules::globals(&evidence, &s.set),
            kept: at
                .iter()
                .map(|a| Kept {
                    collective: a.collective,
                    shape: a.shape,
                    sizes: a.kept(),
                })
                .collect(),
            disqualified: Vec::new(),
            not_tried: Vec::new(),
            dropped: Vec::new(),
        };
        self.verify(&mut tuning, &places, &at)?;
        Ok(tuning)
    }

    /// Every pair and global against NCCL's own; then each winning pair's channel counts
    /// against that pair; ranges of one winner; globals that won and were never slower.
    fn select(&mut self, c: Collective, place_index: usize, place: &Place, f: &Facts) -> Result<Selected, Error> {
        let mut first: Vec<Candidate> = space::choices(c, f);
        first.extend(space::globals(f));
        let judged = self.measure(c, place, &first, "search", None)?;
        let (globals, pairs): (Vec<Judged>, Vec<Judged>) = judged.into_iter().partition(|j| is_global(&j.candidate));
        let mut per_size = judge::winners(&pairs);
        let mut won: Vec<Candidate> = Vec::new();
        for w in per_size.iter().filter_map(|(_, w)| w.as_ref()) {
            if !won.contains(&w.candidate) {
                won.push(w.candidate.clone());
            }
        }
        for pair in won {
            let Candidate::Choice { algo, proto, .. } = pair else {
                continue;
            };
            let counts = space::channel_choices(algo, proto);
            let against = self.measure(c, place, &counts, "channels", Some(&pair))?;
            judge::refine(&mut per_size, &against);
        }
        let global_wins = globals
            .iter()
            .filter(|j| judge::global_holds(std::slice::from_ref(&j.sizes)))
            .map(|j| {
                let sizes = j.sizes.iter().filter(|a| a.wins).map(|a| a.size).collect();
                (j.candidate.clone(), sizes)
            })
            .collect();
        let sweep = pairs
            .first()
            .or(globals.first())
            .map(|j| j.sizes.iter().map(|a| a.size).collect())
            .unwrap_or_default();
        Ok(Selected {
            collective: c,
            place: place_index,
            sweep,
            ranges: judge::ranges(&per_size),
            globals,
            global_wins,
        })
    }

    /// Every candidate over the configured rounds against `baseline` (NCCL's own when
    /// `None`), each one's sizes judged and recorded.
    fn measure(
        &mut self,
        c: Collective,
        place: &Place,
        cands: &[Candidate],
        phase: &'static str,
        baseline: Option<&Candidate>,
    ) -> Result<Vec<Judged>, Error> {
        let arms: Vec<Arm> = cands.iter().map(|k| Arm::of(c, k)).collect();
        let base = baseline.map(|b| Arm::of(c, b));
        let pairs = self.pairs(c, place, &arms, phase, self.rounds, base.as_ref())?;
        let mut judged = Vec::new();
        for (cand, pairs) in cands.iter().zip(pairs) {
            let Some(pairs) = pairs else { continue };
            let sizes = judge::at_sizes(&pairs, &self.gate);
            self.trials
                .push(trial(c, place.shape, &cand.label(), phase, pairs.len(), &sizes));
            judged.push(Judged {
                candidate: cand.clone(),
                sizes,
            });
        }
        Ok(judged)
    }

    /// Every arm over `rounds` rounds: its pairs, or `None` — an arm whose run fails is
    /// disqualified (and not run again), one the budget leaves short is not tried.
    fn pairs(
        &mut self,
        c: Collective,
        place: &Place,
        arms: &[Arm],
        phase: &'static str,
        rounds: usize,
        baseline: Option<&Arm>,
    ) -> Result<Vec<Option<Vec<Pair>>>, Error> {
        let template = self.template(c)?;
        let mut files: Vec<RunFiles> = arms.iter().map(|a| a.files.clone()).collect();
        files.extend(baseline.map(|b| b.files.clone()));
        let mut staged = self.stage(&files)?;
        let base_ref = baseline.and_then(|_| staged.pop());
        // Selection may drop an arm that can no longer win; a replication runs every round.
        let early = phase == "search" || phase == "channels";
        let mut pairs: Vec<Vec<Pair>> = vec![Vec::new(); arms.len()];
        let mut out = vec![false; arms.len()];
        let mut dropped = vec![false; arms.len()];
        for round in 0..rounds {
            let step = format!(
                "tune {} on {}: {phase} round {}/{rounds}",
                c.perf(),
                place.shape,
                round + 1
            );
            let live: Vec<usize> = (0..arms.len())
                .map(|k| (k + round) % arms.len())
                .filter(|i| !out[*i] && !dropped[*i])
                .collect();
            if live.is_empty() {
                break;
            }
            let mut seq: Vec<Option<usize>> = live.into_iter().map(Some).collect();
            seq.insert(baseline_slot(&self.run, &step, seq.len()), None);
            let lane = Lane {
                collective: c,
                template: &template,
                place,
                base_ref: base_ref.as_ref(),
                staged: &staged,
                arms,
            };
            let Some((base, got)) = self.round(&lane, &seq, &step, &mut out)? else {
                break;
            };
            for (i, run) in got {
                pairs[i].push(Pair {
                    baseline: base.clone(),
                    candidate: run,
                });
            }
            for i in 0..arms.len() {
                dropped[i] |= early && !out[i] && judge::cannot_win(&pairs[i], rounds);
            }
            self.tell_pace();
        }
        let mut done = Vec::new();
        for (i, p) in pairs.into_iter().enumerate() {
            if out[i] {
                done.push(None);
            } else if p.len() < rounds && !dropped[i] {
                self.not_tried
                    .push(format!("{} {} at {} ({phase})", c.perf(), arms[i].label, place.shape));
                done.push(None);
            } else {
                done.push(Some(p));
            }
        }
        Ok(done)
    }

    /// One round in the order `seq` gives (`None`: the baseline): the baseline's run and each
    /// arm's, or `None` when the budget ended the round (its runs count for nothing).
    fn round(
        &mut self,
        lane: &Lane<'_>,
        seq: &[Option<usize>],
        step: &str,
        out: &mut [bool],
    ) -> Result<Option<RoundRuns>, Error> {
        let mut base = None;
        let mut got = Vec::new();
        for item in seq {
            match *item {
                None => {
                    let Some(b) = self.one(lane.template, lane.place, lane.base_ref, step)? else {
                        return Ok(None);
                    };
                    let b = b.map_err(|e| failed(format!("{step}: the baseline failed: {}", e.0)))?;
                    per_iteration(&b, step)?;
                    base = Some(b);
                }
                Some(i) => {
                    let label = &lane.arms[i].label;
                    match self.one(
                        lane.template,
                        lane.place,
                        Some(&lane.staged[i]),
                        &format!("{step}: {label}"),
                    )? {
                        None => return Ok(None),
                        Some(Ok(run)) => got.push((i, run)),
                        Some(Err(e)) => {
                            out[i] = true;
                            self.disqualify(label, lane.collective, lane.place.shape, &e);
                        }
                    }
                }
            }
        }
        Ok(base.map(|b| (b, got)))
    }

    /// After the first round, what the search will take at this pace (said once).
    fn tell_pace(&mut self) {
        if self.told || self.bench.rounds == 0 {
            return;
        }
        self.told = true;
        let (_, spent) = self.bench.bencher.budget();
        let per_run = spent / self.bench.rounds as f64;
        self.printer.line(&format!(
            "tune: {:.1} s a run so far: the {} planned search runs take about {:.0} min (channel counts and the confirmation add to it)",
            per_run,
            self.planned,
            per_run * self.planned as f64 / 60.0
        ));
    }

    /// The benchmark command for collective `c`.
    fn template(&self, c: Collective) -> Result<String, Error> {
        let command = self.bench.command();
        match crate::config::benchmark::perf_command(&command, c.perf()) {
            Some(t) => Ok(t),
            // A command that runs one fixed binary measures all-reduce or nothing else.
            None if c == Collective::AllReduce => Ok(command),
            None => Err(Error::Usage(format!(
                "tune --collectives {}: benchmark.command names neither {{collective}} nor all_reduce_perf, so it cannot run {}_perf",
                c.perf(),
                c.perf()
            ))),
        }
    }

    /// Run files staged on every node of the set, in the order given.
    fn stage(&mut self, files: &[RunFiles]) -> Result<Vec<StagedRef>, Error> {
        let call = TuneStage {
            run: self.run.clone(),
            plugin: self.plugin.clone(),
            files: files.to_vec(),
        };
        self.bench.bencher.stage(&self.hosts, &call)?;
        // Staged once it reached every node: later stages carry no copy.
        self.plugin = None;
        Ok(files
            .iter()
            .map(|f| StagedRef {
                run: self.run.clone(),
                id: f.id.clone(),
            })
            .collect())
    }

    /// One run: its figures, its failure, or `None` when the budget is spent. A run whose
    /// benchmark reports another rank count than its shape measured another job: an error.
    fn one(
        &mut self,
        template: &str,
        place: &Place,
        staged: Option<&StagedRef>,
        step: &str,
    ) -> Result<Option<Result<BenchRun, FailedRun>>, Error> {
        let run = Run {
            template,
            hosts: &place.hosts,
            gpus: place.gpus,
            rail: None,
            staged,
        };
        let out = self.bench.runs(step, &[run])?.and_then(|mut v| v.pop());
        if let Some(Ok(r)) = &out {
            if r.ranks != place.shape.ranks {
                return Err(failed(format!(
                    "{step}: the benchmark ran {} rank(s) for a job of {}: its command does not run the shape asked ({{ranks}}, {{hosts}}, {{gpus_per_node}} in benchmark.command)",
                    r.ranks, place.shape
                )));
            }
        }
        Ok(out)
    }

    fn disqualify(&mut self, label: &str, c: Collective, shape: Shape, e: &FailedRun) {
        let wrong = e.wrong_values();
        tracing::warn!(
            "tune: {} {} at {shape} {}: {}",
            c.perf(),
            label.to_string(),
            if wrong {
                "DISQUALIFIED, wrong results"
            } else {
                "disqualified"
            },
            e.0
        );
        self.disqualified.push(Disqualified {
            candidate: label.to_string(),
            collective: c,
            shape,
            kind: if wrong { "wrong_values" } else { "failed" }.into(),
            why: e.0.chars().take(400).collect(),
        });
    }

    /// Every selection tested again in fresh rounds as one family: enough rounds that a
    /// unanimous replication passes Holm's first step, each hypothesis's p-value and gain
    /// from its own range, Holm over them all.
    fn confirm(
        &mut self,
        places: &[Place],
        selected: &[Selected],
    ) -> Result<(Vec<AtShape>, Vec<GlobalEvidence>, Family), Error> {
        let hyps = hypotheses(selected);
        let rounds = judge::confirm_rounds(self.rounds, hyps.len());
        let mut reps: Vec<(Replication, Vec<AtSize>)> = Vec::new();
        for (i, sel) in selected.iter().enumerate() {
            let mine: Vec<&Hypothesis> = hyps.iter().filter(|h| h.selected == i).collect();
            if !mine.is_empty() {
                reps.extend(self.replicate(sel, &places[sel.place], &mine, rounds)?);
            }
        }
        let held = judge::confirmed(&reps.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>(), &self.gate);
        let (at, evidence) = assemble(places, selected, &hyps, reps, held);
        Ok((at, evidence, Family(hyps.len())))
    }

    /// One selection's hypotheses in fresh rounds against NCCL's own: each one's replication
    /// and the fresh figures at every size (a candidate the rounds could not finish: none).
    fn replicate(
        &mut self,
        sel: &Selected,
        place: &Place,
        mine: &[&Hypothesis],
        rounds: usize,
    ) -> Result<Vec<(Replication, Vec<AtSize>)>, Error> {
        let mut cands: Vec<Candidate> = Vec::new();
        for h in mine {
            if !cands.contains(&h.candidate) {
                cands.push(h.candidate.clone());
            }
        }
        let arms: Vec<Arm> = cands.iter().map(|k| Arm::of(sel.collective, k)).collect();
        let fresh = self.pairs(sel.collective, place, &arms, "confirm", rounds, None)?;
        for (k, pairs) in cands.iter().zip(&fresh) {
            if let Some(p) = pairs {
                let at = judge::at_sizes(p, &self.gate);
                self.trials
                    .push(trial(sel.collective, place.shape, &k.label(), "confirm", p.len(), &at));
            }
        }
        Ok(mine
            .iter()
            .map(|h| {
                let at_k = cands
                    .iter()
                    .position(|k| *k == h.candidate)
                    .and_then(|j| fresh[j].as_ref());
                match at_k {
                    Some(p) => (judge::replicate(p, &h.sizes), judge::at_sizes(p, &self.gate)),
                    None => (judge::replicate(&[], &h.sizes), Vec::new()),
                }
            })
            .collect())
    }

    /// The tuning measured once more as it is written — NCCL's own against the written rules
    /// file through the plugin, with the kept globals — at every shape and collective it
    /// touches; a rule that is not faster there over its sizes is dropped (and said), and the
    /// file is measured again until what is written is what was measured.
    fn verify(&mut self, t: &mut Tuning, places: &[Place], at: &[AtShape]) -> Result<(), Error> {
        for _ in 0..3 {
            if t.rules.is_empty() && t.globals.is_empty() {
                return Ok(());
            }
            let verified = self.measure_written(t, places, at)?;
            let before = t.rules.len();
            let mut kept = Vec::new();
            for (mut r, v) in std::mem::take(&mut t.rules).into_iter().zip(verified) {
                match v {
                    Some(g) if g.median > 0.0 && g.high >= 0.0 => {
                        r.verified = Some(g);
                        kept.push(r);
                    }
                    other => t.dropped.push(format!(
                        "{} {}–{} {}/{}: measured as written, {}",
                        r.collective.perf(),
                        tuning::bytes(r.min_bytes),
                        tuning::bytes(r.max_bytes),
                        r.algorithm.csv(),
                        r.protocol.csv(),
                        other.map_or("not measured".into(), |g| format!(
                            "{}: not faster",
                            tuning::interval(&g)
                        ))
                    )),
                }
            }
            t.rules = kept;
            if t.rules.len() == before {
                return Ok(());
            }
        }
        Err(failed(
            "the tuning as written kept losing rules when measured again: nothing is written".into(),
        ))
    }

    /// Each rule's gain over its sizes with the tuning as written (the weakest shape it
    /// applies to); `None` for a rule no measurement reached.
    fn measure_written(&mut self, t: &Tuning, places: &[Place], at: &[AtShape]) -> Result<Vec<Option<Change>>, Error> {
        let vars: BTreeMap<String, String> = t.globals.iter().map(|g| (g.name.clone(), g.value.clone())).collect();
        let csv = (!t.rules.is_empty()).then(|| tuning::csv(t));
        let arm = Arm {
            label: "the tuning as written".into(),
            files: RunFiles::new(vars, csv),
        };
        let mut verified: Vec<Option<Change>> = vec![None; t.rules.len()];
        for a in at {
            let applies: Vec<usize> = (0..t.rules.len())
                .filter(|i| t.rules[*i].collective == a.collective && t.rules[*i].shape.is_none_or(|s| s == a.shape))
                .collect();
            let Some(place) = places.iter().find(|p| p.shape == a.shape) else {
                continue;
            };
            if applies.is_empty() && t.globals.is_empty() {
                continue;
            }
            let fresh = self.pairs(
                a.collective,
                place,
                std::slice::from_ref(&arm),
                "verify",
                self.rounds,
                None,
            )?;
            let Some(Some(pairs)) = fresh.into_iter().next() else {
                return Err(failed(
                    "the tuning as written could not be measured: nothing is written".into(),
                ));
            };
            let figures = judge::at_sizes(&pairs, &self.gate);
            self.trials.push(trial(
                a.collective,
                a.shape,
                &arm.label,
                "verify",
                pairs.len(),
                &figures,
            ));
            for i in applies {
                let r = &t.rules[i];
                let sizes: Vec<u64> = a
                    .sweep
                    .iter()
                    .copied()
                    .filter(|s| (r.min_bytes..=r.max_bytes).contains(s))
                    .collect();
                verified[i] = Some(rules::weaker(verified[i], judge::replicate(&pairs, &sizes).gain));
            }
        }
        Ok(verified)
    }
}

/// Every selected range and global, each one hypothesis over the sizes it was selected at.
fn hypotheses(selected: &[Selected]) -> Vec<Hypothesis> {
    let mut hyps = Vec::new();
    for (i, sel) in selected.iter().enumerate() {
        for r in &sel.ranges {
            hyps.push(Hypothesis {
                selected: i,
                candidate: r.candidate.clone(),
                sizes: r.size_list(),
            });
        }
        for (g, sizes) in &sel.global_wins {
            hyps.push(Hypothesis {
                selected: i,
                candidate: g.clone(),
                sizes: sizes.clone(),
            });
        }
    }
    hyps
}

/// The confirmed ranges per collective and shape (a range whose tail is not shown no worse
/// at each of its sizes in the fresh rounds too is not kept), and every global's evidence.
fn assemble(
    places: &[Place],
    selected: &[Selected],
    hyps: &[Hypothesis],
    reps: Vec<(Replication, Vec<AtSize>)>,
    held: Vec<bool>,
) -> (Vec<AtShape>, Vec<GlobalEvidence>) {
    let mut at: Vec<AtShape> = selected
        .iter()
        .map(|sel| AtShape {
            collective: sel.collective,
            shape: places[sel.place].shape,
            sweep: sel.sweep.clone(),
            ranges: Vec::new(),
        })
        .collect();
    let mut evidence: Vec<GlobalEvidence> = Vec::new();
    for g in selected.iter().flat_map(|sel| &sel.globals) {
        match evidence.iter_mut().find(|e| e.candidate == g.candidate) {
            Some(e) => e.search.push(g.sizes.clone()),
            None => evidence.push(GlobalEvidence {
                candidate: g.candidate.clone(),
                search: vec![g.sizes.clone()],
                confirmations: Vec::new(),
            }),
        }
    }
    for ((h, (rep, fresh)), ok) in hyps.iter().zip(reps).zip(held) {
        if is_global(&h.candidate) {
            if let Some(e) = evidence.iter_mut().find(|e| e.candidate == h.candidate) {
                e.confirmations.push((ok, rep, fresh));
            }
            continue;
        }
        let in_range: Vec<AtSize> = fresh.into_iter().filter(|a| h.sizes.contains(&a.size)).collect();
        if ok && in_range.len() == h.sizes.len() && in_range.iter().all(|a| !a.p99_worse) {
            at[h.selected].ranges.push(ConfirmedRange {
                candidate: h.candidate.clone(),
                sizes: in_range,
                rep,
            });
        }
    }
    (at, evidence)
}

/// The search's runs at most: per collective and shape, NCCL's own and every candidate, each
/// round.
fn planned_runs(s: &TuneSettings, order: &[String], gpus: u32, facts: &Facts) -> usize {
    places(order, gpus)
        .iter()
        .map(|p| {
            let f = Facts {
                nodes: p.shape.nodes,
                ..facts.clone()
            };
            s.collectives
                .iter()
                .map(|c| (space::choices(*c, &f).len() + space::globals(&f).len() + 1) * s.rounds as usize)
                .sum::<usize>()
        })
        .sum()
}

/// Where the baseline runs in a round of `arms` other runs: drawn from the run's id and the
/// round (repeatable), so that it is not always first — drift within a round then favours no
/// side on average.
fn baseline_slot(run: &str, step: &str, arms: usize) -> usize {
    let h = crate::digest::sha256_hex(format!("{run}|{step}").as_bytes());
    let v = u64::from_str_radix(&h[..15], 16).unwrap_or(0);
    (v % (arms as u64 + 1)) as usize
}

/// A round without per-iteration P99 figures cannot show a candidate's tail is no worse.
fn per_iteration(run: &BenchRun, step: &str) -> Result<(), Error> {
    if run.rows.iter().any(|r| r.p99_us.is_none()) {
        return Err(Error::Usage(format!(
            "{step}: the benchmark reported no per-iteration P99 (nccl-tests `-I 1`): tune keeps a candidate only where its P99 is shown no worse; add `-I 1` to benchmark.command"
        )));
    }
    Ok(())
}

fn is_global(c: &Candidate) -> bool {
    matches!(c, Candidate::Global { .. })
}

fn trial(c: Collective, shape: Shape, label: &str, phase: &'static str, rounds: usize, sizes: &[AtSize]) -> Trial {
    Trial {
        collective: c,
        shape,
        candidate: label.to_string(),
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
