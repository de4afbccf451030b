//! `tune`'s run files on a node: for each candidate, the NCCL config file its runs read (its
//! variables first, then `NCCL_TUNER_PLUGIN` and `NCCL_TUNER_CONFIG_FILE` naming topo-tune's
//! plugin and the candidate's rules file, then the live file's other lines) and the rules
//! file; and the plugin itself — all under one directory per tune run
//! (`/var/lib/topo-tune/tune/<run>/`), on every node of the run, at the same path, so every
//! rank of a multi-node job reads the same files. The next run removes what a killed one left
//! (tune holds the rollout lock of its cluster: no other run is live there).

pub(crate) use super::plugin::PluginCopy;
use super::tree::{Tree, TreeError};
use super::writer::WriteError;
use crate::model::files::{FILE_LIMIT, NCCL_CONF, TUNE_DIR, TUNE_PLUGIN};
use crate::model::BadAnswer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Most candidates one stage may carry.
const MAX_FILES: usize = 256;
/// Most candidate settings one run may add, and how long a value may be.
const MAX_SETTINGS: usize = 16;
const MAX_VALUE: usize = 256;
/// The names a run directory holds (what a later run may remove).
const CONF: &str = "nccl.conf";
const ENV: &str = "nccl.env";
const RULES: &str = "nccl-tuner.csv";

/// One candidate's files: its variables and, for a choice, its rules file's text. `id` is the
/// digest of both: the directory they are written to, the same on every node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunFiles {
    pub(crate) id: String,
    pub(crate) settings: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rules: Option<String>,
}

fn digest_of(settings: &BTreeMap<String, String>, rules: Option<&str>) -> String {
    let mut text: String = settings.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    text.push('\0');
    text.push_str(rules.unwrap_or(""));
    crate::digest::sha256_hex(text.as_bytes())[..16].to_string()
}

impl RunFiles {
    pub(crate) fn new(settings: BTreeMap<String, String>, rules: Option<String>) -> RunFiles {
        RunFiles {
            id: digest_of(&settings, rules.as_deref()),
            settings,
            rules,
        }
    }

    /// What a node checks before it writes: NCCL variables with plain values (they go into a
    /// config file, one line each; the plugin's two are topo-tune's to set), a rules file the
    /// plugin reads whole, and the id that is their digest.
    pub(crate) fn check(&self) -> Result<(), BadAnswer> {
        if self.settings.len() > MAX_SETTINGS {
            return Err(BadAnswer(format!("more than {MAX_SETTINGS} candidate settings")));
        }
        for (name, value) in &self.settings {
            let name_ok = name.starts_with("NCCL_")
                && !name.starts_with("NCCL_TUNER_")
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            let value_ok = !value.is_empty()
                && value.len() <= MAX_VALUE
                && value
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'#' && b != b'\\' && b != b'"' && b != b'\'');
            if !name_ok || !value_ok {
                return Err(BadAnswer(format!(
                    "candidate setting {:?}={:?} is not an NCCL variable with a plain value",
                    name.escape_default().to_string(),
                    value.escape_default().to_string()
                )));
            }
        }
        if let Some(rules) = &self.rules {
            nccl_tuner_topo_tune::rules::parse_strict(rules.as_bytes())
                .map_err(|e| BadAnswer(format!("the candidate's rules file: {e}")))?;
        }
        if self.id != digest_of(&self.settings, self.rules.as_deref()) {
            return Err(BadAnswer(format!(
                "run files {:?} are not what their id names",
                self.id
            )));
        }
        Ok(())
    }
}

/// Where one run's files live, relative to the node's root.
fn run_dir(run: &str) -> String {
    format!("{}/{run}", TUNE_DIR.trim_start_matches('/'))
}

fn id_ok(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn invalid(path: String, message: String) -> WriteError {
    WriteError::Invalid { path, message }
}

/// The config file of one candidate's runs: its variables, then (for a choice) the plugin
/// and its rules file, then the live file's lines that set none of those — NCCL takes a
/// name's first line in a config file (src/misc/param.cc `setEnvFile`).
fn conf_text(files: &RunFiles, plugin: &str, rules: &str, live: &str) -> String {
    let mut set: BTreeMap<&str, &str> = files.settings.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    if files.rules.is_some() {
        set.insert("NCCL_TUNER_PLUGIN", plugin);
        set.insert("NCCL_TUNER_CONFIG_FILE", rules);
    }
    let mut out: String = set.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    for line in live.lines() {
        let name = line.split('=').next().unwrap_or("").trim();
        if !set.contains_key(name) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Remove one run's directory: the names a run writes, then the directories; anything else
/// found there is left, and so is the directory that holds it.
fn remove_run(tree: &Tree, run: &str) -> Result<(), TreeError> {
    let dir = run_dir(run);
    for id in tree.list(&dir)? {
        if id == TUNE_PLUGIN {
            tree.remove(&format!("{dir}/{id}"))?;
            continue;
        }
        if !id_ok(&id) {
            continue;
        }
        for name in [CONF, ENV, RULES] {
            tree.remove(&format!("{dir}/{id}/{name}"))?;
        }
        tree.remove_empty_dir(&format!("{dir}/{id}"))?;
    }
    tree.remove_empty_dir(&dir)?;
    Ok(())
}

/// Write `files` (and the plugin, when given) for run `run` under `root`; every other run's
/// directory is removed first. Returns the ids written.
pub(crate) fn stage(
    root: &Path,
    run: &str,
    plugin: Option<&PluginCopy>,
    files: &[RunFiles],
) -> Result<Vec<String>, WriteError> {
    let tree = Tree::open(root)?;
    let dir = run_dir(run);
    if !crate::model::files::run_id_ok(run) || files.len() > MAX_FILES {
        return Err(invalid(
            tree.show(&dir),
            format!("{run:?} is not a run id, or more than {MAX_FILES} candidates"),
        ));
    }
    for other in tree.list(TUNE_DIR.trim_start_matches('/'))? {
        if other != run && crate::model::files::run_id_ok(&other) {
            remove_run(&tree, &other)?;
        }
    }
    let plugin_path = format!("{dir}/{TUNE_PLUGIN}");
    if let Some(p) = plugin {
        let bytes = p.bytes().map_err(|m| invalid(tree.show(&plugin_path), m.0))?;
        tree.write(&plugin_path, &bytes, 0o755)?;
    }
    let live = tree
        .read_text(NCCL_CONF.trim_start_matches('/'), FILE_LIMIT)?
        .unwrap_or_default();
    let mut ids = Vec::new();
    for f in files {
        f.check().map_err(|e| invalid(tree.show(&dir), e.0))?;
        let at = |name: &str| format!("{dir}/{}/{name}", f.id);
        if f.rules.is_some() && tree.mode(&plugin_path)?.is_none() {
            return Err(invalid(tree.show(&plugin_path), "no plugin staged for this run".into()));
        }
        let text = conf_text(f, &tree.show(&plugin_path), &tree.show(&at(RULES)), &live);
        if let Some(rules) = &f.rules {
            tree.write(&at(RULES), rules.as_bytes(), 0o644)?;
        }
        tree.write(&at(CONF), text.as_bytes(), 0o644)?;
        tree.write(&at(ENV), text.as_bytes(), 0o644)?;
        ids.push(f.id.clone());
    }
    Ok(ids)
}

/// Remove run `run`'s files under `root` (absent is fine).
pub(crate) fn unstage(root: &Path, run: &str) -> Result<(), WriteError> {
    let tree = Tree::open(root)?;
    if !crate::model::files::run_id_ok(run) {
        return Err(invalid(tree.show(&run_dir(run)), format!("{run:?} is not a run id")));
    }
    Ok(remove_run(&tree, run)?)
}

/// The config file and env file one staged candidate's run reads, under `root`; `None` when
/// the reference names no run directory.
pub(crate) fn staged_files(root: &Path, staged: &StagedRef) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    if !crate::model::files::run_id_ok(&staged.run) || !id_ok(&staged.id) {
        return None;
    }
    let dir = root.join(run_dir(&staged.run)).join(&staged.id);
    Some((dir.join(CONF), dir.join(ENV)))
}

/// A benchmark run's staged candidate: which run, which files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StagedRef {
    pub(crate) run: String,
    pub(crate) id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "20261205T090000Z-42";

    fn files() -> Vec<RunFiles> {
        let rules = "allreduce,0,1099511627776,ring,ll128,-1,-1,-1\n".to_string();
        let mut buff = BTreeMap::new();
        buff.insert("NCCL_BUFFSIZE".to_string(), "8388608".to_string());
        vec![RunFiles::new(BTreeMap::new(), Some(rules)), RunFiles::new(buff, None)]
    }

    #[test]
    fn every_candidate_gets_its_config_the_plugin_and_its_rules_and_the_next_run_clears_it() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        std::fs::write(
            root.path().join("etc/nccl.conf"),
            "NCCL_TUNER_PLUGIN=/old.so\nNCCL_BUFFSIZE=4194304\nNCCL_IB_HCA=mlx5_0\n",
        )
        .unwrap();
        let plugin = PluginCopy::of(b"\x7fELF plugin");
        let f = files();
        let ids = stage(root.path(), RUN, Some(&plugin), &f).unwrap();
        let dir = root.path().join("var/lib/topo-tune/tune").join(RUN);
        let choice = std::fs::read_to_string(dir.join(&ids[0]).join(CONF)).unwrap();
        let so = dir.join(TUNE_PLUGIN).display().to_string();
        let csv = dir.join(&ids[0]).join(RULES).display().to_string();
        assert_eq!(
            choice,
            format!(
                "NCCL_TUNER_CONFIG_FILE={csv}\nNCCL_TUNER_PLUGIN={so}\nNCCL_BUFFSIZE=4194304\nNCCL_IB_HCA=mlx5_0\n"
            )
        );
        let global = std::fs::read_to_string(dir.join(&ids[1]).join(CONF)).unwrap();
        assert_eq!(
            global,
            "NCCL_BUFFSIZE=8388608\nNCCL_TUNER_PLUGIN=/old.so\nNCCL_IB_HCA=mlx5_0\n"
        );
        assert_eq!(std::fs::read(dir.join(TUNE_PLUGIN)).unwrap(), b"\x7fELF plugin");
        // A killed run's directory is removed by the next run's first stage.
        let next = "20261205T100000Z-43";
        stage(root.path(), next, Some(&plugin), &f[1..]).unwrap();
        assert!(!dir.exists(), "the earlier run's files are gone");
        unstage(root.path(), next).unwrap();
        assert!(std::fs::read_dir(root.path().join("var/lib/topo-tune/tune"))
            .unwrap()
            .next()
            .is_none());
    }

    #[test]
    fn what_does_not_hold_up_is_refused_and_nothing_is_written() {
        let root = tempfile::tempdir().unwrap();
        let mut bad = files();
        bad[0].rules = Some("allreduce,0,1,warp,ll,-1,-1,-1\n".into());
        assert!(stage(root.path(), RUN, Some(&PluginCopy::of(b"\x7fELF")), &bad).is_err());
        let mut forged = files();
        forged[1]
            .settings
            .insert("NCCL_TUNER_PLUGIN".into(), "/tmp/evil.so".into());
        assert!(
            forged[1].check().is_err(),
            "the plugin's variables are topo-tune's to set"
        );
        let mut tampered = PluginCopy::of(b"\x7fELF");
        tampered.hex.replace_range(0..2, "00");
        assert!(stage(root.path(), RUN, Some(&tampered), &files()).is_err());
        assert!(stage(root.path(), "../../etc", None, &files()).is_err());
        assert!(staged_files(
            root.path(),
            &StagedRef {
                run: RUN.into(),
                id: "../x".into()
            }
        )
        .is_none());
    }
}
