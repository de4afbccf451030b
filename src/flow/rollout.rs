//! A rollout started (plan, a candidate per node, waves — all recorded before any node is
//! touched) or resumed (its record held to what topo-tune would write), then driven to its
//! end by the engine in `canary::rollout` over the node calls (`fleet`).

use super::fleet::NodeFleet;
use super::gather::Ask;
use super::plan::{admit, gather_and_plan, reviewed_plan, Facts};
use super::settings::{ApplySettings, Given, NewRollout, Start};
use super::tuned::Rollable;
use crate::apply::plugin::PluginCopy;
use crate::apply::writer::Tuner;
use crate::apply::writer::{self, Bundle};
use crate::canary::rollout::{self, EngineError};
use crate::canary::state::{Options, Rollout, RolloutStatus, RolloutTuning, StateError, Store, Wave, STATE_VERSION};
use crate::canary::vet;
use crate::config::select;
use crate::config::{Inventory, NodeSpec, TransportKind};
use crate::error::Error;
use crate::model::Refusal;
use crate::report::Printer;
use std::collections::BTreeMap;

/// Start or resume the rollout, and drive it: the record as it ends, and the store it is in.
pub(crate) fn run(s: &ApplySettings, printer: &Printer) -> Result<(Rollout, Store), Error> {
    let inv = &s.gather.inv;
    // A tuning that cannot be obeyed is refused before anything is locked or contacted.
    let tuned = s.tuning.as_ref().map(super::tuned::read).transpose()?;
    let store = Store::open(&s.state_dir)?;
    let _lock = store.lock(&inv.path)?;
    // The benchmark must be able to start before anything is probed, staged or recorded (a
    // resume's record is read first: a rollout that does not exist says so).
    let mut r = match &s.start {
        Start::Resume { id, given } => {
            let r = resume(&store, id, inv, given)?;
            super::preflight::benchmark_runnable(inv)?;
            r
        }
        Start::New(new) => {
            super::preflight::benchmark_runnable(inv)?;
            start(s, new, tuned.as_ref(), printer)?
        }
    };
    let plugin = match (&tuned, &r.tuning) {
        (Some(t), _) => t.tuner.as_ref().and_then(|x| x.plugin.clone()),
        (None, Some(rt)) => resumed_plugin(s, rt)?,
        (None, None) => None,
    };
    store.save(&r)?;
    let mut fleet = NodeFleet {
        inv,
        reach: &s.gather.reach,
        printer,
        plugin,
    };
    let progress = |line: &str| printer.line(line);
    match rollout::drive(&mut r, &mut fleet, &store, &progress) {
        Ok(()) => {}
        Err(EngineError::State(e)) => return Err(e.into()),
        Err(EngineError::Stopped(e)) => return Err(e),
    }
    Ok((r, store))
}

/// The plugin a resumed rollout's tuning installs: `--tuner-plugin` (beside the binary by
/// default), only if it is the very one the rollout recorded.
fn resumed_plugin(s: &ApplySettings, rt: &RolloutTuning) -> Result<Option<PluginCopy>, Error> {
    let Some(want) = &rt.plugin_sha256 else { return Ok(None) };
    let copy = PluginCopy::of(&super::preflight::tuner_plugin(&s.tuner_plugin)?);
    if copy.sha256 != *want {
        return Err(Error::Usage(format!(
            "the rollout's tuning installs the plugin of sha256 {want}; {} is {}: give --tuner-plugin the one it started with",
            s.tuner_plugin.display(),
            copy.sha256
        )));
    }
    Ok(Some(copy))
}

fn resume(store: &Store, id: &str, inv: &Inventory, given: &Given) -> Result<Rollout, Error> {
    let r = store.load(id)?;
    let same = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if same(&r.cluster_config) != same(&inv.path) {
        return Err(Error::Usage(format!(
            "rollout {id} was started with {}, not {}",
            r.cluster_config.display(),
            inv.path.display()
        )));
    }
    vet::check(&r, inv).map_err(|message| StateError::Invalid {
        path: store.show(id),
        message: format!("{message}: the record is not obeyed (nothing was run or changed)"),
    })?;
    ignored_by_resume(&r, given)?;
    same_benchmark(&r, inv, store)?;
    Ok(r)
}

/// What a resume runs is what cluster.yaml says today: a record that carries another
/// benchmark command (or where and how long it runs) is refused, naming the field, and never
/// run — the record is the state directory's, cluster.yaml is what the operator reviewed.
fn same_benchmark(r: &Rollout, inv: &Inventory, store: &Store) -> Result<(), Error> {
    let (was, now) = (&r.options.benchmark, &inv.benchmark);
    let found = differs("command", &was.command, &now.command)
        .or_else(|| differs("runs_on", &was.runs_on, &now.runs_on))
        .or_else(|| differs("timeout_s", &was.timeout_s, &now.timeout_s))
        .or_else(|| differs("gpus_per_node", &was.gpus_per_node, &now.gpus_per_node));
    match found {
        Some((field, a, b)) => Err(StateError::Invalid {
            path: store.show(&r.id),
            message: format!(
                "options.benchmark.{field} is {a}, but {} says {b}: a resume runs only what cluster.yaml says (restore it, or start a new rollout); nothing was run or changed",
                inv.path.display()
            ),
        }
        .into()),
        None => Ok(()),
    }
}

/// `field` and both values as shown (cut at 200 characters: a command may be long), when they
/// differ; compared as values, never as what is shown.
fn differs<T: PartialEq + std::fmt::Debug>(
    field: &'static str,
    was: &T,
    now: &T,
) -> Option<(&'static str, String, String)> {
    let shown = |v: &T| format!("{v:?}").chars().take(200).collect::<String>();
    (was != now).then(|| (field, shown(was), shown(now)))
}

/// A flag `--resume` would not use is refused, not dropped: the record decides how the
/// rollout goes on. Given with the recorded value it changes nothing and is accepted.
fn ignored_by_resume(r: &Rollout, given: &Given) -> Result<(), Error> {
    let o = &r.options;
    let same_dir = |flag: &std::path::Path| {
        let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        o.output_dir.as_deref().is_some_and(|d| abs(d) == abs(flag))
    };
    // The recorded directory is written to only when today's command line names it too.
    if let (Some(d), None) = (&o.output_dir, &given.output_dir) {
        return Err(Error::Usage(format!(
            "rollout {} writes its benchmark output to {} (its record says so): give `--output-dir {}` to resume it; a resume writes nowhere today's command line does not name",
            r.id,
            d.display(),
            d.display()
        )));
    }
    let pct = |flag: Option<f64>, recorded: f64| flag.is_some_and(|p| (p / 100.0 - recorded).abs() > 1e-12);
    let differs = [
        (
            "--output-dir",
            given.output_dir.as_deref().is_some_and(|d| !same_dir(d)),
        ),
        ("--rounds", given.rounds.is_some_and(|n| n != o.rounds)),
        ("--threshold", pct(given.threshold, o.gate.threshold)),
        ("--p99-threshold", pct(given.p99_threshold, o.gate.p99_threshold)),
        ("--require-gain", given.require_gain && !o.gate.require_gain),
        ("--wave-size", given.wave_size.is_some_and(|n| Some(n) != o.wave_size)),
        ("--max-fail", given.max_fail.is_some_and(|n| n != o.max_fail)),
        ("--plan", given.plan),
        ("--from-probes", given.from_probes),
        ("--tuning", given.tuning),
    ];
    match differs.iter().find(|(_, d)| *d) {
        Some((flag, _)) => Err(Error::Usage(format!(
            "{flag}: rollout {} goes on as it was started (its record holds its options); `--resume` takes no other value (drop the flag)",
            r.id
        ))),
        None => Ok(()),
    }
}

/// Plan, give each node its candidate, cut the waves, and record it all before any node is
/// touched.
fn start(s: &ApplySettings, new: &NewRollout, tuned: Option<&Rollable>, printer: &Printer) -> Result<Rollout, Error> {
    let inv = &s.gather.inv;
    let canary = new
        .canary
        .as_deref()
        .map(|sel| select::select("--canary", sel, inv))
        .transpose()
        .map_err(|e| Error::Usage(e.0))?;
    let (plan, facts) = match &s.plan {
        Some(path) => {
            let (plan, facts, _) = reviewed_plan(path, &s.gather, printer, Ask::Snapshot)?;
            (plan, facts)
        }
        None => {
            let planned = gather_and_plan(&s.gather, printer, crate::flow::PREDICTION_BYTES, Ask::Snapshot)?;
            let facts = Facts::of_plan(&planned.plan, &planned.reached);
            (planned.plan, facts)
        }
    };
    let judged = match tuned {
        Some(t) => Some(judge_tuning(s, new, canary.as_deref(), &plan, t, printer)?),
        None => None,
    };
    let Candidates {
        bundles,
        host_bundle,
        untouched,
    } = candidates(
        inv,
        &plan,
        &facts,
        s.output_dir.is_some(),
        judged.as_ref().map(|j| &j.0),
    );
    let planned: Vec<String> = inv
        .nodes
        .iter()
        .map(|n| n.host.clone())
        .filter(|h| host_bundle.contains_key(h))
        .collect();
    if let Some(c) = &canary {
        if !c.iter().any(|h| host_bundle.contains_key(h)) {
            let why: Vec<String> = c
                .iter()
                .filter_map(|h| untouched.get(h).map(|w| format!("{h}: {w}")))
                .collect();
            return Err(Error::Usage(format!(
                "no node of --canary {} has anything to apply ({})",
                new.canary.as_deref().unwrap_or_default(),
                why.join("; ")
            )));
        }
    }
    let id = writer::run_id();
    let waves: Vec<Wave> = select::waves(inv, &planned, canary.as_deref(), new.wave_size, new.canary_only)
        .into_iter()
        .enumerate()
        .map(|(i, w)| Wave::pending(w.name, w.hosts, format!("{id}-{}", i + 1)))
        .collect();
    if waves.is_empty() {
        return Err(Error::Usage(
            "no node has anything to apply: see `topo-tune plan`".into(),
        ));
    }
    let gpus = gpus_of(&plan);
    Ok(Rollout {
        version: STATE_VERSION,
        id,
        cluster_config: inv.path.clone(),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        options: options(s, new)?,
        status: RolloutStatus::Running,
        bundles,
        host_bundle,
        gpus,
        waves,
        untouched,
        tuning: judged.map(|j| j.1),
    })
}

/// GPUs per host, from the plan (the benchmark's ranks).
fn gpus_of(plan: &crate::model::plan::Plan) -> BTreeMap<String, u32> {
    plan.node_classes
        .iter()
        .flat_map(|c| {
            c.hosts
                .iter()
                .map(move |h| (h.clone(), c.gpus.min(u32::MAX as usize) as u32))
        })
        .collect()
}

/// The canary's judgement of the tuning before any wave (`flow::tune::judge_on_canary`): the
/// tuning as it goes out (only what held) and the record of it; none of it held: not promoted.
fn judge_tuning(
    s: &ApplySettings,
    new: &NewRollout,
    canary: Option<&[String]>,
    plan: &crate::model::plan::Plan,
    t: &Rollable,
    printer: &Printer,
) -> Result<(Rollable, RolloutTuning), Error> {
    let Some(canary) = canary else {
        return Err(Error::Usage(
            "apply --tuning needs --canary SEL: the tuning is judged there, rule by rule, before any wave".into(),
        ));
    };
    let by_host = plan.nccl_by_host();
    let may = |h: &String| super::write::with_tuning(plan, h, by_host.get(h.as_str()).copied(), Some(t));
    let mut hosts: Vec<String> = plan.node_order.iter().filter(|h| canary.contains(h)).cloned().collect();
    let rest: Vec<String> = canary.iter().filter(|h| !hosts.contains(h)).cloned().collect();
    hosts.extend(rest);
    let refused: Vec<String> = hosts
        .iter()
        .filter_map(|h| may(h).refused.map(|w| format!("{h}: {w}")))
        .collect();
    hosts.retain(|h| may(h).given);
    if hosts.is_empty() {
        return Err(Error::Usage(format!(
            "no node of --canary {} may have the tuning ({})",
            new.canary.as_deref().unwrap_or_default(),
            refused.join("; ")
        )));
    }
    printer.line(&format!(
        "apply: judging the tuning of {} on the canary ({}), rule by rule, before any wave",
        t.tuning.set,
        hosts.join(",")
    ));
    let judge = super::tune::CanaryJudge {
        gather: &s.gather,
        plan,
        hosts,
        output_dir: s.output_dir.as_deref(),
        plugin: t.tuner.as_ref().and_then(|x| x.plugin.clone()),
        gate: new.gate,
        rounds: new.rounds as usize,
    };
    let v = super::tune::judge_on_canary(&judge, &t.tuning, printer)?;
    for j in &v.judged {
        let gain = j
            .gain
            .as_ref()
            .map_or_else(|| "not measured".into(), crate::tune::tuning::interval);
        printer.line(&format!(
            "    {}: {gain}: {}",
            j.rule,
            if j.holds { "holds" } else { "dropped" }
        ));
    }
    if v.kept.rules.is_empty() && v.kept.globals.is_empty() {
        return Err(NotBorneOut(v.judged.iter().map(|j| j.rule.clone()).collect::<Vec<_>>().join("; ")).into());
    }
    let plugin = t.tuner.as_ref().and_then(|x| x.plugin.clone());
    let tuner = crate::tune::onto::has_rules(&v.kept).then(|| Tuner {
        csv: crate::tune::tuning::csv(&v.kept),
        plugin: plugin.clone(),
    });
    let record = RolloutTuning {
        file: std::path::absolute(&t.file).unwrap_or_else(|_| t.file.clone()),
        plugin_sha256: tuner.as_ref().and(plugin.map(|p| p.sha256)),
        tuning: v.kept.clone(),
        judged: v.judged,
    };
    Ok((
        Rollable {
            file: t.file.clone(),
            tuning: v.kept,
            tuner,
        },
        record,
    ))
}

/// No rule or global of a tuning held on the canary: nothing of it is promoted.
#[derive(Debug, thiserror::Error)]
#[error("the canary bore out none of the tuning ({0}): nothing was staged or promoted")]
pub(crate) struct NotBorneOut(String);

impl crate::exit::Classify for NotBorneOut {
    fn classify(&self) -> crate::exit::Class {
        crate::exit::Class::new(crate::exit::HALTED, "canary")
    }
}

impl From<NotBorneOut> for Error {
    fn from(e: NotBorneOut) -> Self {
        Error::Flow(Box::new(e))
    }
}

/// The rollout's options as recorded (resolved once: flags over cluster.yaml over defaults).
fn options(s: &ApplySettings, new: &NewRollout) -> Result<Options, Error> {
    Ok(Options {
        canary: new.canary.clone(),
        wave_size: new.wave_size,
        canary_only: new.canary_only,
        max_fail: new.max_fail,
        rounds: new.rounds,
        gate: new.gate,
        benchmark: s.gather.inv.benchmark.clone(),
        // Recorded absolute: a resume from another directory writes where this one did.
        output_dir: s
            .output_dir
            .as_deref()
            .map(|d| {
                let abs = std::path::absolute(d).map_err(|source| Error::Io {
                    what: format!("--output-dir {}", d.display()),
                    source,
                })?;
                vet::output_dir(&abs).map_err(|m| Error::Usage(m.0.replace("options.output_dir", "--output-dir")))?;
                Ok::<_, Error>(abs)
            })
            .transpose()?,
    })
}

/// Each node's candidate (one bundle per distinct set of files), or why it gets none.
struct Candidates {
    bundles: Vec<Bundle>,
    host_bundle: BTreeMap<String, usize>,
    untouched: BTreeMap<String, String>,
}

fn candidates(
    inv: &Inventory,
    plan: &crate::model::plan::Plan,
    facts: &Facts,
    has_output_dir: bool,
    tuned: Option<&Rollable>,
) -> Candidates {
    let by_host = plan.nccl_by_host();
    let mut c = Candidates {
        bundles: Vec::new(),
        host_bundle: BTreeMap::new(),
        untouched: BTreeMap::new(),
    };
    for n in &inv.nodes {
        let class = by_host.get(n.host.as_str()).copied();
        let tuned = super::write::with_tuning(plan, &n.host, class, tuned);
        let made = candidate(inv, n, class, facts, has_output_dir, &tuned).map(|mut b| {
            // The record keeps the plugin's sha256 (in the drop-in), never its bytes.
            if let Some(t) = b.tuner.as_mut() {
                t.plugin = None;
            }
            b
        });
        match made {
            Ok(b) => {
                let i = c.bundles.iter().position(|x| *x == b).unwrap_or_else(|| {
                    c.bundles.push(b);
                    c.bundles.len() - 1
                });
                c.host_bundle.insert(n.host.clone(), i);
            }
            Err(why) => {
                c.untouched.insert(n.host.clone(), why.0);
            }
        }
    }
    c
}

/// A node's candidate, or why it gets none (no settings, the guard, a paper node).
fn candidate(
    inv: &Inventory,
    n: &NodeSpec,
    class: Option<&crate::model::plan::NcclClass>,
    facts: &Facts,
    has_output_dir: bool,
    tuning: &super::write::WithTuning,
) -> Result<Bundle, Refusal> {
    if n.transport == TransportKind::Simulated && !has_output_dir {
        return Err(Refusal(
            "a simulated node exists only on paper: use --output-dir to roll out its files".into(),
        ));
    }
    if let Some(f) = facts.failed.get(&n.host) {
        return Err(Refusal(format!("not probed: {}", f.message)));
    }
    let class = class.ok_or_else(|| Refusal("the plan gives this node no NCCL settings".into()))?;
    admit(inv, n, class, facts)?;
    super::write::bundle_of(class, tuning).map_err(|r| Refusal(format!("refused setting: {r}")))
}
