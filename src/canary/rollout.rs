//! The rollout engine: wave by wave, stage the candidate beside the live files, measure
//! baseline and candidate interleaved on the same nodes, decide by the rule in
//! `bench::stats`, then promote with the atomic writer — or undo exactly what this wave did.
//! Every step is recorded before it is taken, so a killed rollout resumes from its record.
//! Nodes are reached through [`Fleet`] (the node calls over the usual transports).

use super::state::{Phase, Rollout, RolloutStatus, RoundRecord, RunRecord, StateError, Store, Wave};
use crate::apply::stage::{NodeState, StageRecord};
use crate::apply::writer::WriteReport;
use crate::bench::stats::{self, Round};
use crate::model::Failure;
use crate::runner::{self, BenchAnswer, Variant};

/// Per-host results of one call on many nodes.
pub(crate) type Results<T> = Vec<(String, Result<T, Failure>)>;

/// Why the engine stopped without finishing its record.
#[derive(Debug)]
pub(crate) enum EngineError<S> {
    State(StateError),
    /// The fleet could not go on (the fan-out could not run, or a signal stopped it): the
    /// record says where the rollout stands, and `--resume` continues it.
    Stopped(S),
}

impl<S> From<StateError> for EngineError<S> {
    fn from(e: StateError) -> Self {
        EngineError::State(e)
    }
}

/// How the engine reaches nodes. `Stop` is why the fleet itself cannot go on.
pub(crate) trait Fleet {
    type Stop;
    fn stage(&mut self, r: &Rollout, hosts: &[String]) -> Result<Results<StageRecord>, Self::Stop>;
    fn unstage(&mut self, r: &Rollout, hosts: &[String]) -> Result<Results<StageRecord>, Self::Stop>;
    fn promote(&mut self, r: &Rollout, hosts: &[String], run_id: &str) -> Result<Results<WriteReport>, Self::Stop>;
    fn rollback(&mut self, r: &Rollout, hosts: &[String], run_id: &str) -> Result<Results<WriteReport>, Self::Stop>;
    /// What the nodes' files hold now (between rounds: has anything changed under the run?).
    fn state(&mut self, r: &Rollout, hosts: &[String]) -> Result<Results<NodeState>, Self::Stop>;
    /// One benchmark run on `hosts`, its processes marked with `marker`.
    fn bench(
        &mut self,
        r: &Rollout,
        hosts: &[String],
        variant: Variant,
        marker: &str,
    ) -> Result<Result<BenchAnswer, Failure>, Self::Stop>;
    /// End what a killed run marked `marker` left running (a resume's first step).
    fn end(&mut self, r: &Rollout, marker: &str);
}

type Step<F> = Result<(), EngineError<<F as Fleet>::Stop>>;

/// Why a wave's measurement stops it (a failed run, files that moved, figures that cannot be
/// judged): the wave is rolled back with this reason.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Halt(String);

/// Progress for a terminal (one line per step).
pub(crate) type Progress<'a> = &'a dyn Fn(&str);

/// Run (or resume) the rollout to its end; the record is saved after every step.
pub(crate) fn drive<F: Fleet>(r: &mut Rollout, fleet: &mut F, store: &Store, progress: Progress) -> Step<F> {
    // A run a killed predecessor left is ended before anything else runs.
    for i in 0..r.waves.len() {
        if let Some(marker) = r.waves[i].in_flight.take() {
            fleet.end(r, &marker);
            store.save(r)?;
        }
    }
    if r.status != RolloutStatus::Running {
        // Halted or failed: nothing goes forward, but a rollback that was cut short (killed,
        // or a node that could not be reached) is finished now.
        for i in 0..r.waves.len() {
            if r.waves[i].phase == Phase::RollingBack {
                wave(r, i, fleet, store, progress)?;
            }
        }
        return Ok(());
    }
    for i in 0..r.waves.len() {
        wave(r, i, fleet, store, progress)?;
        match r.waves[i].phase {
            Phase::Promoted => continue,
            _ => return Ok(()),
        }
    }
    r.status = RolloutStatus::Completed;
    store.save(r)?;
    Ok(())
}

fn wave<F: Fleet>(r: &mut Rollout, i: usize, fleet: &mut F, store: &Store, progress: Progress) -> Step<F> {
    loop {
        let w = &r.waves[i];
        let hosts = w.hosts.clone();
        match w.phase {
            Phase::Pending | Phase::Staging => {
                set_phase(r, i, Phase::Staging, store)?;
                progress(&format!(
                    "wave {} ({}): staging on {} node(s)",
                    i + 1,
                    r.waves[i].name,
                    hosts.len()
                ));
                let results = fleet.stage(r, &hosts).map_err(EngineError::Stopped)?;
                let mut failed = 0;
                for (host, res) in results {
                    match res {
                        Ok(rec) if rec.rollout == r.id => {
                            r.waves[i].staged.insert(host, rec);
                        }
                        Ok(rec) => {
                            failed += 1;
                            let why = format!("staging: the node answered for rollout {}, not {}", rec.rollout, r.id);
                            r.waves[i].failures.insert(host, why);
                        }
                        Err(f) => {
                            failed += 1;
                            r.waves[i].failures.insert(host, format!("staging: {}", f.message));
                        }
                    }
                }
                if failed > r.options.max_fail {
                    let why = format!("{failed} node(s) failed staging (--max-fail {})", r.options.max_fail);
                    return undo(r, i, fleet, store, progress, RolloutStatus::Failed, why);
                }
                set_phase(r, i, Phase::Measuring, store)?;
            }
            Phase::Measuring => {
                let bench_hosts: Vec<String> = hosts
                    .iter()
                    .filter(|h| !r.waves[i].failures.contains_key(*h))
                    .cloned()
                    .collect();
                match measure(r, i, &bench_hosts, fleet, store, progress)? {
                    Err(Halt(why)) => return undo(r, i, fleet, store, progress, RolloutStatus::Halted, why),
                    Ok(()) => {
                        let verdict = r.waves[i].verdict.as_ref();
                        if !verdict.is_some_and(|v| v.decision.promotes()) {
                            let why = verdict.map_or_else(|| "no verdict".into(), |v| v.reason.clone());
                            return undo(r, i, fleet, store, progress, RolloutStatus::Halted, why);
                        }
                        set_phase(r, i, Phase::Promoting, store)?;
                    }
                }
            }
            Phase::Promoting => return promote(r, i, fleet, store, progress),
            Phase::RollingBack => {
                // The reason is kept; a rollback that did not finish before is tried again.
                let why = r.waves[i].outcome.clone().unwrap_or_else(|| "rolled back".into());
                let status = if r.status == RolloutStatus::Running {
                    RolloutStatus::Halted
                } else {
                    r.status
                };
                return undo(r, i, fleet, store, progress, status, why);
            }
            Phase::Promoted | Phase::RolledBack => return Ok(()),
        }
    }
}

fn set_phase(r: &mut Rollout, i: usize, phase: Phase, store: &Store) -> Result<(), StateError> {
    r.waves[i].phase = phase;
    store.save(r)?;
    Ok(())
}

/// The interleaved rounds (A B, B A, A B, …) still missing, then the verdict. `Err`: a
/// benchmark run failed (the wave is halted with that reason).
fn measure<F: Fleet>(
    r: &mut Rollout,
    i: usize,
    hosts: &[String],
    fleet: &mut F,
    store: &Store,
    progress: Progress,
) -> Result<Result<(), Halt>, EngineError<F::Stop>> {
    if hosts.is_empty() {
        return Ok(Err(Halt("no node of this wave is staged".into())));
    }
    let rounds = r.options.rounds as usize;
    while r.waves[i].rounds.len() < rounds {
        let n = r.waves[i].rounds.len();
        let candidate_first = n % 2 == 1;
        let order = if candidate_first {
            [Variant::Candidate, Variant::Baseline]
        } else {
            [Variant::Baseline, Variant::Candidate]
        };
        let mut got = Vec::new();
        for v in order {
            progress(&format!(
                "wave {} ({}): round {}/{rounds}, {}",
                i + 1,
                r.waves[i].name,
                n + 1,
                v.name()
            ));
            let marker = format!("{}:round-{}:{}", r.waves[i].run_id, n + 1, v.name());
            r.waves[i].in_flight = Some(marker.clone());
            store.save(r)?;
            let record = one_run(r, hosts, v, &marker, fleet)?;
            r.waves[i].in_flight = None;
            if let Some(e) = &record.error {
                let why = format!("round {}: the {} benchmark failed: {e}", n + 1, v.name());
                got.push((v, record));
                push_round(&mut r.waves[i], candidate_first, got);
                store.save(r)?;
                return Ok(Err(Halt(why)));
            }
            if let Some(f) = &record.figures {
                progress(&format!("    {}", headline(f)));
            }
            got.push((v, record));
        }
        push_round(&mut r.waves[i], candidate_first, got);
        store.save(r)?;
        // Figures are only comparable while the files they ran on are the ones staged.
        if let Some(why) = files_moved(r, i, hosts, fleet)? {
            return Ok(Err(Halt(format!("after round {}: {why}", n + 1))));
        }
    }
    let rounds: Vec<Round> = r.waves[i]
        .rounds
        .iter()
        .filter_map(|rr| {
            Some(Round {
                baseline: rr.baseline.figures.clone()?,
                candidate: rr.candidate.figures.clone()?,
            })
        })
        .collect();
    match stats::judge(&rounds, &r.options.gate) {
        Ok(v) => {
            progress(&format!("wave {} ({}): {}", i + 1, r.waves[i].name, v.reason));
            r.waves[i].verdict = Some(v);
            store.save(r)?;
            Ok(Ok(()))
        }
        Err(e) => Ok(Err(Halt(format!("the figures cannot be judged: {e}")))),
    }
}

fn headline(f: &crate::bench::parse::BenchRun) -> String {
    f.rows
        .last()
        .map(|l| {
            format!(
                "{} B: {:.1} GB/s algbw, {:.1} GB/s busbw, {} rank(s)",
                l.size, l.algbw, l.busbw, f.ranks
            )
        })
        .unwrap_or_default()
}

fn push_round(w: &mut Wave, candidate_first: bool, got: Vec<(Variant, RunRecord)>) {
    let mut baseline = None;
    let mut candidate = None;
    for (v, rec) in got {
        match v {
            Variant::Baseline => baseline = Some(rec),
            Variant::Candidate => candidate = Some(rec),
        }
    }
    let missing = || RunRecord {
        command: String::new(),
        seconds: 0.0,
        figures: None,
        error: Some("not run: the round stopped at the other variant's failure".into()),
    };
    w.rounds.push(RoundRecord {
        candidate_first,
        baseline: baseline.unwrap_or_else(missing),
        candidate: candidate.unwrap_or_else(missing),
    });
}

fn one_run<F: Fleet>(
    r: &Rollout,
    hosts: &[String],
    v: Variant,
    marker: &str,
    fleet: &mut F,
) -> Result<RunRecord, EngineError<F::Stop>> {
    let answer = fleet.bench(r, hosts, v, marker).map_err(EngineError::Stopped)?;
    Ok(match answer {
        Err(f) => RunRecord {
            command: String::new(),
            seconds: 0.0,
            figures: None,
            error: Some(f.message),
        },
        Ok(a) => {
            // A run that did not span the wave measured something else: a failed run.
            let judged =
                runner::judge(&a, r.options.benchmark.timeout_s).and_then(
                    |run| match crate::bench::parse::off_the_set(run.ranks, hosts.len(), r.gpus_per_node(hosts)) {
                        Some(why) => Err(runner::FailedRun(why)),
                        None => Ok(run),
                    },
                );
            RunRecord {
                command: a.command,
                seconds: a.seconds,
                figures: judged.as_ref().ok().cloned(),
                error: judged.err().map(|e| e.0),
            }
        }
    })
}

/// Whether a file a variant reads changed since the wave was staged (the live
/// `/etc/nccl.conf`, the staged candidate and env files), or a node cannot say: the reason.
fn files_moved<F: Fleet>(
    r: &Rollout,
    i: usize,
    hosts: &[String],
    fleet: &mut F,
) -> Result<Option<String>, EngineError<F::Stop>> {
    let mut moved = Vec::new();
    for (host, res) in fleet.state(r, hosts).map_err(EngineError::Stopped)? {
        let Some(staged) = r.waves[i].staged.get(&host) else {
            continue;
        };
        let now = match res {
            Ok(s) => s.current,
            Err(f) => {
                moved.push(format!("{host} could not say ({})", f.message));
                continue;
            }
        };
        let expected = staged
            .live
            .iter()
            .chain(staged.files.iter().filter(|(p, _)| now.contains_key(*p)));
        let changed: Vec<&str> = expected
            .filter(|(path, sha)| now.get(*path).is_some_and(|n| n != *sha))
            .map(|(path, _)| path.as_str())
            .collect();
        if !changed.is_empty() {
            moved.push(format!("{host}: {} changed", changed.join(", ")));
        }
    }
    Ok((!moved.is_empty()).then(|| {
        format!(
            "the files the benchmark reads changed during measurement ({}): the figures mix two configurations",
            moved.join("; ")
        )
    }))
}

/// Install the candidate on the wave's staged nodes, then remove the staged copies.
fn promote<F: Fleet>(r: &mut Rollout, i: usize, fleet: &mut F, store: &Store, progress: Progress) -> Step<F> {
    let w = &r.waves[i];
    let hosts: Vec<String> = w.hosts.iter().filter(|h| w.staged.contains_key(*h)).cloned().collect();
    let run_id = w.run_id.clone();
    progress(&format!(
        "wave {} ({}): promoting on {} node(s)",
        i + 1,
        w.name,
        hosts.len()
    ));
    let mut failed = 0;
    for (host, res) in fleet.promote(r, &hosts, &run_id).map_err(EngineError::Stopped)? {
        match res {
            Ok(rep) if rep.changed() => r.waves[i].changed.push(host),
            Ok(_) => {}
            Err(f) => {
                failed += 1;
                r.waves[i].failures.insert(host, format!("promotion: {}", f.message));
            }
        }
    }
    r.waves[i].changed.sort();
    r.waves[i].changed.dedup();
    if failed > r.options.max_fail {
        let why = format!("{failed} node(s) failed promotion (--max-fail {})", r.options.max_fail);
        return undo(r, i, fleet, store, progress, RolloutStatus::Failed, why);
    }
    r.waves[i].unfinished.clear();
    for (host, res) in fleet.unstage(r, &hosts).map_err(EngineError::Stopped)? {
        if let Err(f) = res {
            r.waves[i].unfinished.insert(host, f.message);
        }
    }
    if !r.waves[i].unfinished.is_empty() {
        // Promoted, but a candidate stays staged: the wave is not done (a resume promotes
        // again — nothing changes — and removes the staged copies).
        r.waves[i].outcome = Some(format!(
            "promoted, but the staged copy could not be removed: `topo-tune apply --resume {}` removes it",
            r.id
        ));
        store.save(r)?;
        return Ok(());
    }
    let w = &mut r.waves[i];
    w.outcome = Some(match &w.verdict {
        Some(v) => format!("promoted: {}", v.reason),
        None => "promoted".into(),
    });
    Ok(set_phase(r, i, Phase::Promoted, store)?)
}

/// Undo this wave on exactly its nodes: staged files removed, promoted files restored (only
/// this wave's run). Earlier waves stay promoted.
fn undo<F: Fleet>(
    r: &mut Rollout,
    i: usize,
    fleet: &mut F,
    store: &Store,
    progress: Progress,
    status: RolloutStatus,
    why: String,
) -> Step<F> {
    r.status = status;
    r.waves[i].outcome = Some(why.clone());
    set_phase(r, i, Phase::RollingBack, store)?;
    progress(&format!("wave {} ({}): rolling back: {why}", i + 1, r.waves[i].name));
    let hosts = r.waves[i].hosts.clone();
    let run_id = r.waves[i].run_id.clone();
    let mut unfinished = std::collections::BTreeMap::new();
    for (host, res) in fleet.rollback(r, &hosts, &run_id).map_err(EngineError::Stopped)? {
        if let Err(f) = res {
            unfinished.insert(host, f.message);
        }
    }
    for (host, res) in fleet.unstage(r, &hosts).map_err(EngineError::Stopped)? {
        if let Err(f) = res {
            unfinished.entry(host).or_insert(f.message);
        }
    }
    r.waves[i].unfinished = unfinished;
    if !r.waves[i].unfinished.is_empty() {
        r.status = RolloutStatus::Failed;
        store.save(r)?;
        return Ok(());
    }
    Ok(set_phase(r, i, Phase::RolledBack, store)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::writer::Bundle;
    use crate::canary::state::{Options, Wave, STATE_VERSION};
    use crate::model::FailureKind;
    use std::collections::BTreeMap;

    /// Nodes on paper: every call recorded; the candidate runs `speed` times faster; the
    /// rollback of `unreachable` fails while it is set, and so does the unstage of
    /// `stuck`; `stage_as` answers stages for another rollout; `moved` makes the live
    /// `/etc/nccl.conf` differ from the stage after that many state calls; `ranks` is what
    /// every run reports (default: the wave's hosts × 8).
    #[derive(Default)]
    struct PaperFleet {
        speed: f64,
        unreachable: Option<String>,
        stuck: Option<String>,
        stage_as: Option<String>,
        moved: Option<usize>,
        ranks: Option<usize>,
        states: usize,
        calls: Vec<String>,
    }

    fn run_json(ranks: usize, speed: f64) -> String {
        let results: Vec<String> = [8u64, 1 << 20, 64 << 20]
            .iter()
            .map(|s| {
                let t = (10.0 + *s as f64 / 4e5) / speed;
                let bw = *s as f64 / t / 1e3;
                format!(r#"{{"size":{s},"out_of_place":{{"time":{t},"alg_bw":{bw},"bus_bw":{bw},"nwrong":0.0}}}}"#)
            })
            .collect();
        let devices = vec!["{}"; ranks].join(",");
        format!(
            r#"{{"version":3,"config":{{"devices":[{devices}]}},"results":[{}]}}"#,
            results.join(",")
        )
    }

    impl PaperFleet {
        fn each<T>(&mut self, what: &str, hosts: &[String], ok: impl Fn() -> T) -> Results<T> {
            hosts
                .iter()
                .map(|h| {
                    self.calls.push(format!("{what} {h}"));
                    let down = (what == "rollback" && self.unreachable.as_deref() == Some(h.as_str()))
                        || (what == "unstage" && self.stuck.as_deref() == Some(h.as_str()));
                    let r = if down {
                        Err(Failure::new(FailureKind::ConnectTimeout, "down"))
                    } else {
                        Ok(ok())
                    };
                    (h.clone(), r)
                })
                .collect()
        }
    }

    impl Fleet for PaperFleet {
        type Stop = std::convert::Infallible;
        fn stage(&mut self, r: &Rollout, hosts: &[String]) -> Result<Results<StageRecord>, std::convert::Infallible> {
            let rollout = self.stage_as.clone().unwrap_or_else(|| r.id.clone());
            let live = [("/etc/nccl.conf".to_string(), "a".repeat(64))].into();
            Ok(self.each("stage", hosts, || StageRecord {
                rollout: rollout.clone(),
                live: std::clone::Clone::clone(&live),
                ..StageRecord::default()
            }))
        }
        fn state(&mut self, _: &Rollout, hosts: &[String]) -> Result<Results<NodeState>, std::convert::Infallible> {
            self.states += 1;
            let sha = if self.moved.is_some_and(|n| self.states > n) {
                "b"
            } else {
                "a"
            };
            let current = [("/etc/nccl.conf".to_string(), sha.repeat(64))].into();
            Ok(self.each("state", hosts, || NodeState {
                current: std::clone::Clone::clone(&current),
                ..NodeState::default()
            }))
        }
        fn end(&mut self, _: &Rollout, marker: &str) {
            self.calls.push(format!("end {marker}"));
        }
        fn unstage(&mut self, _: &Rollout, hosts: &[String]) -> Result<Results<StageRecord>, std::convert::Infallible> {
            Ok(self.each("unstage", hosts, StageRecord::default))
        }
        fn promote(
            &mut self,
            _: &Rollout,
            hosts: &[String],
            _: &str,
        ) -> Result<Results<WriteReport>, std::convert::Infallible> {
            Ok(self.each("promote", hosts, WriteReport::default))
        }
        fn rollback(
            &mut self,
            _: &Rollout,
            hosts: &[String],
            _: &str,
        ) -> Result<Results<WriteReport>, std::convert::Infallible> {
            Ok(self.each("rollback", hosts, WriteReport::default))
        }
        fn bench(
            &mut self,
            _: &Rollout,
            hosts: &[String],
            v: Variant,
            _marker: &str,
        ) -> Result<Result<BenchAnswer, Failure>, std::convert::Infallible> {
            self.calls.push(format!("bench {}", v.name()));
            let speed = if v == Variant::Candidate { self.speed } else { 1.0 };
            Ok(Ok(BenchAnswer {
                exit_code: Some(0),
                json: Some(run_json(self.ranks.unwrap_or(hosts.len() * 8), speed)),
                ..BenchAnswer::default()
            }))
        }
    }

    fn rollout(waves: &[&[&str]]) -> Rollout {
        let hosts: Vec<&str> = waves.iter().flat_map(|w| w.iter().copied()).collect();
        Rollout {
            version: STATE_VERSION,
            id: "20261201T000000Z-1".into(),
            cluster_config: "c.yaml".into(),
            created_unix: 0,
            options: Options {
                canary: None,
                wave_size: None,
                canary_only: false,
                max_fail: 0,
                rounds: 6,
                gate: Default::default(),
                benchmark: Default::default(),
                output_dir: None,
            },
            status: RolloutStatus::Running,
            bundles: vec![Bundle {
                dropin: String::new(),
                topology_xml: None,
                nccl_version: None,
                tuner: None,
            }],
            host_bundle: hosts.iter().map(|h| (h.to_string(), 0)).collect(),
            gpus: hosts.iter().map(|h| (h.to_string(), 8)).collect(),
            waves: waves
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    let hosts = w.iter().map(|h| h.to_string()).collect();
                    Wave::pending(format!("w{i}"), hosts, format!("20261201T000000Z-1-{}", i + 1))
                })
                .collect(),
            untouched: BTreeMap::new(),
            tuning: None,
        }
    }

    #[test]
    fn a_gain_is_staged_measured_then_promoted_wave_by_wave() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut r = rollout(&[&["a"], &["b", "c"]]);
        let mut fleet = PaperFleet {
            speed: 1.1,
            ..PaperFleet::default()
        };
        assert!(drive(&mut r, &mut fleet, &store, &|_| {}).is_ok());
        assert_eq!(r.status, RolloutStatus::Completed);
        let first_bench = fleet.calls.iter().position(|c| c.starts_with("bench")).unwrap();
        let first_promote = fleet.calls.iter().position(|c| c == "promote a").unwrap();
        assert!(fleet.calls[0] == "stage a" && first_bench < first_promote);
        // Interleaved A B, B A, …: 12 runs per wave; the staged files checked after each round.
        let benches: Vec<&String> = fleet.calls.iter().filter(|c| c.starts_with("bench")).collect();
        assert_eq!(fleet.states, 12, "6 rounds × 2 waves");
        assert_eq!(benches.len(), 24);
        assert_eq!(
            (benches[1].as_str(), benches[2].as_str()),
            ("bench candidate", "bench candidate")
        );
        assert_eq!(store.load(&r.id).unwrap(), r, "the record is what the engine holds");
    }

    #[test]
    fn a_staged_copy_left_behind_keeps_the_wave_unfinished_until_a_resume_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut r = rollout(&[&["a", "b"], &["c"]]);
        let mut fleet = PaperFleet {
            speed: 1.1,
            stuck: Some("b".into()),
            ..PaperFleet::default()
        };
        assert!(drive(&mut r, &mut fleet, &store, &|_| {}).is_ok());
        assert_eq!(r.status, RolloutStatus::Running, "not completed");
        assert_eq!(r.waves[0].phase, Phase::Promoting, "not promoted for good");
        assert_eq!(r.waves[0].unfinished["b"], "down", "the staged copy left on b");
        assert!(r.waves[0].outcome.as_deref().unwrap().contains("could not be removed"));
        assert!(!fleet.calls.iter().any(|c| c.ends_with(" c")), "the next wave waits");
        let mut r = store.load(&r.id).unwrap();
        let mut fleet = PaperFleet {
            speed: 1.1,
            ..PaperFleet::default()
        };
        assert!(drive(&mut r, &mut fleet, &store, &|_| {}).is_ok());
        assert_eq!(r.status, RolloutStatus::Completed);
        assert_eq!(fleet.calls[..4], ["promote a", "promote b", "unstage a", "unstage b"]);
    }

    #[test]
    fn a_stage_answer_for_another_rollout_is_a_failed_node() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut r = rollout(&[&["a"]]);
        let mut fleet = PaperFleet {
            speed: 1.1,
            stage_as: Some("20261130T000000Z-9".into()),
            ..PaperFleet::default()
        };
        assert!(drive(&mut r, &mut fleet, &store, &|_| {}).is_ok());
        assert_eq!(r.status, RolloutStatus::Failed);
        assert!(r.waves[0].failures["a"].contains("20261130T000000Z-9"));
        assert!(!fleet.calls.iter().any(|c| c.starts_with("bench")), "nothing measured");
    }

    #[test]
    fn files_that_change_under_the_rounds_or_runs_off_the_wave_halt_it() {
        for fleet in [
            PaperFleet {
                speed: 1.1,
                moved: Some(2),
                ..PaperFleet::default()
            },
            PaperFleet {
                speed: 1.1,
                ranks: Some(1),
                ..PaperFleet::default()
            },
        ] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let mut r = rollout(&[&["a", "b"]]);
            let mut fleet = fleet;
            let moved = fleet.moved.is_some();
            assert!(drive(&mut r, &mut fleet, &store, &|_| {}).is_ok());
            assert_eq!(r.status, RolloutStatus::Halted);
            assert_eq!(r.waves[0].phase, Phase::RolledBack);
            let outcome = r.waves[0].outcome.clone().unwrap();
            if moved {
                assert!(
                    outcome.contains("after round 3") && outcome.contains("/etc/nccl.conf changed"),
                    "{outcome}"
                );
            } else {
                assert!(
                    outcome.contains("1 rank(s)") && outcome.contains("have 16"),
                    "{outcome}"
                );
            }
            assert!(!fleet.calls.iter().any(|c| c.starts_with("promote")));
        }
    }

    #[test]
    fn a_run_a_killed_rollout_left_is_ended_before_anything_else() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut r = rollout(&[&["a"]]);
        r.waves[0].phase = Phase::Measuring;
        r.waves[0].in_flight = Some("20261201T000000Z-1-1:round-1:baseline".into());
        let mut fleet = PaperFleet {
            speed: 1.1,
            ..PaperFleet::default()
        };
        assert!(drive(&mut r, &mut fleet, &store, &|_| {}).is_ok());
        assert_eq!(fleet.calls[0], "end 20261201T000000Z-1-1:round-1:baseline");
        assert_eq!(r.waves[0].in_flight, None);
    }

    #[test]
    fn a_rollback_cut_short_is_finished_on_resume() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut r = rollout(&[&["a", "b"], &["c"]]);
        let mut fleet = PaperFleet {
            speed: 0.9,
            unreachable: Some("b".into()),
            ..PaperFleet::default()
        };
        assert!(drive(&mut r, &mut fleet, &store, &|_| {}).is_ok());
        assert_eq!(r.status, RolloutStatus::Failed);
        assert_eq!(r.waves[0].phase, Phase::RollingBack);
        assert_eq!(r.waves[0].unfinished["b"], "down", "the rollback did not finish on b");
        assert_eq!(r.waves[0].unfinished.len(), 1);
        assert!(
            !fleet.calls.iter().any(|c| c.ends_with(" c")),
            "the next wave is never touched"
        );
        // Later, b answers: resuming finishes the rollback, and only that.
        let mut r = store.load(&r.id).unwrap();
        let mut fleet = PaperFleet::default();
        assert!(drive(&mut r, &mut fleet, &store, &|_| {}).is_ok());
        assert_eq!(r.waves[0].phase, Phase::RolledBack);
        assert_eq!(fleet.calls, ["rollback a", "rollback b", "unstage a", "unstage b"]);
        assert!(r.waves[0].unfinished.is_empty(), "finished everywhere now");
        assert_eq!(
            r.waves[0].verdict.as_ref().map(|v| v.decision),
            Some(crate::bench::stats::Decision::Regression)
        );
    }
}
