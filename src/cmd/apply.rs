//! `topo-tune apply`: start a rollout (plan, candidates per node, waves) or resume one, drive
//! it with the engine in `canary::rollout` over the node calls, and report every wave's
//! figures and decision.

use super::gather::Ask;
use super::plan::{admit, gather_and_plan, reviewed_plan, Facts};
use super::reach::{bench_target, benchmarks_on_nodes, on_nodes};
use super::{finish, Done};
use crate::apply::stage::{NodeState, StageRecord};
use crate::apply::writer::{self, Bundle, WriteReport};
use crate::canary::rollout::{self, EngineError, Fleet, Results};
use crate::canary::state::{self, Options, Phase, Rollout, RolloutStatus, StateError, Store, Wave, STATE_VERSION};
use crate::canary::vet;
use crate::cli::{ApplyArgs, OutputFormat, ReachArgs};
use crate::config::select;
use crate::config::{Inventory, NodeSpec, TransportKind};
use crate::error::Error;
use crate::exit;
use crate::model::{Failure, FailureKind};
use crate::node::calls::{Bench, Rollback, Stage, State, Unstage, Write};
use crate::node::{write_target, Call, NodeJob};
use crate::report::apply::{render_apply, ApplyDetail, ApplyPayload};
use crate::report::envelope::{Envelope, NodeRow};
use crate::runner::{BenchAnswer, BenchRequest, Variant};
use std::collections::BTreeMap;
use std::io::IsTerminal;

pub fn run(args: &ApplyArgs, output: OutputFormat) -> Result<Done, Error> {
    let inv = Inventory::load(&args.gather.cluster_config)?;
    let dir = args.state_dir.clone().unwrap_or_else(state::default_dir);
    let store = Store::open(&dir)?;
    let _lock = store.lock(&inv.path)?;
    let mut r = match &args.resume {
        Some(id) => resume(&store, id, &inv, args)?,
        None => start(&inv, args, output)?,
    };
    store.save(&r)?;
    let mut fleet = NodeFleet {
        inv: &inv,
        reach: &args.gather.reach,
        output,
    };
    let live = output == OutputFormat::Human && std::io::stderr().is_terminal();
    let progress = move |line: &str| {
        if live {
            eprintln!("{}", crate::report::visible(line));
        }
    };
    match rollout::drive(&mut r, &mut fleet, &store, &progress) {
        Ok(()) => {}
        Err(EngineError::State(e)) => return Err(e.into()),
        Err(EngineError::Stopped(e)) => return Err(e),
    }
    report(&r, &store, output)
}

fn resume(store: &Store, id: &str, inv: &Inventory, args: &ApplyArgs) -> Result<Rollout, Error> {
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
    ignored_by_resume(&r, args)?;
    Ok(r)
}

/// A flag `--resume` would not use is refused, not dropped: the record decides how the
/// rollout goes on. Given with the recorded value it changes nothing and is accepted.
fn ignored_by_resume(r: &Rollout, args: &ApplyArgs) -> Result<(), Error> {
    let o = &r.options;
    let same_dir = |flag: &std::path::Path| {
        let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        o.output_dir.as_deref().is_some_and(|d| abs(d) == abs(flag))
    };
    let pct = |flag: Option<f64>, recorded: f64| flag.is_some_and(|p| (p / 100.0 - recorded).abs() > 1e-12);
    let differs = [
        ("--output-dir", args.output_dir.as_deref().is_some_and(|d| !same_dir(d))),
        ("--rounds", args.rounds.is_some_and(|n| n != o.rounds)),
        ("--threshold", pct(args.threshold, o.gate.threshold)),
        ("--p99-threshold", pct(args.p99_threshold, o.gate.p99_threshold)),
        ("--require-gain", args.require_gain && !o.gate.require_gain),
        ("--wave-size", args.wave_size.is_some_and(|n| Some(n) != o.wave_size)),
        (
            "--max-fail",
            args.gather.reach.max_fail.is_some_and(|n| n != o.max_fail),
        ),
        ("--plan", args.plan.is_some()),
        ("--from-probes", args.gather.from_probes.is_some()),
    ];
    match differs.iter().find(|(_, d)| *d) {
        Some((flag, _)) => Err(Error::Usage(format!(
            "{flag}: rollout {} goes on as it was started (its record holds its options); `--resume` takes no other value (drop the flag)",
            r.id
        ))),
        None => Ok(()),
    }
}

/// A percentage flag (0, 50] as a fraction, else cluster.yaml's value.
fn pct(flag: Option<f64>, name: &str, dflt: f64) -> Result<f64, Error> {
    match flag {
        None => Ok(dflt),
        Some(p) if p.is_finite() && p > 0.0 && p <= 50.0 => Ok(p / 100.0),
        Some(p) => Err(Error::Usage(format!("--{name} {p}: a percentage in (0, 50]"))),
    }
}

/// Plan, give each node its candidate, cut the waves, and record it all before any node is
/// touched.
fn start(inv: &Inventory, args: &ApplyArgs, output: OutputFormat) -> Result<Rollout, Error> {
    let canary = args
        .canary
        .as_deref()
        .map(|sel| select::select("--canary", sel, inv))
        .transpose()
        .map_err(Error::Usage)?;
    let (plan, facts) = match &args.plan {
        Some(path) => {
            let (plan, facts, _) = reviewed_plan(path, inv, &args.gather, output, Ask::Snapshot)?;
            (plan, facts)
        }
        None => {
            let planned = gather_and_plan(inv, &args.gather, output, 1 << 30, Ask::Snapshot)?;
            let facts = Facts::of_plan(&planned.plan, &planned.reached);
            (planned.plan, facts)
        }
    };
    let Candidates {
        bundles,
        host_bundle,
        untouched,
    } = candidates(inv, &plan, &facts, args.output_dir.is_some());
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
                args.canary.as_deref().unwrap_or_default(),
                why.join("; ")
            )));
        }
    }
    let id = writer::run_id();
    let waves: Vec<Wave> = select::waves(inv, &planned, canary.as_deref(), args.wave_size, args.canary_only)
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
        options: options(inv, args)?,
        status: RolloutStatus::Running,
        bundles,
        host_bundle,
        gpus,
        waves,
        untouched,
    })
}

/// The rollout's options: flags over cluster.yaml's `benchmark:` over defaults.
fn options(inv: &Inventory, args: &ApplyArgs) -> Result<Options, Error> {
    let b = &inv.benchmark;
    Ok(Options {
        canary: args.canary.clone(),
        wave_size: args.wave_size,
        canary_only: args.canary_only,
        max_fail: args.gather.reach.max_fail.unwrap_or(0),
        rounds: args.rounds.unwrap_or(b.rounds),
        gate: crate::bench::stats::Gate {
            threshold: pct(args.threshold, "threshold", b.gate.threshold)?,
            p99_threshold: pct(args.p99_threshold, "p99-threshold", b.gate.p99_threshold)?,
            require_gain: args.require_gain,
            ..b.gate
        },
        benchmark: b.clone(),
        // Recorded absolute: a resume from another directory writes where this one did.
        output_dir: args
            .output_dir
            .as_deref()
            .map(|d| {
                let abs = std::path::absolute(d).map_err(|source| Error::Io {
                    what: format!("--output-dir {}", d.display()),
                    source,
                })?;
                vet::output_dir(&abs).map_err(|m| Error::Usage(m.replace("options.output_dir", "--output-dir")))?;
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
                c.untouched.insert(n.host.clone(), why);
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
) -> Result<Bundle, String> {
    if n.transport == TransportKind::Simulated && !has_output_dir {
        return Err("a simulated node exists only on paper: use --output-dir to roll out its files".into());
    }
    if let Some(f) = facts.failed.get(&n.host) {
        return Err(format!("not probed: {}", f.message));
    }
    let class = class.ok_or_else(|| "the plan gives this node no NCCL settings".to_string())?;
    let ports = facts.ports.get(&n.host).map(Vec::as_slice).unwrap_or_default();
    admit(inv, n, class, ports)?;
    Bundle::of(class).map_err(|r| format!("refused setting: {r}"))
}

/// The engine's way to the nodes: the node calls, over each node's transport.
struct NodeFleet<'a> {
    inv: &'a Inventory,
    reach: &'a ReachArgs,
    output: OutputFormat,
}

impl NodeFleet<'_> {
    fn spec(&self, host: &str) -> Option<&NodeSpec> {
        self.inv.nodes.iter().find(|n| n.host == host)
    }

    fn call<C: Call>(
        &self,
        r: &Rollout,
        hosts: &[String],
        make: impl Fn(&str) -> Option<C>,
    ) -> Result<Results<C::Answer>, Error> {
        let mut out = Vec::new();
        let mut jobs = Vec::new();
        for h in hosts {
            match (self.spec(h), make(h)) {
                (Some(n), Some(call)) => jobs.push(NodeJob {
                    node: n.clone(),
                    target: write_target(n, r.options.output_dir.as_deref()),
                    call,
                }),
                _ => out.push((
                    h.clone(),
                    Err(Failure::new(
                        FailureKind::NotPlanned,
                        "not in cluster.yaml or without a candidate any more",
                    )),
                )),
            }
        }
        let outcomes = on_nodes(self.inv, self.reach, self.output, jobs)?;
        out.extend(outcomes.into_iter().map(|o| (o.host, o.result)));
        Ok(out)
    }
}

impl Fleet for NodeFleet<'_> {
    type Stop = Error;

    fn stage(&mut self, r: &Rollout, hosts: &[String]) -> Result<Results<StageRecord>, Error> {
        self.call(r, hosts, |h| {
            let bundle = r.bundles.get(*r.host_bundle.get(h)?)?.clone();
            Some(Stage {
                bundle,
                rollout: r.id.clone(),
            })
        })
    }

    fn unstage(&mut self, r: &Rollout, hosts: &[String]) -> Result<Results<StageRecord>, Error> {
        self.call(r, hosts, |_| Some(Unstage { rollout: r.id.clone() }))
    }

    fn promote(&mut self, r: &Rollout, hosts: &[String], run_id: &str) -> Result<Results<WriteReport>, Error> {
        self.call(r, hosts, |h| {
            let bundle = r.bundles.get(*r.host_bundle.get(h)?)?.clone();
            Some(Write {
                bundle,
                check: false,
                diff: false,
                run_id: Some(run_id.to_string()),
            })
        })
    }

    fn rollback(&mut self, r: &Rollout, hosts: &[String], run_id: &str) -> Result<Results<WriteReport>, Error> {
        self.call(r, hosts, |_| {
            Some(Rollback {
                run_id: Some(run_id.to_string()),
            })
        })
    }

    fn state(&mut self, r: &Rollout, hosts: &[String]) -> Result<Results<NodeState>, Error> {
        self.call(r, hosts, |_| Some(State {}))
    }

    fn end(&mut self, r: &Rollout, marker: &str) {
        // A run on the controller is found by its mark; one on a first node ended with its
        // node-side process (which exits when the controller's connection goes).
        if r.options.benchmark.runs_on == crate::config::benchmark::RunsOn::Controller {
            let n = crate::runner::end_marked(marker);
            if n > 0 {
                tracing::warn!(marker, groups = n, "ended a benchmark a killed run left");
            }
        }
    }

    fn bench(
        &mut self,
        r: &Rollout,
        hosts: &[String],
        variant: Variant,
        marker: &str,
    ) -> Result<Result<BenchAnswer, Failure>, Error> {
        let b = &r.options.benchmark;
        let Some(first) = hosts.first().and_then(|h| self.spec(h)) else {
            return Ok(Err(Failure::new(FailureKind::NotPlanned, "no node to benchmark")));
        };
        let gpus = r.gpus_per_node(hosts);
        let target = bench_target(first, b.runs_on, r.options.output_dir.as_deref())?;
        let job = NodeJob {
            node: first.clone(),
            target,
            call: Bench {
                request: BenchRequest {
                    template: b.command.clone(),
                    variant,
                    hosts: hosts.to_vec(),
                    gpus_per_node: gpus,
                    timeout_s: b.timeout_s,
                    rail: None,
                    marker: marker.to_string(),
                },
            },
        };
        let mut outcomes = benchmarks_on_nodes(self.inv, self.reach, OutputFormat::Json, vec![job], b.timeout_s, None)?;
        Ok(outcomes
            .pop()
            .map_or_else(|| Err(Failure::new(FailureKind::Internal, "no answer")), |o| o.result))
    }
}

fn report(r: &Rollout, store: &Store, output: OutputFormat) -> Result<Done, Error> {
    let mut rows = Vec::new();
    for (i, w) in r.waves.iter().enumerate() {
        for h in &w.hosts {
            let detail = ApplyDetail {
                wave: Some(i + 1),
                wave_name: Some(w.name.clone()),
                phase: Some(w.phase),
                run_id: (w.phase == Phase::Promoted && w.changed.contains(h)).then(|| w.run_id.clone()),
            };
            let changed = w.phase == Phase::Promoted && w.changed.contains(h);
            rows.push(match w.failures.get(h) {
                Some(m) => NodeRow::failed(h, Failure::new(FailureKind::WriteFailed, m.clone()), detail),
                None => NodeRow::ok(h, changed, detail),
            });
        }
    }
    for (h, why) in &r.untouched {
        rows.push(NodeRow::failed(
            h,
            Failure::new(FailureKind::Skipped, why.clone()),
            ApplyDetail::default(),
        ));
    }
    let promoted = r.waves.iter().filter(|w| w.phase == Phase::Promoted).count();
    let exit_code = match r.status {
        RolloutStatus::Completed => exit::OK,
        // Stopped before its end (a staged copy left behind): `--resume` finishes it.
        RolloutStatus::Running => exit::PARTIAL_FAILURE,
        RolloutStatus::Halted => exit::HALTED,
        RolloutStatus::Failed => exit::PARTIAL_FAILURE,
    };
    let msg = format!(
        "apply {}: {} — {promoted} of {} wave(s) promoted; record: {}",
        r.id,
        format!("{:?}", r.status).to_lowercase(),
        r.waves.len(),
        store.show(&r.id)
    );
    let envelope = Envelope {
        command: "apply",
        changed: rows.iter().any(|x| x.changed),
        failed: exit_code != exit::OK,
        msg,
        exit_code,
        nodes: rows,
        payload: ApplyPayload {
            rollout: r.clone(),
            state_file: store.show(&r.id),
        },
    };
    finish(output, envelope, render_apply)
}
