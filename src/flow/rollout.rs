//! A rollout started (plan, a candidate per node, waves — all recorded before any node is
//! touched) or resumed (its record held to what topo-tune would write), then driven to its
//! end by the engine in `canary::rollout` over the node calls (`fleet`).

use super::fleet::NodeFleet;
use super::gather::Ask;
use super::plan::{admit, gather_and_plan, reviewed_plan, Facts};
use super::settings::{ApplySettings, Given, NewRollout, Start};
use crate::apply::writer::{self, Bundle};
use crate::canary::rollout::{self, EngineError};
use crate::canary::state::{Options, Rollout, RolloutStatus, StateError, Store, Wave, STATE_VERSION};
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
            start(s, new, printer)?
        }
    };
    store.save(&r)?;
    let mut fleet = NodeFleet {
        inv,
        reach: &s.gather.reach,
        printer,
    };
    let progress = |line: &str| printer.line(line);
    match rollout::drive(&mut r, &mut fleet, &store, &progress) {
        Ok(()) => {}
        Err(EngineError::State(e)) => return Err(e.into()),
        Err(EngineError::Stopped(e)) => return Err(e),
    }
    Ok((r, store))
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
fn start(s: &ApplySettings, new: &NewRollout, printer: &Printer) -> Result<Rollout, Error> {
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
    let Candidates {
        bundles,
        host_bundle,
        untouched,
    } = candidates(inv, &plan, &facts, s.output_dir.is_some());
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
    let gpus = plan
        .node_classes
        .iter()
        .flat_map(|c| {
            c.hosts
                .iter()
                .map(move |h| (h.clone(), c.gpus.min(u32::MAX as usize) as u32))
        })
        .collect();
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
    })
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

fn candidates(inv: &Inventory, plan: &crate::model::plan::Plan, facts: &Facts, has_output_dir: bool) -> Candidates {
    let by_host = plan.nccl_by_host();
    let mut c = Candidates {
        bundles: Vec::new(),
        host_bundle: BTreeMap::new(),
        untouched: BTreeMap::new(),
    };
    for n in &inv.nodes {
        match candidate(inv, n, by_host.get(n.host.as_str()).copied(), facts, has_output_dir) {
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
    Bundle::of(class).map_err(|r| Refusal(format!("refused setting: {r}")))
}
