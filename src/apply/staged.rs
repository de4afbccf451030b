//! A canary's stage record (`/etc/nccl/topo-tune/candidate/stage.json`): which rollout staged
//! the candidate beside the live files, each staged file's sha256, and the live files' as the
//! stage found them. Read by the stage itself, by `status`, and by the writer: while a
//! rollout has a candidate staged, only that rollout may change the files it measures.

use super::tree::{Tree, TreeError};
use crate::model::files::{
    run_id_ok, FILE_LIMIT, MANAGED, STAGE_BASELINE_ENV, STAGE_CONF, STAGE_ENV, STAGE_RECORD, STAGE_TOPOLOGY,
    STAGE_TUNER_CSV,
};
use crate::model::BadAnswer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Staged files, the record last (removed last: it names what the others belong to).
pub(crate) const STAGED: [&str; 6] = [
    STAGE_CONF,
    STAGE_TOPOLOGY,
    STAGE_TUNER_CSV,
    STAGE_ENV,
    STAGE_BASELINE_ENV,
    STAGE_RECORD,
];

/// What a stage put where (the record kept in `candidate/stage.json`, and the answer).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct StageRecord {
    pub(crate) rollout: String,
    /// Staged path → sha256.
    pub(crate) files: BTreeMap<String, String>,
    /// The live files the baseline reads (`/etc/nccl.conf`) → sha256 when staged (empty:
    /// absent). A run between two rounds that finds another content measured something else.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) live: BTreeMap<String, String>,
    /// What the measurement of this candidate cannot isolate (said in the report).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) caveats: Vec<String>,
    /// Whether this call changed anything on the node.
    #[serde(default)]
    pub(crate) changed: bool,
}

/// A sha256 in hex.
pub(crate) fn is_sha256(h: &str) -> bool {
    h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())
}

impl StageRecord {
    /// A node's answer names only staged paths, sha256 values, and a rollout id.
    pub(crate) fn check(&self) -> Result<(), BadAnswer> {
        if !run_id_ok(&self.rollout) {
            return Err(BadAnswer(format!(
                "rollout {:?} is not an id topo-tune makes",
                self.rollout
            )));
        }
        if let Some((p, _)) = self
            .files
            .iter()
            .find(|(p, h)| !STAGED.contains(&p.as_str()) || !is_sha256(h))
        {
            return Err(BadAnswer(format!("{p:?} is not a file topo-tune stages")));
        }
        if let Some((p, _)) = self
            .live
            .iter()
            .find(|(p, h)| !MANAGED.contains(&p.as_str()) || !(h.is_empty() || is_sha256(h)))
        {
            return Err(BadAnswer(format!(
                "live {p:?} is not a file topo-tune manages with its sha256"
            )));
        }
        if self.caveats.len() > 64
            || self
                .caveats
                .iter()
                .any(|c| c.len() > 512 || c.chars().any(char::is_control))
        {
            return Err(BadAnswer("caveats are not plain text".into()));
        }
        Ok(())
    }
}

/// Why a stage record cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StagedError {
    #[error(transparent)]
    Tree(#[from] TreeError),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// The stage record of this tree, checked; `None` when nothing is staged.
pub(crate) fn read(tree: &Tree) -> Result<Option<StageRecord>, StagedError> {
    let Some(text) = tree.read_text(STAGE_RECORD, FILE_LIMIT)? else {
        return Ok(None);
    };
    let invalid = |message: String| StagedError::Invalid {
        path: tree.show(STAGE_RECORD),
        message,
    };
    let record: StageRecord =
        serde_json::from_str(&text).map_err(|e| invalid(format!("not a topo-tune stage record: {e}")))?;
    record.check().map_err(|e| invalid(e.0))?;
    Ok(Some(record))
}

/// Whether a run id is one of this rollout's (its waves record `ROLLOUT-N`).
pub(crate) fn belongs(run_id: &str, rollout: &str) -> bool {
    run_id == rollout || run_id.strip_prefix(rollout).is_some_and(|rest| rest.starts_with('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waves_run_belongs_to_its_rollout_only() {
        let r = "20261201T120000Z-42";
        assert!(belongs("20261201T120000Z-42-1", r));
        assert!(belongs(r, r));
        assert!(!belongs("20261201T120000Z-421", r), "another pid");
        assert!(!belongs("20261201T120000Z-4", r));
    }

    #[test]
    fn a_record_with_foreign_paths_or_bad_hashes_is_refused() {
        let good = StageRecord {
            rollout: "20261201T120000Z-42".into(),
            files: [(STAGE_CONF.to_string(), "a".repeat(64))].into(),
            live: [("/etc/nccl.conf".to_string(), String::new())].into(),
            ..StageRecord::default()
        };
        assert!(good.check().is_ok());
        let mut bad = good.clone();
        bad.live.insert("/etc/passwd".into(), "a".repeat(64));
        assert!(bad.check().is_err());
        let mut bad = good.clone();
        bad.files.insert(STAGE_ENV.into(), "zz".into());
        assert!(bad.check().is_err());
    }
}
