//! Settings that come from an artifact rather than from this run's rules — a reviewed
//! `plan.json`, the candidates of a rollout record — checked before they are written: what
//! cluster.yaml's `nccl:` must pass ([`check_node_wide`]), and for the variables that name a
//! file NCCL reads or a library every job loads, only the value topo-tune itself gives or
//! cluster.yaml states. An artifact travels (CI, pull requests, a state directory); the
//! operator's cluster.yaml and this build are what is trusted. Pure.

use super::table::{check_node_wide, lookup, Rejection, Syntax};
use crate::model::files::TOPOLOGY;
use crate::model::{NcclVersion, Setting};
use std::collections::BTreeMap;

/// Variables whose value makes NCCL read a file or load code: an artifact may carry only what
/// topo-tune or cluster.yaml would write.
const LOADS: [&str; 3] = ["NCCL_TOPO_FILE", "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN"];

fn loads_something(name: &str) -> bool {
    LOADS.contains(&name) || lookup(name).is_some_and(|v| v.syntax == Syntax::Path)
}

/// Check an artifact's settings for one node class. `stated`: cluster.yaml's `nccl:`;
/// `has_topology`: the artifact carries the topology file topo-tune writes at [`TOPOLOGY`].
pub(crate) fn check_settings(
    settings: &[Setting],
    stated: &BTreeMap<String, String>,
    has_topology: bool,
    version: Option<NcclVersion>,
) -> Result<(), Rejection> {
    let mut seen = std::collections::HashSet::new();
    for s in settings {
        let reject = |reason: String| Rejection {
            name: s.name.clone(),
            value: s.value.clone(),
            reason,
        };
        if !seen.insert(s.name.as_str()) {
            return Err(reject("set twice".into()));
        }
        check_node_wide(&s.name, &s.value, version)?;
        if !loads_something(&s.name) || stated.get(&s.name) == Some(&s.value) {
            continue;
        }
        let own = s.name == "NCCL_TOPO_FILE" && s.value == TOPOLOGY && has_topology;
        if !own {
            return Err(reject(format!(
                "names a file NCCL reads or a library every job loads: from a plan or a record only the value cluster.yaml's `nccl:` states{}",
                if s.name == "NCCL_TOPO_FILE" {
                    format!(" (or {TOPOLOGY}, with the topology file topo-tune writes)")
                } else {
                    String::new()
                }
            )));
        }
    }
    Ok(())
}

/// The settings of a drop-in topo-tune rendered (a rollout record's candidate): `# ` comment
/// lines and `NAME=VALUE` lines, nothing else.
pub(crate) fn dropin_settings(text: &str) -> Result<Vec<Setting>, Rejection> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with("# ") || line == "#" {
            continue;
        }
        let assignment = line.split_once('=').filter(|_| !line.starts_with('#'));
        let Some((name, value)) = assignment else {
            return Err(Rejection {
                name: line.chars().take(64).collect(),
                value: String::new(),
                reason: "not a `NAME=VALUE` line of a drop-in topo-tune renders".into(),
            });
        };
        out.push(Setting {
            name: name.to_string(),
            value: value.to_string(),
            reason: String::new(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str, value: &str) -> Setting {
        Setting {
            name: name.into(),
            value: value.into(),
            reason: String::new(),
        }
    }

    const V: Option<NcclVersion> = Some(NcclVersion(2, 28, 9));

    #[test]
    fn files_and_libraries_only_as_topo_tune_or_cluster_yaml_names_them() {
        let none = BTreeMap::new();
        let err = |set: &[Setting], stated: &BTreeMap<String, String>, topo: bool| {
            check_settings(set, stated, topo, V).map_err(|r| r.reason)
        };
        assert!(err(&[s("NCCL_TOPO_FILE", "/etc/shadow")], &none, true)
            .unwrap_err()
            .contains("cluster.yaml"));
        assert!(err(&[s("NCCL_TOPO_FILE", TOPOLOGY)], &none, true).is_ok());
        assert!(
            err(&[s("NCCL_TOPO_FILE", TOPOLOGY)], &none, false).is_err(),
            "no topology file with it"
        );
        assert!(err(&[s("NCCL_NET_PLUGIN", "/any.so")], &none, false).is_err());
        assert!(err(&[s("NCCL_TUNER_PLUGIN", "evil")], &none, false).is_err());
        let stated: BTreeMap<String, String> = [("NCCL_NET_PLUGIN".to_string(), "aws-ofi".to_string())].into();
        assert!(err(&[s("NCCL_NET_PLUGIN", "aws-ofi")], &stated, false).is_ok());
        assert!(err(&[s("NCCL_NET_PLUGIN", "other")], &stated, false).is_err());
        assert!(err(&[s("NCCL_P2P_DISABLE", "1")], &none, false)
            .unwrap_err()
            .contains("debugging"));
        assert!(err(
            &[s("NCCL_IB_HCA", "=mlx5_0"), s("NCCL_IB_HCA", "=mlx5_1")],
            &none,
            false
        )
        .unwrap_err()
        .contains("twice"));
        assert!(err(&[s("NCCL_IB_HCA", "=mlx5_0"), s("NCCL_CROSS_NIC", "0")], &none, false).is_ok());
    }

    #[test]
    fn a_dropin_is_comments_and_assignments() {
        let text = "# topo-tune 0.1.0: why\nNCCL_IB_HCA==mlx5_0\n\nNCCL_CROSS_NIC=0\n";
        let got = dropin_settings(text).unwrap();
        assert_eq!(got, vec![s("NCCL_IB_HCA", "=mlx5_0"), s("NCCL_CROSS_NIC", "0")]);
        assert!(dropin_settings("NCCL_IB_HCA==mlx5_0\ninclude /etc/x\n").is_err());
        assert!(dropin_settings("#NCCL_X=1\n").is_err(), "only `# ` comments");
    }
}
