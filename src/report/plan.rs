//! The human form of a plan: the node order, crossings, predictions, ring classes, NCCL
//! settings per node group, exclusions and notes.

use super::envelope::{Envelope, NoDetail};
use super::table;
use crate::model::plan::Plan;
use crate::model::ring::Method;
use serde::Serialize;
use std::fmt::Write as _;

fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b => format!("{b} B"),
    }
}

pub(crate) fn render(e: &Envelope<PlanPayload, NoDetail>) -> String {
    let p = &e.payload.plan;
    let mut out = String::new();
    order(&mut out, p);
    crossings(&mut out, p);
    predictions(&mut out, p);
    domains(&mut out, p);
    classes(&mut out, p);
    for x in &p.excluded {
        let _ = writeln!(out, "excluded {}: {}", x.host, x.reason);
    }
    for n in &p.notes {
        let _ = writeln!(out, "{:?} {}: {}", n.level, n.code, n.message);
    }
    if let Some(d) = &e.payload.output_dir {
        let blocks = if p.nvlink_domains.is_empty() {
            ""
        } else {
            " (topology/block), topology-tree.conf"
        };
        let _ = writeln!(
            out,
            "\nwrote plan.json, hostfile, slurm-hostfile, torchrun-node-ranks.txt, topology.conf{blocks}, topology.yaml{} to {d}{}",
            if has_labels(p) { ", k8s-node-labels.yaml, k8s-label-nodes.sh" } else { "" },
            if e.changed { "" } else { " (unchanged)" }
        );
    }
    out
}

fn order(out: &mut String, p: &Plan) {
    let shown: Vec<&str> = p.node_order.iter().take(12).map(String::as_str).collect();
    let more = if p.node_order.len() > 12 {
        format!(" … ({} more)", p.node_order.len() - 12)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "node order ({} nodes): {}{more}\n",
        p.node_order.len(),
        shown.join(" ")
    );
}

fn crossings(out: &mut String, p: &Plan) {
    let c = &p.crossings;
    let mut t = table(&["crossings", "solved", "default (hostname order)", "lower bound"]);
    for (name, s, d, l) in [
        ("spine", c.solved.spine, c.default.spine, c.lower_bound.spine),
        ("leaf", c.solved.leaf, c.default.leaf, c.lower_bound.leaf),
        ("rack", c.solved.rack, c.default.rack, c.lower_bound.rack),
        ("NVLink domain", c.solved.domain, c.default.domain, c.lower_bound.domain),
    ] {
        if name == "NVLink domain" && p.nvlink_domains.is_empty() {
            continue;
        }
        t.add_row(vec![name.to_string(), s.to_string(), d.to_string(), l.to_string()]);
    }
    let _ = writeln!(out, "{t}\n");
}

fn predictions(out: &mut String, p: &Plan) {
    let _ = writeln!(out, "predicted ring all-reduce of {}:", human_bytes(p.message_bytes));
    let mut t = table(&["order", "busbw GB/s", "time", "bottleneck"]);
    let without = p
        .predicted
        .without_domains
        .iter()
        .map(|x| ("solved, no NVLink domains", x));
    for (name, x) in [("solved", &p.predicted.solved), ("default", &p.predicted.default)]
        .into_iter()
        .chain(without)
    {
        // A figure that rests on a default or a stated rate says so where it is read.
        let basis = match x.assumed.as_deref() {
            Some(a) if a.starts_with("assumed") => ", assumed",
            Some(_) => ", stated",
            None => "",
        };
        t.add_row(vec![
            name.to_string(),
            format!("{:.1}", x.busbw_gbps),
            format!("{:.2} ms", x.time_us / 1000.0),
            format!("{} ({:.1} GB/s{basis})", x.bottleneck, x.bottleneck_gbps),
        ]);
    }
    let _ = writeln!(out, "{t}\ngain: {:.2}x", p.predicted.gain);
    let mut said = Vec::new();
    for x in [&p.predicted.solved, &p.predicted.default] {
        if let Some(a) = x.assumed.as_ref().filter(|a| !said.contains(a)) {
            let _ = writeln!(out, "{}: {a}", x.bottleneck);
            said.push(a);
        }
    }
    out.push('\n');
}

/// Whether `plan --output-dir` writes Kubernetes labels: some node has a domain, leaf or
/// spine (the labels are made from the inventory; a plan with domains always has some).
fn has_labels(p: &Plan) -> bool {
    !p.nvlink_domains.is_empty() || p.crossings.lower_bound.leaf > 0 || p.crossings.lower_bound.spine > 0
}

/// The multi-node NVLink domains: members, GPUs, where known, health.
fn domains(out: &mut String, p: &Plan) {
    if p.nvlink_domains.is_empty() {
        return;
    }
    let mut t = table(&["NVLink domain", "nodes", "GPUs", "known from", "health"]);
    for d in &p.nvlink_domains {
        t.add_row(vec![
            d.name.clone(),
            hosts_cell(&d.hosts),
            d.gpus.to_string(),
            d.source.clone(),
            if d.health.is_empty() {
                "ok (or not reported)".to_string()
            } else {
                d.health.join("; ")
            },
        ]);
    }
    let _ = writeln!(out, "{t}\n");
}

/// A class's NVLink as a cell: `NV18 × 40.1 GB/s (nccl-file)`, or the links per pair when
/// they differ, or `-` (PCIe only).
fn nvlink_cell(c: &crate::model::plan::NodeClass) -> String {
    let Some(n) = &c.nvlink else { return "-".into() };
    let links: Vec<u32> = n.links.iter().flatten().copied().filter(|&k| k > 0).collect();
    let origin: Vec<String> = n
        .origins
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok()?.as_str().map(str::to_string))
        .collect();
    let origin = origin.join(", ");
    match (links.iter().min(), links.iter().max()) {
        (Some(lo), Some(hi)) if lo == hi => format!("NV{lo} × {:.1} GB/s ({origin})", n.gbps_per_link),
        (Some(lo), Some(hi)) => format!("NV{lo}-NV{hi} × {:.1} GB/s ({origin})", n.gbps_per_link),
        _ => format!("- ({origin})"),
    }
}

/// A class's hosts as a Slurm-style list (`p5en-[01-08]`), shortened to the first few when
/// long, with the count.
fn hosts_cell(hosts: &[String]) -> String {
    let list = crate::emit::slurm::compress(hosts);
    if list.chars().count() <= 40 {
        return format!("{list} ({})", hosts.len());
    }
    let first = crate::emit::slurm::compress(&hosts[..hosts.len().min(3)]);
    format!("{first},… ({})", hosts.len())
}

/// Why each class leaves settings out: one line per reason.
fn left_out(out: &mut String, p: &Plan) {
    for c in p.nccl.classes.iter().filter(|c| !c.left_out.is_empty()) {
        for why in &c.left_out {
            let _ = writeln!(out, "{} left out: {why}", c.name);
        }
    }
}

fn classes(out: &mut String, p: &Plan) {
    let mut t = table(&[
        "class",
        "hosts",
        "GPUs",
        "ring",
        "bottleneck GB/s",
        "NVLink",
        "method",
        "graph file",
        "why",
    ]);
    for c in &p.node_classes {
        let method = match (c.ring.method, c.ring.gap) {
            (Method::Heuristic, Some(g)) => format!("heuristic (gap {:.1}%)", g * 100.0),
            (Method::Heuristic, None) => "heuristic".into(),
            (Method::Exact, _) => "exact".into(),
        };
        t.add_row(vec![
            c.name.clone(),
            hosts_cell(&c.hosts),
            c.gpus.to_string(),
            format!("{:?}", c.ring.order),
            format!("{:.1}", c.ring.bottleneck_gbps),
            nvlink_cell(c),
            method,
            c.graph_file
                .clone()
                .or_else(|| c.graph_xml.as_ref().map(|_| format!("nccl-graph-{}.xml", c.name)))
                .unwrap_or_else(|| "-".into()),
            c.reason.clone(),
        ]);
    }
    let _ = writeln!(out, "{t}");
    let mut t = table(&["nccl", "hosts", "settings", "left out"]);
    for c in &p.nccl.classes {
        let settings: Vec<String> = c.settings.iter().map(|s| format!("{}={}", s.name, s.value)).collect();
        t.add_row(vec![
            c.name.clone(),
            hosts_cell(&c.hosts),
            if settings.is_empty() {
                "-".into()
            } else {
                settings.join(" ")
            },
            c.left_out.len().to_string(),
        ]);
    }
    let _ = writeln!(out, "{t}");
    left_out(out, p);
    for r in &p.nccl.refused {
        let _ = writeln!(out, "refused {}: {}", r.host, r.reason);
    }
}

#[derive(Serialize)]
pub(crate) struct PlanPayload {
    #[serde(flatten)]
    pub(crate) plan: Plan,
    pub(crate) output_dir: Option<String>,
}
