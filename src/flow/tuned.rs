//! A tuning read back for a rollout (`init --tuning`, `apply --tuning`): `tuning.json` read
//! bounded and reviewed like any artifact, its rules file made again from it and held to the
//! one `tune` wrote beside it, and the plugin that reads it — all before a node is contacted.

use crate::apply::plugin::PluginCopy;
use crate::apply::writer::Tuner;
use crate::error::Error;
use crate::model::Refusal;
use crate::tune::tuning::{self, Tuning};
use std::path::{Path, PathBuf};

/// How large a tuning.json may be (a tuning holds at most 1,024 rules).
const MAX_TUNING: u64 = 4 << 20;

/// `--tuning` as given, with the plugin it rolls out.
#[derive(Debug, Clone)]
pub(crate) struct TuningGiven {
    /// `tune --output-dir DIR`, or its `tuning.json`.
    pub(crate) path: PathBuf,
    /// topo-tune's plugin (`--tuner-plugin`, default beside this binary).
    pub(crate) plugin: PathBuf,
}

/// A tuning ready to be given to nodes: what it says, the rules file and plugin it installs
/// (none when it keeps only globals).
#[derive(Debug, Clone)]
pub(crate) struct Rollable {
    pub(crate) file: PathBuf,
    pub(crate) tuning: Tuning,
    pub(crate) tuner: Option<Tuner>,
}

fn bad(path: &Path, message: impl Into<String>) -> Error {
    Error::TuningFile {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Read and check `--tuning`; nothing on a node has been touched when this refuses.
pub(crate) fn read(given: &TuningGiven) -> Result<Rollable, Error> {
    let (file, beside) = if given.path.is_dir() {
        (given.path.join("tuning.json"), given.path.join("nccl-tuner.csv"))
    } else {
        let dir = given.path.parent().unwrap_or(Path::new("."));
        (given.path.clone(), dir.join("nccl-tuner.csv"))
    };
    let text = crate::input::read_text(&file, MAX_TUNING, "tuning.json").map_err(|e| bad(&file, e.to_string()))?;
    let (tuning, csv) = from_text(&text).map_err(|why| bad(&file, why.0))?;
    same_as_beside(&beside, &csv)?;
    let tuner = if crate::tune::onto::has_rules(&tuning) {
        let bytes = super::preflight::tuner_plugin(&given.plugin)?;
        Some(Tuner {
            csv,
            plugin: Some(PluginCopy::of(&bytes)),
        })
    } else {
        None
    };
    Ok(Rollable { file, tuning, tuner })
}

/// A tuning.json's text as a rollout obeys it, with the rules file it makes: this build's
/// schema (unknown fields refused), reviewed (`tuning::review`), something to roll out, and a
/// rules file the plugin reads whole with every rule. Pure (the fuzz target calls it).
pub(crate) fn from_text(text: &str) -> Result<(Tuning, String), Refusal> {
    let tuning: Tuning = serde_json::from_str(text).map_err(|e| {
        Refusal(format!(
            "line {} column {}: {e} (write it with `topo-tune tune`)",
            e.line(),
            e.column()
        ))
    })?;
    tuning::review(&tuning).map_err(|r| Refusal(format!("{}: the tuning is not obeyed", r.0)))?;
    if tuning.rules.is_empty() && tuning.globals.is_empty() {
        return Err(Refusal(
            "holds no rule and no global: NCCL's own choice held wherever it was measured, so there is nothing to roll out"
                .into(),
        ));
    }
    let csv = tuning::csv(&tuning);
    tuning::check_csv(&tuning, &csv)?;
    Ok((tuning, csv))
}

/// The rules file `tune` wrote beside tuning.json, when there is one, must be the one the
/// rollout makes from tuning.json: a hand edit would otherwise be silently replaced.
fn same_as_beside(beside: &Path, made: &str) -> Result<(), Error> {
    let on_disk = match crate::input::read_text(beside, MAX_TUNING, "nccl-tuner.csv") {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(bad(beside, e.to_string())),
    };
    if on_disk != made {
        let line = on_disk
            .lines()
            .zip(made.lines().chain(std::iter::repeat("")))
            .position(|(a, b)| a != b)
            .map_or_else(|| made.lines().count().max(on_disk.lines().count()), |i| i + 1);
        return Err(bad(
            beside,
            format!(
                "line {line} differs from the rules tuning.json makes (edited by hand?): the rollout writes what tuning.json says; restore the file or tune again"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::tuning::tests::sample;

    fn dir_with(t: &Tuning) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("tuning.json"), serde_json::to_string_pretty(t).unwrap()).unwrap();
        std::fs::write(d.path().join("nccl-tuner.csv"), tuning::csv(t)).unwrap();
        std::fs::write(d.path().join("plugin.so"), b"\x7fELF a plugin").unwrap();
        d
    }

    fn given(d: &Path, path: &str) -> TuningGiven {
        TuningGiven {
            path: d.join(path),
            plugin: d.join("plugin.so"),
        }
    }

    #[test]
    fn a_tuning_is_read_from_its_directory_or_file_with_its_plugin() {
        let d = dir_with(&sample());
        for path in ["", "tuning.json"] {
            let r = read(&given(d.path(), path)).unwrap();
            let t = r.tuner.unwrap();
            assert_eq!(t.csv, tuning::csv(&sample()));
            assert_eq!(t.plugin.unwrap().bytes().unwrap(), b"\x7fELF a plugin");
        }
    }

    /// Hostile shapes of tuning.json: each refused with a reason, none obeyed.
    #[test]
    fn hostile_tunings_are_refused() {
        let json = |t: &Tuning| serde_json::to_string(t).unwrap();
        let mut cases: Vec<(String, &str)> = Vec::new();
        let mut bell = sample();
        bell.hardware = Some("8 GPU(s)\u{7}".into());
        cases.push((json(&bell), "hardware"));
        let mut upside = sample();
        upside.rules[0].min_bytes = upside.rules[0].max_bytes + 1;
        cases.push((json(&upside), "bounds"));
        let mut overlap = sample();
        let first = overlap.rules[0].clone();
        overlap.rules.push(first);
        cases.push((json(&overlap), "overlaps"));
        let mut many = sample();
        many.rules = (0..1100u64)
            .map(|i| tuning::Rule {
                min_bytes: i * 10,
                max_bytes: i * 10 + 1,
                ..sample().rules[0].clone()
            })
            .collect();
        cases.push((json(&many), "more than"));
        let mut chunk = sample();
        chunk.globals[0].name = "NCCL_P2P_NET_CHUNKSIZE".into();
        cases.push((json(&chunk), "never set by tune"));
        let mut why = sample();
        why.rules[0].why = "line\nbreak".into();
        cases.push((json(&why), "one line"));
        let extra = json(&sample()).replacen('{', "{\"obey\":true,", 1);
        cases.push((extra, "unknown field"));
        let twice = json(&sample()).replacen('{', "{\"schema\":1,", 1);
        cases.push((twice, "duplicate field"));
        cases.push(("[]".into(), "line 1"));
        for (text, want) in cases {
            let e = from_text(&text).unwrap_err().0;
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn an_edited_csv_a_bad_json_an_empty_tuning_and_a_missing_plugin_are_refused() {
        let d = dir_with(&sample());
        let csv = d.path().join("nccl-tuner.csv");
        std::fs::write(&csv, tuning::csv(&sample()).replace("tree", "ring")).unwrap();
        let e = read(&given(d.path(), "")).unwrap_err().to_string();
        assert!(e.contains("nccl-tuner.csv: line 4 differs"), "{e}");
        std::fs::remove_file(&csv).unwrap();
        assert!(
            read(&given(d.path(), "")).is_ok(),
            "no CSV beside it: made from tuning.json"
        );

        std::fs::write(d.path().join("tuning.json"), "{\n  \"schema\": 1,\n  \"set\": 7\n}").unwrap();
        let e = read(&given(d.path(), "")).unwrap_err().to_string();
        assert!(e.contains("tuning.json: line 3 column"), "{e}");

        let mut empty = sample();
        empty.rules.clear();
        empty.globals.clear();
        let d = dir_with(&empty);
        let e = read(&given(d.path(), "")).unwrap_err().to_string();
        assert!(e.contains("nothing to roll out"), "{e}");

        let mut gain_zero = sample();
        gain_zero.rules[0].gain.low = -0.01;
        let d = dir_with(&gain_zero);
        assert!(read(&given(d.path(), ""))
            .unwrap_err()
            .to_string()
            .contains("not obeyed"));

        let d = dir_with(&sample());
        std::fs::write(d.path().join("plugin.so"), b"#!/bin/sh").unwrap();
        let e = read(&given(d.path(), "")).unwrap_err().to_string();
        assert!(e.contains("not an ELF"), "{e}");
    }
}
