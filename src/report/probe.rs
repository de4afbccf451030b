//! Human summary of a NodeSnapshot: machine line, GPU table, NIC table, notes.

use super::table;
use crate::model::snapshot::{NicKind, NodeSnapshot, NoteLevel};
use std::fmt::Write;

pub(crate) fn render(s: &NodeSnapshot) -> String {
    let mut out = String::new();
    let source = match &s.source.path {
        Some(p) => format!("{:?} {p}", s.source.kind).to_lowercase(),
        None => "live".to_string(),
    };
    let _ = writeln!(out, "node      {}  ({source})", s.hostname);
    let m = &s.machine;
    let machine: Vec<String> = [
        m.product.clone(),
        m.cpu_model.clone(),
        m.architecture.clone(),
        m.kernel.as_ref().map(|k| format!("kernel {k}")),
        m.nvidia_driver.as_ref().map(|d| format!("driver {d}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !machine.is_empty() {
        let _ = writeln!(out, "machine   {}", machine.join(", "));
    }
    let count = |n: Option<u32>, what: &str| n.map_or_else(|| format!("? {what}"), |n| format!("{n} {what}"));
    let _ = writeln!(
        out,
        "cpus      {}, {}, {} ({})",
        count(s.cpu.packages, "packages"),
        count(s.cpu.cores, "cores"),
        count(s.cpu.pus, "threads"),
        s.cpu.cpus
    );
    let numa: Vec<String> = s.numa_nodes.iter().map(|n| format!("{}: {}", n.id, n.cpus)).collect();
    let _ = writeln!(out, "numa      {} node(s)  {}", s.numa_nodes.len(), numa.join("  "));
    let _ = writeln!(
        out,
        "pci       {} host bridge(s), {} PCIe switch(es){}",
        s.pci.host_bridges.len(),
        s.pci.switches.len(),
        if s.pci.switches_visible {
            ""
        } else {
            " (switches not visible)"
        }
    );

    if let Some(d) = &s.nvlink_domain {
        let _ = writeln!(out, "nvlink    domain {d} (multi-node NVLink)");
    }
    gpus(&mut out, s);
    nics(&mut out, s);
    notes(&mut out, s);
    out
}

fn gpus(out: &mut String, s: &NodeSnapshot) {
    let _ = writeln!(out, "\nGPUs ({})", s.gpus.len());
    if !s.gpus.is_empty() {
        let mut t = table(&["#", "Name", "Bus id", "NUMA", "CPU affinity", "PCIe", "NVLink"]);
        for g in &s.gpus {
            let p = &g.placement;
            let mut nvlink = match &g.nvlinks {
                None => "unknown".to_string(),
                Some(l) => {
                    let active = l.iter().filter(|l| l.active).count();
                    let from = g
                        .nvlink_source
                        .filter(|s| *s != crate::model::snapshot::NvlinkSource::Nvml)
                        .map(|s| format!(" ({})", s.name()))
                        .unwrap_or_default();
                    if active == 0 {
                        format!("none{from}")
                    } else {
                        format!("{active} active{from}")
                    }
                }
            };
            if let Some(c) = &g.c2c {
                let _ = write!(nvlink, ", C2C ×{}", c.links);
            }
            let pcie = match p.pcie.degradation() {
                Some(_) => format!("{} DEGRADED", p.pcie.describe()),
                None => p.pcie.describe(),
            };
            t.add_row(vec![
                g.index.to_string(),
                g.name.clone(),
                p.bdf.to_string(),
                numa_text(p.numa_node, &p.numa_affinity),
                p.cpu_affinity.to_string(),
                pcie,
                nvlink,
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
}

fn nics(out: &mut String, s: &NodeSnapshot) {
    // An hwloc export carries no interrupts: say unknown rather than zero.
    let irqs_known = matches!(
        s.source.kind,
        crate::model::SourceKind::Live | crate::model::SourceKind::Fsroot
    );
    let _ = writeln!(out, "\nNICs ({})", s.nics.len());
    if !s.nics.is_empty() {
        let mut t = table(&[
            "Name",
            "Kind",
            "Bus id",
            "Netdev",
            "State",
            "Link layer",
            "Rate",
            "NUMA",
            "PCIe",
            "IRQs",
        ]);
        for n in &s.nics {
            let port = n.rdma.as_ref().and_then(|r| r.ports.first());
            let kind = match n.kind {
                NicKind::Rdma => "rdma",
                NicKind::Ethernet => "ethernet",
            };
            let rate = port
                .and_then(|p| p.rate_gbps.map(|r| format!("{r} Gb/s")))
                .or_else(|| {
                    n.netdevs
                        .first()
                        .and_then(|d| d.speed_mbps)
                        .map(|m| format!("{} Gb/s", m as f64 / 1000.0))
                })
                .unwrap_or_else(|| "-".into());
            let state = port
                .and_then(|p| p.state.clone())
                .or_else(|| n.netdevs.first().and_then(|d| d.operstate.clone()))
                .unwrap_or_else(|| "-".into());
            let pcie = n.pci.as_ref().map_or("-".to_string(), |p| match p.pcie.degradation() {
                Some(_) => format!("{} DEGRADED", p.pcie.describe()),
                None => p.pcie.describe(),
            });
            t.add_row(vec![
                n.name.clone(),
                kind.to_string(),
                n.pci.as_ref().map_or("-".into(), |p| p.bdf.to_string()),
                n.netdevs.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(","),
                state,
                port.map_or("-".into(), |p| format!("{:?}", p.link_layer)),
                rate,
                n.pci
                    .as_ref()
                    .map_or("-".into(), |p| numa_text(p.numa_node, &p.numa_affinity)),
                pcie,
                if irqs_known {
                    n.irqs.len().to_string()
                } else {
                    "-".to_string()
                },
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
}

fn notes(out: &mut String, s: &NodeSnapshot) {
    if !s.notes.is_empty() {
        let _ = writeln!(out, "\nNotes");
        for note in &s.notes {
            let level = match note.level {
                NoteLevel::Info => "info",
                NoteLevel::Warn => "WARN",
            };
            let _ = writeln!(out, "  {level:<4} {}: {}", note.code, note.message);
        }
    }
}

/// `0`, or `? (affinity 0)` when the firmware gives no node and the affinity is derived from CPUs.
fn numa_text(node: Option<u32>, affinity: &[u32]) -> String {
    match node {
        Some(n) => n.to_string(),
        None if affinity.is_empty() => "?".to_string(),
        None => format!(
            "? (affinity {})",
            crate::model::CpuList::from_ids(affinity.iter().copied())
        ),
    }
}
