//! A canary's candidate on a node, staged beside the live files while it is measured
//! (`/etc/nccl/topo-tune/candidate/`): the `/etc/nccl.conf` that promotion would assemble
//! (its topology file pointed at the staged copy), the topology file, the env files of both
//! variants, and a record of which rollout staged them. Live files are never touched here:
//! running jobs see no change. Also what `status` reads on a node: what topo-tune wrote,
//! whether it still holds, and what is staged.

pub(crate) use super::staged::StageRecord;
use super::staged::{self, STAGED};
use super::tree::Tree;
use super::writer::{self, changes_with, read_manifest, Bundle, WriteError, LOCK, LOCK_WAIT};
use crate::digest::sha256_hex;
use crate::model::files::{
    MANIFEST, NCCL_CONF, STAGE_BASELINE_ENV, STAGE_CONF, STAGE_DIR, STAGE_ENV, STAGE_RECORD, STAGE_TOPOLOGY,
    STAGE_TUNER_CSV, TOPOLOGY, TUNER_CSV,
};
use crate::model::BadAnswer;
use crate::nccl::conf::{env_file, parse};
use serde::{Deserialize, Serialize};
use std::path::Path;

fn invalid(tree: &Tree, path: &str, message: String) -> WriteError {
    WriteError::Invalid {
        path: tree.show(path),
        message,
    }
}

fn read_record(tree: &Tree) -> Result<Option<StageRecord>, WriteError> {
    staged::read(tree).map_err(WriteError::from)
}

/// Stage `bundle` for `rollout`: the candidate files as promotion would make them. A stage
/// of another rollout is refused (its rollout is named); the same rollout's is replaced.
pub(crate) fn stage(root: &Path, bundle: &Bundle, rollout: &str) -> Result<StageRecord, WriteError> {
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
    let conf = staged_conf(&tree, bundle, &conf);
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
    if let Some(t) = &bundle.tuner {
        files.push((STAGE_TUNER_CSV, t.csv.clone()));
        writer::install_plugin(&tree, bundle)?;
    } else {
        tree.remove(STAGE_TUNER_CSV)?;
    }
    let mut record = StageRecord {
        rollout: rollout.to_string(),
        caveats: leaks(&live, &conf),
        live: [(
            NCCL_CONF.to_string(),
            hash_of(conf_change.and_then(|c| c.before.as_deref())),
        )]
        .into(),
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

/// The nccl.conf promotion would assemble, pointed at the staged copies: the staged topology
/// file, the staged rules file and the plugin, as this tree shows them (a node's own paths; a
/// paper node's under its directory). The plugin itself goes to its content-addressed path
/// when staged (written once, never removed: a running job may have it loaded).
fn staged_conf(tree: &Tree, bundle: &Bundle, conf: &str) -> String {
    // The staged file names the staged topology: the live one may differ or not exist.
    let conf = conf.replace(
        &format!("NCCL_TOPO_FILE={TOPOLOGY}\n"),
        &format!("NCCL_TOPO_FILE={STAGE_TOPOLOGY}\n"),
    );
    let conf = conf.replace(
        &format!("NCCL_TUNER_CONFIG_FILE={TUNER_CSV}\n"),
        &format!("NCCL_TUNER_CONFIG_FILE={}\n", tree.show(STAGE_TUNER_CSV)),
    );
    match bundle.tuner.as_ref().and_then(|t| t.plugin.as_ref()) {
        Some(p) => {
            let path = crate::model::files::plugin_path(&p.sha256);
            conf.replace(
                &format!("NCCL_TUNER_PLUGIN={path}\n"),
                &format!("NCCL_TUNER_PLUGIN={}\n", tree.show(&path)),
            )
        }
        None => conf,
    }
}

/// A file's sha256, or empty when it does not exist.
fn hash_of(content: Option<&str>) -> String {
    content.map(|c| sha256_hex(c.as_bytes())).unwrap_or_default()
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
pub(crate) fn unstage(root: &Path, rollout: &str) -> Result<StageRecord, WriteError> {
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
pub(crate) struct NodeState {
    /// The last run recorded in the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_run: Option<String>,
    /// That run was interrupted (the next `init` or `rollback` undoes it).
    pub(crate) pending: bool,
    /// Files topo-tune owns: path → whether the live content still matches.
    pub(crate) files: Vec<OwnedFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) staged: Option<StageRecord>,
    /// What the files a benchmark reads hold now (`/etc/nccl.conf` and the staged ones) →
    /// sha256, empty when absent: a rollout compares them with its stage between rounds.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(crate) current: std::collections::BTreeMap<String, String>,
    /// Every run the manifest records, oldest first (a promoted wave's run that is no longer
    /// among them was undone since).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) runs: Vec<String>,
    /// The run the last `rollback` undid, until a new run is recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) undone: Option<String>,
    /// The tuning live on the node (`status` asks; a rollout's checks between rounds do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tuning: Option<super::live_tuning::LiveTuning>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OwnedFile {
    pub(crate) path: String,
    pub(crate) sha256: String,
    /// `matches`, `modified` or `missing`.
    pub(crate) live: LiveState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LiveState {
    Matches,
    Modified,
    Missing,
}

impl NodeState {
    /// A live tuning whose drop-in names a plugin that is not there: NCCL warns and tunes
    /// alone.
    pub(crate) fn tuner_plugin_gone(&self) -> bool {
        self.tuning
            .as_ref()
            .is_some_and(|t| t.plugin.is_some() && !t.plugin_present)
    }

    pub(crate) fn drift(&self) -> bool {
        self.files.iter().any(|f| f.live != LiveState::Matches)
    }

    pub(crate) fn check(&self) -> Result<(), BadAnswer> {
        if self.last_run.as_deref().is_some_and(|r| !writer::run_id_ok(r)) {
            return Err(BadAnswer("last_run is not a run id topo-tune makes".into()));
        }
        if self.files.len() > writer::MANAGED.len() {
            return Err(BadAnswer("more owned files than topo-tune manages".into()));
        }
        if let Some(f) = self.files.iter().find(|f| !writer::MANAGED.contains(&f.path.as_str())) {
            return Err(BadAnswer(format!("{:?} is not a file topo-tune manages", f.path)));
        }
        if let Some(f) = self.files.iter().find(|f| !staged::is_sha256(&f.sha256)) {
            return Err(BadAnswer(format!("the sha256 of {} is not one", f.path)));
        }
        let known = |p: &str| writer::MANAGED.contains(&p) || STAGED.contains(&p);
        if let Some((p, _)) = self
            .current
            .iter()
            .find(|(p, h)| !known(p) || !(h.is_empty() || staged::is_sha256(h)))
        {
            return Err(BadAnswer(format!(
                "current {p:?} is not a file topo-tune reads with its sha256"
            )));
        }
        if self.runs.len() > writer::MAX_RUNS || self.runs.iter().any(|r| !writer::run_id_ok(r)) {
            return Err(BadAnswer("runs are not run ids topo-tune makes".into()));
        }
        if self.undone.as_deref().is_some_and(|r| !writer::run_id_ok(r)) {
            return Err(BadAnswer("undone is not a run id topo-tune makes".into()));
        }
        if let Some(t) = &self.tuning {
            t.check()?;
        }
        self.staged.as_ref().map_or(Ok(()), StageRecord::check)
    }
}

/// Read a node's state: no lock taken, nothing written.
pub(crate) fn state(root: &Path) -> Result<NodeState, WriteError> {
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
    let mut current = std::collections::BTreeMap::new();
    for path in std::iter::once(NCCL_CONF).chain(STAGED.into_iter().filter(|p| *p != STAGE_RECORD)) {
        let bytes = tree.read(path, writer::CONF_LIMIT)?;
        current.insert(path.to_string(), bytes.map(|b| sha256_hex(&b)).unwrap_or_default());
    }
    Ok(NodeState {
        last_run: manifest.runs.last().map(|r| r.id.clone()),
        pending: manifest.runs.last().is_some_and(|r| r.pending),
        files,
        staged: read_record(&tree)?,
        current,
        runs: manifest.runs.iter().map(|r| r.id.clone()).collect(),
        undone: manifest.undone.clone(),
        tuning: None,
    })
}

/// A node's state with its live tuning (`status`): `nccl` is the NCCL it runs, as far as
/// anyone knows.
pub(crate) fn state_with_tuning(root: &Path, nccl: Option<crate::model::NcclVersion>) -> Result<NodeState, WriteError> {
    let mut st = state(root)?;
    st.tuning = super::live_tuning::read(&Tree::open(root)?, nccl)?;
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::writer::write_bundle;
    use crate::model::NcclVersion;

    const ROLLOUT: &str = "20261201T100000Z-42";
    const OTHER: &str = "20261201T110000Z-43";

    fn bundle(timeout: u32, topology: bool) -> Bundle {
        let topo_line = if topology {
            format!("NCCL_TOPO_FILE={TOPOLOGY}\n")
        } else {
            String::new()
        };
        Bundle {
            dropin: format!("# topo-tune\nNCCL_IB_TIMEOUT={timeout}\n{topo_line}"),
            topology_xml: topology.then(|| "<system version=\"1\"/>\n".to_string()),
            nccl_version: Some(NcclVersion(2, 28, 9)),
            tuner: None,
        }
    }

    fn site() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        dir
    }

    fn at(root: &Path, path: &str) -> std::path::PathBuf {
        root.join(path.trim_start_matches('/'))
    }

    fn read(root: &Path, path: &str) -> Option<String> {
        std::fs::read_to_string(at(root, path)).ok()
    }

    #[test]
    fn staging_leaves_the_live_files_alone_and_records_what_it_staged() {
        let dir = site();
        let root = dir.path();
        std::fs::write(at(root, NCCL_CONF), "NCCL_IB_TIMEOUT=20\n").unwrap();
        let record = stage(root, &bundle(22, true), ROLLOUT).unwrap();
        assert!(record.changed);
        assert_eq!(
            read(root, NCCL_CONF).as_deref(),
            Some("NCCL_IB_TIMEOUT=20\n"),
            "live untouched"
        );
        let conf = read(root, STAGE_CONF).unwrap();
        assert!(conf.contains("NCCL_IB_TIMEOUT=22"), "{conf}");
        assert!(
            conf.contains(&format!("NCCL_TOPO_FILE={STAGE_TOPOLOGY}\n")),
            "the staged topology: {conf}"
        );
        assert!(!conf.contains(&format!("={TOPOLOGY}\n")));
        assert!(read(root, STAGE_BASELINE_ENV).unwrap().contains("NCCL_IB_TIMEOUT=20"));
        assert!(read(root, STAGE_ENV).unwrap().contains("NCCL_IB_TIMEOUT=22"));
        for (path, sha) in &record.files {
            assert_eq!(sha256_hex(read(root, path).unwrap().as_bytes()), *sha, "{path}");
        }
        assert_eq!(record.live[NCCL_CONF], sha256_hex(b"NCCL_IB_TIMEOUT=20\n"));
        let on_disk: StageRecord = serde_json::from_str(&read(root, STAGE_RECORD).unwrap()).unwrap();
        assert_eq!(on_disk.rollout, ROLLOUT);
        assert_eq!(on_disk.files, record.files);
    }

    #[test]
    fn the_same_stage_twice_changes_nothing_and_another_bundle_replaces_it() {
        let dir = site();
        stage(dir.path(), &bundle(22, true), ROLLOUT).unwrap();
        assert!(!stage(dir.path(), &bundle(22, true), ROLLOUT).unwrap().changed);
        let again = stage(dir.path(), &bundle(23, false), ROLLOUT).unwrap();
        assert!(again.changed);
        assert_eq!(
            read(dir.path(), STAGE_TOPOLOGY),
            None,
            "no topology in the new bundle: removed"
        );
        assert!(!again.files.contains_key(STAGE_TOPOLOGY));
    }

    #[test]
    fn another_rollouts_stage_is_neither_replaced_nor_removed() {
        let dir = site();
        stage(dir.path(), &bundle(22, false), ROLLOUT).unwrap();
        let before = read(dir.path(), STAGE_CONF);
        match stage(dir.path(), &bundle(23, false), OTHER) {
            Err(WriteError::Invalid { message, .. }) => assert!(message.contains(ROLLOUT), "{message}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        let left = unstage(dir.path(), OTHER).unwrap();
        assert!(!left.changed);
        assert!(left.caveats[0].contains(ROLLOUT), "{:?}", left.caveats);
        assert_eq!(read(dir.path(), STAGE_CONF), before);
    }

    #[test]
    fn unstage_removes_every_staged_file_and_the_directory_once() {
        let dir = site();
        stage(dir.path(), &bundle(22, true), ROLLOUT).unwrap();
        assert!(unstage(dir.path(), ROLLOUT).unwrap().changed);
        assert!(!at(dir.path(), STAGE_DIR).exists());
        assert!(!unstage(dir.path(), ROLLOUT).unwrap().changed, "nothing staged is fine");
    }

    #[test]
    fn a_rollout_id_topo_tune_does_not_make_is_refused_before_anything_is_written() {
        let dir = site();
        for id in ["../../etc", "", "x y", "20261201T100000Z-42/.."] {
            assert!(stage(dir.path(), &bundle(22, false), id).is_err(), "{id:?}");
        }
        assert!(!at(dir.path(), STAGE_DIR).exists());
    }

    #[test]
    fn live_settings_the_candidate_drops_are_caveats() {
        let caveats = leaks("NCCL_IB_TIMEOUT=20\nNCCL_IB_SL=3\n", "NCCL_IB_TIMEOUT=22\n");
        assert_eq!(caveats.len(), 1);
        assert!(caveats[0].starts_with("NCCL_IB_SL:"), "{caveats:?}");
        assert!(leaks("NCCL_IB_SL=3\n", "NCCL_IB_SL=4\n").is_empty());
    }

    #[test]
    fn state_says_what_holds_what_drifted_and_what_is_staged() {
        let dir = site();
        let root = dir.path();
        let empty = state(root).unwrap();
        assert_eq!(
            (empty.last_run.as_deref(), empty.files.len(), empty.drift()),
            (None, 0, false)
        );
        write_bundle(root, &bundle(22, true), false, false, Some(ROLLOUT)).unwrap();
        let s = state(root).unwrap();
        s.check().unwrap();
        assert_eq!(s.last_run.as_deref(), Some(ROLLOUT));
        assert!(!s.pending && !s.drift() && !s.files.is_empty());
        std::fs::write(at(root, TOPOLOGY), "<system version=\"2\"/>\n").unwrap();
        std::fs::remove_file(at(root, crate::model::files::DROPIN)).unwrap();
        stage(root, &bundle(23, false), OTHER).unwrap();
        let s = state(root).unwrap();
        let live = |p: &str| s.files.iter().find(|f| f.path == p).map(|f| f.live);
        assert_eq!(live(TOPOLOGY), Some(LiveState::Modified));
        assert_eq!(live(crate::model::files::DROPIN), Some(LiveState::Missing));
        assert!(s.drift());
        assert_eq!(s.staged.as_ref().map(|r| r.rollout.as_str()), Some(OTHER));
        let conf = read(root, NCCL_CONF).unwrap();
        assert_eq!(s.current[NCCL_CONF], sha256_hex(conf.as_bytes()));
        assert_eq!(s.current[STAGE_TOPOLOGY], "", "absent");
    }

    #[test]
    fn a_node_state_naming_foreign_files_is_a_bad_answer() {
        let good = NodeState {
            files: vec![OwnedFile {
                path: NCCL_CONF.into(),
                sha256: sha256_hex(b"x"),
                live: LiveState::Matches,
            }],
            ..NodeState::default()
        };
        good.check().unwrap();
        let mut foreign = good.clone();
        foreign.files[0].path = "/etc/shadow".into();
        assert!(foreign.check().is_err());
        let mut bad_hash = good.clone();
        bad_hash.files[0].sha256 = "not-a-hash".into();
        assert!(bad_hash.check().is_err());
        let mut odd_current = good.clone();
        odd_current.current.insert("/etc/passwd".into(), String::new());
        assert!(odd_current.check().is_err());
        let mut odd_run = good;
        odd_run.runs = vec!["rm -rf /".into()];
        assert!(odd_run.check().is_err());
    }
}
