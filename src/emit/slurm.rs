//! Slurm's view of the fabric: `topology.conf` (topology/tree, or topology/block when the
//! cluster has multi-node NVLink domains) and `topology.yaml` (Slurm 25.05+: the block and the
//! tree topologies side by side), from each node's Slurm name and place (spine, leaf, rack),
//! host lists compressed the way Slurm writes them.
//!
//! Blocks (topology.conf(5), src/plugins/topology/block/block_record.c): one `BlockName=`
//! per NVLink domain, named `block001`… with the domain in a comment (as NVIDIA Topograph
//! writes them); `BlockSizes=` the base size (the smallest domain: Slurm refuses a block
//! smaller than the base) and its power-of-two multiples up to the number of domains. Nodes in
//! no domain are in no block: Slurm warns "blocks lack access to N nodes" and places no job
//! there under topology/block; the file lists them in a comment.
//!
//! The tree: a rack's switch holds its nodes, a leaf's holds its racks, a spine's its leaves.
//! A switch holds either nodes or switches (Slurm's tree plugin reads one or the other), so
//! nodes placed under a leaf or spine without a rack get a switch of their own
//! (`<leaf>-nodes`); nodes with no place at all go under `unplaced`. When more than one switch
//! is left at the top, a `core` switch joins them: topo-tune's cost model routes between
//! spines through a core, and Slurm lets a job span only switches with a common parent.

use crate::model::fabric::Placement;
use std::collections::BTreeMap;

/// One switch of the tree: its name and either its nodes or its child switches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Switch {
    pub(crate) name: String,
    pub(crate) children: Children,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Children {
    Nodes(Vec<String>),
    Switches(Vec<String>),
}

/// Why the fabric cannot be written as Slurm's tree (cluster.yaml refuses these first; the
/// emitter refuses them again rather than write a file Slurm misreads).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SlurmError {
    #[error(
        "`{0}` is not a name Slurm's topology files can hold (letters, digits, `-`, `_`, `.`; 1 to 63 characters)"
    )]
    BadName(String),
    #[error("switch `{0}` would be listed twice (a name used at two levels of the fabric)")]
    Twice(String),
    #[error("switch `{0}` would be its own ancestor (a name used at two levels of the fabric)")]
    Cycle(String),
}

/// A name Slurm reads as one token of `SwitchName=`/`Nodes=`/`Switches=` lines and as a YAML
/// plain scalar: nothing that ends a line, starts a comment, separates keys or lists, or quotes.
fn name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !name.starts_with(['-', '.'])
}

/// The switches for these nodes (Slurm name, place), leaves first, the root last.
pub(crate) fn tree(nodes: &[(String, Placement)]) -> Result<Vec<Switch>, SlurmError> {
    for (name, p) in nodes {
        for n in std::iter::once(name)
            .chain(p.rack.iter())
            .chain(p.leaf.iter())
            .chain(p.spine.iter())
        {
            if !name_ok(n) {
                return Err(SlurmError::BadName(n.clone()));
            }
        }
    }
    // Level 0: the switch each node hangs off.
    let mut leaf_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // Each switch's parent, as far as the fabric says.
    let mut parent: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (name, p) in nodes {
        let (switch, up) = match (&p.rack, &p.leaf, &p.spine) {
            (Some(r), leaf, spine) => (r.clone(), leaf.clone().or_else(|| spine.clone())),
            (None, Some(l), _) => (format!("{l}-nodes"), Some(l.clone())),
            (None, None, Some(s)) => (format!("{s}-nodes"), Some(s.clone())),
            (None, None, None) => ("unplaced".to_string(), None),
        };
        leaf_of.entry(switch.clone()).or_default().push(name.clone());
        parent.entry(switch).or_insert(up);
        if let (Some(l), Some(s)) = (&p.leaf, &p.spine) {
            parent.entry(l.clone()).or_insert_with(|| Some(s.clone()));
        }
        if let Some(l) = &p.leaf {
            parent.entry(l.clone()).or_insert(None);
        }
        if let Some(s) = &p.spine {
            parent.entry(s.clone()).or_insert(None);
        }
    }
    let mut out: Vec<Switch> = leaf_of
        .into_iter()
        .map(|(name, nodes)| Switch {
            name,
            children: Children::Nodes(nodes),
        })
        .collect();
    let mut below: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (child, up) in &parent {
        if let Some(up) = up {
            below.entry(up.clone()).or_default().push(child.clone());
        }
    }
    // Leaves before spines: a switch is listed after its children.
    let mut uppers: Vec<(usize, String, Vec<String>)> = Vec::new();
    for (name, kids) in below {
        uppers.push((depth(&name, &parent)?, name, kids));
    }
    uppers.sort();
    out.extend(uppers.into_iter().map(|(_, name, kids)| Switch {
        name,
        children: Children::Switches(kids),
    }));
    let tops: Vec<String> = out
        .iter()
        .filter(|s| parent.get(&s.name).is_none_or(Option::is_none))
        .map(|s| s.name.clone())
        .collect();
    if tops.len() > 1 {
        out.push(Switch {
            name: "core".into(),
            children: Children::Switches(tops),
        });
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(s) = out.iter().find(|s| !seen.insert(s.name.as_str())) {
        return Err(SlurmError::Twice(s.name.clone()));
    }
    Ok(out)
}

/// How far a switch is above the nodes (1 for a leaf of racks, 2 for a spine): its longest
/// chain of children, each switch visited once (a name at two levels makes a loop).
fn depth(name: &str, parent: &BTreeMap<String, Option<String>>) -> Result<usize, SlurmError> {
    let mut level = vec![name];
    let mut visited = std::collections::HashSet::from([name]);
    let mut d = 0;
    while !level.is_empty() {
        d += 1;
        let mut next = Vec::new();
        for (child, up) in parent {
            if up.as_deref().is_some_and(|u| level.contains(&u)) {
                if !visited.insert(child.as_str()) {
                    return Err(SlurmError::Cycle(child.clone()));
                }
                next.push(child.as_str());
            }
        }
        level = next;
    }
    Ok(d - 1)
}

/// `topology.conf` for `TopologyPlugin=topology/tree`.
pub(crate) fn topology_conf(switches: &[Switch], header: &str) -> String {
    let mut out = format!("# {header}\n");
    for s in switches {
        let (key, names) = match &s.children {
            Children::Nodes(n) => ("Nodes", n),
            Children::Switches(n) => ("Switches", n),
        };
        out.push_str(&format!("SwitchName={} {key}={}\n", s.name, compress(names)));
    }
    out
}

/// `topology.yaml` (Slurm 25.05+): one tree topology, the cluster's default.
pub(crate) fn topology_yaml(switches: &[Switch], header: &str) -> String {
    let mut out = format!("# {header}\n- topology: topo-tune\n  cluster_default: true\n  tree:\n    switches:\n");
    for s in switches {
        let (key, names) = match &s.children {
            Children::Nodes(n) => ("nodes", n),
            Children::Switches(n) => ("children", n),
        };
        out.push_str(&format!(
            "    - switch: {}\n      {key}: \"{}\"\n",
            s.name,
            compress(names)
        ));
    }
    out
}

/// One block: Slurm's name for it, the NVLink domain it is, and its nodes (Slurm names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) name: String,
    pub(crate) domain: String,
    pub(crate) nodes: Vec<String>,
}

/// The blocks of these domains (domain, nodes), in order, and `BlockSizes`: the smallest
/// domain's size D, then 2D, 4D … while the number of domains reaches it (NVIDIA Topograph's
/// inference), at most 16 levels (Slurm's MAX_BLOCK_LEVELS).
pub(crate) fn blocks(domains: &[(String, Vec<String>)]) -> Result<(Vec<Block>, Vec<usize>), SlurmError> {
    let mut out = Vec::new();
    for (i, (domain, nodes)) in domains.iter().enumerate() {
        if let Some(bad) = nodes.iter().find(|n| !name_ok(n)) {
            return Err(SlurmError::BadName(bad.clone()));
        }
        out.push(Block {
            name: format!("block{:03}", i + 1),
            domain: domain.clone(),
            nodes: nodes.clone(),
        });
    }
    let Some(base) = out.iter().map(|b| b.nodes.len()).filter(|&n| n > 0).min() else {
        return Ok((out, Vec::new()));
    };
    let mut sizes = vec![base];
    let mut level = 1usize;
    while level * 2 <= out.len() && sizes.len() < 16 {
        level *= 2;
        sizes.push(base * level);
    }
    Ok((out, sizes))
}

/// `topology.conf` for `TopologyPlugin=topology/block`.
pub(crate) fn block_conf(blocks: &[Block], sizes: &[usize], unblocked: &[String], header: &str) -> String {
    let mut out = format!(
        "# {header}
# TopologyPlugin=topology/block: one block per multi-node NVLink domain
"
    );
    for b in blocks {
        out.push_str(&format!(
            "# {}={}
BlockName={} Nodes={}
",
            b.name,
            b.domain,
            b.name,
            compress(&b.nodes)
        ));
    }
    out.push_str(&format!(
        "BlockSizes={}
",
        sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(",")
    ));
    if !unblocked.is_empty() {
        out.push_str(&format!(
            "# in no NVLink domain, so in no block (Slurm warns that blocks lack access to them): {}
",
            compress(unblocked)
        ));
    }
    out
}

/// `topology.yaml` with a block topology (the cluster's default) beside the tree.
pub(crate) fn topology_yaml_with_blocks(
    switches: &[Switch],
    blocks: &[Block],
    sizes: &[usize],
    header: &str,
) -> String {
    let mut out = format!(
        "# {header}
- topology: topo-tune-nvlink
  cluster_default: true
  block:
    block_sizes:
"
    );
    for s in sizes {
        out.push_str(&format!(
            "      - {s}
"
        ));
    }
    out.push_str(
        "    blocks:
",
    );
    for b in blocks {
        out.push_str(&format!(
            "      # {}
      - block: {}
        nodes: \"{}\"
",
            b.domain,
            b.name,
            compress(&b.nodes)
        ));
    }
    let tree = topology_yaml(switches, header);
    let tree = tree
        .split_once('\n')
        .map_or(tree.as_str(), |(_, rest)| rest)
        .replace("  cluster_default: true\n", "  cluster_default: false\n");
    out.push_str(&tree);
    out
}

/// A host list as Slurm writes it: `gpu[01-04,07],login1` — names grouped by what precedes
/// their numeric suffix and by its number of digits, runs of numbers as ranges.
pub(crate) fn compress(names: &[String]) -> String {
    // (prefix, digit count) → numbers; names without digits stay whole.
    let mut groups: BTreeMap<(String, usize), Vec<(u64, String)>> = BTreeMap::new();
    let mut plain: Vec<String> = Vec::new();
    for name in names {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, suffix) = name.split_at(name.len() - digits);
        match suffix.parse::<u64>() {
            // Grouped by digit count: a range's lower bound sets its zero padding, so
            // `09` and `10` share `[09-10]`, while `9` and `10` stay apart (`9,10`).
            Ok(n) if digits <= 18 => {
                groups
                    .entry((prefix.to_string(), digits))
                    .or_default()
                    .push((n, suffix.to_string()));
            }
            _ => plain.push(name.clone()),
        }
    }
    let mut parts: Vec<String> = Vec::new();
    for ((prefix, _), mut nums) in groups {
        nums.sort();
        nums.dedup();
        if let [(_, only)] = nums.as_slice() {
            parts.push(format!("{prefix}{only}"));
            continue;
        }
        let mut ranges: Vec<String> = Vec::new();
        let mut i = 0;
        while i < nums.len() {
            let mut j = i;
            while j + 1 < nums.len() && nums[j + 1].0 == nums[j].0 + 1 {
                j += 1;
            }
            ranges.push(if i == j {
                nums[i].1.clone()
            } else {
                format!("{}-{}", nums[i].1, nums[j].1)
            });
            i = j + 1;
        }
        parts.push(format!("{prefix}[{}]", ranges.join(",")));
    }
    plain.sort();
    plain.dedup();
    parts.extend(plain);
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn at(rack: Option<&str>, leaf: Option<&str>, spine: Option<&str>) -> Placement {
        Placement {
            rack: rack.map(str::to_string),
            leaf: leaf.map(str::to_string),
            spine: spine.map(str::to_string),
        }
    }

    #[test]
    fn block_sizes_follow_slurms_rules() {
        let d = |name: &str, n: usize, from: usize| {
            (
                name.to_string(),
                (from..from + n).map(|i| format!("gb-{i:02}")).collect::<Vec<_>>(),
            )
        };
        let (b, sizes) = blocks(&[d("a.1", 18, 1), d("a.2", 18, 19)]).unwrap();
        assert_eq!(sizes, [18, 36], "the base, then doubled while domains reach it");
        assert_eq!(b[0].name, "block001");
        assert_eq!(b[1].domain, "a.2");
        let (_, sizes) = blocks(&[d("x", 18, 1), d("y", 9, 19), d("z", 18, 28)]).unwrap();
        assert_eq!(sizes, [9, 18], "the smallest domain is the base: no block is smaller");
        let (_, sizes) = blocks(&[d("x", 4, 1)]).unwrap();
        assert_eq!(sizes, [4]);
        let conf = block_conf(&b, &[18, 36], &names(&["login1"]), "made by a test");
        assert!(conf.contains("BlockName=block001 Nodes=gb-[01-18]\n"), "{conf}");
        assert!(
            conf.contains("# block002=a.2\nBlockName=block002 Nodes=gb-[19-36]\n"),
            "{conf}"
        );
        assert!(conf.contains("BlockSizes=18,36\n"));
        assert!(conf.contains("login1"));
        assert!(blocks(&[("x".into(), names(&["a b"]))]).is_err());
    }

    #[test]
    fn host_lists_compress_as_slurm_writes_them() {
        assert_eq!(
            compress(&names(&["p5en-01", "p5en-02", "p5en-03", "p5en-04"])),
            "p5en-[01-04]"
        );
        assert_eq!(
            compress(&names(&["gpu1", "gpu2", "gpu4", "gpu9", "gpu10"])),
            "gpu[1-2,4,9],gpu10"
        );
        assert_eq!(compress(&names(&["gpu-09", "gpu-10", "gpu-11"])), "gpu-[09-11]");
        assert_eq!(compress(&names(&["n01", "n1"])), "n1,n01");
        assert_eq!(compress(&names(&["login", "gpu7"])), "gpu7,login");
        assert_eq!(compress(&names(&["r1-n01", "r1-n02", "r2-n01"])), "r1-n[01-02],r2-n01");
        assert_eq!(compress(&names(&["a0", "a1"])), "a[0-1]");
    }

    #[test]
    fn racks_hang_off_leaves_and_leaves_off_spines_with_one_root() {
        let nodes = vec![
            (
                "p5en-01".to_string(),
                at(Some("rack-1"), Some("leaf-1"), Some("spine-1")),
            ),
            (
                "p5en-02".to_string(),
                at(Some("rack-1"), Some("leaf-1"), Some("spine-1")),
            ),
            (
                "ndv5-01".to_string(),
                at(Some("rack-2"), Some("leaf-2"), Some("spine-1")),
            ),
        ];
        let conf = topology_conf(&tree(&nodes).unwrap(), "test");
        assert_eq!(
            conf,
            "# test\nSwitchName=rack-1 Nodes=p5en-[01-02]\nSwitchName=rack-2 Nodes=ndv5-01\n\
             SwitchName=leaf-1 Switches=rack-1\nSwitchName=leaf-2 Switches=rack-2\n\
             SwitchName=spine-1 Switches=leaf-[1-2]\n"
        );
    }

    #[test]
    fn names_slurm_would_misread_and_loops_are_refused() {
        for bad in [
            "r\nSwitchName=evil",
            "r#x",
            "r x",
            "r=x",
            "a;b",
            "$(x)",
            "\"q\"",
            "a/b",
            "",
            "r\u{2028}x",
            "-r",
        ] {
            let nodes = vec![("n1".to_string(), at(Some(bad), None, None))];
            assert_eq!(tree(&nodes), Err(SlurmError::BadName(bad.to_string())), "{bad:?}");
        }
        // rack-1 hangs off leaf rack-1: its own parent.
        let nodes = vec![("n1".to_string(), at(Some("rack-1"), Some("rack-1"), None))];
        assert!(tree(&nodes).is_err());
        // A leaf whose spine is a rack of another node.
        let nodes = vec![
            ("n1".to_string(), at(Some("r1"), Some("l1"), Some("r1"))),
            ("n2".to_string(), at(Some("r2"), Some("r1"), None)),
        ];
        assert!(tree(&nodes).is_err());
    }

    #[test]
    fn loose_and_unplaced_nodes_get_switches_and_a_core_joins_the_tops() {
        let nodes = vec![
            ("a1".to_string(), at(None, Some("leaf-1"), None)),
            ("b1".to_string(), at(None, None, None)),
            ("c1".to_string(), at(Some("r9"), None, None)),
        ];
        let switches = tree(&nodes).unwrap();
        let conf = topology_conf(&switches, "t");
        assert!(conf.contains("SwitchName=leaf-1-nodes Nodes=a1\n"), "{conf}");
        assert!(conf.contains("SwitchName=leaf-1 Switches=leaf-1-nodes\n"), "{conf}");
        assert!(conf.contains("SwitchName=unplaced Nodes=b1\n"), "{conf}");
        assert!(
            conf.ends_with("SwitchName=core Switches=leaf-1,r9,unplaced\n"),
            "{conf}"
        );
        let yaml = topology_yaml(&switches, "t");
        assert!(
            yaml.contains("    - switch: core\n      children: \"leaf-1,r9,unplaced\"\n"),
            "{yaml}"
        );
    }
}
