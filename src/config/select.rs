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

/// The hosts `sel` names, in inventory order. `sel` is terms joined by commas (commas inside
/// `[…]` belong to a range): a rack (`rack: NAME` label, or a range of rack names
/// `rack-[1-2]`), `KEY=VALUE` on any label, a host list or range (`gpu[001-016]`), or `all`; a
/// term after `!` takes its nodes out (Ansible's `--limit` spelling; pdsh's and clush's `-x`).
/// What selects nothing by accident is refused before any node is touched: an empty selector
/// (`--canary "$RACK"` with `$RACK` unset), one of only exclusions unless it says `all,!x`,
/// another tool's spelling (clush `@group`, Ansible `a:!b`, pdsh `^file`), a term that matches
/// no node, a host not in the inventory, and nothing left. `flag` is the option the selector
/// came from (`--canary`, `--nodes`, `TOPO_TUNE_NODES`), named in the message.
pub(crate) fn select(flag: &str, sel: &str, inv: &Inventory) -> Result<Vec<String>, SelectError> {
    let terms = terms(flag, sel)?;
    let sel = sel.trim();
    let mut wanted: Option<BTreeSet<&str>> = None;
    let mut unwanted: BTreeSet<&str> = BTreeSet::new();
    for (out, term) in terms {
        let hosts = if term == ALL {
            inv.nodes.iter().map(|n| n.host.as_str()).collect()
        } else {
            term_hosts(flag, sel, term, inv)?
        };
        if out {
            unwanted.extend(hosts);
        } else {
            wanted.get_or_insert_with(BTreeSet::new).extend(hosts);
        }
    }
    let picked: Vec<String> = inv
        .nodes
        .iter()
        .filter(|n| wanted.as_ref().is_some_and(|w| w.contains(n.host.as_str())))
        .filter(|n| !unwanted.contains(n.host.as_str()))
        .map(|n| n.host.clone())
        .collect();
    if picked.is_empty() {
        return Err(SelectError(format!(
            "{flag} {sel}: no node of {} is left",
            inv.path.display()
        )));
    }
    Ok(picked)
}

/// The selector's word for every node: `all,!gpu07` is every node but gpu07.
pub(crate) const ALL: &str = "all";

/// The selector's terms, each with whether it leaves its nodes out; refused when it selects
/// nothing as written, starts from every node without saying `all`, or is another tool's
/// spelling.
fn terms<'s>(flag: &str, sel: &'s str) -> Result<Vec<(bool, &'s str)>, SelectError> {
    let shown = sel.trim();
    let terms: Vec<(bool, &str)> = split_top_level(shown)
        .into_iter()
        .map(|t| match t.strip_prefix('!') {
            Some(rest) => (true, rest.trim()),
            None => (false, t),
        })
        .collect();
    if terms.is_empty() {
        return Err(SelectError(format!(
            "{flag} {shown:?}: an empty selector selects no node (an unset variable?); name a rack, KEY=VALUE, hosts, or `all`"
        )));
    }
    for (_, t) in &terms {
        if t.is_empty() {
            return Err(SelectError(format!("{flag} {shown}: an empty term")));
        }
        if let Some(said) = foreign_spelling(t) {
            return Err(SelectError(format!("{flag} {shown}: {said}")));
        }
    }
    if terms.iter().all(|(out, _)| *out) {
        return Err(SelectError(format!(
            "{flag} {shown}: only exclusions; say `all,{shown}` for every other node"
        )));
    }
    Ok(terms)
}

/// Another tool's selector spelling, and topo-tune's for it.
fn foreign_spelling(term: &str) -> Option<String> {
    if let Some(group) = term.strip_prefix('@') {
        return Some(format!(
            "`@{group}` is clush's group spelling; here a group is a rack (`{group}`) or a label (`KEY=VALUE`)"
        ));
    }
    if let Some(file) = term.strip_prefix('^') {
        return Some(format!(
            "`^{file}` is pdsh's host-file spelling; give the hosts as a list or range (`gpu[01-16]`), a rack or `KEY=VALUE`"
        ));
    }
    if term.contains(':') && !term.contains('=') && term.contains(['!', '&']) {
        return Some(format!(
            "`{term}` is Ansible's pattern spelling; here terms are joined by commas: `{}`",
            term.replace(":!", ",!").replace(":&", ",").replace(':', ",")
        ));
    }
    None
}

/// One term's hosts: a `KEY=VALUE` label, a rack, or hosts of the inventory.
fn term_hosts<'a>(flag: &str, sel: &str, term: &str, inv: &'a Inventory) -> Result<Vec<&'a str>, SelectError> {
    if term.is_empty() {
        return Err(SelectError(format!("{flag} {sel}: an empty term")));
    }
    let labelled = |k: &str, v: &str| -> Vec<&'a str> {
        inv.nodes
            .iter()
            .filter(|n| n.labels.get(k).is_some_and(|x| x == v))
            .map(|n| n.host.as_str())
            .collect()
    };
    let picked = if let Some((k, v)) = term.split_once('=') {
        labelled(k.trim(), v.trim())
    } else if inv
        .nodes
        .iter()
        .any(|n| n.labels.get("rack").is_some_and(|r| r == term))
    {
        labelled("rack", term)
    } else {
        // A range may name racks (`rack-[1-2]`) as well as hosts: each name is one or the other.
        let names = hostlist::expand(term).map_err(|e| SelectError(format!("{flag} {sel}: {e}")))?;
        let known: std::collections::HashMap<&str, &'a str> =
            inv.nodes.iter().map(|n| (n.host.as_str(), n.host.as_str())).collect();
        let mut out = Vec::with_capacity(names.len());
        for name in &names {
            match known.get(name.as_str()) {
                Some(host) => out.push(*host),
                None => {
                    let rack = labelled("rack", name);
                    if rack.is_empty() {
                        return Err(not_a_node(flag, sel, name, inv));
                    }
                    out.extend(rack);
                }
            }
        }
        out
    };
    if picked.is_empty() {
        return Err(SelectError(format!(
            "{flag} {sel}: `{term}` matches no node of {}",
            inv.path.display()
        )));
    }
    Ok(picked)
}

fn not_a_node(flag: &str, sel: &str, missing: &str, inv: &Inventory) -> SelectError {
    let racks: BTreeSet<&str> = inv
        .nodes
        .iter()
        .filter_map(|n| n.labels.get("rack"))
        .map(String::as_str)
        .collect();
    let ansible = if missing.contains(':') && !missing.contains("::") {
        "; Ansible joins patterns with `:`, here terms are joined by commas"
    } else {
        ""
    };
    SelectError(format!(
        "{flag} {sel}: `{missing}` is neither a rack (racks: {}) nor a host of {}{ansible}",
        if racks.is_empty() {
            "none labelled".to_string()
        } else {
            racks.into_iter().collect::<Vec<_>>().join(", ")
        },
        inv.path.display()
    ))
}

/// The inventory cut to what `sel` selects (the nodes left out kept aside, for telling one
/// node's answer from another's), and the selected hosts in inventory order. `None`: all.
pub(crate) fn cut(flag: &str, sel: Option<&str>, inv: Inventory) -> Result<(Inventory, Vec<String>), SelectError> {
    let Some(sel) = sel else {
        let hosts = inv.nodes.iter().map(|n| n.host.clone()).collect();
        return Ok((inv, hosts));
    };
    let hosts = select(flag, sel, &inv)?;
    let keep: std::collections::HashSet<&str> = hosts.iter().map(String::as_str).collect();
    let mut inv = inv;
    let (nodes, aside): (Vec<NodeSpec>, Vec<NodeSpec>) = std::mem::take(&mut inv.nodes)
        .into_iter()
        .partition(|n| keep.contains(n.host.as_str()));
    inv.nodes = nodes;
    inv.set_aside.extend(aside);
    Ok((inv, hosts))
}

/// `a,b[1-3,5],c` → `a`, `b[1-3,5]`, `c` (commas inside brackets belong to the range).
pub(crate) fn split_top_level(s: &str) -> Vec<&str> {
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
        assert!(select("--canary", "pool=b", &inv)
            .unwrap_err()
            .0
            .contains("matches no node"));
    }

    #[test]
    fn terms_add_up_and_exclusions_take_out() {
        let inv = inv();
        // A rack and a host beside it; inventory order, each host once.
        assert_eq!(
            select("--nodes", "gpu07,rack-1,gpu02", &inv).unwrap(),
            ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]
        );
        assert_eq!(
            select("--nodes", "rack-1,!gpu[02-03]", &inv).unwrap(),
            ["gpu01", "gpu04"]
        );
        assert_eq!(select("--nodes", "pool=a,!rack=rack-2", &inv).unwrap().len(), 4);
        // Every other node: said with `all`.
        assert_eq!(
            select("--nodes", "all,!rack-1,!gpu05", &inv).unwrap(),
            ["gpu06", "gpu07", "gpu08"]
        );
        assert_eq!(select("--nodes", "all", &inv).unwrap().len(), 8);
        // A typo in an exclusion would touch more than meant: refused like any other.
        assert!(select("--nodes", "all,!rack-9", &inv)
            .unwrap_err()
            .0
            .contains("`rack-9` is neither"));
        assert!(select("--nodes", "all,!pool=b", &inv)
            .unwrap_err()
            .0
            .contains("`pool=b` matches no node"));
        assert!(select("--nodes", "rack-1,!rack-1", &inv)
            .unwrap_err()
            .0
            .contains("no node of c.yaml is left"));
        assert!(
            select("--nodes", "rack-1,,gpu05", &inv).is_ok(),
            "empty parts between commas are dropped"
        );
        assert!(select("--nodes", "!", &inv).unwrap_err().0.contains("an empty term"));
    }

    /// Before: `''`, `','`, `' , '` had no terms and started from every node, and so did
    /// `!rack-1`: a script's `--canary "$RACK"` with `$RACK` unset selected the whole cluster.
    #[test]
    fn a_selector_that_says_nothing_selects_nothing() {
        let inv = inv();
        for empty in ["", ",", " , ", "  "] {
            let e = select("--canary", empty, &inv).unwrap_err().0;
            assert!(e.contains("an empty selector selects no node"), "{empty:?}: {e}");
        }
        let e = select("--nodes", "!rack-1", &inv).unwrap_err().0;
        assert!(e.contains("only exclusions; say `all,!rack-1`"), "{e}");
        assert!(select("--nodes", "!rack-1,!gpu05", &inv).is_err());
    }

    #[test]
    fn rack_ranges_and_other_tools_spellings() {
        let inv = inv();
        // rack-1 and rack-2 (rack-10 is not in the range).
        assert_eq!(select("--nodes", "rack-[1-2]", &inv).unwrap().len(), 6);
        assert_eq!(select("--nodes", "rack-[1,10]", &inv).unwrap().len(), 6);
        assert!(select("--nodes", "rack-[1-3]", &inv)
            .unwrap_err()
            .0
            .contains("`rack-3` is neither"));
        for (sel, want) in [
            ("@gpus", "clush's group spelling"),
            ("^hosts.txt", "pdsh's host-file spelling"),
            (
                "rack-1:!gpu02",
                "Ansible's pattern spelling; here terms are joined by commas: `rack-1,!gpu02`",
            ),
            ("rack-1:rack-2", "Ansible joins patterns with `:`"),
        ] {
            let e = select("--nodes", sel, &inv).unwrap_err().0;
            assert!(e.contains(want), "{sel}: {e}");
        }
    }

    #[test]
    fn a_cut_keeps_the_rest_aside() {
        let (cut, hosts) = cut("--nodes", Some("rack-2"), inv()).unwrap();
        assert_eq!(hosts, ["gpu07", "gpu08"]);
        assert_eq!(cut.nodes.len(), 2);
        assert_eq!(cut.set_aside.len(), 6);
        let (all, hosts) = super::cut("--nodes", None, inv()).unwrap();
        assert_eq!((all.nodes.len(), hosts.len(), all.set_aside.len()), (8, 8, 0));
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
