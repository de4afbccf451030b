//! The node-side writer: what topo-tune owns under `/etc`, written safely.
//!
//! - `/etc/nccl/conf.d/50-topo-tune.conf`: topo-tune's drop-in.
//! - `/etc/nccl/conf.d/00-preserved-nccl.conf`: a `/etc/nccl.conf` topo-tune did not write,
//!   kept as the earliest drop-in (so topo-tune's values win, and nothing is lost).
//! - `/etc/nccl.conf`: assembled from every `conf.d/*.conf` in lexical order (later wins,
//!   each key once), validated line by line.
//! - `/etc/nccl/topo-tune/topology.xml` (when a rule asks) and `nccl.env` (for containers).
//! - `/etc/nccl/topo-tune/manifest.json`: what topo-tune owns (sha256) and every run's
//!   backups under `/etc/nccl/topo-tune/backups/<run>/`, for `rollback`.
//!
//! Every write is temp + fsync + rename, only when content differs; a second identical run
//! changes nothing. All paths live under `root` (`/`, or `DIR/<host>` for `--output-dir`).

use super::atomic::{remove, remove_stale_temps, write_if_changed};
use crate::nccl::conf::{assemble, env_file, parse};
use crate::nccl::version::NcclVersion;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const DROPIN_DIR: &str = "/etc/nccl/conf.d";
pub const DROPIN: &str = "/etc/nccl/conf.d/50-topo-tune.conf";
pub const PRESERVED: &str = "/etc/nccl/conf.d/00-preserved-nccl.conf";
pub const NCCL_CONF: &str = "/etc/nccl.conf";
pub const STATE_DIR: &str = "/etc/nccl/topo-tune";
pub const TOPOLOGY: &str = "/etc/nccl/topo-tune/topology.xml";
pub const ENV_FILE: &str = "/etc/nccl/topo-tune/nccl.env";
pub const MANIFEST: &str = "/etc/nccl/topo-tune/manifest.json";
const HEADER: &str = "managed by topo-tune: edit /etc/nccl/conf.d/*.conf, not this file";

/// What topo-tune wants on one node (sent to the node as JSON for remote writes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bundle {
    pub dropin: String,
    pub topology_xml: Option<String>,
    pub nccl_version: Option<NcclVersion>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Create,
    Update,
    Unchanged,
    Remove,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    pub action: Action,
    pub reason: String,
    #[serde(skip)]
    pub before: Option<String>,
    #[serde(skip)]
    pub after: Option<String>,
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

fn sha(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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

/// Work out every change the bundle implies, reading the node's current files. Writes nothing.
pub fn changes(root_dir: &Path, bundle: &Bundle) -> Result<Vec<FileChange>, WriteError> {
    let root = Root(root_dir);
    let manifest = read_manifest(&root)?;
    let mut out = Vec::new();
    fn change(out: &mut Vec<FileChange>, path: &str, before: Option<String>, after: String, reason: String) {
        let action = match &before {
            None => Action::Create,
            Some(b) if *b == after => Action::Unchanged,
            Some(_) => Action::Update,
        };
        out.push(FileChange {
            path: path.into(),
            action,
            reason,
            before,
            after: Some(after),
        });
    }

    // A /etc/nccl.conf topo-tune did not write (or that was edited since) is kept as a drop-in.
    let current_conf = root.read(NCCL_CONF)?;
    let mut preserved = root.read(PRESERVED)?;
    if let Some(conf) = &current_conf {
        if manifest.owned.get(NCCL_CONF) != Some(&sha(conf)) {
            let mut text = String::new();
            for (i, line) in conf.split('\n').enumerate() {
                if line.starts_with('#') || !line.contains('=') {
                    continue;
                }
                let (n, v) = line.split_once('=').unwrap_or((line, ""));
                crate::nccl::table::validate(n, v, bundle.nccl_version).map_err(|r| WriteError::Invalid {
                    path: format!("{NCCL_CONF}:{}", i + 1),
                    message: format!(
                        "cannot be kept as it is: {} (fix or remove the line; nothing was changed)",
                        r.reason
                    ),
                })?;
                text.push_str(line);
                text.push('\n');
            }
            change(
                &mut out,
                PRESERVED,
                preserved.clone(),
                text.clone(),
                "the existing /etc/nccl.conf was not written by topo-tune: kept as the first drop-in".into(),
            );
            preserved = Some(text);
        }
    }
    change(
        &mut out,
        DROPIN,
        root.read(DROPIN)?,
        bundle.dropin.clone(),
        "topo-tune's settings (see the plan for each reason)".into(),
    );

    // Assemble from what conf.d will hold.
    let mut dropins: Vec<(String, String)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root.p(DROPIN_DIR)) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".conf") && !name.starts_with('.') {
                let kernel = format!("{DROPIN_DIR}/{name}");
                if kernel != DROPIN && kernel != PRESERVED {
                    if let Some(text) = root.read(&kernel)? {
                        dropins.push((name, text));
                    }
                }
            }
        }
    }
    dropins.push(("50-topo-tune.conf".into(), bundle.dropin.clone()));
    if let Some(p) = &preserved {
        dropins.push(("00-preserved-nccl.conf".into(), p.clone()));
    }
    let (assembled, _) = assemble(&dropins, bundle.nccl_version, HEADER).map_err(|r| WriteError::Invalid {
        path: DROPIN_DIR.into(),
        message: r.to_string(),
    })?;
    change(
        &mut out,
        NCCL_CONF,
        current_conf,
        assembled.clone(),
        "assembled from /etc/nccl/conf.d in lexical order".into(),
    );

    match &bundle.topology_xml {
        Some(xml) => change(
            &mut out,
            TOPOLOGY,
            root.read(TOPOLOGY)?,
            xml.clone(),
            "NCCL_TOPO_FILE names it".into(),
        ),
        None => {
            if let Some(before) = root.read(TOPOLOGY)? {
                if manifest.owned.contains_key(TOPOLOGY) {
                    out.push(FileChange {
                        path: TOPOLOGY.into(),
                        action: Action::Remove,
                        reason: "no rule asks for a topology file any more".into(),
                        before: Some(before),
                        after: None,
                    });
                }
            }
        }
    }
    let settings: Vec<(String, String)> = parse(&assembled);
    change(
        &mut out,
        ENV_FILE,
        root.read(ENV_FILE)?,
        env_file(&settings),
        "the same settings for containers (docker --env-file), which never see /etc/nccl.conf".into(),
    );
    Ok(out)
}

/// Apply changes: back up what is replaced, write atomically, record the run. Returns the
/// changes with their actions (all `Unchanged`: nothing was touched, not even the manifest).
pub fn apply(root_dir: &Path, changes: Vec<FileChange>, run_id: &str) -> Result<Vec<FileChange>, WriteError> {
    let root = Root(root_dir);
    if changes.iter().all(|c| c.action == Action::Unchanged) {
        return Ok(changes);
    }
    let mut manifest = read_manifest(&root)?;
    let io = |path: &str| {
        let path = path.to_string();
        move |e: std::io::Error| WriteError::Io {
            path: path.clone(),
            source: e,
        }
    };
    // A run killed mid-write leaves at most temp files; clear them (backups nest deeper).
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
    let mut run = Run {
        id: run_id.to_string(),
        files: Vec::new(),
    };
    for c in &changes {
        if c.action == Action::Unchanged {
            continue;
        }
        let backup = match &c.before {
            Some(before) => {
                let rel = format!("backups/{run_id}{}", c.path);
                write_if_changed(&root.p(&format!("{STATE_DIR}/{rel}")), before.as_bytes(), 0o600).map_err(io(&rel))?;
                Some(rel)
            }
            None => None,
        };
        match &c.after {
            Some(after) => {
                write_if_changed(&root.p(&c.path), after.as_bytes(), 0o644).map_err(io(&c.path))?;
                manifest.owned.insert(c.path.clone(), sha(after));
            }
            None => {
                remove(&root.p(&c.path)).map_err(io(&c.path))?;
                manifest.owned.remove(&c.path);
            }
        }
        run.files.push(RunFile {
            path: c.path.clone(),
            backup,
        });
    }
    manifest.runs.push(run);
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
    write_if_changed(&root.p(MANIFEST), text.as_bytes(), 0o644).map_err(io(MANIFEST))?;
    Ok(changes)
}

/// Undo the last recorded run: restore its backups, remove the files it created.
pub fn rollback(root_dir: &Path) -> Result<Vec<FileChange>, WriteError> {
    let root = Root(root_dir);
    let mut manifest = read_manifest(&root)?;
    let run = manifest
        .runs
        .pop()
        .ok_or_else(|| WriteError::NothingToRollBack(MANIFEST.into()))?;
    let mut out = Vec::new();
    for f in run.files.iter().rev() {
        let current = root.read(&f.path)?;
        match &f.backup {
            Some(rel) => {
                let kernel = format!("{STATE_DIR}/{rel}");
                let before = root.read(&kernel)?.ok_or_else(|| WriteError::Invalid {
                    path: kernel.clone(),
                    message: "backup missing: cannot restore".into(),
                })?;
                let changed =
                    write_if_changed(&root.p(&f.path), before.as_bytes(), 0o644).map_err(|e| WriteError::Io {
                        path: f.path.clone(),
                        source: e,
                    })?;
                manifest.owned.insert(f.path.clone(), sha(&before));
                out.push(FileChange {
                    path: f.path.clone(),
                    action: if changed { Action::Update } else { Action::Unchanged },
                    reason: format!("restored from {kernel}"),
                    before: current,
                    after: Some(before),
                });
            }
            None => {
                remove(&root.p(&f.path)).map_err(|e| WriteError::Io {
                    path: f.path.clone(),
                    source: e,
                })?;
                manifest.owned.remove(&f.path);
                out.push(FileChange {
                    path: f.path.clone(),
                    action: Action::Remove,
                    reason: "did not exist before that run".into(),
                    before: current,
                    after: None,
                });
            }
        }
    }
    // The restored /etc/nccl.conf is not topo-tune's unless it was before.
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
    write_if_changed(&root.p(MANIFEST), text.as_bytes(), 0o644).map_err(|e| WriteError::Io {
        path: MANIFEST.into(),
        source: e,
    })?;
    Ok(out)
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

/// A run id from the clock: `20261129T110500Z`.
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
