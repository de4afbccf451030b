//! A tuning given to a node's NCCL class (`init --tuning`, `apply --tuning`): which nodes may
//! have it (the hardware and the NCCL it was measured on), and the settings that carry it —
//! topo-tune's plugin and its rules file, the kept globals with their evidence. Pure.

use super::tuning::{interval, Tuning};
use crate::model::files::{plugin_path, TUNER_CSV};
use crate::model::plan::{NcclClass, Plan};
use crate::model::{NcclVersion, Refusal, Setting};

/// Whether the tuning has rules NCCL asks a tuner about (else no plugin and no rules file).
pub(crate) fn has_rules(t: &Tuning) -> bool {
    t.rules.iter().any(|r| r.collective.csv().is_some())
}

/// Why `host` may not have the tuning, or `None` when it may: a node whose plan cannot tell
/// it from the measured ones, running the NCCL they ran.
pub(crate) fn refused_for(plan: &Plan, host: &str, version: Option<NcclVersion>, t: &Tuning) -> Option<String> {
    let Some(measured) = &t.hardware else {
        return Some(
            "the tuning does not say what hardware it was measured on (an older topo-tune made it): tune again".into(),
        );
    };
    let Some(here) = super::hardware::key(plan, host) else {
        return Some("the plan gives this node no class: its hardware is unknown".into());
    };
    if here != *measured {
        return Some(format!(
            "the tuning was measured on other hardware ({measured}); this node: {here}"
        ));
    }
    match (t.nccl_version, version) {
        (Some(was), Some(now)) if was != now => {
            Some(format!("measured on NCCL {was}, this node runs {now}: tune again"))
        }
        (Some(was), None) => Some(format!(
            "measured on NCCL {was}, and this node's NCCL version is unknown"
        )),
        _ => None,
    }
}

/// `class` with the tuning's settings: the plugin (at its content-addressed path) and the rules
/// file when there are rules, each kept global with its evidence. A global the plan already
/// sets keeps the plan's value (said in `left_out`); a class that names another tuner is not
/// given the tuning (`Err`: why).
pub(crate) fn tuned_class(class: &NcclClass, t: &Tuning, plugin_sha256: Option<&str>) -> Result<NcclClass, Refusal> {
    let mut out = class.clone();
    let set = |out: &mut NcclClass, name: &str, value: String, reason: String| {
        out.settings.push(Setting {
            name: name.into(),
            value,
            reason,
        })
    };
    if let Some(sha) = plugin_sha256.filter(|_| has_rules(t)) {
        for name in ["NCCL_TUNER_PLUGIN", "NCCL_TUNER_CONFIG_FILE"] {
            if let Some(s) = class.settings.iter().find(|s| s.name == name) {
                return Err(Refusal(format!(
                    "the plan sets {name}={} (another tuner): the tuning is not given",
                    s.value
                )));
            }
        }
        let measured = t
            .nccl_version
            .map(|v| format!(", measured on NCCL {v}"))
            .unwrap_or_default();
        let rules = t.rules.iter().filter(|r| r.collective.csv().is_some()).count();
        set(
            &mut out,
            "NCCL_TUNER_PLUGIN",
            plugin_path(sha),
            format!(
                "tune on {} ({rules} rule(s){measured}): topo-tune's tuner plugin tells NCCL's cost table what won there",
                t.set
            ),
        );
        set(
            &mut out,
            "NCCL_TUNER_CONFIG_FILE",
            TUNER_CSV.into(),
            format!("the tuning's rules, read by the plugin ({TUNER_CSV})"),
        );
    }
    for g in &t.globals {
        if let Some(s) = class.settings.iter().find(|s| s.name == g.name) {
            out.left_out.push(format!(
                "{}={} (tune on {}): the plan sets {}={}, kept",
                g.name, g.value, t.set, s.name, s.value
            ));
            continue;
        }
        set(
            &mut out,
            &g.name,
            g.value.clone(),
            format!("tune on {}: {} ({})", t.set, g.why, interval(&g.gain)),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::tuning::tests::sample;

    fn class() -> NcclClass {
        NcclClass {
            name: "nccl-0".into(),
            hosts: vec!["gpu1".into()],
            nccl_version: Some(NcclVersion(2, 28, 3)),
            settings: vec![Setting {
                name: "NCCL_IB_HCA".into(),
                value: "=mlx5_0".into(),
                reason: "rail".into(),
            }],
            left_out: Vec::new(),
            topology_xml: None,
            gpu_ports: Vec::new(),
        }
    }

    #[test]
    fn a_tuning_adds_its_plugin_rules_file_and_globals_with_their_evidence() {
        let mut t = sample();
        t.globals.push(crate::tune::tuning::Global {
            name: "NCCL_BUFFSIZE".into(),
            value: "8388608".into(),
            gain: t.rules[0].gain,
            why: "won at every size".into(),
        });
        let c = tuned_class(&class(), &t, Some(&"ab".repeat(32))).unwrap();
        let get = |n: &str| c.settings.iter().find(|s| s.name == n).map(|s| s.value.clone());
        assert_eq!(get("NCCL_TUNER_PLUGIN"), Some(plugin_path(&"ab".repeat(32))));
        assert_eq!(get("NCCL_TUNER_CONFIG_FILE").as_deref(), Some(TUNER_CSV));
        assert_eq!(get("NCCL_BUFFSIZE").as_deref(), Some("8388608"));
        assert_eq!(get("NCCL_IB_HCA").as_deref(), Some("=mlx5_0"), "the plan's own stay");
        let reason = &c.settings.iter().find(|s| s.name == "NCCL_BUFFSIZE").unwrap().reason;
        assert!(reason.contains("rack-1") && reason.contains('%'), "{reason}");

        // A global the plan sets keeps the plan's value; another tuner refuses the tuning.
        let mut planned = class();
        planned.settings.push(Setting {
            name: "NCCL_BUFFSIZE".into(),
            value: "4194304".into(),
            reason: "cluster.yaml".into(),
        });
        let c = tuned_class(&planned, &t, Some(&"ab".repeat(32))).unwrap();
        assert_eq!(c.settings.iter().filter(|s| s.name == "NCCL_BUFFSIZE").count(), 1);
        assert!(c.left_out.iter().any(|l| l.contains("kept")), "{:?}", c.left_out);
        planned.settings.push(Setting {
            name: "NCCL_TUNER_PLUGIN".into(),
            value: "libnccl-tuner-other.so".into(),
            reason: "cluster.yaml".into(),
        });
        assert!(tuned_class(&planned, &t, Some("ab"))
            .unwrap_err()
            .0
            .contains("another tuner"));

        // Globals only: no plugin, no rules file.
        t.rules.clear();
        let c = tuned_class(&class(), &t, None).unwrap();
        assert!(c.settings.iter().all(|s| !s.name.starts_with("NCCL_TUNER")));
    }

    #[test]
    fn only_nodes_of_the_measured_hardware_and_nccl_may_have_it() {
        use crate::model::fabric::NodeHints;
        use crate::solve::plan::{plan, NcclPolicy, PlanInput, PlanNode};
        let (a, b) = (crate::model::testing::p4d(), crate::model::testing::p5en());
        let node = |host: &str, s| PlanNode {
            host: host.into(),
            labels: Default::default(),
            snapshot: s,
            hints: NodeHints::default(),
        };
        let nodes = [node("a0", &a), node("a1", &a), node("b0", &b)];
        let p = plan(&PlanInput {
            nodes: &nodes,
            fabric: None,
            message_bytes: 1 << 30,
            nccl: &NcclPolicy::default(),
        });
        let mut t = sample();
        t.hardware = Some(super::super::hardware::key(&p, "a0").unwrap());
        let v = t.nccl_version;
        assert_eq!(refused_for(&p, "a1", v, &t), None, "the same hardware and NCCL");
        let other = refused_for(&p, "b0", v, &t).unwrap();
        assert!(other.contains("other hardware"), "{other}");
        let newer = refused_for(&p, "a1", Some(NcclVersion(2, 30, 7)), &t).unwrap();
        assert_eq!(newer, "measured on NCCL 2.28.3, this node runs 2.30.7: tune again");
        assert!(refused_for(&p, "a1", None, &t).unwrap().contains("unknown"));
        assert!(refused_for(&p, "nowhere", v, &t).unwrap().contains("no class"));
        t.hardware = None;
        assert!(refused_for(&p, "a1", v, &t).unwrap().contains("tune again"));
        assert!(super::super::hardware::common(&p, &["a0".into(), "b0".into()]).is_err());
        assert!(super::super::hardware::common(&p, &["a0".into(), "a1".into()]).is_ok());
    }
}
