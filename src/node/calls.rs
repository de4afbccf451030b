//! The calls a node serves: probe (and survey: probe plus whether its files are settled), write, rollback, irq-pin, doctor, and for canaries stage,
//! unstage, state and bench. Each maps its module's
//! typed errors to a failure kind the controller reports as `nodes[].error`.

use super::Call;
use crate::apply::stage::{NodeState, StageRecord};
use crate::apply::tree::TreeError;
use crate::apply::tune_stage::{PluginCopy, RunFiles};
use crate::apply::writer::{self, Bundle, Settled, WriteError, WriteReport};
use crate::config::NodeSpec;
use crate::doctor::{self, Check, DoctorRequest};
use crate::irq::pin::{self, PinReport, PinRequest};
use crate::irq::system::System;
use crate::irq::IrqError;
use crate::model::{BadAnswer, Failure, FailureKind};
use crate::model::{NcclVersion, NodeSnapshot};
use crate::probe::fsroot::FsRoot;
use crate::probe::{self, ProbeRequest, Target as ProbeTarget};
use crate::runner::{self, BenchAnswer, BenchRequest};
use crate::transport::{simulated, NodeEnv};
use serde::{Deserialize, Serialize};

/// Describe the machine: its snapshot.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Probe {}

impl Call for Probe {
    type Answer = NodeSnapshot;
    const KIND: &'static str = "probe";

    fn here(&self, env: &NodeEnv) -> Result<NodeSnapshot, Failure> {
        snapshot(env).map_err(|e| Failure::new(FailureKind::ProbeFailed, e.to_string()))
    }

    fn check_answer(snap: &NodeSnapshot) -> Result<(), BadAnswer> {
        snap.check_version().map_err(|e| BadAnswer(e.to_string()))?;
        crate::model::snapshot_check::check(snap).map_err(|e| BadAnswer(e.to_string()))
    }

    fn on_paper(&self, node: &NodeSpec) -> Result<NodeSnapshot, Failure> {
        simulated::snapshot(node)
    }
}

/// Probe, and say whether the NCCL files in place are settled (`init`'s probe): a repeat
/// `init` whose plan gives a settled node the same files skips its write round trip.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Survey {
    /// cluster.yaml's `nccl_version`, for a node whose probe finds no NCCL (as the planner
    /// does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cluster_nccl_version: Option<NcclVersion>,
}

/// A node's snapshot and, when its files are a fixed point, what they hold.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Surveyed {
    pub(crate) snapshot: NodeSnapshot,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) settled: Option<Settled>,
}

impl Call for Survey {
    type Answer = Surveyed;
    const KIND: &'static str = "survey";

    fn here(&self, env: &NodeEnv) -> Result<Surveyed, Failure> {
        let snapshot = Probe {}.here(env)?;
        let version = snapshot.nccl_version.or(self.cluster_nccl_version);
        Ok(Surveyed {
            settled: writer::settled(&env.write_root, version),
            snapshot,
        })
    }

    fn check_answer(answer: &Surveyed) -> Result<(), BadAnswer> {
        Probe::check_answer(&answer.snapshot)?;
        answer.settled.as_ref().map_or(Ok(()), Settled::check)
    }

    fn on_paper(&self, node: &NodeSpec) -> Result<Surveyed, Failure> {
        Ok(Surveyed {
            snapshot: simulated::snapshot(node)?,
            settled: None,
        })
    }
}

/// The machine `env` describes.
pub(crate) fn snapshot(env: &NodeEnv) -> Result<NodeSnapshot, probe::ProbeError> {
    let target = match &env.hwloc_xml {
        Some(xml) => ProbeTarget::HwlocXml(xml.clone()),
        None => ProbeTarget::Machine {
            fsroot: env.fsroot.clone(),
        },
    };
    probe::probe(&ProbeRequest {
        target,
        nvml_fixture: env.nvml_fixture.clone(),
    })
}

/// Write (or check) the NCCL files a plan gives this node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Write {
    pub(crate) bundle: Bundle,
    pub(crate) check: bool,
    pub(crate) diff: bool,
    /// The run id to record (a rollout's wave); none: a fresh one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run_id: Option<String>,
}

fn write_failure(e: WriteError) -> Failure {
    let kind = match &e {
        WriteError::Tree(TreeError::Io { .. }) => FailureKind::WriteFailed,
        WriteError::Tree(TreeError::Locked { .. }) | WriteError::Staged { .. } => FailureKind::Locked,
        WriteError::Tree(_) | WriteError::Invalid { .. } => FailureKind::InvalidInput,
        WriteError::NothingToRollBack(_) => FailureKind::NothingToRollBack,
    };
    Failure::new(kind, e.to_string())
}

fn paper(why: &str) -> Failure {
    Failure::new(FailureKind::Simulated, why)
}

impl Call for Write {
    type Answer = WriteReport;
    const KIND: &'static str = "write";

    fn here(&self, env: &NodeEnv) -> Result<WriteReport, Failure> {
        writer::write_bundle(
            &env.write_root,
            &self.bundle,
            self.check,
            self.diff,
            self.run_id.as_deref(),
        )
        .map_err(write_failure)
    }

    fn check_answer(report: &WriteReport) -> Result<(), BadAnswer> {
        report.check()
    }

    fn on_paper(&self, _node: &NodeSpec) -> Result<WriteReport, Failure> {
        Err(paper(
            "a simulated node exists only on paper: use --output-dir to see its files",
        ))
    }
}

/// Undo the last recorded write (with `run_id`: only if it is that run).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Rollback {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run_id: Option<String>,
}

impl Call for Rollback {
    type Answer = WriteReport;
    const KIND: &'static str = "rollback";

    fn here(&self, env: &NodeEnv) -> Result<WriteReport, Failure> {
        writer::rollback(&env.write_root, self.run_id.as_deref()).map_err(write_failure)
    }

    fn check_answer(report: &WriteReport) -> Result<(), BadAnswer> {
        report.check()
    }

    fn on_paper(&self, _node: &NodeSpec) -> Result<WriteReport, Failure> {
        Err(paper(
            "a simulated node exists only on paper: use --output-dir to roll back its files",
        ))
    }
}

fn fs_of(env: &NodeEnv) -> FsRoot {
    env.fsroot.as_ref().map_or_else(FsRoot::live, FsRoot::new)
}

/// The live system, or a described tree (no services, no root check).
fn system_of(env: &NodeEnv) -> &'static dyn System {
    crate::irq::system::for_root(env.fsroot.as_deref())
}

pub(crate) fn irq_failure(e: &IrqError) -> Failure {
    let kind = match e {
        IrqError::NotRoot => FailureKind::NotRoot,
        IrqError::Probe(_) => FailureKind::ProbeFailed,
        IrqError::NoLocalCpus { .. }
        | IrqError::Io { .. }
        | IrqError::Write(_)
        | IrqError::BadCpus { .. }
        | IrqError::Unsafe { .. }
        | IrqError::ReservedOutside { .. } => FailureKind::IrqFailed,
    };
    Failure::new(kind, e.to_string())
}

/// Pin mlx5 interrupts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct IrqPin(pub(crate) PinRequest);

impl IrqPin {
    /// Run on the machine `env` describes, with its side effects through `sys`.
    pub(crate) fn run(&self, env: &NodeEnv, sys: &dyn System) -> Result<PinReport, IrqError> {
        let fs = fs_of(env);
        let snap = snapshot(env)?;
        pin::pin(&fs, &snap, &self.0, sys)
    }
}

impl Call for IrqPin {
    type Answer = PinReport;
    const KIND: &'static str = "irq-pin";

    fn here(&self, env: &NodeEnv) -> Result<PinReport, Failure> {
        self.run(env, system_of(env)).map_err(|e| irq_failure(&e))
    }

    fn on_paper(&self, _node: &NodeSpec) -> Result<PinReport, Failure> {
        Err(paper("a simulated node has no interrupts to pin"))
    }
}

/// Check the host basics.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Doctor(pub(crate) DoctorRequest);

/// A node's checks, with the hostname it answered as.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DoctorReport {
    pub(crate) hostname: String,
    pub(crate) checks: Vec<Check>,
    /// What the node runs, for the controller's `cluster-consistency` check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) versions: Option<doctor::consistency::Versions>,
}

impl Doctor {
    /// Check the machine `env` describes.
    pub(crate) fn run(&self, env: &NodeEnv) -> Result<DoctorReport, probe::ProbeError> {
        let snap = snapshot(env)?;
        let fs = fs_of(env);
        Ok(DoctorReport {
            hostname: snap.hostname.clone(),
            checks: doctor::run(&fs, &snap, &self.0),
            versions: Some(doctor::consistency::versions(&fs, &snap)),
        })
    }
}

impl Call for Doctor {
    type Answer = DoctorReport;
    const KIND: &'static str = "doctor";

    fn here(&self, env: &NodeEnv) -> Result<DoctorReport, Failure> {
        self.run(env)
            .map_err(|e| Failure::new(FailureKind::ProbeFailed, e.to_string()))
    }

    fn check_answer(report: &DoctorReport) -> Result<(), BadAnswer> {
        doctor::answer::check_report(&report.hostname, &report.checks, &doctor::check_ids())
            .map_err(|e| BadAnswer(e.to_string()))?;
        // The controller judges consistency from every node's versions; a node that answers
        // the verdict itself is not believed.
        if let Some(i) = report.checks.iter().position(|c| c.check == doctor::consistency::CHECK) {
            return Err(BadAnswer(format!(
                "checks[{i}].check: `{}` is the controller's to judge, not a node's",
                doctor::consistency::CHECK
            )));
        }
        match &report.versions {
            Some(v) => v.check().map_err(|e| BadAnswer(e.to_string())),
            None => Ok(()),
        }
    }

    fn on_paper(&self, _node: &NodeSpec) -> Result<DoctorReport, Failure> {
        Err(paper("a simulated node has no /proc or /sys to check"))
    }
}

/// Stage a canary's candidate beside the live files (`apply`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Stage {
    pub(crate) bundle: Bundle,
    pub(crate) rollout: String,
}

impl Call for Stage {
    type Answer = StageRecord;
    const KIND: &'static str = "stage";

    fn here(&self, env: &NodeEnv) -> Result<StageRecord, Failure> {
        crate::apply::stage::stage(&env.write_root, &self.bundle, &self.rollout).map_err(write_failure)
    }

    fn check_answer(record: &StageRecord) -> Result<(), BadAnswer> {
        record.check()
    }
}

/// Remove a rollout's staged candidate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Unstage {
    pub(crate) rollout: String,
}

impl Call for Unstage {
    type Answer = StageRecord;
    const KIND: &'static str = "unstage";

    fn here(&self, env: &NodeEnv) -> Result<StageRecord, Failure> {
        crate::apply::stage::unstage(&env.write_root, &self.rollout).map_err(write_failure)
    }

    fn check_answer(record: &StageRecord) -> Result<(), BadAnswer> {
        record.check()
    }
}

/// What topo-tune wrote and staged on the node, and whether it still holds (`status`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct State {
    /// `status`: also the live tuning and the NCCL the node runs (its loader's, else this,
    /// cluster.yaml's). `None`: the files only — a rollout's check between rounds loads no
    /// library and reads no rules file.
    #[serde(default)]
    pub(crate) tuning: Option<TuningAsk>,
}

/// What `status` tells a node so it can say which NCCL it runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct TuningAsk {
    #[serde(default)]
    pub(crate) nccl_version: Option<crate::model::NcclVersion>,
}

impl Call for State {
    type Answer = NodeState;
    const KIND: &'static str = "state";

    fn here(&self, env: &NodeEnv) -> Result<NodeState, Failure> {
        let Some(ask) = &self.tuning else {
            return crate::apply::stage::state(&env.write_root).map_err(write_failure);
        };
        // Only this machine's loader knows its NCCL (a described or paper node does not).
        let live = env.fsroot.is_none() && env.hwloc_xml.is_none() && env.write_root == std::path::Path::new("/");
        let nccl = live
            .then(crate::probe::nccl_lib::installed_version)
            .flatten()
            .or(ask.nccl_version);
        crate::apply::stage::state_with_tuning(&env.write_root, nccl).map_err(write_failure)
    }

    fn check_answer(state: &NodeState) -> Result<(), BadAnswer> {
        state.check()
    }
}

/// Stage `tune`'s run files: the plugin (when given) and each candidate's config and rules
/// file, under the run's directory (`apply::tune_stage`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TuneStage {
    pub(crate) run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) plugin: Option<PluginCopy>,
    pub(crate) files: Vec<RunFiles>,
}

impl Call for TuneStage {
    /// The ids written.
    type Answer = Vec<String>;
    const KIND: &'static str = "tune-stage";

    fn here(&self, env: &NodeEnv) -> Result<Vec<String>, Failure> {
        crate::apply::tune_stage::stage(&env.write_root, &self.run, self.plugin.as_ref(), &self.files)
            .map_err(write_failure)
    }

    fn check_answer(ids: &Vec<String>) -> Result<(), BadAnswer> {
        if ids.len() > 256 || ids.iter().any(|i| i.len() != 16) {
            return Err(BadAnswer("tune-stage answered ids that are not run file ids".into()));
        }
        Ok(())
    }
}

/// Remove a tune run's files.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TuneUnstage {
    pub(crate) run: String,
}

impl Call for TuneUnstage {
    type Answer = ();
    const KIND: &'static str = "tune-unstage";

    fn here(&self, env: &NodeEnv) -> Result<(), Failure> {
        crate::apply::tune_stage::unstage(&env.write_root, &self.run).map_err(write_failure)
    }
}

/// Run the benchmark once, for one variant (on the wave's first node, or here).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Bench {
    pub(crate) request: BenchRequest,
}

impl Call for Bench {
    type Answer = BenchAnswer;
    const KIND: &'static str = "bench";

    fn here(&self, env: &NodeEnv) -> Result<BenchAnswer, Failure> {
        self.request
            .check()
            .map_err(|e| Failure::new(FailureKind::BenchmarkFailed, e.0))?;
        runner::run(&self.request, &env.write_root, &env.cancel)
            .map_err(|e| Failure::new(FailureKind::BenchmarkFailed, format!("starting the benchmark: {e}")))
    }

    fn check_answer(answer: &BenchAnswer) -> Result<(), BadAnswer> {
        answer.check()
    }
}
