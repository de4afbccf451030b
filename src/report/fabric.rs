//! `fabric`'s tables: the switches of each level, the leaf groups, the findings with their
//! fixes, and where cluster.yaml disagrees.

use super::envelope::{Envelope, NoDetail};
use super::table;
use crate::wires::compare::Diff;
use crate::wires::derive::{Discovered, Finding, Severity};
use serde::Serialize;
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
    for g in d.groups.iter().filter(|g| !g.hosts.is_empty()) {
        if let Some(why) = &g.not_rail_optimised {
            let _ = writeln!(out, "{}: {why}", g.name);
        }
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
fn level_tables(d: &Discovered) -> String {
    let mut out = String::new();
    let top = d.switches.iter().filter_map(|s| s.level).max().unwrap_or(0);
    for level in 1..=top {
        let mut t = table(&["Switch", "Host ports", "Uplinks", "Links (peer ×n)"]);
        for s in d.switches.iter().filter(|s| s.level == Some(level)) {
            let peers: Vec<String> = s.links.iter().map(|(p, n)| format!("{p}×{n}")).collect();
            let shown = if peers.len() > 4 {
                format!("{} and {} more", peers[..4].join(", "), peers.len() - 4)
            } else {
                peers.join(", ")
            };
            t.add_row(vec![
                s.name.clone(),
                s.host_ports.to_string(),
                s.uplinks.to_string(),
                shown,
            ]);
        }
        let _ = writeln!(
            out,
            "level {level}{}:\n{t}\n",
            if level == 1 { " (leaves)" } else { "" }
        );
    }
    out
}

fn groups_table(d: &Discovered) -> String {
    let mut g = table(&[
        "Group",
        "Leaves (rail order)",
        "Hosts",
        "Rails",
        "Spines",
        "Uplink Gb/s",
    ]);
    for gr in d.groups.iter().filter(|g| !g.hosts.is_empty()) {
        g.add_row(vec![
            gr.name.clone(),
            gr.leaves.join(" "),
            gr.hosts.len().to_string(),
            gr.rails.map_or("-".into(), |r| r.to_string()),
            gr.spines.len().to_string(),
            format!("{}", gr.uplink_gbps),
        ]);
    }
    format!("{g}\n\n")
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
