//! The node labels a Kubernetes scheduler reads, from the plan's domains and cluster.yaml's
//! fabric: `nvidia.com/gpu.clique` (GPU Feature Discovery's NVLink clique label) and NVIDIA
//! Topograph's `network.topology.nvidia.com/accelerator` for the NVLink domain, Topograph's
//! `…/leaf` and `…/spine` for the switches. As a YAML list of Node objects (kustomize patches,
//! or `kubectl apply --server-side`) and as `kubectl label` commands. Values longer than a label
//! holds (63) become Topograph's `x` + FNV-64a hex of the name. Pure.

use crate::model::fabric::Placement;

/// One node's labels, keys in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeLabels {
    pub(crate) node: String,
    pub(crate) labels: Vec<(&'static str, String)>,
}

pub(crate) const CLIQUE: &str = "nvidia.com/gpu.clique";
pub(crate) const ACCELERATOR: &str = "network.topology.nvidia.com/accelerator";
pub(crate) const LEAF: &str = "network.topology.nvidia.com/leaf";
pub(crate) const SPINE: &str = "network.topology.nvidia.com/spine";

/// A Kubernetes label value: 63 characters at most, alphanumerics at both ends, `-`, `_`, `.`
/// between.
pub(crate) fn value_ok(v: &str) -> bool {
    v.len() <= 63
        && (v.is_empty()
            || (v
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                && v.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
                && v.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())))
}

/// The value as written: itself when it fits, else Topograph's `x`-prefixed FNV-64a hash.
pub(crate) fn label_value(v: &str) -> String {
    if value_ok(v) {
        return v.to_string();
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("x{h:016x}")
}

/// Each node's labels (nodes without any are left out).
pub(crate) fn node_labels(nodes: &[(String, Placement, Option<String>)]) -> Vec<NodeLabels> {
    nodes
        .iter()
        .filter_map(|(node, p, domain)| {
            let mut labels = Vec::new();
            if let Some(d) = domain {
                labels.push((CLIQUE, label_value(d)));
                labels.push((ACCELERATOR, label_value(d)));
            }
            if let Some(l) = &p.leaf {
                labels.push((LEAF, label_value(l)));
            }
            if let Some(s) = &p.spine {
                labels.push((SPINE, label_value(s)));
            }
            (!labels.is_empty()).then(|| NodeLabels {
                node: node.clone(),
                labels,
            })
        })
        .collect()
}

/// Node objects carrying only their labels, one YAML document each.
pub(crate) fn labels_yaml(nodes: &[NodeLabels], header: &str) -> String {
    let mut out = format!(
        "# {header}\n# Node labels for topology-aware scheduling. Apply as kustomize patches, or:\n#   kubectl apply --server-side --field-manager=topo-tune -f k8s-node-labels.yaml\n# GPU Feature Discovery manages {CLIQUE} itself on nodes it runs on.\n"
    );
    for n in nodes {
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: {}\n  labels:\n",
            n.node
        ));
        for (k, v) in &n.labels {
            out.push_str(&format!("    {k}: \"{v}\"\n"));
        }
    }
    out
}

/// The same labels as `kubectl label` commands.
pub(crate) fn labels_sh(nodes: &[NodeLabels], header: &str) -> String {
    let mut out = format!("#!/bin/sh\n# {header}\nset -e\n");
    for n in nodes {
        let pairs: Vec<String> = n.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!(
            "kubectl label node --overwrite {} {}\n",
            n.node,
            pairs.join(" ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_become_topographs_hash() {
        assert_eq!(label_value("leaf-1"), "leaf-1");
        let long = "x".repeat(64);
        let v = label_value(&long);
        assert_eq!(v.len(), 17);
        assert!(v.starts_with('x') && value_ok(&v));
        assert_eq!(v, label_value(&long), "the same name, the same label");
        // FNV-64a of "a" (the reference value).
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        h ^= u64::from(b'a');
        h = h.wrapping_mul(0x0100_0000_01b3);
        assert_eq!(h, 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn domains_and_switches_become_labels() {
        let p = Placement {
            spine: Some("spine-1".into()),
            leaf: Some("leaf-2".into()),
            rack: Some("rack-9".into()),
        };
        let nodes = node_labels(&[
            (
                "gb-01".into(),
                p.clone(),
                Some("dc6e40c4-d722-4357-9ba6-5291dd461278.2".into()),
            ),
            ("login".into(), Placement::default(), None),
        ]);
        assert_eq!(nodes.len(), 1, "a node with nothing to say is left out");
        let keys: Vec<&str> = nodes[0].labels.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, [CLIQUE, ACCELERATOR, LEAF, SPINE]);
        let yaml = labels_yaml(&nodes, "test");
        assert!(yaml.contains("  name: gb-01\n"));
        assert!(yaml.contains("    network.topology.nvidia.com/leaf: \"leaf-2\"\n"));
        let sh = labels_sh(&nodes, "test");
        assert!(sh.contains(
            "kubectl label node --overwrite gb-01 nvidia.com/gpu.clique=dc6e40c4-d722-4357-9ba6-5291dd461278.2 "
        ));
    }
}
