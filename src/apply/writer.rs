//! The node-side writer: what topo-tune owns under `/etc`, written safely (paths in
//! `model::files`).
//!
//! - the drop-in `/etc/nccl/conf.d/50-topo-tune.conf`: topo-tune's settings;
//! - `/etc/nccl/conf.d/00-preserved-nccl.conf`: a `/etc/nccl.conf` topo-tune did not write,
//!   kept as the earliest drop-in (so topo-tune's values win, and nothing is lost);
//! - `/etc/nccl.conf`: assembled from every `conf.d/*.conf` in lexical order (later wins,
//!   each key once), validated line by line;
//! - `/etc/nccl/topo-tune/topology.xml` (when a rule asks) and `nccl.env` (for containers);
//! - `/etc/nccl/topo-tune/manifest.json`: what topo-tune owns (sha256) and every run's
//!   backups under `/etc/nccl/topo-tune/backups/<run>/`, for `rollback`.
//!
//! Every write is temp + fsync + rename, only when content differs; a second identical run
//! changes nothing. All paths live under `root` (`/`, or `DIR/<host>` for `--output-dir`).

use super::atomic::{remove, remove_stale_temps, write_if_changed};
use crate::digest::sha256_hex;
use crate::model::files::{
    BACKUPS, DROPIN, DROPIN_DIR, DROPIN_NAME, ENV_FILE, MANIFEST, NCCL_CONF, PRESERVED, PRESERVED_NAME, STATE_DIR,
    TOPOLOGY,
};
use crate::model::plan::NcclClass;
use crate::model::NcclVersion;
use crate::nccl::conf::{assemble, env_file, parse, render};
use crate::nccl::table::Rejection;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const HEADER: &str = "managed by topo-tune: edit /etc/nccl/conf.d/*.conf, not this file";

/// What topo-tune wants on one node (sent to the node as JSON for remote writes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bundle {
    pub dropin: String,
    pub topology_xml: Option<String>,
    pub nccl_version: Option<NcclVersion>,
}

impl Bundle {
    /// The files a plan's NCCL class gives each of its nodes.
    pub fn of(class: &NcclClass) -> Result<Bundle, Rejection> {
        let header = format!(
            "topo-tune {}: one line per setting; `topo-tune plan --output json` shows each reason",
            env!("CARGO_PKG_VERSION")
        );
        Ok(Bundle {
            dropin: render(&class.settings, class.nccl_version, &header)?,
            topology_xml: class.topology_xml.clone(),
            nccl_version: class.nccl_version,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Create,
    Update,
    Unchanged,
    Remove,
}

/// One file's change, with the contents on both sides (for the diff and the backup).
#[derive(Debug, Clone, PartialEq)]
pub struct FileChange {
    pub path: String,
    pub action: Action,
    pub reason: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// What the node reports for one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileReport {
    pub path: String,
    pub action: Action,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// What the node reports for one write, check or rollback.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WriteReport {
    /// The run recorded in the manifest (none when nothing changed or for `--check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub files: Vec<FileReport>,
}

impl WriteReport {
    pub fn changed(&self) -> bool {
        self.files.iter().any(|f| f.action != Action::Unchanged)
    }

    fn of(changes: &[FileChange], with_diff: bool, run_id: Option<String>) -> WriteReport {
        WriteReport {
            run_id,
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
pub struct Manifest {
    pub version: u32,
    /// Path → sha256 of the content topo-tune last wrote.
    pub owned: BTreeMap<String, String>,
    pub runs: Vec<Run>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub id: String,
    pub files: Vec<RunFile>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunFile {
    pub path: String,
    /// Backup of the previous content, relative to the state dir; `None`: it did not exist.
    pub backup: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("nothing to roll back: no earlier run recorded in {0}")]
    NothingToRollBack(String),
}

struct Root<'a>(&'a Path);

impl Root<'_> {
    fn p(&self, kernel: &str) -> PathBuf {
        self.0.join(kernel.trim_start_matches('/'))
    }
    fn read(&self, kernel: &str) -> Result<Option<String>, WriteError> {
        match std::fs::read_to_string(self.p(kernel)) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(WriteError::Io {
                path: kernel.into(),
                source: e,
            }),
        }
    }
    fn write(&self, kernel: &str, text: &str, mode: u32) -> Result<bool, WriteError> {
        write_if_changed(&self.p(kernel), text.as_bytes(), mode).map_err(|e| WriteError::Io {
            path: kernel.into(),
            source: e,
        })
    }
    fn remove(&self, kernel: &str) -> Result<bool, WriteError> {
        remove(&self.p(kernel)).map_err(|e| WriteError::Io {
            path: kernel.into(),
            source: e,
        })
    }
}

fn read_manifest(root: &Root) -> Result<Manifest, WriteError> {
    match root.read(MANIFEST)? {
        None => Ok(Manifest {
            version: 1,
            ..Manifest::default()
        }),
        Some(text) => serde_json::from_str(&text).map_err(|e| WriteError::Invalid {
            path: MANIFEST.into(),
            message: format!("not a topo-tune manifest: {e}"),
        }),
    }
}

fn write_manifest(root: &Root, manifest: &Manifest) -> Result<(), WriteError> {
    let text = serde_json::to_string_pretty(manifest).map_err(|e| WriteError::Invalid {
        path: MANIFEST.into(),
        message: format!("cannot serialise the manifest: {e}"),
    })? + "\n";
    root.write(MANIFEST, &text, 0o644).map(|_| ())
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

/// Write (or, with `check`, only report) a bundle under `root`; diffs when asked.
pub fn write_bundle(root: &Path, bundle: &Bundle, check: bool, with_diff: bool) -> Result<WriteReport, WriteError> {
    let changes = changes(root, bundle)?;
    if check {
        return Ok(WriteReport::of(&changes, with_diff, None));
    }
    let id = run_id();
    let applied = apply(root, changes, &id)?;
    let recorded = applied.iter().any(|c| c.action != Action::Unchanged).then_some(id);
    Ok(WriteReport::of(&applied, with_diff, recorded))
}

/// Work out every change the bundle implies, reading the node's current files. Writes nothing.
pub fn changes(root_dir: &Path, bundle: &Bundle) -> Result<Vec<FileChange>, WriteError> {
    let root = Root(root_dir);
    let manifest = read_manifest(&root)?;
    let mut out = Vec::new();
    let current_conf = root.read(NCCL_CONF)?;
    let mut preserved = root.read(PRESERVED)?;
    if let Some(kept) = foreign_conf(current_conf.as_deref(), &manifest, bundle.nccl_version)? {
        out.push(change(
            PRESERVED,
            preserved.clone(),
            kept.clone(),
            "the existing /etc/nccl.conf was not written by topo-tune: kept as the first drop-in",
        ));
        preserved = Some(kept);
    }
    out.push(change(
        DROPIN,
        root.read(DROPIN)?,
        bundle.dropin.clone(),
        "topo-tune's settings (`topo-tune plan --output json` shows each reason)",
    ));
    let assembled = assembled_conf(&root, bundle, preserved)?;
    out.push(change(
        NCCL_CONF,
        current_conf,
        assembled.clone(),
        "assembled from /etc/nccl/conf.d in lexical order",
    ));
    out.extend(topology_change(&root, bundle, &manifest)?);
    out.push(change(
        ENV_FILE,
        root.read(ENV_FILE)?,
        env_file(&parse(&assembled)),
        "the same settings for containers (docker --env-file), which never see /etc/nccl.conf",
    ));
    Ok(out)
}

/// A `/etc/nccl.conf` topo-tune did not write (or that was edited since): its settings, each
/// validated, to keep as a drop-in. `None` when the file is topo-tune's own or absent.
fn foreign_conf(
    conf: Option<&str>,
    manifest: &Manifest,
    version: Option<NcclVersion>,
) -> Result<Option<String>, WriteError> {
    let Some(conf) = conf else { return Ok(None) };
    if manifest.owned.get(NCCL_CONF) == Some(&sha256_hex(conf.as_bytes())) {
        return Ok(None);
    }
    let mut text = String::new();
    for (i, line) in conf.split('\n').enumerate() {
        if line.starts_with('#') || !line.contains('=') {
            continue;
        }
        let (n, v) = line.split_once('=').unwrap_or((line, ""));
        crate::nccl::table::validate(n, v, version).map_err(|r| WriteError::Invalid {
            path: format!("{NCCL_CONF}:{}", i + 1),
            message: format!(
                "cannot be kept as it is: {} (fix or remove the line; nothing was changed)",
                r.reason
            ),
        })?;
        text.push_str(line);
        text.push('\n');
    }
    Ok(Some(text))
}

/// `/etc/nccl.conf` as conf.d will assemble it once the bundle is written.
fn assembled_conf(root: &Root, bundle: &Bundle, preserved: Option<String>) -> Result<String, WriteError> {
    let mut dropins: Vec<(String, String)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root.p(DROPIN_DIR)) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".conf") && !name.starts_with('.') && name != DROPIN_NAME && name != PRESERVED_NAME {
                if let Some(text) = root.read(&format!("{DROPIN_DIR}/{name}"))? {
                    dropins.push((name, text));
                }
            }
        }
    }
    dropins.push((DROPIN_NAME.into(), bundle.dropin.clone()));
    if let Some(p) = preserved {
        dropins.push((PRESERVED_NAME.into(), p));
    }
    let (assembled, _) = assemble(&dropins, bundle.nccl_version, HEADER).map_err(|r| WriteError::Invalid {
        path: DROPIN_DIR.into(),
        message: r.to_string(),
    })?;
    Ok(assembled)
}

/// The topology file: written when the bundle has one, removed when topo-tune wrote it and
/// no rule asks for it any more.
fn topology_change(root: &Root, bundle: &Bundle, manifest: &Manifest) -> Result<Option<FileChange>, WriteError> {
    let before = root.read(TOPOLOGY)?;
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

/// Remove temp files a killed earlier run left behind (backups nest deeper).
fn clear_stale_temps(root: &Root) {
    for dir in [DROPIN_DIR, "/etc"] {
        remove_stale_temps(&root.p(dir));
    }
    let mut stack = vec![root.p(STATE_DIR)];
    while let Some(dir) = stack.pop() {
        remove_stale_temps(&dir);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            stack.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
}

/// Apply changes: back up what is replaced, write atomically, record the run. Returns the
/// changes with their actions (all `Unchanged`: nothing was touched, not even the manifest).
pub fn apply(root_dir: &Path, changes: Vec<FileChange>, run_id: &str) -> Result<Vec<FileChange>, WriteError> {
    let root = Root(root_dir);
    if changes.iter().all(|c| c.action == Action::Unchanged) {
        return Ok(changes);
    }
    let mut manifest = read_manifest(&root)?;
    clear_stale_temps(&root);
    let mut run = Run {
        id: run_id.to_string(),
        files: Vec::new(),
    };
    for c in changes.iter().filter(|c| c.action != Action::Unchanged) {
        let backup = match &c.before {
            Some(before) => {
                let rel = format!("{BACKUPS}/{run_id}{}", c.path);
                root.write(&format!("{STATE_DIR}/{rel}"), before, 0o600)?;
                Some(rel)
            }
            None => None,
        };
        match &c.after {
            Some(after) => {
                root.write(&c.path, after, 0o644)?;
                manifest.owned.insert(c.path.clone(), sha256_hex(after.as_bytes()));
            }
            None => {
                root.remove(&c.path)?;
                manifest.owned.remove(&c.path);
            }
        }
        run.files.push(RunFile {
            path: c.path.clone(),
            backup,
        });
    }
    manifest.runs.push(run);
    write_manifest(&root, &manifest)?;
    Ok(changes)
}

/// Undo the last recorded run: restore its backups, remove the files it created.
pub fn rollback(root_dir: &Path) -> Result<WriteReport, WriteError> {
    let root = Root(root_dir);
    let mut manifest = read_manifest(&root)?;
    let run = manifest
        .runs
        .pop()
        .ok_or_else(|| WriteError::NothingToRollBack(MANIFEST.into()))?;
    let mut out = Vec::new();
    for f in run.files.iter().rev() {
        out.push(undo(&root, &mut manifest, f)?);
    }
    // The restored /etc/nccl.conf is not topo-tune's unless it was before.
    write_manifest(&root, &manifest)?;
    Ok(WriteReport::of(&out, false, Some(run.id)))
}

/// Put one file back as the run found it.
fn undo(root: &Root, manifest: &mut Manifest, f: &RunFile) -> Result<FileChange, WriteError> {
    let current = root.read(&f.path)?;
    let Some(rel) = &f.backup else {
        root.remove(&f.path)?;
        manifest.owned.remove(&f.path);
        return Ok(FileChange {
            path: f.path.clone(),
            action: Action::Remove,
            reason: "did not exist before that run".into(),
            before: current,
            after: None,
        });
    };
    let kernel = format!("{STATE_DIR}/{rel}");
    let before = root.read(&kernel)?.ok_or_else(|| WriteError::Invalid {
        path: kernel.clone(),
        message: "backup missing: cannot restore".into(),
    })?;
    let changed = root.write(&f.path, &before, 0o644)?;
    manifest.owned.insert(f.path.clone(), sha256_hex(before.as_bytes()));
    Ok(FileChange {
        path: f.path.clone(),
        action: if changed { Action::Update } else { Action::Unchanged },
        reason: format!("restored from {kernel}"),
        before: current,
        after: Some(before),
    })
}

/// Unified diff of one change (`--diff`).
pub fn diff(c: &FileChange) -> String {
    let before = c.before.as_deref().unwrap_or("");
    let after = c.after.as_deref().unwrap_or("");
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .header(&format!("a{}", c.path), &format!("b{}", c.path))
        .to_string()
}

/// A run id from the clock: `20261129T110500Z-PID`.
pub fn run_id() -> String {
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
