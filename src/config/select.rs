//! Which nodes a rollout touches, in which order: the canary selector (`rack-1`,
//! `KEY=VALUE`, `gpu[001-016]`) and the waves after it (one per rack in fabric order, or
//! `--wave-size N`). Pure: the inventory in, host lists out.

use super::{hostlist, Inventory, NodeSpec};
use crate::model::fabric::Placement;
use crate::model::natural_key;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One wave: a name for humans and its hosts, in inventory order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WavePlan {
    pub(crate) name: String,
    pub(crate) hosts: Vec<String>,
}

/// Why a selector (`--canary`, `--nodes`) selects nothing it may.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SelectError(pub(crate) String);

impl From<SelectError> for String {
    fn from(e: SelectError) -> String {
        e.0
    }
}

/// The hosts `sel` names: a rack (`rack: NAME` label), a `KEY=VALUE` label, or a host list
/// or range. Nothing selected is an error, as is a host not in the inventory; `flag` is the
/// option the selector came from (`--canary`, `--nodes`), named in the message.
pub(crate) fn select(flag: &str, sel: &str, inv: &Inventory) -> Result<Vec<String>, SelectError> {
    let sel = sel.trim();
    let picked: Vec<&NodeSpec> = if let Some((k, v)) = sel.split_once('=') {
        inv.nodes
            .iter()
            .filter(|n| n.labels.get(k.trim()).is_some_and(|x| x == v.trim()))
            .collect()
    } else if inv.nodes.iter().any(|n| n.labels.get("rack").is_some_and(|r| r == sel)) {
        inv.nodes
            .iter()
            .filter(|n| n.labels.get("rack").is_some_and(|r| r == sel))
            .collect()
    } else {
        let mut hosts = Vec::new();
        for part in split_top_level(sel) {
            hosts.extend(hostlist::expand(part).map_err(|e| SelectError(format!("{flag} {sel}: {e}")))?);
        }
        let wanted: BTreeSet<&str> = hosts.iter().map(String::as_str).collect();
        if let Some(missing) = hosts.iter().find(|h| !inv.nodes.iter().any(|n| &n.host == *h)) {
            let racks: BTreeSet<&str> = inv
                .nodes
                .iter()
                .filter_map(|n| n.labels.get("rack"))
                .map(String::as_str)
                .collect();
            return Err(SelectError(format!(
                "{flag} {sel}: `{missing}` is neither a rack (racks: {}) nor a host of {}",
                if racks.is_empty() {
                    "none labelled".to_string()
                } else {
                    racks.into_iter().collect::<Vec<_>>().join(", ")
                },
                inv.path.display()
            )));
        }
        inv.nodes.iter().filter(|n| wanted.contains(n.host.as_str())).collect()
    };
    if picked.is_empty() {
        return Err(SelectError(format!(
            "{flag} {sel}: no node of {} matches",
            inv.path.display()
        )));
    }
    Ok(picked.into_iter().map(|n| n.host.clone()).collect())
}

/// `a,b[1-3,5],c` → `a`, `b[1-3,5]`, `c` (commas inside brackets belong to the range).
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect()
}

/// The waves of a rollout over `hosts` (the nodes that have something to apply): the canary
/// first, then the rest in fabric order (spine, leaf, rack), one wave per rack or `wave_size`
/// nodes at a time. `canary_only` stops after the canary.
pub(crate) fn waves(
    inv: &Inventory,
    hosts: &[String],
    canary: Option<&[String]>,
    wave_size: Option<usize>,
    canary_only: bool,
) -> Vec<WavePlan> {
    let in_canary = |h: &str| canary.is_some_and(|c| c.iter().any(|x| x == h));
    let mut out = Vec::new();
    if let Some(c) = canary {
        let hosts: Vec<String> = hosts.iter().filter(|h| in_canary(h)).cloned().collect();
        if !hosts.is_empty() {
            out.push(WavePlan {
                name: "canary".into(),
                hosts,
            });
        }
        if canary_only || c.is_empty() {
            return out;
        }
    }
    let mut rest: Vec<(&NodeSpec, Placement)> = inv
        .nodes
        .iter()
        .filter(|n| hosts.contains(&n.host) && !in_canary(&n.host))
        .map(|n| (n, Placement::of(&n.labels, inv.fabric.as_ref())))
        .collect();
    let key = |p: &Placement| [&p.spine, &p.leaf, &p.rack].map(|x| x.as_deref().map(natural_key));
    rest.sort_by_key(|a| key(&a.1));
    match wave_size {
        Some(n) => {
            for (i, chunk) in rest.chunks(n.max(1)).enumerate() {
                out.push(WavePlan {
                    name: format!("wave-{}", i + 1),
                    hosts: chunk.iter().map(|(n, _)| n.host.clone()).collect(),
                });
            }
        }
        None => {
            for (node, place) in rest {
                let name = place.rack.clone().unwrap_or_else(|| "no-rack".into());
                match out.last_mut().filter(|w| w.name == name) {
                    Some(w) => w.hosts.push(node.host.clone()),
                    None => out.push(WavePlan {
                        name,
                        hosts: vec![node.host.clone()],
                    }),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv() -> Inventory {
        let yaml = "fabric:\n  leaves:\n    leaf-2: {spine: s1}\n    leaf-1: {spine: s1}\n  racks:\n    rack-10: {leaf: leaf-2}\n    rack-2: {leaf: leaf-1}\n    rack-1: {leaf: leaf-1}\n\
            nodes:\n  - host: \"gpu[01-04]\"\n    labels: {rack: rack-1, pool: a}\n    simulate: aws-p5en\n\
            \x20 - host: \"gpu[05-06]\"\n    labels: {rack: rack-10}\n    simulate: aws-p5en\n\
            \x20 - host: \"gpu[07-08]\"\n    labels: {rack: rack-2, pool: a}\n    simulate: aws-p5en\n";
        Inventory::parse(std::path::Path::new("c.yaml"), yaml).unwrap()
    }

    #[test]
    fn selectors() {
        let inv = inv();
        assert_eq!(
            select("--canary", "rack-1", &inv).unwrap(),
            ["gpu01", "gpu02", "gpu03", "gpu04"]
        );
        assert_eq!(select("--canary", "pool=a", &inv).unwrap().len(), 6);
        assert_eq!(
            select("--canary", "gpu[02-03],gpu07", &inv).unwrap(),
            ["gpu02", "gpu03", "gpu07"]
        );
        assert!(select("--canary", "rack-9", &inv)
            .unwrap_err()
            .0
            .contains("racks: rack-1, rack-10, rack-2"));
        assert!(select("--canary", "pool=b", &inv).unwrap_err().0.contains("no node"));
    }

    #[test]
    fn waves_follow_the_fabric_after_the_canary() {
        let inv = inv();
        let all: Vec<String> = inv.nodes.iter().map(|n| n.host.clone()).collect();
        let canary = select("--canary", "rack-1", &inv).unwrap();
        let w = waves(&inv, &all, Some(&canary), None, false);
        let names: Vec<&str> = w.iter().map(|w| w.name.as_str()).collect();
        // leaf-1 (rack-2) before leaf-2 (rack-10): fabric order, not name order.
        assert_eq!(names, ["canary", "rack-2", "rack-10"]);
        let w = waves(&inv, &all, Some(&canary), Some(3), false);
        assert_eq!(w.iter().map(|w| w.hosts.len()).collect::<Vec<_>>(), [4, 3, 1]);
        assert_eq!(waves(&inv, &all, Some(&canary), None, true).len(), 1);
        let w = waves(&inv, &all, None, None, false);
        assert_eq!(w[0].name, "rack-1");
    }
}
