//! A rollout's record on the controller (`STATE_DIR/rollouts/<id>.json`): its options, the
//! exact candidate each node gets, every wave's phase, nodes, rounds, figures and decision.
//! Saved (atomically) before and after every step, so `apply --resume ID` continues a killed
//! rollout and `status` says where each node stands. One lock per cluster refuses a second
//! rollout while one runs.

use crate::apply::stage::StageRecord;
use crate::apply::tree::{Lock, Tree, TreeError};
use crate::apply::writer::Bundle;
use crate::bench::parse::BenchRun;
use crate::bench::stats::{Gate, Verdict};
use crate::config::benchmark::Benchmark;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) const STATE_VERSION: u32 = 1;
const STATE_LIMIT: u64 = 256 << 20;

/// How the rollout was asked for (kept, so a resume does exactly what was started).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Options {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) canary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) wave_size: Option<usize>,
    pub(crate) canary_only: bool,
    pub(crate) max_fail: usize,
    pub(crate) rounds: u32,
    pub(crate) gate: Gate,
    pub(crate) benchmark: Benchmark,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) output_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RolloutStatus {
    Running,
    /// Every wave promoted (or the canary, with `--canary-only`).
    Completed,
    /// A wave's measurement said no: it was rolled back; earlier waves stay promoted.
    Halted,
    /// Nodes failed beyond `--max-fail`, or a rollback could not finish.
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Phase {
    Pending,
    /// Candidates being written to the staging directory (recorded before the first write).
    Staging,
    Measuring,
    /// Installing the candidate with the atomic writer (run id recorded before).
    Promoting,
    Promoted,
    /// Undoing this wave (staged files removed, promoted files restored).
    RollingBack,
    RolledBack,
}

/// One benchmark run as recorded: its figures or why it has none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunRecord {
    pub(crate) command: String,
    pub(crate) seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) figures: Option<BenchRun>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RoundRecord {
    /// `true`: the candidate ran first in this round (A B B A …).
    pub(crate) candidate_first: bool,
    pub(crate) baseline: RunRecord,
    pub(crate) candidate: RunRecord,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Wave {
    pub(crate) name: String,
    pub(crate) hosts: Vec<String>,
    pub(crate) phase: Phase,
    /// The run id promotion records on every node of this wave (what its rollback undoes).
    pub(crate) run_id: String,
    #[serde(default)]
    pub(crate) rounds: Vec<RoundRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) verdict: Option<Verdict>,
    /// Node → what went wrong there.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) failures: BTreeMap<String, String>,
    /// Per node: what was staged (sha256 per file).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) staged: BTreeMap<String, StageRecord>,
    /// Nodes whose live files the promotion changed (the others already held them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) changed: Vec<String>,
    /// Why the wave ended as it did, in one sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) outcome: Option<String>,
    /// Hosts where this wave's cleanup (its rollback, or removing a staged copy) did not
    /// finish, with why: a resume tries them again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) unfinished: BTreeMap<String, String>,
    /// The benchmark run in flight (its `TOPO_TUNE_BENCH_ID`), saved before it starts and
    /// cleared after: a resume ends what a killed run left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) in_flight: Option<String>,
}

impl Wave {
    /// A wave not started yet; promotion records `run_id` on its nodes.
    pub(crate) fn pending(name: String, hosts: Vec<String>, run_id: String) -> Wave {
        Wave {
            name,
            hosts,
            phase: Phase::Pending,
            run_id,
            rounds: Vec::new(),
            verdict: None,
            failures: BTreeMap::new(),
            staged: BTreeMap::new(),
            changed: Vec::new(),
            outcome: None,
            unfinished: BTreeMap::new(),
            in_flight: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Rollout {
    pub(crate) version: u32,
    pub(crate) id: String,
    pub(crate) cluster_config: PathBuf,
    pub(crate) created_unix: u64,
    pub(crate) options: Options,
    pub(crate) status: RolloutStatus,
    /// The candidates (one per NCCL class) and which host gets which.
    pub(crate) bundles: Vec<Bundle>,
    pub(crate) host_bundle: BTreeMap<String, usize>,
    /// GPUs per host, from the plan (the benchmark's ranks).
    pub(crate) gpus: BTreeMap<String, u32>,
    pub(crate) waves: Vec<Wave>,
    /// Hosts the plan gives nothing, with the reason: never touched.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) untouched: BTreeMap<String, String>,
    /// `apply --tuning`: the tuning as it goes out (the rules that held on the canary), the
    /// canary's word on every rule, and the plugin that reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tuning: Option<RolloutTuning>,
}

/// A tuning in a rollout. The record never carries the plugin's bytes, only their sha256:
/// the plugin comes from `--tuner-plugin` (beside the binary by default) and must match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RolloutTuning {
    pub(crate) file: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) plugin_sha256: Option<String>,
    pub(crate) tuning: crate::tune::tuning::Tuning,
    pub(crate) judged: Vec<RuleJudged>,
}

/// The canary's word on one rule or global of the tuning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleJudged {
    /// `all_reduce 8 B–32 KiB ring/ll128`, `NCCL_BUFFSIZE=8388608`.
    pub(crate) rule: String,
    /// Its gain over its sizes on the canary (the weakest shape), when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gain: Option<crate::bench::stats::Change>,
    pub(crate) holds: bool,
}

impl Rollout {
    /// GPUs per node of a run on `hosts`: cluster.yaml's `benchmark.gpus_per_node`, else the
    /// fewest the plan found on them (the ranks a run must report: hosts × this).
    pub(crate) fn gpus_per_node(&self, hosts: &[String]) -> u32 {
        self.options
            .benchmark
            .gpus_per_node
            .unwrap_or_else(|| {
                hosts
                    .iter()
                    .filter_map(|h| self.gpus.get(h))
                    .copied()
                    .min()
                    .unwrap_or(1)
            })
            .max(1)
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum StateError {
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("no rollout {id} in {dir}")]
    Unknown { id: String, dir: String },
}

impl crate::exit::Classify for StateError {
    fn classify(&self) -> crate::exit::Class {
        use crate::exit::{self, Class};
        let code = match self {
            StateError::Tree(t) => t.classify().code,
            StateError::Unknown { .. } => exit::NO_INPUT,
            StateError::Invalid { .. } => exit::DATA_ERROR,
        };
        Class::new(code, "state")
    }
}

/// The state directory: `--state-dir`, else `$XDG_STATE_HOME/topo-tune`, else
/// `~/.local/state/topo-tune`.
pub(crate) fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("topo-tune");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".local/state/topo-tune")
}

/// A record of the state directory that is not read, or not believed, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Unreadable {
    pub(crate) path: String,
    pub(crate) reason: String,
}

/// The rollout records of one state directory.
pub(crate) struct Store {
    tree: Tree,
}

fn record_path(id: &str) -> String {
    format!("rollouts/{id}.json")
}

/// A file or directory of the state is trusted only when the invoking user owns it and
/// nobody else may write it (as ssh treats `~/.ssh`): a record is obeyed on `--resume`.
fn trusted(shown: &str, uid: u32, mode: u32) -> Result<(), StateError> {
    let me = rustix::process::geteuid().as_raw();
    let invalid = |message: String| StateError::Invalid {
        path: shown.to_string(),
        message,
    };
    if uid != me {
        return Err(invalid(format!(
            "owned by uid {uid}, not by you (uid {me}): a rollout record is obeyed as its owner wrote it, so only yours are read"
        )));
    }
    if mode & 0o022 != 0 {
        return Err(invalid(format!(
            "writable by group or others (mode {:04o}): a record anyone could write is not obeyed (chmod go-w)",
            mode & 0o7777
        )));
    }
    Ok(())
}

impl Store {
    pub(crate) fn open(dir: &Path) -> Result<Store, StateError> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| TreeError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        let meta = std::fs::metadata(dir).map_err(|source| TreeError::Io {
            path: dir.display().to_string(),
            source,
        })?;
        trusted(&dir.display().to_string(), meta.uid(), meta.mode())?;
        let store = Store { tree: Tree::open(dir)? };
        for sub in ["rollouts", "locks"] {
            if let Some((uid, mode)) = store.tree.owner_mode(sub)? {
                trusted(&store.tree.show(sub), uid, mode)?;
            }
        }
        // Records a killed save left half-written (of processes that are gone).
        store.tree.remove_stale_temps("rollouts");
        Ok(store)
    }

    pub(crate) fn show(&self, id: &str) -> String {
        self.tree.show(&record_path(id))
    }

    /// One rollout at a time per cluster (by its cluster.yaml): a second is refused at once,
    /// naming the holder.
    pub(crate) fn lock(&self, cluster_config: &Path) -> Result<Lock, StateError> {
        let canonical = std::fs::canonicalize(cluster_config).unwrap_or_else(|_| cluster_config.to_path_buf());
        let key = &crate::digest::sha256_hex(canonical.display().to_string().as_bytes())[..16];
        Ok(self.tree.lock(&format!("locks/{key}.lock"), Duration::ZERO)?)
    }

    pub(crate) fn save(&self, r: &Rollout) -> Result<(), StateError> {
        let text = serde_json::to_string_pretty(r).map_err(|e| StateError::Invalid {
            path: self.show(&r.id),
            message: e.to_string(),
        })? + "\n";
        // What `--resume` could not read back is never written.
        if text.len() as u64 > STATE_LIMIT {
            return Err(StateError::Invalid {
                path: self.show(&r.id),
                message: format!(
                    "{} bytes, more than the {} MiB a record may hold",
                    text.len(),
                    STATE_LIMIT >> 20
                ),
            });
        }
        self.tree.write(&record_path(&r.id), text.as_bytes(), 0o600)?;
        Ok(())
    }

    pub(crate) fn load(&self, id: &str) -> Result<Rollout, StateError> {
        if !crate::apply::writer::run_id_ok(id) {
            return Err(StateError::Invalid {
                path: id.to_string(),
                message: "not a rollout id (they look like 20261130T120000Z-4242)".into(),
            });
        }
        let path = record_path(id);
        let (uid, mode) = self.tree.owner_mode(&path)?.ok_or_else(|| StateError::Unknown {
            id: id.to_string(),
            dir: self.tree.show("rollouts"),
        })?;
        trusted(&self.show(id), uid, mode)?;
        let text = self
            .tree
            .read_text(&path, STATE_LIMIT)?
            .ok_or_else(|| StateError::Unknown {
                id: id.to_string(),
                dir: self.tree.show("rollouts"),
            })?;
        let r: Rollout = serde_json::from_str(&text).map_err(|e| StateError::Invalid {
            path: self.show(id),
            message: format!("not a rollout record: {e}"),
        })?;
        if r.version != STATE_VERSION || r.id != id {
            return Err(StateError::Invalid {
                path: self.show(id),
                message: format!("version {} / id {} is not this record's", r.version, r.id),
            });
        }
        Ok(r)
    }

    /// Every rollout, oldest first, and every record that could not be read with why.
    pub(crate) fn all(&self) -> Result<(Vec<Rollout>, Vec<Unreadable>), StateError> {
        let mut out = Vec::new();
        let mut unreadable = Vec::new();
        for name in self.tree.list("rollouts")? {
            let Some(id) = name.strip_suffix(".json") else { continue };
            match self.load(id) {
                Ok(r) => out.push(r),
                Err(e) => unreadable.push(Unreadable {
                    path: self.tree.show(&format!("rollouts/{name}")),
                    reason: e.to_string(),
                }),
            }
        }
        out.sort_by(|a, b| (a.created_unix, &a.id).cmp(&(b.created_unix, &b.id)));
        Ok((out, unreadable))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_state_directory_others_can_write_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        Store::open(&state).unwrap();
        let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "made private");
        std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Store::open(&state).err().unwrap().to_string();
        assert!(e.contains("writable by group or others (mode 0777)"), "{e}");
    }

    #[test]
    fn temps_of_dead_savers_are_cleared_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let rollouts = dir.path().join("rollouts");
        std::fs::create_dir_all(&rollouts).unwrap();
        // pid 0 names no process; ours is alive.
        let dead = rollouts.join(".20261201T000000Z-1.json.topo-tune.0.1.tmp");
        let live = rollouts.join(format!(
            ".20261201T000000Z-1.json.topo-tune.{}.1.tmp",
            std::process::id()
        ));
        std::fs::write(&dead, "{").unwrap();
        std::fs::write(&live, "{").unwrap();
        Store::open(dir.path()).unwrap();
        assert!(!dead.exists(), "a dead saver's temp stays no more");
        assert!(live.exists(), "a save in flight is not pulled from under it");
    }
    fn record(id: &str, created_unix: u64) -> Rollout {
        Rollout {
            version: STATE_VERSION,
            id: id.into(),
            cluster_config: "/etc/topo-tune/cluster.yaml".into(),
            created_unix,
            options: Options {
                canary: Some("rack-1".into()),
                wave_size: None,
                canary_only: true,
                max_fail: 0,
                rounds: 6,
                gate: Gate::default(),
                benchmark: Benchmark::default(),
                output_dir: None,
            },
            status: RolloutStatus::Running,
            bundles: Vec::new(),
            host_bundle: BTreeMap::new(),
            gpus: BTreeMap::from([("a".to_string(), 8), ("b".to_string(), 4)]),
            waves: vec![Wave::pending(
                "canary".into(),
                vec!["a".into(), "b".into()],
                format!("{id}-1"),
            )],
            untouched: BTreeMap::new(),
            tuning: None,
        }
    }

    #[test]
    fn a_saved_record_reads_back_as_it_was_and_privately() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let r = record("20261201T100000Z-7", 5);
        store.save(&r).unwrap();
        assert_eq!(store.load(&r.id).unwrap(), r);
        let file = dir.path().join("rollouts/20261201T100000Z-7.json");
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_record_under_another_name_or_version_is_not_believed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let r = record("20261201T100000Z-7", 5);
        store.save(&r).unwrap();
        let rollouts = dir.path().join("rollouts");
        std::fs::copy(
            rollouts.join("20261201T100000Z-7.json"),
            rollouts.join("20261201T100000Z-8.json"),
        )
        .unwrap();
        let e = store.load("20261201T100000Z-8").unwrap_err().to_string();
        assert!(e.contains("is not this record's"), "{e}");
        let mut old = r.clone();
        old.version = STATE_VERSION + 1;
        store.save(&old).unwrap();
        assert!(store.load(&r.id).is_err());
        assert!(matches!(
            store.load("../../etc/passwd"),
            Err(StateError::Invalid { .. })
        ));
        assert!(matches!(
            store.load("20261201T100000Z-9"),
            Err(StateError::Unknown { .. })
        ));
    }

    #[test]
    fn all_lists_records_oldest_first_and_names_the_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.save(&record("20261201T100000Z-2", 20)).unwrap();
        store.save(&record("20261201T100000Z-1", 10)).unwrap();
        std::fs::write(dir.path().join("rollouts/20261201T100000Z-3.json"), "{not json").unwrap();
        let (records, unreadable) = store.all().unwrap();
        let ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["20261201T100000Z-1", "20261201T100000Z-2"]);
        assert_eq!(unreadable.len(), 1);
        assert!(unreadable[0].path.ends_with("20261201T100000Z-3.json"));
        assert!(
            unreadable[0].reason.contains("not a rollout record"),
            "{}",
            unreadable[0].reason
        );
    }

    #[test]
    fn one_rollout_per_cluster_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let yaml = dir.path().join("cluster.yaml");
        std::fs::write(&yaml, "nodes: []\n").unwrap();
        let held = store.lock(&yaml).unwrap();
        assert!(store.lock(&yaml).is_err(), "a second rollout of the same cluster");
        let other = dir.path().join("other.yaml");
        std::fs::write(&other, "nodes: []\n").unwrap();
        let _other = store.lock(&other).unwrap();
        drop(held);
        assert!(store.lock(&yaml).is_ok(), "free once the first ends");
    }

    #[test]
    fn ranks_per_node_come_from_cluster_yaml_else_the_fewest_gpus() {
        let mut r = record("20261201T100000Z-7", 5);
        let hosts = ["a".to_string(), "b".to_string()];
        assert_eq!(r.gpus_per_node(&hosts), 4);
        assert_eq!(r.gpus_per_node(&hosts[..1]), 8);
        assert_eq!(r.gpus_per_node(&["ghost".to_string()]), 1);
        r.options.benchmark.gpus_per_node = Some(2);
        assert_eq!(r.gpus_per_node(&hosts), 2);
    }
}
