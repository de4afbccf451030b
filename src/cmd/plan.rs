//! `topo-tune plan`: gather snapshots (as `init` does), solve, print the plan, and with
//! `--output-dir` write plan.json and the launcher files.

use super::init::{collect, from_probes, Report};
use crate::cli::{OutputFormat, PlanArgs};
use crate::config::Inventory;
use crate::emit;
use crate::error::Error;
use crate::exit;
use crate::model::plan::{Excluded, Plan};
use crate::report::table;
use crate::solve::plan::{plan, PlanNode};
use std::fmt::Write as _;
use std::path::Path;

/// `1G`, `256M`, `4096`: binary units, as nccl-tests reads them.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, unit) = t.find(|c: char| !c.is_ascii_digit()).map_or((t, ""), |i| t.split_at(i));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not a size (e.g. 4096, 256M, 1G)"))?;
    let mult: u64 = match unit
        .trim_end_matches("iB")
        .trim_end_matches('B')
        .to_ascii_uppercase()
        .as_str()
    {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (K, M, G, T)")),
    };
    n.checked_mul(mult)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("`{text}` is out of range"))
}

fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b => format!("{b} B"),
    }
}

pub fn run(args: &PlanArgs, output: OutputFormat) -> Result<Report, Error> {
    let message_bytes = parse_size(&args.message_size).map_err(Error::Usage)?;
    let inv = Inventory::load(&args.gather.cluster_config)?;
    let outcomes = match &args.gather.from_probes {
        Some(dir) => from_probes(&inv, dir)?,
        None => collect(&inv, &args.gather, output)?,
    };
    let mut failed = Vec::new();
    let nodes: Vec<PlanNode> = outcomes
        .iter()
        .zip(&inv.nodes)
        .filter_map(|(o, spec)| match &o.result {
            Ok((snap, _)) => Some(PlanNode {
                host: o.host.clone(),
                labels: spec.labels.clone(),
                snapshot: snap,
            }),
            Err(f) => {
                failed.push(Excluded {
                    host: o.host.clone(),
                    reason: format!("not probed: {}", f.message),
                });
                None
            }
        })
        .collect();
    let mut p = plan(&nodes, inv.fabric.as_ref(), message_bytes);
    let any_failed = !failed.is_empty();
    p.excluded.extend(failed);

    let mut changed = false;
    if let Some(dir) = &args.output_dir {
        changed = write_outputs(&mut p, dir)?;
    }
    let exit_code = if any_failed { exit::PARTIAL_FAILURE } else { exit::OK };
    let text = match output {
        OutputFormat::Json => {
            let doc = serde_json::json!({ "changed": changed, "failed": any_failed, "output_dir": args.output_dir.as_ref().map(|d| d.display().to_string()), "plan": &p });
            let mut v = serde_json::to_value(&p).unwrap_or_default();
            // node_order and predicted stay at the top level, as scripts read them.
            if let (Some(obj), Some(extra)) = (v.as_object_mut(), doc.as_object()) {
                for k in ["changed", "failed", "output_dir"] {
                    obj.insert(k.into(), extra[k].clone());
                }
            }
            serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
        }
        OutputFormat::Human => render(&p, changed, args.output_dir.as_deref()),
    };
    Ok(Report { text, exit_code })
}

fn type_intra(class: &crate::model::plan::NodeClass) -> &'static str {
    // The worst link of the ring names its type; cost ranks follow NCCL's path types.
    let worst = class.ring.cost / (class.ring.order.len().max(1) as u32);
    match worst {
        0 | 1 => "NVL",
        2..=4 => "PIX",
        5 => "PXB",
        6..=8 => "PHB",
        _ => "SYS",
    }
}

fn write_outputs(p: &mut Plan, dir: &Path) -> Result<bool, Error> {
    let write = |name: &str, content: &str| -> Result<bool, Error> {
        let path = dir.join(name);
        crate::apply::atomic::write_if_changed(&path, content.as_bytes(), 0o644).map_err(|e| Error::Io {
            what: format!("writing {}", path.display()),
            source: e,
        })
    };
    let mut changed = false;
    for class in p.node_classes.iter_mut() {
        let beats = class.gpus > 1
            && crate::solve::ring::better(
                (class.ring.bottleneck_gbps, class.ring.cost),
                (class.index_order_bottleneck_gbps, class.index_order_cost),
            );
        if beats {
            let name = format!("nccl-graph-{}.xml", class.name);
            changed |= write(&name, &emit::graph_xml::ring_graph(class, type_intra(class)))?;
            class.graph_file = Some(dir.join(&name).display().to_string());
        }
    }
    changed |= write("hostfile", &emit::launch::mpi_hostfile(p))?;
    changed |= write("slurm-hostfile", &emit::launch::slurm_hostfile(p))?;
    changed |= write("torchrun-node-ranks.txt", &emit::launch::torchrun_node_ranks(p))?;
    changed |= write(
        "plan.json",
        &(serde_json::to_string_pretty(p).unwrap_or_default() + "\n"),
    )?;
    Ok(changed)
}

fn render(p: &Plan, changed: bool, dir: Option<&Path>) -> String {
    let mut out = String::new();
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
    let mut t = table(&["crossings", "solved", "default (hostname order)", "lower bound"]);
    for (name, s, d, l) in [
        (
            "spine",
            p.crossings.solved.spine,
            p.crossings.default.spine,
            p.crossings.lower_bound.spine,
        ),
        (
            "leaf",
            p.crossings.solved.leaf,
            p.crossings.default.leaf,
            p.crossings.lower_bound.leaf,
        ),
        (
            "rack",
            p.crossings.solved.rack,
            p.crossings.default.rack,
            p.crossings.lower_bound.rack,
        ),
    ] {
        t.add_row(vec![name.to_string(), s.to_string(), d.to_string(), l.to_string()]);
    }
    let _ = writeln!(out, "{t}\n");
    let (s, d) = (&p.predicted.solved, &p.predicted.default);
    let _ = writeln!(out, "predicted ring all-reduce of {}:", human_bytes(p.message_bytes));
    let mut t = table(&["order", "busbw GB/s", "time", "bottleneck"]);
    t.add_row(vec![
        "solved".to_string(),
        format!("{:.1}", s.busbw_gbps),
        format!("{:.2} ms", s.time_us / 1000.0),
        format!("{} ({:.1} GB/s)", s.bottleneck, s.bottleneck_gbps),
    ]);
    t.add_row(vec![
        "default".to_string(),
        format!("{:.1}", d.busbw_gbps),
        format!("{:.2} ms", d.time_us / 1000.0),
        format!("{} ({:.1} GB/s)", d.bottleneck, d.bottleneck_gbps),
    ]);
    let _ = writeln!(out, "{t}\ngain: {:.2}x\n", p.predicted.gain);
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
            (crate::solve::ring::Method::Heuristic, Some(g)) => format!("heuristic (gap {:.1}%)", g * 100.0),
            (crate::solve::ring::Method::Heuristic, None) => "heuristic".into(),
            _ => "exact".into(),
        };
        t.add_row(vec![
            c.name.clone(),
            c.hosts.len().to_string(),
            c.gpus.to_string(),
            format!("{:?}", c.ring.order),
            format!("{:.1}", c.ring.bottleneck_gbps),
            method,
            c.graph_file.clone().unwrap_or_else(|| "-".into()),
            c.reason.clone(),
        ]);
    }
    let _ = writeln!(out, "{t}");
    for e in &p.excluded {
        let _ = writeln!(out, "excluded {}: {}", e.host, e.reason);
    }
    for n in &p.notes {
        let _ = writeln!(out, "{:?} {}: {}", n.level, n.code, n.message);
    }
    if let Some(d) = dir {
        let _ = writeln!(
            out,
            "\nwrote plan.json, hostfile, slurm-hostfile, torchrun-node-ranks.txt to {}{}",
            d.display(),
            if changed { "" } else { " (unchanged)" }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert!(parse_size("1X").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
