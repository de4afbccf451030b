//! The node-side writer: what topo-tune owns under `/etc`, written safely (paths in
//! `model::files`).
//!
//! - the drop-in `/etc/nccl/conf.d/50-topo-tune.conf`: topo-tune's settings;
//! - `/etc/nccl/conf.d/00-preserved-nccl.conf`: a `/etc/nccl.conf` topo-tune did not write,
//!   kept as the earliest drop-in (so topo-tune's values win, and nothing is lost);
//! - `/etc/nccl.conf`: assembled from every `conf.d/*.conf` in lexical order (later wins,
//!   each key once), validated line by line;
//! - `/etc/nccl/topo-tune/topology.xml` (when a rule asks) and `nccl.env` (for containers);
//! - `/etc/nccl/nccl-tuner.csv` (a tuning rolled out with `init --tuning`), and its plugin,
//!   content-addressed under `/var/lib/topo-tune/plugin/` (never replaced or removed: a
//!   rollback's drop-in names a plugin that is still there);
//! - `/etc/nccl/topo-tune/manifest.json`: what topo-tune owns (sha256) and every run's
//!   backups under `/etc/nccl/topo-tune/backups/<run>/`, for `rollback`.
//!
//! Every write goes through [`Tree`] (no symlink followed, temp + fsync + rename, only when
//! content differs); a second identical run changes nothing. All paths live under `root`
//! (`/`, or `DIR/<host>` for `--output-dir`). One lock per tree; each run is recorded as
//! pending before its first rename, so an interrupted run is undone by the next run or by
//! `rollback`, whatever the moment it died (docs/security.md).

use super::tree::{Tree, TreeError};
use crate::digest::sha256_hex;
use crate::model::files::{
    plugin_path, BACKUPS, DROPIN, DROPIN_DIR, DROPIN_NAME, ENV_FILE, MANIFEST, NCCL_CONF, PRESERVED, PRESERVED_NAME,
    STAGE_DIR, STATE_DIR, TOPOLOGY, TUNER_CSV,
};
use crate::model::plan::NcclClass;
use crate::model::{BadAnswer, NcclVersion, Refusal};
use crate::nccl::conf::{assemble, env_file, parse, render};
use crate::nccl::table::Rejection;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

const HEADER: &str = "managed by topo-tune: edit /etc/nccl/conf.d/*.conf, not this file";

/// What topo-tune wants on one node (sent to the node as JSON for remote writes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Bundle {
    pub(crate) dropin: String,
    pub(crate) topology_xml: Option<String>,
    pub(crate) nccl_version: Option<NcclVersion>,
    /// A tuning rolled out with the files (`init --tuning`): its rules file, and the plugin
    /// the drop-in names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tuner: Option<Tuner>,
}

/// A rolled-out tuning's node files: the rules file's text, and the plugin's bytes (absent
/// when a node's settled files are read back: the plugin is content-addressed, not owned).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Tuner {
    pub(crate) csv: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) plugin: Option<super::plugin::PluginCopy>,
}

impl Bundle {
    /// The files a plan's NCCL class gives each of its nodes.
    pub(crate) fn of(class: &NcclClass) -> Result<Bundle, Rejection> {
        let header = format!(
            "topo-tune {}: one line per setting; why each is set, and what is left out and why: topo-tune init --check --cluster-config <your cluster.yaml>",
            env!("CARGO_PKG_VERSION")
        );
        Ok(Bundle {
            dropin: render(&class.settings, class.nccl_version, &header)?,
            topology_xml: class.topology_xml.clone(),
            nccl_version: class.nccl_version,
            tuner: None,
        })
    }

    /// What identifies the bundle: a node settled on the same fingerprint already holds
    /// exactly these files, so writing them would change nothing.
    pub(crate) fn fingerprint(&self) -> String {
        let part = |t: Option<&str>| t.map_or_else(|| "-".to_string(), |t| sha256_hex(t.as_bytes()));
        let version = self.nccl_version.map_or_else(|| "-".to_string(), |v| v.to_string());
        sha256_hex(
            format!(
                "dropin {}\ntopology {}\nnccl {version}\ntuner {}\n",
                part(Some(&self.dropin)),
                part(self.topology_xml.as_deref()),
                part(self.tuner.as_ref().map(|t| t.csv.as_str()))
            )
            .as_bytes(),
        )
    }
}

/// A node whose files are a fixed point: writing the bundle they hold changes nothing. The
/// probe reports it, so a repeat `init` that changes nothing needs no second round trip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Settled {
    /// [`Bundle::fingerprint`] of the files in place.
    pub(crate) fingerprint: String,
    /// What a write of that bundle reports (every file unchanged).
    pub(crate) files: Vec<FileReport>,
    /// The operator's own NCCL files, as a write reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) operator: Vec<OperatorFile>,
}

impl Settled {
    pub(crate) fn check(&self) -> Result<(), BadAnswer> {
        if self.fingerprint.len() != 64 || !self.fingerprint.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(BadAnswer("settled.fingerprint is not a sha256".into()));
        }
        if self
            .files
            .iter()
            .any(|f| f.action != Action::Unchanged || f.diff.is_some())
        {
            return Err(BadAnswer("settled.files names a change".into()));
        }
        WriteReport {
            files: self.files.clone(),
            operator: self.operator.clone(),
            ..WriteReport::default()
        }
        .check()
    }

    /// The report a write of `bundle` would give, when this node is settled on it.
    pub(crate) fn report_for(&self, bundle: &Bundle) -> Option<WriteReport> {
        (self.fingerprint == bundle.fingerprint()).then(|| WriteReport {
            files: self.files.clone(),
            operator: self.operator.clone(),
            ..WriteReport::default()
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Action {
    Create,
    Update,
    Unchanged,
    Remove,
}

/// One file's change, with the contents on both sides (for the diff and the backup).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FileChange {
    pub(crate) path: String,
    pub(crate) action: Action,
    pub(crate) reason: String,
    pub(crate) before: Option<String>,
    pub(crate) after: Option<String>,
}

/// What the node reports for one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FileReport {
    pub(crate) path: String,
    pub(crate) action: Action,
    pub(crate) reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) diff: Option<String>,
}

/// What the node reports for one write, check or rollback.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct WriteReport {
    /// The run recorded in the manifest (none when nothing changed or for `--check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run_id: Option<String>,
    pub(crate) files: Vec<FileReport>,
    /// Why nothing was done, when that is the answer (a rollback with nothing newer to undo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
    /// `rollback --run ID` that undid nothing here: whether the node holds that run under a
    /// newer one or never ran it (what the controller counts; the note says it to people).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run_not_undone: Option<RunNotUndone>,
    /// The operator's own NCCL files and what they set (kept as they are): the controller
    /// warns of those that would turn NVLink off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) operator: Vec<OperatorFile>,
}

/// One NCCL file topo-tune did not write, and its settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct OperatorFile {
    pub(crate) path: String,
    pub(crate) settings: Vec<(String, String)>,
}

/// At most this many operator files, and settings per file, in an answer.
const MAX_OPERATOR_FILES: usize = 64;
const MAX_OPERATOR_SETTINGS: usize = 512;

/// Operator files as an answer holds them: bounded, names and values plain text.
fn operator_ok(files: &[OperatorFile]) -> bool {
    let text = |t: &str| t.len() <= 1024 && !t.chars().any(|c| c.is_control() || crate::model::is_deceptive(c));
    files.len() <= MAX_OPERATOR_FILES
        && files.iter().all(|f| {
            text(&f.path)
                && f.settings.len() <= MAX_OPERATOR_SETTINGS
                && f.settings.iter().all(|(n, v)| text(n) && text(v))
        })
}

impl WriteReport {
    /// A node's report names only files topo-tune manages, a run id it makes, and text
    /// without control characters (the diff aside: shown escaped).
    pub(crate) fn check(&self) -> Result<(), BadAnswer> {
        if let Some(id) = self.run_id.as_deref().filter(|id| !run_id_ok(id)) {
            return Err(BadAnswer(format!(
                "run_id {:?} is not one topo-tune makes",
                id.escape_default().to_string()
            )));
        }
        if !operator_ok(&self.operator) {
            return Err(BadAnswer("operator files are not bounded plain text".into()));
        }
        if self
            .note
            .as_ref()
            .is_some_and(|n| n.len() > 4096 || n.chars().any(char::is_control))
        {
            return Err(BadAnswer("note is not plain text".into()));
        }
        if self.files.len() > MANAGED.len() * 2 {
            return Err(BadAnswer(format!(
                "{} files reported; topo-tune manages {}",
                self.files.len(),
                MANAGED.len()
            )));
        }
        for f in &self.files {
            if !MANAGED.contains(&f.path.as_str()) {
                return Err(BadAnswer(format!(
                    "files[].path {:?} is not a file topo-tune manages",
                    f.path.escape_default().to_string()
                )));
            }
            if f.reason.len() > 4096 || f.reason.chars().any(char::is_control) {
                return Err(BadAnswer(format!("files[].reason of {} is not plain text", f.path)));
            }
            if f.diff.as_ref().is_some_and(|d| d.len() > 16 << 20) {
                return Err(BadAnswer(format!("files[].diff of {} is larger than 16 MiB", f.path)));
            }
        }
        Ok(())
    }

    pub(crate) fn changed(&self) -> bool {
        self.files.iter().any(|f| f.action != Action::Unchanged)
    }

    fn of(changes: &[FileChange], with_diff: bool, run_id: Option<String>) -> WriteReport {
        WriteReport {
            run_id,
            note: None,
            run_not_undone: None,
            operator: Vec::new(),
            files: changes
                .iter()
                .map(|c| FileReport {
                    path: c.path.clone(),
                    action: c.action,
                    reason: c.reason.clone(),
                    diff: (with_diff && c.action != Action::Unchanged).then(|| diff(c)),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub(crate) version: u32,
    /// Path → sha256 of the content topo-tune last wrote.
    pub(crate) owned: BTreeMap<String, String>,
    pub(crate) runs: Vec<Run>,
    /// What topo-tune last wrote to `/etc/nccl.conf`: when the operator edits that file, only
    /// the lines topo-tune did not write are kept as theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_conf: Option<String>,
    /// The run the last `rollback` undid, until a new run is recorded: a second `rollback`
    /// then undoes nothing older unless that run is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) undone: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Run {
    pub(crate) id: String,
    pub(crate) files: Vec<RunFile>,
    /// Recorded before the first file is replaced and cleared after the last: a run found
    /// pending was interrupted, and is undone before anything else happens.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) pending: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunFile {
    pub(crate) path: String,
    /// Backup of the previous content, relative to the state dir; `None`: it did not exist.
    pub(crate) backup: Option<String>,
    /// The `owned` entry before the run (what `rollback` puts back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) owned_before: Option<String>,
    /// The file's permission bits before the run (a restored `0600` file is `0600` again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mode: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum WriteError {
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("nothing to roll back: no earlier run recorded in {0}")]
    NothingToRollBack(String),
    #[error("{path}: rollout {rollout} has a candidate staged here and measures against these files: init and rollback wait until it promotes or rolls back (`topo-tune status` shows it; `topo-tune apply --resume {rollout}` finishes an interrupted one)")]
    Staged { path: String, rollout: String },
}

impl crate::exit::Classify for WriteError {
    fn classify(&self) -> crate::exit::Class {
        use crate::exit::{self, Class};
        match self {
            WriteError::Tree(t) => t.classify(),
            WriteError::Staged { .. } => Class::new(exit::TEMP_FAILURE, "write"),
            WriteError::Invalid { .. } => {
                Class::new(exit::DATA_ERROR, "write").hint("fix or remove the named line, then run again")
            }
            WriteError::NothingToRollBack(_) => Class::new(exit::DATA_ERROR, "write"),
        }
    }
}

impl From<super::staged::StagedError> for WriteError {
    fn from(e: super::staged::StagedError) -> Self {
        match e {
            super::staged::StagedError::Tree(t) => WriteError::Tree(t),
            super::staged::StagedError::Invalid { path, message } => WriteError::Invalid { path, message },
        }
    }
}

pub(crate) use crate::model::files::MANAGED;
/// Taken by every write and rollback on a tree (`init`, `node write`, `rollback`).
pub(crate) const LOCK: &str = "/etc/nccl/topo-tune/lock";
/// How long a run waits for another to finish before it gives up, naming the holder.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(10);
/// The most a config file topo-tune reads may hold (a foreign `/etc/nccl.conf`, a drop-in),
/// and so the most it writes into one.
pub(crate) const CONF_LIMIT: u64 = crate::model::files::FILE_LIMIT;
const MANIFEST_LIMIT: u64 = 16 << 20;
/// The manifest layout this build reads and writes.
const MANIFEST_VERSION: u32 = 1;
/// Runs kept for `rollback`; older runs and their backups are pruned.
pub(crate) const MAX_RUNS: usize = 64;

pub(super) fn read_text(tree: &Tree, path: &str) -> Result<Option<String>, WriteError> {
    Ok(tree.read_text(path, CONF_LIMIT)?)
}

pub(super) fn read_manifest(tree: &Tree) -> Result<Manifest, WriteError> {
    let manifest = match tree.read_text(MANIFEST, MANIFEST_LIMIT)? {
        None => Manifest {
            version: MANIFEST_VERSION,
            ..Manifest::default()
        },
        Some(text) => {
            serde_json::from_str(&text).map_err(|e| invalid_manifest(tree, format!("not a topo-tune manifest: {e}")))?
        }
    };
    check_manifest(&manifest).map_err(|m| invalid_manifest(tree, m.0))?;
    Ok(manifest)
}

fn invalid_manifest(tree: &Tree, message: String) -> WriteError {
    WriteError::Invalid {
        path: tree.show(MANIFEST),
        message: format!("{message}: refused, nothing was changed (move the file aside to start afresh)"),
    }
}

/// Every path in the manifest is one topo-tune manages, and every backup is the one the run
/// would have made: nothing read from state reaches outside the files it owns.
fn check_manifest(m: &Manifest) -> Result<(), Refusal> {
    if m.version != MANIFEST_VERSION {
        return Err(Refusal(format!(
            "manifest version {} is not the one this topo-tune reads ({MANIFEST_VERSION})",
            m.version
        )));
    }
    let managed = |p: &str| MANAGED.contains(&p);
    let hash = |h: &str| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some((p, h)) = m.owned.iter().find(|(p, h)| !managed(p) || !hash(h)) {
        return Err(Refusal(format!(
            "`owned` names {p:?} ({h:?}), which is not a file topo-tune manages"
        )));
    }
    if let Some(id) = m.undone.as_deref().filter(|id| !run_id_ok(id)) {
        return Err(Refusal(format!("`undone` {id:?} is not a run id topo-tune makes")));
    }
    for run in &m.runs {
        if !run_id_ok(&run.id) {
            return Err(Refusal(format!("run id {:?} is not one topo-tune makes", run.id)));
        }
        for f in &run.files {
            if !managed(&f.path) {
                return Err(Refusal(format!(
                    "run {} names {:?}, which is not a file topo-tune manages",
                    run.id, f.path
                )));
            }
            let expected = format!("{BACKUPS}/{}{}", run.id, f.path);
            if f.backup.as_ref().is_some_and(|b| *b != expected) {
                return Err(Refusal(format!(
                    "run {} keeps the backup of {} at {:?}, not {expected:?}",
                    run.id, f.path, f.backup
                )));
            }
            if f.mode.is_some_and(|m| m > 0o7777) {
                return Err(Refusal(format!("run {} has a malformed mode for {}", run.id, f.path)));
            }
            if f.owned_before.as_deref().is_some_and(|h| !hash(h)) {
                return Err(Refusal(format!("run {} has a malformed hash for {}", run.id, f.path)));
            }
        }
    }
    Ok(())
}

pub(crate) use crate::model::files::run_id_ok;

fn write_manifest(tree: &Tree, manifest: &Manifest) -> Result<(), WriteError> {
    let text = serde_json::to_string_pretty(manifest).map_err(|e| WriteError::Invalid {
        path: tree.show(MANIFEST),
        message: format!("cannot serialise the manifest: {e}"),
    })? + "\n";
    tree.write(MANIFEST, text.as_bytes(), 0o644)?;
    Ok(())
}

/// A change from what a file holds (`before`) to what it should hold.
fn change(path: &str, before: Option<String>, after: String, reason: &str) -> FileChange {
    let action = match &before {
        None => Action::Create,
        Some(b) if *b == after => Action::Unchanged,
        Some(_) => Action::Update,
    };
    FileChange {
        path: path.into(),
        action,
        reason: reason.into(),
        before,
        after: Some(after),
    }
}

/// Write (or, with `check`, only report) a bundle under `root`; diffs when asked. A write
/// holds the tree's lock, and first undoes a run that was interrupted. The run is recorded
/// under `run_id` when the caller names it (a rollout's wave), else under a fresh one.
pub(crate) fn write_bundle(
    root: &Path,
    bundle: &Bundle,
    check: bool,
    with_diff: bool,
    run_id: Option<&str>,
) -> Result<WriteReport, WriteError> {
    let tree = Tree::open(root)?;
    if let Some(id) = run_id.filter(|id| !run_id_ok(id)) {
        return Err(WriteError::Invalid {
            path: tree.show(MANIFEST),
            message: format!(
                "run id {:?} is not one topo-tune makes",
                id.escape_default().to_string()
            ),
        });
    }
    if check {
        let manifest = read_manifest(&tree)?;
        if let Some(run) = manifest.runs.last().filter(|r| r.pending) {
            return Err(WriteError::Invalid {
                path: tree.show(MANIFEST),
                message: format!(
                    "run {} was interrupted: `topo-tune init` (or `rollback`) undoes it first; --check cannot say what would change before that",
                    run.id
                ),
            });
        }
        let mut report = WriteReport::of(&changes_with(&tree, &manifest, bundle)?, with_diff, None);
        report.operator = operator_files(&tree, &manifest)?;
        return Ok(report);
    }
    let _lock = tree.lock(LOCK, LOCK_WAIT)?;
    tidy(&tree)?;
    not_staged_for_another(&tree, run_id)?;
    let mut manifest = read_manifest(&tree)?;
    recover(&tree, &mut manifest)?;
    let changes = changes_with(&tree, &manifest, bundle)?;
    install_plugin(&tree, bundle)?;
    let id = run_id.map_or_else(self::run_id, str::to_string);
    let applied = apply(&tree, &mut manifest, changes, &id)?;
    let recorded = applied.iter().any(|c| c.action != Action::Unchanged).then_some(id);
    if let Some(id) = &recorded {
        tracing::info!(root = %root.display(), run = id, "files written");
    }
    let mut report = WriteReport::of(&applied, with_diff, recorded);
    report.operator = operator_files(&tree, &manifest)?;
    Ok(report)
}

/// The plugin a tuning's drop-in names, at its content-addressed path (written once: a file
/// already there with these bytes is left; the copy verifies against its sha256 first).
pub(crate) fn install_plugin(tree: &Tree, bundle: &Bundle) -> Result<(), WriteError> {
    let Some(copy) = bundle.tuner.as_ref().and_then(|t| t.plugin.as_ref()) else {
        return Ok(());
    };
    let path = plugin_path(&copy.sha256);
    let bytes = copy.bytes().map_err(|e| WriteError::Invalid {
        path: tree.show(&path),
        message: e.0,
    })?;
    tree.write(&path, &bytes, 0o755)?;
    Ok(())
}

/// Temp files a killed run left (under the lock no other writer of this tree is running).
fn tidy(tree: &Tree) -> Result<(), WriteError> {
    for dir in [DROPIN_DIR, STATE_DIR] {
        tree.remove_stale_temps(dir);
    }
    for name in tree.list("/etc")? {
        if name.starts_with(".nccl.conf.topo-tune.") && name.ends_with(".tmp") {
            tree.remove(&format!("/etc/{name}"))?;
        }
    }
    Ok(())
}

/// While a rollout has a candidate staged here, it measures the live files against it: only
/// that rollout's own runs (its promotion, its rollback) may change them.
fn not_staged_for_another(tree: &Tree, run_id: Option<&str>) -> Result<(), WriteError> {
    match super::staged::read(tree)? {
        Some(rec) if !run_id.is_some_and(|id| super::staged::belongs(id, &rec.rollout)) => Err(WriteError::Staged {
            path: tree.show(STAGE_DIR),
            rollout: rec.rollout,
        }),
        _ => Ok(()),
    }
}

/// Whether the files under `root` are settled for NCCL `version`: the bundle they hold (the
/// drop-in, the topology file topo-tune owns) written again would change nothing. Reads only;
/// no lock (a run in flight is recorded as pending first, and a pending run is never settled).
/// `None` when a write would do something, when topo-tune never wrote here, or on any error
/// (the write then runs and reports it).
pub(crate) fn settled(root: &Path, version: Option<NcclVersion>) -> Option<Settled> {
    let tree = Tree::open(root).ok()?;
    let manifest = read_manifest(&tree).ok()?;
    if manifest.runs.last().is_some_and(|r| r.pending) {
        return None;
    }
    let topology_xml = match manifest.owned.contains_key(TOPOLOGY) {
        true => read_text(&tree, TOPOLOGY).ok()?,
        false => None,
    };
    let dropin = read_text(&tree, DROPIN).ok()??;
    let tuner = match manifest.owned.contains_key(TUNER_CSV) {
        true => Some(Tuner {
            csv: read_text(&tree, TUNER_CSV).ok()??,
            plugin: None,
        }),
        false => None,
    };
    // A drop-in naming a plugin that is gone is not settled: the write puts it back.
    let plugin_gone = parse(&dropin)
        .iter()
        .find(|(name, _)| name == "NCCL_TUNER_PLUGIN")
        .is_some_and(|(_, value)| {
            value.starts_with(crate::model::files::PLUGIN_DIR) && !matches!(tree.mode(value), Ok(Some(_)))
        });
    if plugin_gone {
        return None;
    }
    let bundle = Bundle {
        dropin,
        topology_xml,
        nccl_version: version,
        tuner,
    };
    let changes = changes_with(&tree, &manifest, &bundle).ok()?;
    if changes.iter().any(|c| c.action != Action::Unchanged) {
        return None;
    }
    Some(Settled {
        fingerprint: bundle.fingerprint(),
        files: WriteReport::of(&changes, false, None).files,
        operator: operator_files(&tree, &manifest).ok()?,
    })
}

/// Work out every change the bundle implies, reading the node's current files. Writes nothing.
pub(super) fn changes_with(tree: &Tree, manifest: &Manifest, bundle: &Bundle) -> Result<Vec<FileChange>, WriteError> {
    let mut out = Vec::new();
    let current_conf = read_text(tree, NCCL_CONF)?;
    let mut preserved = read_text(tree, PRESERVED)?;
    if let Some(kept) = foreign_conf(
        &tree.show(NCCL_CONF),
        current_conf.as_deref(),
        manifest,
        preserved.as_deref(),
        bundle.nccl_version,
    )? {
        out.push(change(
            PRESERVED,
            preserved.clone(),
            kept.clone(),
            "the existing /etc/nccl.conf holds lines topo-tune did not write: kept as the first drop-in",
        ));
        preserved = Some(kept);
    }
    out.push(change(
        DROPIN,
        read_text(tree, DROPIN)?,
        bundle.dropin.clone(),
        "topo-tune's settings (`topo-tune init --check` shows why each is set or left out)",
    ));
    let assembled = assembled_conf(tree, bundle, preserved)?;
    out.push(change(
        NCCL_CONF,
        current_conf,
        assembled.clone(),
        "assembled from /etc/nccl/conf.d in lexical order",
    ));
    out.extend(topology_change(tree, bundle, manifest)?);
    out.extend(tuner_change(tree, bundle, manifest)?);
    out.push(change(
        ENV_FILE,
        read_text(tree, ENV_FILE)?,
        env_file(&parse(&assembled)),
        "the same settings for containers (docker --env-file), which never see /etc/nccl.conf",
    ));
    // What rollback, status and the next init could not read back is never written.
    if let Some(c) = out
        .iter()
        .find(|c| c.after.as_ref().is_some_and(|a| a.len() as u64 > CONF_LIMIT))
    {
        return Err(WriteError::Invalid {
            path: tree.show(&c.path),
            message: format!(
                "{} bytes, larger than the {} topo-tune reads back of a file (rollback, status and the next init would refuse it): refused, nothing was changed",
                c.after.as_ref().map_or(0, String::len),
                format_args!("{} MiB", CONF_LIMIT >> 20)
            ),
        });
    }
    Ok(out)
}

/// The operator's part of `/etc/nccl.conf`, to keep as the first drop-in, line for line
/// (comments too), every setting validated. A file topo-tune did not write is theirs
/// entirely; a file it wrote and the operator edited since adds to what was kept before only
/// the lines topo-tune did not write. `None`: nothing of theirs to keep.
pub(crate) fn foreign_conf(
    shown: &str,
    conf: Option<&str>,
    manifest: &Manifest,
    preserved: Option<&str>,
    version: Option<NcclVersion>,
) -> Result<Option<String>, WriteError> {
    let Some(conf) = conf else { return Ok(None) };
    let owned = manifest.owned.get(NCCL_CONF);
    if owned == Some(&sha256_hex(conf.as_bytes())) {
        return Ok(None);
    }
    // Lines topo-tune wrote last time, by count (a multiset).
    let mut ours: HashMap<&str, usize> = HashMap::new();
    let edited = owned.is_some() && manifest.last_conf.is_some();
    if edited {
        for line in manifest.last_conf.as_deref().unwrap_or_default().split('\n') {
            *ours.entry(line).or_default() += 1;
        }
    }
    let mut text = if edited {
        preserved.unwrap_or_default().to_string()
    } else {
        String::new()
    };
    let mut added = false;
    let body = conf.strip_suffix('\n').unwrap_or(conf);
    for (i, line) in body.split('\n').enumerate() {
        if let Some(n) = ours.get_mut(line).filter(|n| **n > 0) {
            *n -= 1;
            continue;
        }
        if !line.starts_with('#') && line.contains('=') {
            let (n, v) = line.split_once('=').unwrap_or((line, ""));
            crate::nccl::table::validate(n, v, version).map_err(|r| WriteError::Invalid {
                path: format!("{shown}:{}", i + 1),
                message: format!(
                    "cannot be kept as it is: {} (fix or remove the line; nothing was changed)",
                    r.reason
                ),
            })?;
        }
        text.push_str(line);
        text.push('\n');
        added = true;
    }
    Ok((added || !edited).then_some(text))
}

/// The settings of the operator's own NCCL files, each file with its settings: the drop-ins
/// in /etc/nccl/conf.d topo-tune did not write, and the preserved /etc/nccl.conf (or the live
/// one, when topo-tune has not written it). Reads only.
fn operator_files(tree: &Tree, manifest: &Manifest) -> Result<Vec<OperatorFile>, WriteError> {
    let mut out = Vec::new();
    for name in tree.list(DROPIN_DIR)? {
        if name.ends_with(".conf") && !name.starts_with('.') && name != DROPIN_NAME {
            let path = format!("{DROPIN_DIR}/{name}");
            if let Some(text) = read_text(tree, &path)? {
                out.push(OperatorFile {
                    path,
                    settings: parse(&text),
                });
            }
        }
    }
    if !manifest.owned.contains_key(NCCL_CONF) {
        if let Some(text) = read_text(tree, NCCL_CONF)? {
            out.push(OperatorFile {
                path: NCCL_CONF.to_string(),
                settings: parse(&text),
            });
        }
    }
    out.truncate(MAX_OPERATOR_FILES);
    for f in &mut out {
        f.settings.truncate(MAX_OPERATOR_SETTINGS);
    }
    Ok(out)
}

/// `/etc/nccl.conf` as conf.d will assemble it once the bundle is written.
fn assembled_conf(tree: &Tree, bundle: &Bundle, preserved: Option<String>) -> Result<String, WriteError> {
    let mut dropins: Vec<(String, String)> = Vec::new();
    for name in tree.list(DROPIN_DIR)? {
        if name.ends_with(".conf") && !name.starts_with('.') && name != DROPIN_NAME && name != PRESERVED_NAME {
            if let Some(text) = read_text(tree, &format!("{DROPIN_DIR}/{name}"))? {
                dropins.push((name, text));
            }
        }
    }
    dropins.push((DROPIN_NAME.into(), bundle.dropin.clone()));
    if let Some(p) = preserved {
        dropins.push((PRESERVED_NAME.into(), p));
    }
    let (assembled, _) = assemble(&dropins, bundle.nccl_version, HEADER).map_err(|r| WriteError::Invalid {
        path: tree.show(DROPIN_DIR),
        message: r.to_string(),
    })?;
    Ok(assembled)
}

/// The topology file: written when the bundle has one, removed when topo-tune wrote it and
/// no rule asks for it any more.
fn topology_change(tree: &Tree, bundle: &Bundle, manifest: &Manifest) -> Result<Option<FileChange>, WriteError> {
    let before = read_text(tree, TOPOLOGY)?;
    Ok(match (&bundle.topology_xml, before) {
        (Some(xml), before) => Some(change(TOPOLOGY, before, xml.clone(), "NCCL_TOPO_FILE names it")),
        (None, Some(before)) if manifest.owned.contains_key(TOPOLOGY) => Some(FileChange {
            path: TOPOLOGY.into(),
            action: Action::Remove,
            reason: "no rule asks for a topology file any more".into(),
            before: Some(before),
            after: None,
        }),
        (None, _) => None,
    })
}

/// The tuning's rules file: written when the bundle has one, removed when topo-tune wrote it
/// and the bundle has none any more.
fn tuner_change(tree: &Tree, bundle: &Bundle, manifest: &Manifest) -> Result<Option<FileChange>, WriteError> {
    if let Some(Err(e)) = bundle
        .tuner
        .as_ref()
        .map(|t| nccl_tuner_topo_tune::rules::parse_strict(t.csv.as_bytes()))
    {
        return Err(WriteError::Invalid {
            path: tree.show(TUNER_CSV),
            message: format!("{e}: not a rules file the plugin reads whole; nothing was changed"),
        });
    }
    let before = read_text(tree, TUNER_CSV)?;
    Ok(match (&bundle.tuner, before) {
        (Some(t), before) => Some(change(
            TUNER_CSV,
            before,
            t.csv.clone(),
            "the tuning's rules (NCCL_TUNER_CONFIG_FILE names it; topo-tune tune measured them)",
        )),
        (None, Some(before)) if manifest.owned.contains_key(TUNER_CSV) => Some(FileChange {
            path: TUNER_CSV.into(),
            action: Action::Remove,
            reason: "no tuning is rolled out any more".into(),
            before: Some(before),
            after: None,
        }),
        (None, _) => None,
    })
}

/// Apply changes: back up what is replaced, record the run as pending (the intent), replace
/// the files, then mark the run done. A kill at any point leaves a state `recover` undoes.
/// Returns the changes with their actions (all `Unchanged`: nothing was touched, not even
/// the manifest).
fn apply(
    tree: &Tree,
    manifest: &mut Manifest,
    changes: Vec<FileChange>,
    run_id: &str,
) -> Result<Vec<FileChange>, WriteError> {
    if changes.iter().all(|c| c.action == Action::Unchanged) {
        return Ok(changes);
    }
    let mut run = Run {
        id: run_id.to_string(),
        files: Vec::new(),
        pending: true,
    };
    for c in changes.iter().filter(|c| c.action != Action::Unchanged) {
        let backup = match &c.before {
            Some(before) => {
                let rel = format!("{BACKUPS}/{run_id}{}", c.path);
                tree.write(&format!("{STATE_DIR}/{rel}"), before.as_bytes(), 0o600)?;
                Some(rel)
            }
            None => None,
        };
        run.files.push(RunFile {
            path: c.path.clone(),
            mode: c.before.as_ref().map(|_| tree.mode(&c.path)).transpose()?.flatten(),
            backup,
            owned_before: manifest.owned.get(&c.path).cloned(),
        });
    }
    manifest.runs.push(run);
    manifest.undone = None;
    write_manifest(tree, manifest)?;
    for c in changes.iter().filter(|c| c.action != Action::Unchanged) {
        match &c.after {
            Some(after) => {
                tree.write(&c.path, after.as_bytes(), 0o644)?;
                manifest.owned.insert(c.path.clone(), sha256_hex(after.as_bytes()));
                if c.path == NCCL_CONF {
                    manifest.last_conf = Some(after.clone());
                }
            }
            None => {
                tree.remove(&c.path)?;
                manifest.owned.remove(&c.path);
            }
        }
    }
    if let Some(run) = manifest.runs.last_mut() {
        run.pending = false;
    }
    prune(tree, manifest);
    write_manifest(tree, manifest)?;
    Ok(changes)
}

/// Keep the last [`MAX_RUNS`] runs; drop the backups of older ones.
fn prune(tree: &Tree, manifest: &mut Manifest) {
    while manifest.runs.len() > MAX_RUNS {
        let old = manifest.runs.remove(0);
        for f in old.files.iter().filter_map(|f| f.backup.as_ref()) {
            let _ = tree.remove(&format!("{STATE_DIR}/{f}"));
        }
    }
}

/// A run recorded as pending was interrupted: undo it (restore its backups, remove what it
/// created) so the tree is as that run found it. Idempotent: a kill during recovery is
/// recovered by the next run. Returns the undone run.
fn recover(tree: &Tree, manifest: &mut Manifest) -> Result<Option<(Run, Vec<FileChange>)>, WriteError> {
    if !manifest.runs.last().is_some_and(|r| r.pending) {
        return Ok(None);
    }
    let Some(run) = manifest.runs.pop() else {
        return Ok(None);
    };
    let undone = undo_run(tree, manifest, &run)?;
    write_manifest(tree, manifest)?;
    Ok(Some((run, undone)))
}

fn undo_run(tree: &Tree, manifest: &mut Manifest, run: &Run) -> Result<Vec<FileChange>, WriteError> {
    check_backups(tree, run)?;
    run.files.iter().rev().map(|f| undo(tree, manifest, f)).collect()
}

/// Before anything of a run is undone, its record must agree with the disk: a file it says
/// did not exist has no backup (undoing it deletes the file), and a file it backed up has
/// its backup. A manifest that says otherwise is refused with nothing changed.
fn check_backups(tree: &Tree, run: &Run) -> Result<(), WriteError> {
    for f in &run.files {
        let expected = format!("{STATE_DIR}/{BACKUPS}/{}{}", run.id, f.path);
        let present = tree.read(&expected, CONF_LIMIT)?.is_some();
        let lie = match &f.backup {
            None if present => Some(format!(
                "run {} says {} did not exist before it, but its backup is there: undoing it would delete the file",
                run.id, f.path
            )),
            Some(_) if !present => Some(format!(
                "run {} lost the backup of {}: cannot restore it",
                run.id, f.path
            )),
            _ => None,
        };
        if let Some(message) = lie {
            return Err(invalid_manifest(tree, message));
        }
    }
    Ok(())
}

/// Why `rollback --run ID` undid nothing on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RunNotUndone {
    /// The node holds the run under a newer one: it is left there.
    Left,
    /// The node never ran it.
    Absent,
}

/// Undo the last recorded run: restore its backups, remove the files it created. With
/// `only`, undo it only when it is that run (a rollout undoing its own wave): otherwise
/// nothing is touched and the report names no run.
pub(crate) fn rollback(root_dir: &Path, only: Option<&str>) -> Result<WriteReport, WriteError> {
    let tree = Tree::open(root_dir)?;
    let _lock = tree.lock(LOCK, LOCK_WAIT)?;
    tidy(&tree)?;
    not_staged_for_another(&tree, only)?;
    let mut manifest = read_manifest(&tree)?;
    let last = manifest.runs.last().map(|r| r.id.clone());
    match (only, &manifest.undone, &last) {
        (Some(id), _, last) if last.as_deref() != Some(id) => {
            let recorded = manifest.runs.iter().any(|r| r.id == id);
            let (why, note) = match last {
                Some(l) if recorded => (
                    RunNotUndone::Left,
                    format!(
                        "not undone: run {id} is recorded here under a newer run ({l}): runs are undone newest first"
                    ),
                ),
                _ => (RunNotUndone::Absent, format!("not here: run {id} is not recorded here")),
            };
            return Ok(WriteReport {
                note: Some(note),
                run_not_undone: Some(why),
                ..WriteReport::default()
            });
        }
        // A plain rollback undoes the last run once; an older one only when named.
        (None, Some(undone), Some(older)) if !manifest.runs.last().is_some_and(|r| r.pending) => {
            return Ok(WriteReport {
                note: Some(format!(
                    "nothing newer to undo: run {undone} was rolled back already; to undo the run before it too: topo-tune rollback --run {older}"
                )),
                ..WriteReport::default()
            });
        }
        (None, Some(undone), None) => {
            return Ok(WriteReport {
                note: Some(format!(
                    "nothing newer to undo: run {undone} was rolled back already, and no run before it is recorded"
                )),
                ..WriteReport::default()
            });
        }
        _ => {}
    }
    let run = manifest
        .runs
        .pop()
        .ok_or_else(|| WriteError::NothingToRollBack(tree.show(MANIFEST)))?;
    manifest.undone = Some(run.id.clone());
    let mut out = undo_run(&tree, &mut manifest, &run)?;
    tracing::info!(root = %root_dir.display(), run = run.id, "run undone");
    if run.pending {
        for c in &mut out {
            c.reason = format!("{} (run {} was interrupted)", c.reason, run.id);
        }
    }
    write_manifest(&tree, &manifest)?;
    Ok(WriteReport::of(&out, false, Some(run.id)))
}

/// Put one file back as the run found it, and its ownership as it was.
fn undo(tree: &Tree, manifest: &mut Manifest, f: &RunFile) -> Result<FileChange, WriteError> {
    let current = read_text(tree, &f.path)?;
    match &f.owned_before {
        Some(h) => manifest.owned.insert(f.path.clone(), h.clone()),
        None => manifest.owned.remove(&f.path),
    };
    let Some(rel) = &f.backup else {
        tree.remove(&f.path)?;
        if f.path == NCCL_CONF {
            manifest.last_conf = None;
        }
        return Ok(FileChange {
            path: f.path.clone(),
            action: Action::Remove,
            reason: "did not exist before that run".into(),
            before: current,
            after: None,
        });
    };
    let kernel = format!("{STATE_DIR}/{rel}");
    let before = read_text(tree, &kernel)?.ok_or_else(|| WriteError::Invalid {
        path: tree.show(&kernel),
        message: "backup missing: cannot restore".into(),
    })?;
    let mode = f.mode.unwrap_or(0o644);
    let changed = tree.write(&f.path, before.as_bytes(), mode)? | tree.set_mode(&f.path, mode)?;
    if f.path == NCCL_CONF {
        // The file was topo-tune's before that run: what it restores is what topo-tune wrote.
        manifest.last_conf = f.owned_before.as_ref().map(|_| before.clone());
    }
    Ok(FileChange {
        path: f.path.clone(),
        action: if changed { Action::Update } else { Action::Unchanged },
        reason: format!("restored from {}", tree.show(&kernel)),
        before: current,
        after: Some(before),
    })
}

/// Unified diff of one change (`--diff` only), given up after a few seconds (then a
/// whole-file replacement is shown).
pub(crate) fn diff(c: &FileChange) -> String {
    let before = c.before.as_deref().unwrap_or("");
    let after = c.after.as_deref().unwrap_or("");
    similar::TextDiff::configure()
        .timeout(Duration::from_secs(5))
        .diff_lines(before, after)
        .unified_diff()
        .header(&format!("a{}", c.path), &format!("b{}", c.path))
        .to_string()
}

/// A run id from the clock: `20261129T110500Z-PID`.
pub(crate) fn run_id() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z-{}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Option<NcclVersion> = Some(NcclVersion(2, 28, 9));

    fn bundle(timeout: u32) -> Bundle {
        Bundle {
            dropin: format!("# topo-tune\nNCCL_IB_TIMEOUT={timeout}\n"),
            topology_xml: None,
            nccl_version: V,
            tuner: None,
        }
    }

    /// A tuning rolled out: its rules file is owned (settled, rolled back, removed when the
    /// bundle no longer has one), its plugin written once at its content-addressed path and
    /// left by a rollback; a node whose plugin is gone is not settled.
    #[test]
    fn a_tunings_rules_file_is_owned_and_its_plugin_content_addressed() {
        let dir = site();
        let plugin = super::super::plugin::PluginCopy::of(b"\x7fELF plugin");
        let so = plugin_path(&plugin.sha256);
        let mut b = bundle(20);
        b.dropin
            .push_str(&format!("NCCL_TUNER_CONFIG_FILE={TUNER_CSV}\nNCCL_TUNER_PLUGIN={so}\n"));
        b.tuner = Some(Tuner {
            csv: "allreduce,0,4096,ring,ll,-1,-1,-1\n".into(),
            plugin: Some(plugin),
        });
        let r = write_bundle(dir.path(), &b, false, false, None).unwrap();
        assert!(
            r.files
                .iter()
                .any(|f| f.path == TUNER_CSV && f.action == Action::Create),
            "{r:?}"
        );
        let at = |p: &str| dir.path().join(p.trim_start_matches('/'));
        assert_eq!(std::fs::read(at(&so)).unwrap(), b"\x7fELF plugin");
        assert!(settled(dir.path(), V).is_some_and(|s| s.report_for(&b).is_some()));
        std::fs::remove_file(at(&so)).unwrap();
        assert!(settled(dir.path(), V).is_none(), "the plugin the drop-in names is gone");
        write_bundle(dir.path(), &b, false, false, None).unwrap();
        assert!(at(&so).exists(), "put back");
        // Rolled back: the rules file goes, the plugin stays.
        rollback(dir.path(), None).unwrap();
        assert!(!at(TUNER_CSV).exists());
        assert!(at(&so).exists());
        // A rules file the plugin would not read whole is refused before anything is written.
        let mut warp = b.clone();
        if let Some(t) = warp.tuner.as_mut() {
            t.csv = "allreduce,0,1,warp,ll,-1,-1,-1\n".into();
        }
        assert!(write_bundle(dir.path(), &warp, false, false, None).is_err());
        assert!(!at(TUNER_CSV).exists());
        // A tampered copy is refused before anything is written.
        let mut bad = b.clone();
        if let Some(t) = bad.tuner.as_mut() {
            t.plugin.as_mut().unwrap().sha256 = "0".repeat(64);
        }
        assert!(write_bundle(dir.path(), &bad, false, false, None).is_err());
        assert!(!at(TUNER_CSV).exists());
    }

    fn site() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        dir
    }

    #[test]
    fn a_written_tree_is_settled_on_exactly_the_bundle_it_holds() {
        let dir = site();
        assert_eq!(settled(dir.path(), V), None, "topo-tune never wrote here");
        write_bundle(dir.path(), &bundle(22), false, false, None).unwrap();
        let s = settled(dir.path(), V).expect("a written tree is settled");
        s.check().unwrap();
        let report = s.report_for(&bundle(22)).expect("the same bundle: nothing to write");
        assert!(!report.changed());
        // The report is the one a real second write gives.
        let again = write_bundle(dir.path(), &bundle(22), false, false, None).unwrap();
        assert_eq!(report, again);
        assert_eq!(s.report_for(&bundle(23)), None, "another setting");
        let other_version = Bundle {
            nccl_version: Some(NcclVersion(2, 27, 3)),
            ..bundle(22)
        };
        assert_eq!(s.report_for(&other_version), None, "another NCCL version");
        let with_topology = Bundle {
            topology_xml: Some("<system version=\"1\"/>\n".into()),
            ..bundle(22)
        };
        assert_eq!(s.report_for(&with_topology), None, "a topology file to add");
    }

    #[test]
    fn anything_a_write_would_change_unsettles_the_tree() {
        let dir = site();
        write_bundle(dir.path(), &bundle(22), false, false, None).unwrap();
        let root = dir.path();
        // Another drop-in changes what /etc/nccl.conf assembles to.
        std::fs::write(root.join("etc/nccl/conf.d/60-site.conf"), "NCCL_DEBUG=WARN\n").unwrap();
        assert_eq!(settled(root, V), None, "a new drop-in");
        write_bundle(root, &bundle(22), false, false, None).unwrap();
        assert!(settled(root, V).is_some());
        // The operator edits the assembled file.
        let conf = root.join("etc/nccl.conf");
        let text = std::fs::read_to_string(&conf).unwrap();
        std::fs::write(&conf, text + "NCCL_IB_TC=106\n").unwrap();
        assert_eq!(settled(root, V), None, "an edited /etc/nccl.conf");
        write_bundle(root, &bundle(22), false, false, None).unwrap();
        // The env file is gone.
        std::fs::remove_file(root.join(ENV_FILE.trim_start_matches('/'))).unwrap();
        assert_eq!(settled(root, V), None, "a missing env file");
        write_bundle(root, &bundle(22), false, false, None).unwrap();
        assert!(settled(root, V).is_some());
        // An interrupted run is never settled: the next write undoes it first.
        let manifest_path = root.join(MANIFEST.trim_start_matches('/'));
        let mut m: Manifest = serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
        m.runs.last_mut().unwrap().pending = true;
        std::fs::write(&manifest_path, serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(settled(root, V), None, "a pending run");
    }

    #[test]
    fn a_settled_answer_that_names_a_change_or_a_foreign_path_is_refused() {
        let dir = site();
        write_bundle(dir.path(), &bundle(22), false, false, None).unwrap();
        let good = settled(dir.path(), V).unwrap();
        let mut changed = good.clone();
        changed.files[0].action = Action::Update;
        assert!(changed.check().is_err());
        let mut foreign = good.clone();
        foreign.files[0].path = "/etc/passwd".into();
        assert!(foreign.check().is_err());
        let mut short = good;
        short.fingerprint.truncate(10);
        assert!(short.check().is_err());
    }
}
