//! From the flags as typed to the settings a flow runs with (`flow::settings`): cluster.yaml
//! loaded, and each "flag over cluster.yaml over default" written here, once.

use super::{
    ApplyArgs, DiagnoseArgs, DoctorArgs, FabricArgs, GatherArgs, InitArgs, IrqPinArgs, NodeArgs, NodeSourceArgs,
    NodesArgs, PlanArgs, ProbeArgs, ReachArgs, RollbackArgs, StatusArgs, TuneArgs, TuningArgs,
};
use crate::config::Inventory;
use crate::error::Error;
use crate::flow::settings::{
    ApplySettings, DiagnoseMode, DiagnoseSettings, DoctorSettings, FabricSettings, FabricSource, GatherSettings, Given,
    InitMode, InitSettings, IrqPinSettings, NewRollout, NodeSettings, PlanSettings, ProbeSettings, ReachSettings,
    RollbackSettings, Scope, Source, Start, StatusSettings, TraceSettings, TuneSettings,
};
use crate::flow::tuned::TuningGiven;
use crate::irq::pin::PinRequest;
use crate::model::CpuList;
use crate::probe::{ProbeRequest, Target};
use crate::transport::NodeEnv;
use std::path::{Path, PathBuf};
use std::time::Duration;

impl ReachArgs {
    pub(crate) fn resolve(&self, inv: &Inventory) -> ReachSettings {
        ReachSettings {
            forks: self.forks.unwrap_or(inv.ssh.forks),
            max_fail: self.max_fail,
            connect_timeout: Duration::from_secs(self.connect_timeout.unwrap_or(inv.ssh.connect_timeout_s)),
            command_timeout: Duration::from_secs(self.command_timeout.unwrap_or(inv.ssh.command_timeout_s)),
            remote_binary: self.remote_binary.clone(),
            simulated_latency: Duration::from_millis(self.simulate_latency_ms),
            cancel: crate::runner::Cancel::default(),
        }
    }
}

impl GatherArgs {
    /// cluster.yaml loaded (every error at its line), on `--fabric`'s discovered fabric when
    /// given, and how its nodes are reached.
    pub(crate) fn resolve(&self) -> Result<GatherSettings, Error> {
        self.nodes.resolve_with(self.inventory()?)
    }

    /// The same, cut to the nodes `select` selects.
    fn resolve_cut(&self, select: &NodesArgs) -> Result<GatherSettings, Error> {
        self.nodes.resolve_with(select.cut(self.inventory()?)?.0)
    }

    fn inventory(&self) -> Result<Inventory, Error> {
        let inv = Inventory::load(&self.cluster_config)?;
        Ok(match &self.fabric {
            Some(f) => inv.on_fabric(Inventory::load(f)?),
            None => inv,
        })
    }
}

/// The inventory cut to a selector (`--nodes`, `--canary`), and its hosts in inventory order.
fn cut(flag: &str, sel: Option<&str>, inv: Inventory) -> Result<(Inventory, Vec<String>), Error> {
    crate::config::select::cut(flag, sel, inv).map_err(|e| Error::Usage(e.0))
}

impl NodesArgs {
    /// The selector and the name messages give it: `--nodes`, else `TOPO_TUNE_NODES` (set but
    /// empty is an empty selector, refused: an unset `$RACK` in a script selects no node).
    pub(crate) fn selector(&self) -> Option<(&'static str, String)> {
        match &self.nodes {
            Some(s) => Some(("--nodes", s.clone())),
            None => std::env::var_os("TOPO_TUNE_NODES").map(|v| ("TOPO_TUNE_NODES", v.to_string_lossy().into_owned())),
        }
    }

    /// The inventory cut to the selector (all of it without one).
    pub(crate) fn cut(&self, inv: Inventory) -> Result<(Inventory, Vec<String>), Error> {
        match self.selector() {
            Some((flag, sel)) => cut(flag, Some(&sel), inv),
            None => cut("--nodes", None, inv),
        }
    }
}

impl NodeSourceArgs {
    fn resolve_with(&self, inv: Inventory) -> Result<GatherSettings, Error> {
        Ok(GatherSettings {
            reach: self.reach.resolve(&inv),
            source: match &self.from_probes {
                Some(dir) => Source::Probes(dir.clone()),
                None => Source::Nodes,
            },
            inv,
        })
    }
}

impl InitArgs {
    pub(crate) fn resolve(&self) -> Result<InitSettings, Error> {
        let mode = if self.list {
            InitMode::List
        } else if self.collect_only {
            InitMode::CollectOnly
        } else {
            InitMode::Write
        };
        let tuning = self.tuning.resolve("init")?;
        if tuning.is_some() && mode != InitMode::Write {
            return Err(Error::Usage(
                "init --tuning writes files: not with --list or --collect-only".into(),
            ));
        }
        Ok(InitSettings {
            mode,
            gather: self.gather.resolve_cut(&self.select)?,
            plan: self.plan.clone(),
            tuning,
            per_node: self.per_node,
            output_dir: self.output_dir.clone(),
            check: self.checking(),
            diff: self.diff,
        })
    }
}

impl TuningArgs {
    /// `--tuning` with its plugin (default beside this binary); `--tuner-plugin` alone is a
    /// usage error, not a flag silently ignored (unless it comes from the environment, which
    /// `tune` shares).
    pub(crate) fn resolve(&self, command: &str) -> Result<Option<TuningGiven>, Error> {
        let TuningArgs { tuning, tuner_plugin } = self;
        let empty = |p: &Option<PathBuf>| {
            p.as_ref()
                .is_some_and(|p| p.as_os_str().to_string_lossy().trim().is_empty())
        };
        if empty(tuning) || empty(tuner_plugin) {
            return Err(Error::Usage(format!(
                "{command} --tuning/--tuner-plugin: an empty path"
            )));
        }
        let from_env = std::env::var_os("TOPO_TUNE_TUNER_PLUGIN").is_some();
        match tuning {
            None if tuner_plugin.is_some() && !from_env => Err(Error::Usage(format!(
                "{command} --tuner-plugin is the plugin of a tuning: give --tuning DIR too"
            ))),
            None => Ok(None),
            Some(path) => Ok(Some(TuningGiven {
                path: path.clone(),
                plugin: tuner_plugin.clone().unwrap_or_else(beside_this_binary),
            })),
        }
    }
}

impl ProbeArgs {
    /// Which machine: an hwloc export, an NCCL topology file, a tree, or this one.
    pub(crate) fn resolve(&self) -> ProbeSettings {
        let target = match (&self.from_hwloc_xml, &self.from_nccl_topo, &self.fsroot) {
            (Some(xml), _, _) => Target::HwlocXml(xml.clone()),
            (None, Some(xml), _) => Target::NcclTopo(xml.clone()),
            (None, None, fsroot) => Target::Machine { fsroot: fsroot.clone() },
        };
        ProbeSettings {
            request: ProbeRequest {
                target,
                nvml_fixture: self.nvml_fixture.clone(),
            },
            matrix: self.matrix,
        }
    }
}

impl NodeArgs {
    pub(crate) fn resolve(&self) -> NodeSettings {
        NodeSettings {
            kind: self.kind.clone(),
            env: NodeEnv {
                write_root: self.root.clone(),
                fsroot: self.fsroot.clone(),
                hwloc_xml: self.from_hwloc_xml.clone(),
                ..NodeEnv::live()
            },
        }
    }
}

impl PlanArgs {
    pub(crate) fn resolve(&self) -> Result<PlanSettings, Error> {
        Ok(PlanSettings {
            gather: self.gather.resolve()?,
            message_bytes: self.message_size.0,
            output_dir: self.output_dir.clone(),
        })
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

impl ApplyArgs {
    pub(crate) fn resolve(&self) -> Result<ApplySettings, Error> {
        let gather = self.gather.resolve()?;
        let tuning = self.tuning.resolve("apply")?;
        let start = match &self.resume {
            Some(id) => Start::Resume {
                id: id.clone(),
                given: Given {
                    output_dir: self.output_dir.clone(),
                    rounds: self.rounds,
                    threshold: self.threshold,
                    p99_threshold: self.p99_threshold,
                    require_gain: self.require_gain,
                    wave_size: self.wave_size,
                    max_fail: self.gather.nodes.reach.max_fail,
                    plan: self.plan.is_some(),
                    from_probes: self.gather.nodes.from_probes.is_some(),
                    tuning: tuning.is_some(),
                },
            },
            None => {
                // The canary is selected again when the rollout starts; a selector that
                // selects nothing it may is a usage error here, before anything is planned.
                if let Some(sel) = &self.canary {
                    crate::config::select::select("--canary", sel, &gather.inv).map_err(|e| Error::Usage(e.0))?;
                }
                // Flags over cluster.yaml's `benchmark:` over the defaults.
                let b = &gather.inv.benchmark;
                Start::New(NewRollout {
                    canary: self.canary.clone(),
                    wave_size: self.wave_size,
                    canary_only: self.canary_only,
                    max_fail: self.gather.nodes.reach.max_fail.unwrap_or(0),
                    rounds: self.rounds.unwrap_or(b.rounds),
                    gate: crate::bench::stats::Gate {
                        threshold: pct(self.threshold, "threshold", b.gate.threshold)?,
                        p99_threshold: pct(self.p99_threshold, "p99-threshold", b.gate.p99_threshold)?,
                        require_gain: self.require_gain,
                        ..b.gate
                    },
                })
            }
        };
        Ok(ApplySettings {
            gather,
            state_dir: state_dir(self.state_dir.as_deref()),
            plan: self.plan.clone(),
            output_dir: self.output_dir.clone(),
            tuner_plugin: self.tuning.tuner_plugin.clone().unwrap_or_else(beside_this_binary),
            tuning,
            start,
        })
    }
}

/// `--state-dir`, else `$XDG_STATE_HOME/topo-tune`, else `~/.local/state/topo-tune`.
fn state_dir(flag: Option<&Path>) -> PathBuf {
    flag.map_or_else(crate::canary::state::default_dir, Path::to_path_buf)
}

impl StatusArgs {
    pub(crate) fn resolve(&self) -> Result<StatusSettings, Error> {
        let (inv, _) = self.select.cut(Inventory::load(&self.cluster_config)?)?;
        Ok(StatusSettings {
            per_node: self.per_node,
            reach: self.reach.resolve(&inv),
            inv,
            state_dir: state_dir(self.state_dir.as_deref()),
            output_dir: self.output_dir.clone(),
        })
    }
}

impl RollbackArgs {
    pub(crate) fn resolve(&self) -> Result<RollbackSettings, Error> {
        let (inv, _) = self.select.cut(Inventory::load(&self.cluster_config)?)?;
        Ok(RollbackSettings {
            per_node: self.per_node,
            reach: self.reach.resolve(&inv),
            inv,
            output_dir: self.output_dir.clone(),
            run: self.run.clone(),
        })
    }
}

/// Where `irq-pin` and `doctor` act: `--cluster-config`, or with `--cluster` the cluster
/// `TOPO_TUNE_CLUSTER_CONFIG` names, else this machine; and the training CPUs interrupts stay
/// off: `--reserve-cpus`, else cluster.yaml's `reserved_cpus`, else none.
fn scope(
    cluster_config: Option<&Path>,
    cluster: bool,
    fsroot: Option<&Path>,
    select: &NodesArgs,
    reach: &ReachArgs,
    reserve: Option<&CpuList>,
) -> Result<(Scope, CpuList), Error> {
    let cfg = super::local_command_scope(cluster_config, cluster, std::env::var_os("TOPO_TUNE_CLUSTER_CONFIG"))
        .map_err(|e| Error::Usage(e.0))?;
    // TOPO_TUNE_NODES, like TOPO_TUNE_CLUSTER_CONFIG, never turns a local run cluster-wide.
    Ok(match cfg {
        None if select.nodes.is_some() => {
            return Err(Error::Usage(
                "--nodes selects nodes of a cluster: give --cluster-config FILE (or --cluster) with it".into(),
            ))
        }
        None => (
            Scope::Here {
                fsroot: fsroot.map(Path::to_path_buf),
            },
            reserve.cloned().unwrap_or_default(),
        ),
        Some(cfg) => {
            let (inv, _) = select.cut(Inventory::load(&cfg)?)?;
            let reserved = reserve.or(inv.reserved_cpus.as_ref()).cloned().unwrap_or_default();
            let reach = reach.resolve(&inv);
            (
                Scope::Cluster {
                    inv: Box::new(inv),
                    reach,
                },
                reserved,
            )
        }
    })
}

impl DoctorArgs {
    pub(crate) fn resolve(&self) -> Result<DoctorSettings, Error> {
        let (scope, reserved) = scope(
            self.cluster_config.as_deref(),
            self.cluster,
            self.fsroot.as_deref(),
            &self.select,
            &self.reach,
            self.reserve_cpus.as_ref(),
        )?;
        let nccl_version = match &scope {
            Scope::Cluster { inv, .. } => self.nccl_version.or(inv.nccl_version),
            Scope::Here { .. } => self.nccl_version,
        };
        Ok(DoctorSettings {
            per_node: self.per_node,
            scope,
            reserved,
            nccl_version,
            textfile: self.textfile.clone(),
            nvml_fixture: self.nvml_fixture.clone(),
        })
    }
}

impl IrqPinArgs {
    pub(crate) fn resolve(&self) -> Result<IrqPinSettings, Error> {
        let (scope, reserved) = scope(
            self.cluster_config.as_deref(),
            self.cluster,
            self.fsroot.as_deref(),
            &self.select,
            &self.reach,
            self.reserve_cpus.as_ref(),
        )?;
        Ok(IrqPinSettings {
            per_node: self.per_node,
            scope,
            request: PinRequest {
                reserved,
                include_control: self.include_control,
                dry_run: self.dry_run,
                irqbalance: self.irqbalance.into(),
                install: self.install,
                restore: self.restore,
            },
        })
    }
}

impl DiagnoseArgs {
    /// The inventory cut to `--nodes` (all nodes without it), and those hosts.
    /// A sweep on nodes, or (`--trace`) the job's traces.
    pub(crate) fn resolve(&self) -> Result<DiagnoseMode, Error> {
        if self.trace.is_empty() {
            Ok(DiagnoseMode::Sweep(Box::new(self.resolve_sweep()?)))
        } else {
            Ok(DiagnoseMode::Trace(Box::new(self.resolve_trace()?)))
        }
    }

    fn resolve_sweep(&self) -> Result<DiagnoseSettings, Error> {
        let config = self.cluster_config.as_ref().ok_or_else(|| {
            Error::Usage(
                "diagnose needs --cluster-config FILE (a sweep on its nodes) or --trace PATH (a job's profiler traces)"
                    .into(),
            )
        })?;
        let (inv, hosts) = self.select.cut(Inventory::load(config)?)?;
        Ok(DiagnoseSettings {
            gather: self.source.resolve_with(inv)?,
            hosts,
            output_dir: self.output_dir.clone(),
            budget: self.budget.map(Duration::from_secs),
            ceiling_fraction: self.ceiling_fraction,
            localise: self.localise,
        })
    }

    /// `--trace` and what goes with it; the cluster only to doctor the straggler's host.
    fn resolve_trace(&self) -> Result<TraceSettings, Error> {
        let cluster = match &self.cluster_config {
            Some(config) => {
                let s = self.source.resolve_with(Inventory::load(config)?)?;
                Some((s.inv, s.reach))
            }
            None => None,
        };
        // `--nodes` with `--trace`: a sweep measured on them, held against the traces (the
        // flag only: TOPO_TUNE_NODES never turns a trace reading into a sweep).
        let measure = match &self.select.nodes {
            Some(_) => Some(self.resolve_sweep()?),
            None if self.output_dir.is_some() || self.source.from_probes.is_some() => {
                return Err(Error::Usage(
                    "--output-dir and --from-probes go with --nodes (a sweep measured before the traces are read); --trace alone reads no nodes".into(),
                ))
            }
            None => None,
        };
        Ok(TraceSettings {
            paths: self.trace.clone(),
            sweep: self.sweep.clone(),
            measure,
            hostfile: self.hostfile.clone(),
            ranks_per_node: self.ranks_per_node,
            cluster,
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()).min(8),
        })
    }
}

impl TuneArgs {
    /// The set (`--canary`), its inventory cut to it, and the rule's rounds and thresholds
    /// from cluster.yaml's `benchmark:` unless a flag says otherwise.
    pub(crate) fn resolve(&self) -> Result<TuneSettings, Error> {
        let TuneArgs {
            gather,
            canary,
            collectives,
            budget,
            rounds,
            output_dir,
            node_files,
            tuner_plugin,
            state_dir: state,
        } = self;
        // An empty path would stage under, or read from, the working directory.
        for (flag, p) in [
            ("--node-files", node_files.as_deref()),
            ("--tuner-plugin", tuner_plugin.as_deref()),
            ("--state-dir", state.as_deref()),
        ] {
            if p.is_some_and(|p| p.as_os_str().to_string_lossy().trim().is_empty()) {
                return Err(Error::Usage(format!("tune {flag}: an empty path")));
            }
        }
        let (inv, hosts) = cut("--canary", Some(canary), gather.inventory()?)?;
        let mut collectives = collectives.clone();
        collectives.sort();
        collectives.dedup();
        let paper: Vec<&str> = inv
            .nodes
            .iter()
            .filter(|n| n.transport == crate::config::TransportKind::Simulated)
            .map(|n| n.host.as_str())
            .collect();
        if node_files.is_none() && !paper.is_empty() {
            return Err(Error::Usage(format!(
                "tune --canary {canary}: {} exist(s) only on paper: give --node-files DIR (their files under DIR/<host>/, where each run's files are staged too)",
                paper.join(", ")
            )));
        }
        Ok(TuneSettings {
            rounds: rounds.unwrap_or(inv.benchmark.rounds),
            gate: inv.benchmark.gate,
            cluster_config: inv.path.clone(),
            gather: gather.nodes.resolve_with(inv)?,
            set: canary.clone(),
            hosts,
            collectives,
            budget: budget.map(Duration::from_secs),
            output_dir: node_files.clone(),
            tuning_dir: output_dir.clone(),
            plugin: tuner_plugin.clone().unwrap_or_else(beside_this_binary),
            state_dir: state_dir(state.as_deref()),
        })
    }
}

/// `libnccl_tuner_topo_tune.so` in the directory of the running binary (where `cargo build
/// --release` and the release tarball put it).
fn beside_this_binary() -> PathBuf {
    let name = crate::model::files::TUNE_PLUGIN;
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

impl FabricArgs {
    pub(crate) fn resolve(&self) -> Result<FabricSettings, Error> {
        // Every flag named: a new one cannot be silently ignored.
        let FabricArgs {
            from_ibnetdiscover,
            from_aws_topology,
            guid_map,
            host_map,
            cluster_config,
            output_dir,
        } = self;
        let source = match (from_ibnetdiscover.as_slice(), from_aws_topology) {
            ([_, ..], _) => FabricSource::Ibnetdiscover(from_ibnetdiscover.clone()),
            ([], Some(f)) => FabricSource::AwsTopology(f.clone()),
            ([], None) => {
                return Err(Error::Usage(
                    "fabric needs --from-ibnetdiscover FILE or --from-aws-topology FILE".into(),
                ))
            }
        };
        Ok(FabricSettings {
            source,
            guid_map: guid_map.clone(),
            host_map: host_map.clone(),
            cluster: cluster_config.as_deref().map(Inventory::load).transpose()?,
            output_dir: output_dir.clone(),
        })
    }
}
