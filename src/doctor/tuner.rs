//! `nccl-tuner`: a tuner plugin the node's NCCL settings name (`NCCL_TUNER_PLUGIN`) is there,
//! is an ELF shared object, and exports a tuner symbol this node's NCCL looks for; the rules
//! file it is given (`NCCL_TUNER_CONFIG_FILE`) reads as the plugins read it. NCCL tries the
//! newest symbol first (src/plugin/tuner.cc): `ncclTunerPlugin_v6` from 2.30.3, `_v5` from
//! 2.28.3, `_v4` from 2.24.3, `_v3` from 2.22.3, `_v2` from 2.21.5; a plugin exporting none
//! of those its NCCL knows is "unsupported" and NCCL tunes alone, silently.

use super::conf::Found;
use super::facts::Facts;
use super::finding::Finding;
use crate::model::NcclVersion;

/// Most bytes of a plugin read (a tuner plugin is well under this).
const MAX_PLUGIN: u64 = 64 << 20;

/// The symbols an NCCL version looks for, newest first.
fn symbols_for(v: Option<NcclVersion>) -> Vec<&'static str> {
    let all = [
        (NcclVersion(2, 30, 3), "ncclTunerPlugin_v6"),
        (NcclVersion(2, 28, 3), "ncclTunerPlugin_v5"),
        (NcclVersion(2, 24, 3), "ncclTunerPlugin_v4"),
        (NcclVersion(2, 22, 3), "ncclTunerPlugin_v3"),
        (NcclVersion(2, 21, 5), "ncclTunerPlugin_v2"),
    ];
    all.iter()
        .filter(|(since, _)| v.is_none_or(|v| v >= *since))
        .map(|(_, s)| *s)
        .collect()
}

/// A 64- or 32-bit ELF shared object (`ET_DYN`), little- or big-endian.
fn is_shared_object(b: &[u8]) -> bool {
    if b.len() < 18 || &b[..4] != b"\x7fELF" {
        return false;
    }
    let e_type = match b[5] {
        1 => u16::from_le_bytes([b[16], b[17]]),
        2 => u16::from_be_bytes([b[16], b[17]]),
        _ => return false,
    };
    e_type == 3
}

/// The tuner symbols the object names (in its dynamic string table, where an exported
/// symbol's name is).
fn exported(b: &[u8]) -> Vec<&'static str> {
    symbols_for(None)
        .into_iter()
        .filter(|s| {
            let want = [s.as_bytes(), b"\0"].concat();
            b.windows(want.len()).any(|w| w == want.as_slice())
        })
        .collect()
}

fn setting<'a>(f: &'a Facts, name: &str) -> Option<&'a Found> {
    f.settings.first(name)
}

pub(super) fn nccl_tuner(f: &Facts) -> Option<Finding> {
    let Some(plugin) = setting(f, "NCCL_TUNER_PLUGIN") else {
        return Some(Finding::skip(
            "no NCCL_TUNER_PLUGIN in NCCL's config or environment files",
        ));
    };
    let at = format!("{}:{}", plugin.file, plugin.line);
    if plugin.value == "none" {
        return Some(Finding::pass(format!("{at} turns tuner plugins off")));
    }
    if !plugin.value.starts_with('/') {
        return Some(Finding::skip(format!(
            "{at} names {:?}: NCCL's loader looks for libnccl-tuner-{}.so in the library path, which doctor does not search",
            plugin.value, plugin.value
        )));
    }
    let bytes = match f.fs.read_bytes(&plugin.value, MAX_PLUGIN) {
        Ok(b) => b,
        Err(e) => {
            return Some(Finding::fail(
                format!(
                    "{at} names {}, which cannot be read ({e}): NCCL tunes alone",
                    plugin.value
                ),
                "install the plugin there (cargo build --release -p topo-tune-tuner), or remove the line",
            ))
        }
    };
    if !is_shared_object(&bytes) {
        return Some(Finding::fail(
            format!("{} is not an ELF shared object: NCCL cannot load it", plugin.value),
            "point NCCL_TUNER_PLUGIN at the plugin's .so",
        ));
    }
    let wanted = symbols_for(f.nccl);
    let has = exported(&bytes);
    let Some(used) = wanted.iter().find(|s| has.contains(s)) else {
        return Some(Finding::fail(
            format!(
                "{} exports {:?}, none of what NCCL {} looks for ({}): NCCL calls it unsupported and tunes alone",
                plugin.value,
                has,
                f.nccl.map_or("(version unknown)".into(), |v| v.to_string()),
                wanted.join(", ")
            ),
            "use a plugin built for this NCCL (topo-tune's exports v6, v5 and v4)",
        ));
    };
    Some(rules(f, &format!("{} ({used})", plugin.value)))
}

/// The plugin is usable: now its rules file.
fn rules(f: &Facts, plugin: &str) -> Finding {
    let Some(file) = setting(f, "NCCL_TUNER_CONFIG_FILE") else {
        return Finding::warn(
            format!("{plugin} is loaded with no NCCL_TUNER_CONFIG_FILE: topo-tune's plugin then has no rules (NCCL's example reads nccl_tuner.conf in the job's directory)"),
            "set NCCL_TUNER_CONFIG_FILE to the nccl-tuner.csv topo-tune tune wrote",
        );
    };
    let bytes =
        f.fs.read_bytes(&file.value, nccl_tuner_topo_tune::rules::MAX_BYTES)
            .map_err(|e| e.to_string());
    let measured = bytes
        .as_ref()
        .ok()
        .and_then(|b| crate::tune::tuning::measured_on(&String::from_utf8_lossy(b)));
    let read = bytes.and_then(|b| nccl_tuner_topo_tune::rules::parse(&b).map_err(|e| e.to_string()));
    match read {
        // Rules measured under another NCCL: its cost model and its algorithms have changed
        // since, and so may what wins.
        Ok(r) if measured.zip(f.nccl).is_some_and(|(m, n)| m != n) && !r.rules.is_empty() => Finding::warn(
            format!(
                "{} holds {} rule(s) measured on NCCL {}, this node runs NCCL {}: tune again",
                file.value,
                r.rules.len(),
                measured.map(|v| v.to_string()).unwrap_or_default(),
                f.nccl.map(|v| v.to_string()).unwrap_or_default()
            ),
            "topo-tune tune --canary <rack> on this NCCL, then roll the new tuning out",
        ),
        Ok(r) if r.refused.is_empty() => {
            Finding::pass(format!("{plugin} with {} rule(s) from {}", r.rules.len(), file.value))
        }
        Ok(r) if r.rules.is_empty() => Finding::fail(
            format!(
                "{} ({}:{}): {}: the plugin refuses every line and NCCL tunes alone",
                file.value,
                file.file,
                file.line,
                r.refused.first().map(|x| x.to_string()).unwrap_or_default()
            ),
            "write it again with topo-tune tune (never by hand)",
        ),
        // The plugin drops each line it cannot read and keeps the rest: the file applies, but
        // not as written (a dropped line can let a later one match first).
        Ok(r) => Finding::warn(
            format!(
                "{} ({}:{}): the plugin refuses {} line(s) and applies the other {} rule(s): {}",
                file.value,
                file.file,
                file.line,
                r.refused.len(),
                r.rules.len(),
                r.refused
                    .iter()
                    .take(3)
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            "write it again with topo-tune tune (never by hand)",
        ),
        Err(why) => Finding::fail(
            format!(
                "{} ({}:{}): {why}: the plugin refuses it and NCCL tunes alone",
                file.value, file.file, file.line
            ),
            "write it again with topo-tune tune (never by hand)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_symbols_follow_the_version_and_the_elf_header_is_read() {
        assert_eq!(symbols_for(Some(NcclVersion(2, 28, 9)))[0], "ncclTunerPlugin_v5");
        assert_eq!(symbols_for(Some(NcclVersion(2, 30, 7)))[0], "ncclTunerPlugin_v6");
        assert_eq!(
            symbols_for(Some(NcclVersion(2, 24, 3))),
            vec!["ncclTunerPlugin_v4", "ncclTunerPlugin_v3", "ncclTunerPlugin_v2"]
        );
        assert!(symbols_for(Some(NcclVersion(2, 19, 3))).is_empty());
        let mut so = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0".to_vec();
        so.extend_from_slice(b"...\0ncclTunerPlugin_v4\0ncclTunerPlugin_v5\0");
        assert!(is_shared_object(&so));
        assert_eq!(exported(&so), vec!["ncclTunerPlugin_v5", "ncclTunerPlugin_v4"]);
        so[16] = 2; // ET_EXEC
        assert!(!is_shared_object(&so));
        assert!(!is_shared_object(b"#!/bin/sh\n"));
        assert!(exported(b"ncclTunerPlugin_v5x").is_empty(), "a name, not a prefix");
    }
}
