//! The tuning live on a node (`status`): the rules file topo-tune rolled out, read the way
//! the plugin reads it, what it says it was measured on, the plugin the live nccl.conf names
//! and whether it is there, and the NCCL this node runs — so `status` can say "tune again".

use super::tree::Tree;
use super::writer::WriteError;
use crate::digest::sha256_hex;
use crate::model::files::{NCCL_CONF, TUNER_CSV};
use crate::model::{BadAnswer, NcclVersion};
use serde::{Deserialize, Serialize};

/// What the node's live tuning is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LiveTuning {
    pub(crate) file: String,
    pub(crate) sha256: String,
    /// Rules the plugin applies, and lines it refuses.
    pub(crate) rules: usize,
    pub(crate) refused: usize,
    /// The file's own word on what it was measured on (set, hosts, NCCL, shapes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) measured: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) measured_on: Option<NcclVersion>,
    /// The NCCL this node runs: its loader's, else cluster.yaml's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nccl: Option<NcclVersion>,
    /// The plugin the live nccl.conf names, and whether that file is there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) plugin: Option<String>,
    pub(crate) plugin_present: bool,
}

impl LiveTuning {
    /// Measured on another NCCL than this node runs: what to say.
    pub(crate) fn stale(&self) -> Option<String> {
        let (was, now) = (self.measured_on?, self.nccl?);
        (was != now).then(|| format!("measured on {was}, this node runs {now}: tune again"))
    }

    pub(crate) fn check(&self) -> Result<(), BadAnswer> {
        let line = |s: &str| s.len() <= 512 && !s.chars().any(char::is_control);
        let ok = self.file == TUNER_CSV
            && super::staged::is_sha256(&self.sha256)
            && self.rules + self.refused <= nccl_tuner_topo_tune::rules::MAX_RULES * 2
            && self.measured.as_deref().is_none_or(line)
            && self.plugin.as_deref().is_none_or(|p| line(p) && p.starts_with('/'));
        if ok {
            Ok(())
        } else {
            Err(BadAnswer("tuning is not what a node reports of its rules file".into()))
        }
    }
}

/// The node's live tuning, if it has a rules file where topo-tune writes one.
pub(crate) fn read(tree: &Tree, nccl: Option<NcclVersion>) -> Result<Option<LiveTuning>, WriteError> {
    let Some(bytes) = tree.read(TUNER_CSV, nccl_tuner_topo_tune::rules::MAX_BYTES)? else {
        return Ok(None);
    };
    let (rules, refused) = match nccl_tuner_topo_tune::rules::parse(&bytes) {
        Ok(p) => (p.rules.len(), p.refused.len()),
        Err(_) => (0, 1),
    };
    let text = String::from_utf8_lossy(&bytes);
    let conf = tree
        .read_text(NCCL_CONF, super::writer::CONF_LIMIT)?
        .unwrap_or_default();
    let plugin = crate::nccl::conf::read_lines(&conf)
        .into_iter()
        .find(|l| l.name == "NCCL_TUNER_PLUGIN")
        .map(|l| l.value)
        .filter(|p| p.starts_with('/') && p.len() <= 512);
    let plugin_present = match &plugin {
        Some(p) => tree.mode(p).ok().flatten().is_some(),
        None => false,
    };
    Ok(Some(LiveTuning {
        file: TUNER_CSV.into(),
        sha256: sha256_hex(&bytes),
        rules,
        refused,
        measured: crate::tune::tuning::provenance(&text),
        measured_on: crate::tune::tuning::measured_on(&text),
        nccl,
        plugin,
        plugin_present,
    }))
}
