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
    classes(&mut out, p);
    for x in &p.excluded {
        let _ = writeln!(out, "excluded {}: {}", x.host, x.reason);
    }
    for n in &p.notes {
        let _ = writeln!(out, "{:?} {}: {}", n.level, n.code, n.message);
    }
    if let Some(d) = &e.payload.output_dir {
        let _ = writeln!(
            out,
            "\nwrote plan.json, hostfile, slurm-hostfile, torchrun-node-ranks.txt, topology.conf, topology.yaml to {d}{}",
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
    ] {
        t.add_row(vec![name.to_string(), s.to_string(), d.to_string(), l.to_string()]);
    }
    let _ = writeln!(out, "{t}\n");
}

fn predictions(out: &mut String, p: &Plan) {
    let _ = writeln!(out, "predicted ring all-reduce of {}:", human_bytes(p.message_bytes));
    let mut t = table(&["order", "busbw GB/s", "time", "bottleneck"]);
    for (name, x) in [("solved", &p.predicted.solved), ("default", &p.predicted.default)] {
        t.add_row(vec![
            name.to_string(),
            format!("{:.1}", x.busbw_gbps),
            format!("{:.2} ms", x.time_us / 1000.0),
            format!("{} ({:.1} GB/s)", x.bottleneck, x.bottleneck_gbps),
        ]);
    }
    let _ = writeln!(out, "{t}\ngain: {:.2}x\n", p.predicted.gain);
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
