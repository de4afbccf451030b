//! `fabric`'s tables: the switches of each level, the leaf groups, the findings with their
//! fixes, and where cluster.yaml disagrees.

use super::envelope::{Envelope, NoDetail};
use super::table;
use crate::wires::compare::Diff;
use crate::wires::derive::{Discovered, Finding, Severity, Switch};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Serialize)]
pub(crate) struct FabricPayload {
    #[serde(flatten)]
    pub(crate) discovered: Discovered,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) diff: Option<Diff>,
    /// Where fabric.yaml was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) written: Option<String>,
    /// A cloud topology's placement groups (`-`: none) and their instances.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub(crate) placement_groups: crate::wires::aws::Groups,
}

pub(crate) fn summary(d: &Discovered) -> String {
    let levels = d.switches.iter().filter_map(|s| s.level).max().unwrap_or(0);
    let fails = d.findings.iter().filter(|f| f.severity == Severity::Fail).count();
    format!(
        "fabric: {} switch(es) in {levels} level(s), {} host(s) with {} port(s), {} leaf group(s), rails: {}; {} finding(s), {fails} failing",
        d.switches.len(),
        d.hosts.len(),
        d.hosts.iter().map(|h| h.ports.len()).sum::<usize>(),
        d.groups.iter().filter(|g| !g.hosts.is_empty()).count(),
        d.rails.map_or_else(|| "not rail-optimised".to_string(), |r| r.to_string()),
        d.findings.len()
    )
}

pub(crate) fn render(e: &Envelope<FabricPayload, NoDetail>) -> String {
    let d = &e.payload.discovered;
    let mut out = level_tables(d);
    out.push_str(&groups_table(d));
    // One line per reason, its groups as a host list.
    let mut why_not: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for g in d.groups.iter().filter(|g| !g.hosts.is_empty()) {
        if let Some(why) = &g.not_rail_optimised {
            why_not.entry(why).or_default().push(g.name.clone());
        }
    }
    for (why, names) in why_not {
        let _ = match names.len() {
            1 => writeln!(out, "{}: {why}", names[0]),
            n => writeln!(
                out,
                "{} ({n} groups): {why}",
                cut(&crate::emit::slurm::compress(&names))
            ),
        };
    }
    for (i, p) in d.planes.iter().enumerate() {
        let _ = writeln!(
            out,
            "plane {i}: {} ({} switch(es), {} host(s), {} host port(s))",
            p.file, p.switches, p.hosts, p.host_ports
        );
    }
    if !d.rail_hcas.is_empty() {
        let rails: Vec<String> = d.rail_hcas.iter().map(|(h, r)| format!("{h}={r}")).collect();
        let _ = writeln!(
            out,
            "rails by HCA: {} ({} host(s) off their rails: plan sets nothing rail-dependent for them)",
            rails.join(" "),
            d.off_rail.len()
        );
    }
    for f in &d.findings {
        out.push_str(&finding(f));
    }
    if let Some(diff) = &e.payload.diff {
        out.push_str(&diff_lines(diff));
    }
    if e.payload.placement_groups.len() > 1 {
        for (group, instances) in &e.payload.placement_groups {
            let _ = writeln!(out, "placement group {group}: {}", instances.join(" "));
        }
    }
    if let Some(w) = &e.payload.written {
        let _ = writeln!(out, "wrote {w}");
    }
    let _ = writeln!(out, "{}", e.msg);
    out
}

/// A table of switches per level: host ports, uplinks, the peers with their parallel links.
/// Switches alike (the same host ports, uplinks and parallel links per peer) are one row, their
/// names as a host list: a 700-switch fabric is a few rows, not 700 (the JSON keeps each).
fn level_tables(d: &Discovered) -> String {
    let mut out = String::new();
    let top = d.switches.iter().filter_map(|s| s.level).max().unwrap_or(0);
    for level in 1..=top {
        let mut t = table(&["Switch", "Host ports", "Uplinks", "Links (peer ×n)"]);
        let mut alike: BTreeMap<(u32, u32, Vec<u32>), Vec<&Switch>> = BTreeMap::new();
        for s in d.switches.iter().filter(|s| s.level == Some(level)) {
            let mut shape: Vec<u32> = s.links.values().copied().collect();
            shape.sort_unstable();
            alike.entry((s.host_ports, s.uplinks, shape)).or_default().push(s);
        }
        let mut rows: Vec<(&Switch, Vec<String>)> = alike
            .into_values()
            .map(|members| (members[0], switch_row(&members)))
            .collect();
        rows.sort_by(|a, b| crate::model::natural_cmp(&a.0.name, &b.0.name));
        for (_, row) in rows {
            t.add_row(row);
        }
        let _ = writeln!(
            out,
            "level {level}{}:\n{t}\n",
            if level == 1 { " (leaves)" } else { "" }
        );
    }
    out
}

/// One row for switches alike: their names as a host list (cut at 60 characters, with the
/// count), and their peers where they share them, else how many each has.
fn switch_row(members: &[&Switch]) -> Vec<String> {
    let first = members[0];
    let list = |peers: &[String]| {
        if peers.len() > 4 {
            format!("{} and {} more", peers[..4].join(", "), peers.len() - 4)
        } else {
            peers.join(", ")
        }
    };
    let peers: Vec<String> = first.links.iter().map(|(p, n)| format!("{p}×{n}")).collect();
    if members.len() == 1 {
        return vec![
            first.name.clone(),
            first.host_ports.to_string(),
            first.uplinks.to_string(),
            list(&peers),
        ];
    }
    let names: Vec<String> = members.iter().map(|s| s.name.clone()).collect();
    let shown = cut(&crate::emit::slurm::compress(&names));
    let same_peers = members.iter().all(|s| s.links == first.links);
    let links = if same_peers {
        list(&peers)
    } else {
        let per: Vec<String> = first.links.values().map(|n| format!("×{n}")).collect();
        format!("{} peer(s) each ({})", first.links.len(), list(&per))
    };
    vec![
        format!("{shown} ({} switches)", members.len()),
        first.host_ports.to_string(),
        first.uplinks.to_string(),
        links,
    ]
}

/// The leaf groups; groups alike (as many leaves, hosts, rails and spines, the same uplink) are
/// one row: 100,000 one-instance network nodes of an AWS answer are a line.
fn groups_table(d: &Discovered) -> String {
    let mut g = table(&[
        "Group",
        "Leaves (rail order)",
        "Hosts",
        "Rails",
        "Spines",
        "Uplink Gb/s",
    ]);
    type Shape = (usize, usize, Option<u32>, usize, u64);
    let mut alike: BTreeMap<Shape, Vec<&crate::wires::derive::Group>> = BTreeMap::new();
    for gr in d.groups.iter().filter(|g| !g.hosts.is_empty()) {
        let shape = (
            gr.leaves.len(),
            gr.hosts.len(),
            gr.rails,
            gr.spines.len(),
            gr.uplink_gbps.to_bits(),
        );
        alike.entry(shape).or_default().push(gr);
    }
    let mut rows: Vec<(&str, Vec<String>)> = alike
        .into_values()
        .map(|members| {
            let first = members[0];
            let (name, leaves) = match members.len() {
                1 => (first.name.clone(), first.leaves.join(" ")),
                n => {
                    let names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
                    (
                        format!("{} ({n} groups)", cut(&crate::emit::slurm::compress(&names))),
                        format!("{} each", first.leaves.len()),
                    )
                }
            };
            let row = vec![
                name,
                leaves,
                first.hosts.len().to_string(),
                first.rails.map_or("-".into(), |r| r.to_string()),
                first.spines.len().to_string(),
                format!("{}", first.uplink_gbps),
            ];
            (first.name.as_str(), row)
        })
        .collect();
    rows.sort_by(|a, b| crate::model::natural_cmp(a.0, b.0));
    for (_, row) in rows {
        g.add_row(row);
    }
    format!("{g}\n\n")
}

/// A long host list cut to 60 characters.
fn cut(list: &str) -> String {
    if list.chars().count() > 60 {
        format!("{}…", list.chars().take(60).collect::<String>())
    } else {
        list.to_string()
    }
}

/// Where cluster.yaml disagrees with the wires.
fn diff_lines(diff: &Diff) -> String {
    let mut out = String::new();
    for r in &diff.regrouped {
        let _ = writeln!(out, "cluster.yaml: {r}");
    }
    if !diff.not_seen.is_empty() {
        let _ = writeln!(
            out,
            "cluster.yaml: {} host(s) no port of the capture names: {}",
            diff.not_seen.len(),
            crate::emit::slurm::compress(&diff.not_seen)
        );
    }
    if diff.not_listed > 0 {
        let _ = writeln!(
            out,
            "cluster.yaml: {} host(s) on the wires are not listed",
            diff.not_listed
        );
    }
    if !diff.switches_not_seen.is_empty() {
        let _ = writeln!(
            out,
            "cluster.yaml: names no switch on the wires: {}",
            diff.switches_not_seen.join(", ")
        );
    }
    out
}

fn finding(f: &Finding) -> String {
    let word = match f.severity {
        Severity::Fail => "FAIL",
        Severity::Warn => "WARN",
    };
    format!("{word} {}: {}\n  fix: {}\n", f.code, f.what, f.fix)
}
