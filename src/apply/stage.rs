//! A canary's candidate on a node, staged beside the live files while it is measured
//! (`/etc/nccl/topo-tune/candidate/`): the `/etc/nccl.conf` that promotion would assemble
//! (its topology file pointed at the staged copy), the topology file, the env files of both
//! variants, and a record of which rollout staged them. Live files are never touched here:
//! running jobs see no change. Also what `status` reads on a node: what topo-tune wrote,
//! whether it still holds, and what is staged.

use super::tree::Tree;
use super::writer::{self, changes_with, read_manifest, read_text, Bundle, WriteError, LOCK, LOCK_WAIT};
use crate::digest::sha256_hex;
use crate::model::files::{
    MANIFEST, NCCL_CONF, STAGE_BASELINE_ENV, STAGE_CONF, STAGE_DIR, STAGE_ENV, STAGE_RECORD, STAGE_TOPOLOGY, TOPOLOGY,
};
use crate::nccl::conf::{env_file, parse};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// What a stage put where (the record kept in `candidate/stage.json`, and the answer).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageRecord {
    pub rollout: String,
    /// Staged path → sha256.
    pub files: BTreeMap<String, String>,
    /// What the measurement of this candidate cannot isolate (said in the report).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
    /// Whether this call changed anything on the node.
    #[serde(default)]
    pub changed: bool,
}

/// Staged files, the record last (removed last: it names what the others belong to).
const STAGED: [&str; 5] = [STAGE_CONF, STAGE_TOPOLOGY, STAGE_ENV, STAGE_BASELINE_ENV, STAGE_RECORD];

impl StageRecord {
    /// A node's answer names only staged paths, sha256 values, and a rollout id.
    pub fn check(&self) -> Result<(), String> {
        if !writer::run_id_ok(&self.rollout) {
            return Err(format!("rollout {:?} is not an id topo-tune makes", self.rollout));
        }
        let hash = |h: &str| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit());
        if let Some((p, _)) = self
            .files
            .iter()
            .find(|(p, h)| !STAGED.contains(&p.as_str()) || !hash(h))
        {
            return Err(format!("{p:?} is not a file topo-tune stages"));
        }
        if self.caveats.len() > 64
            || self
                .caveats
                .iter()
                .any(|c| c.len() > 512 || c.chars().any(char::is_control))
        {
            return Err("caveats are not plain text".into());
        }
        Ok(())
    }
}

fn invalid(tree: &Tree, path: &str, message: String) -> WriteError {
    WriteError::Invalid {
        path: tree.show(path),
        message,
    }
}

fn read_record(tree: &Tree) -> Result<Option<StageRecord>, WriteError> {
    let Some(text) = read_text(tree, STAGE_RECORD)? else {
        return Ok(None);
    };
    let record: StageRecord = serde_json::from_str(&text)
        .map_err(|e| invalid(tree, STAGE_RECORD, format!("not a topo-tune stage record: {e}")))?;
    record.check().map_err(|m| invalid(tree, STAGE_RECORD, m))?;
    Ok(Some(record))
}

/// Stage `bundle` for `rollout`: the candidate files as promotion would make them. A stage
/// of another rollout is refused (its rollout is named); the same rollout's is replaced.
pub fn stage(root: &Path, bundle: &Bundle, rollout: &str) -> Result<StageRecord, WriteError> {
    let tree = Tree::open(root)?;
    if !writer::run_id_ok(rollout) {
        return Err(invalid(
            &tree,
            STAGE_RECORD,
            format!("rollout {rollout:?} is not an id topo-tune makes"),
        ));
    }
    let _lock = tree.lock(LOCK, LOCK_WAIT)?;
    if let Some(other) = read_record(&tree)?.filter(|r| r.rollout != rollout) {
        return Err(invalid(
            &tree,
            STAGE_DIR,
            format!(
                "rollout {} has a candidate staged here: `topo-tune apply --resume {}` finishes it (or remove the directory)",
                other.rollout, other.rollout
            ),
        ));
    }
    let manifest = read_manifest(&tree)?;
    if let Some(run) = manifest.runs.last().filter(|r| r.pending) {
        return Err(invalid(
            &tree,
            MANIFEST,
            format!(
                "run {} was interrupted: `topo-tune init` or `rollback` undoes it before a canary can measure",
                run.id
            ),
        ));
    }
    let changes = changes_with(&tree, &manifest, bundle)?;
    let conf_change = changes.iter().find(|c| c.path == NCCL_CONF);
    let conf = conf_change.and_then(|c| c.after.clone()).unwrap_or_default();
    // What /etc/nccl.conf holds now (read once, by `changes_with`).
    let live = conf_change.and_then(|c| c.before.clone()).unwrap_or_default();
    // The staged file names the staged topology: the live one may differ or not exist.
    let conf = conf.replace(
        &format!("NCCL_TOPO_FILE={TOPOLOGY}\n"),
        &format!("NCCL_TOPO_FILE={STAGE_TOPOLOGY}\n"),
    );
    let mut files: Vec<(&str, String)> = vec![
        (STAGE_CONF, conf.clone()),
        (STAGE_ENV, env_file(&parse(&conf))),
        (STAGE_BASELINE_ENV, env_file(&parse(&live))),
    ];
    if let Some(xml) = &bundle.topology_xml {
        files.push((STAGE_TOPOLOGY, xml.clone()));
    } else {
        tree.remove(STAGE_TOPOLOGY)?;
    }
    let mut record = StageRecord {
        rollout: rollout.to_string(),
        caveats: leaks(&live, &conf),
        ..StageRecord::default()
    };
    for (path, text) in &files {
        record.files.insert((*path).to_string(), sha256_hex(text.as_bytes()));
    }
    // The record first: whatever is staged after it, an unstage of this rollout removes.
    let json = serde_json::to_string_pretty(&record).map_err(|e| invalid(&tree, STAGE_RECORD, e.to_string()))?;
    record.changed |= tree.write(STAGE_RECORD, (json + "\n").as_bytes(), 0o644)?;
    for (path, text) in &files {
        record.changed |= tree.write(path, text.as_bytes(), 0o644)?;
    }
    Ok(record)
}

/// Settings the live `/etc/nccl.conf` has and the candidate drops: NCCL reads
/// `/etc/nccl.conf` after `NCCL_CONF_FILE` (for names the first file does not set), so the
/// candidate's measurement still sees those live values.
fn leaks(live: &str, candidate: &str) -> Vec<String> {
    let cand = parse(candidate);
    parse(live)
        .iter()
        .filter(|(name, _)| !cand.iter().any(|(n, _)| n == name))
        .map(|(name, _)| {
            format!("{name}: set by the live /etc/nccl.conf, not by the candidate; NCCL still reads it under NCCL_CONF_FILE, so the candidate was measured with the live value")
        })
        .collect()
}

/// Remove a rollout's staged files (and the directory, once empty). Another rollout's stage
/// is left as it is (and said); nothing staged is fine.
pub fn unstage(root: &Path, rollout: &str) -> Result<StageRecord, WriteError> {
    let tree = Tree::open(root)?;
    let _lock = tree.lock(LOCK, LOCK_WAIT)?;
    if let Some(other) = read_record(&tree)?.filter(|r| r.rollout != rollout) {
        return Ok(StageRecord {
            rollout: rollout.to_string(),
            caveats: vec![format!(
                "the candidate here belongs to rollout {}: left as it is",
                other.rollout
            )],
            ..StageRecord::default()
        });
    }
    let mut out = StageRecord {
        rollout: rollout.to_string(),
        ..StageRecord::default()
    };
    // The record goes last: a kill before it leaves a stage the next unstage still owns.
    for path in STAGED {
        if tree.remove(path)? {
            out.changed = true;
            out.files.insert(path.to_string(), String::new());
        }
    }
    tree.remove_stale_temps(STAGE_DIR);
    tree.remove_empty_dir(STAGE_DIR)?;
    out.files.clear();
    Ok(out)
}

/// What `status` learns from one node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeState {
    /// The last run recorded in the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<String>,
    /// That run was interrupted (the next `init` or `rollback` undoes it).
    pub pending: bool,
    /// Files topo-tune owns: path → whether the live content still matches.
    pub files: Vec<OwnedFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<StageRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OwnedFile {
    pub path: String,
    pub sha256: String,
    /// `matches`, `modified` or `missing`.
    pub live: LiveState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveState {
    Matches,
    Modified,
    Missing,
}

impl NodeState {
    pub fn drift(&self) -> bool {
        self.files.iter().any(|f| f.live != LiveState::Matches)
    }

    pub fn check(&self) -> Result<(), String> {
        if self.last_run.as_deref().is_some_and(|r| !writer::run_id_ok(r)) {
            return Err("last_run is not a run id topo-tune makes".into());
        }
        if self.files.len() > writer::MANAGED.len() {
            return Err("more owned files than topo-tune manages".into());
        }
        if let Some(f) = self.files.iter().find(|f| !writer::MANAGED.contains(&f.path.as_str())) {
            return Err(format!("{:?} is not a file topo-tune manages", f.path));
        }
        self.staged.as_ref().map_or(Ok(()), StageRecord::check)
    }
}

/// Read a node's state: no lock taken, nothing written.
pub fn state(root: &Path) -> Result<NodeState, WriteError> {
    let tree = Tree::open(root)?;
    let manifest = read_manifest(&tree)?;
    let mut files = Vec::new();
    for (path, sha) in &manifest.owned {
        let live = match tree.read(path, writer::CONF_LIMIT * 16)? {
            None => LiveState::Missing,
            Some(bytes) if sha256_hex(&bytes) == *sha => LiveState::Matches,
            Some(_) => LiveState::Modified,
        };
        files.push(OwnedFile {
            path: path.clone(),
            sha256: sha.clone(),
            live,
        });
    }
    Ok(NodeState {
        last_run: manifest.runs.last().map(|r| r.id.clone()),
        pending: manifest.runs.last().is_some_and(|r| r.pending),
        files,
        staged: read_record(&tree)?,
    })
}
