//! The cluster.yaml text that states a discovered fabric: the `fabric:` section (each leaf
//! group a rack on one logical leaf, its uplinks summed, under the spines it reaches; the
//! rails) and the hosts' `rack` labels as node entries, ready to paste.

use super::derive::Discovered;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The rack and leaf names a group gets: a one-leaf group is that leaf, in `rack-<leaf>`; a
/// group of rail leaves is `su-N`, on one logical leaf `su-N-leaves`.
pub(crate) fn rack_and_leaf(group: &super::derive::Group) -> (String, String) {
    match group.leaves.as_slice() {
        [one] if group.name == *one => (format!("rack-{one}"), one.clone()),
        _ => (group.name.clone(), format!("{}-leaves", group.name)),
    }
}

/// A name as YAML reads it back unchanged: double-quoted, escaped (JSON's string syntax is
/// YAML's double-quoted scalar).
fn q(name: &str) -> String {
    serde_json::to_string(name).unwrap_or_else(|_| "\"\"".into())
}

/// The `fabric:` section and `nodes:` entries; `source` is named in the header comment.
pub(crate) fn cluster_yaml(d: &Discovered, source: &str) -> String {
    let mut out = String::new();
    let levels = d.switches.iter().filter_map(|s| s.level).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "# The fabric as {} saw it (topo-tune fabric): {} switch(es) in {levels} level(s), {} host(s).",
        source.replace('\n', " "),
        d.switches.len(),
        d.hosts.len()
    );
    out.push_str("fabric:\n  leaves:\n");
    // A spine set the groups share is one spine of the model (its tree): named after its one
    // switch, or `spines-N`.
    let mut spine_names: BTreeMap<Vec<String>, String> = BTreeMap::new();
    for g in d.groups.iter().filter(|g| !g.hosts.is_empty()) {
        let next = spine_names.len() + 1;
        spine_names
            .entry(g.spines.clone())
            .or_insert_with(|| match g.spines.as_slice() {
                [one] => one.clone(),
                _ => format!("spines-{next}"),
            });
    }
    for g in d.groups.iter().filter(|g| !g.hosts.is_empty()) {
        let (_, leaf) = rack_and_leaf(g);
        // Hosts on a spine itself (no leaf between): under the spine set that switch is in.
        let spine = match g.spines.is_empty() {
            false => spine_names.get(&g.spines),
            true => spine_names
                .iter()
                .find(|(set, _)| g.leaves.iter().any(|l| set.contains(l)))
                .map(|(_, name)| name),
        };
        let mut fields = Vec::new();
        if let Some(s) = spine {
            fields.push(format!("spine: {}", q(s)));
        }
        if g.uplink_gbps > 0.0 {
            fields.push(format!("uplink_gbps: {}", g.uplink_gbps));
        }
        let _ = writeln!(out, "    {}: {{{}}}", q(&leaf), fields.join(", "));
    }
    out.push_str("  racks:\n");
    for g in d.groups.iter().filter(|g| !g.hosts.is_empty()) {
        let (rack, leaf) = rack_and_leaf(g);
        let _ = writeln!(out, "    {}: {{leaf: {}}}", q(&rack), q(&leaf));
    }
    if let Some(r) = d.rails {
        let _ = writeln!(out, "  rails: {r}");
    }
    // What `plan` tells NCCL of the rails (NCCL_IB_HCA's rail and plane fields,
    // NCCL_CROSS_NIC), and the hosts it tells nothing rail-dependent.
    let map = |m: &BTreeMap<String, u32>| {
        m.iter()
            .map(|(k, v)| format!("{}: {v}", q(k)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !d.rail_hcas.is_empty() {
        let _ = writeln!(out, "  rail_hcas: {{{}}}", map(&d.rail_hcas));
    }
    if !d.hca_planes.is_empty() {
        let _ = writeln!(out, "  hca_planes: {{{}}}", map(&d.hca_planes));
    }
    if !d.off_rail.is_empty() {
        out.push_str("  off_rail:\n");
        for (host, why) in &d.off_rail {
            let _ = writeln!(out, "    {}: {}", q(host), q(why));
        }
    }
    out.push_str("# Each host's rack (merge these labels into your node entries):\nnodes:\n");
    for g in d.groups.iter().filter(|g| !g.hosts.is_empty()) {
        let (rack, _) = rack_and_leaf(g);
        // One entry per range: a node entry's `host` is one pattern, not a comma list.
        for pattern in crate::config::select::split_top_level(&crate::emit::slurm::compress(&g.hosts)) {
            let _ = writeln!(out, "  - host: {}\n    labels: {{rack: {}}}", q(pattern), q(&rack));
        }
    }
    out
}
