//! `topo-tune doctor`: the host basics that make NCCL slow, each check with a status and a fix.

use super::{irqbalance, is_managed, plan, read_cpu_topology, PinAction};
use crate::graph::paths::{path_matrix, PathClass};
use crate::model::snapshot::{IrqClass, NodeSnapshot, NoteLevel};
use crate::model::CpuList;
use crate::probe::fsroot::FsRoot;
use crate::probe::procfs::Interrupts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Skip,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    pub check: String,
    pub status: Status,
    pub detail: String,
    pub fix: String,
}

fn check(name: &str, status: Status, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        check: name.into(),
        status,
        detail: detail.into(),
        fix: fix.into(),
    }
}

/// One CPU with more than this many times its fair share of mlx5 completion work is skew.
pub const SKEW_FACTOR: f64 = 3.0;

pub fn run(fs: &FsRoot, snap: &NodeSnapshot, reserved: &CpuList) -> Vec<Check> {
    let mut out = Vec::new();
    let completion: Vec<(&str, &crate::model::Irq)> = snap
        .nics
        .iter()
        .flat_map(|n| {
            n.irqs
                .iter()
                .filter(|i| i.class == IrqClass::Completion)
                .map(move |i| (n.name.as_str(), i))
        })
        .collect();

    // Placement now: where each completion vector is aimed (effective target when single).
    if completion.is_empty() {
        out.push(check(
            "mlx5-irq-placement",
            Status::Skip,
            "no mlx5 completion interrupts on this node",
            "",
        ));
    } else {
        let mut per_cpu: BTreeMap<u32, usize> = BTreeMap::new();
        let mut eligible = CpuList::new();
        for n in snap.nics.iter().filter(|n| super::is_mlx5(n)) {
            if let Some(p) = &n.pci {
                eligible = eligible.union(&p.cpu_affinity);
            }
        }
        for (_, i) in &completion {
            let target = i
                .affinity
                .as_ref()
                .filter(|a| a.len() == 1)
                .or(i.effective_affinity.as_ref())
                .and_then(|a| a.iter().next());
            if let Some(cpu) = target {
                *per_cpu.entry(cpu).or_default() += 1;
            }
        }
        let total: usize = per_cpu.values().sum();
        let fair = (total as f64 / eligible.len().max(1) as f64).max(1.0);
        let (busiest, most) = per_cpu
            .iter()
            .max_by_key(|(_, c)| **c)
            .map(|(c, n)| (*c, *n))
            .unwrap_or((0, 0));
        if most as f64 > SKEW_FACTOR * fair {
            out.push(check(
                "mlx5-irq-placement",
                Status::Fail,
                format!("{most} of {total} mlx5 completion interrupts target CPU {busiest} (fair share {fair:.1})"),
                "topo-tune irq-pin",
            ));
        } else {
            out.push(check(
                "mlx5-irq-placement",
                Status::Pass,
                format!("{total} completion interrupts, at most {most} per CPU"),
                "",
            ));
        }
        // Load since boot, from /proc/interrupts: evidence, not state (counters never reset).
        if let Some(ints) = fs.read("/proc/interrupts").and_then(|t| Interrupts::parse(&t).ok()) {
            let mut load: BTreeMap<u32, u64> = BTreeMap::new();
            for (_, i) in &completion {
                if let Some(row) = ints.rows.get(&i.irq) {
                    for (k, c) in row.per_cpu.iter().enumerate() {
                        *load.entry(ints.cpus[k]).or_default() += c;
                    }
                }
            }
            let sum: u64 = load.values().sum();
            if let Some((cpu, top)) = load.iter().max_by_key(|(_, c)| **c) {
                let share = *top as f64 / sum.max(1) as f64;
                let mean = sum as f64 / eligible.len().max(1) as f64;
                if sum >= 1000 && (*top as f64) > SKEW_FACTOR * mean {
                    let placed_ok = out.last().is_some_and(|c| c.status == Status::Pass);
                    let (status, fix) = if placed_ok {
                        (Status::Warn, "placement is spread now; the counters since boot still show the old skew: re-check under load")
                    } else {
                        (Status::Fail, "topo-tune irq-pin")
                    };
                    out.push(check(
                        "mlx5-irq-load",
                        status,
                        format!(
                            "{:.0}% of mlx5 completion interrupts since boot ran on CPU {cpu}",
                            share * 100.0
                        ),
                        fix,
                    ));
                } else {
                    out.push(check(
                        "mlx5-irq-load",
                        Status::Pass,
                        format!("busiest CPU {cpu} took {:.0}% of {sum} interrupts", share * 100.0),
                        "",
                    ));
                }
            }
        }
    }

    // Pins: those irq-pin recorded, checked one by one; else what it would do now.
    let current: BTreeMap<u32, Option<CpuList>> = snap
        .nics
        .iter()
        .flat_map(|n| n.irqs.iter().map(|i| (i.irq, i.affinity.clone())))
        .collect();
    match super::PinState::load(fs) {
        Some(state) => {
            let undone: Vec<u32> = state
                .pins
                .iter()
                .filter(|(irq, t)| current.get(irq).is_some_and(|c| c.as_ref() != Some(t)))
                .map(|(irq, _)| *irq)
                .collect();
            let gone = state.pins.keys().filter(|irq| !current.contains_key(irq)).count();
            out.push(if !undone.is_empty() {
                check(
                    "irq-pins",
                    Status::Fail,
                    format!(
                        "{} of {} pinned interrupts moved since irq-pin (e.g. IRQ {}): something undoes the pins",
                        undone.len(),
                        state.pins.len(),
                        undone[0]
                    ),
                    "topo-tune irq-pin --irqbalance ban (and check tuned/other daemons)",
                )
            } else if gone > 0 {
                check(
                    "irq-pins",
                    Status::Warn,
                    format!("{gone} pinned interrupt(s) no longer exist (driver reload?): new ones are unpinned"),
                    "topo-tune irq-pin --install re-pins on reload and boot",
                )
            } else {
                check(
                    "irq-pins",
                    Status::Pass,
                    format!("all {} interrupts irq-pin pinned are still in place", state.pins.len()),
                    "",
                )
            });
        }
        None => {
            let topo = read_cpu_topology(fs);
            match plan(snap, &topo, reserved, false, &|irq| is_managed(fs, irq)) {
                Ok(p) if p.pins.is_empty() => {
                    out.push(check("irq-pins", Status::Skip, "no mlx5 interrupts to pin", ""))
                }
                Ok(p) => {
                    let off = p.pins.iter().filter(|x| x.action == PinAction::Set).count();
                    out.push(if off == 0 {
                        check(
                            "irq-pins",
                            Status::Pass,
                            "every mlx5 completion interrupt is where irq-pin puts it",
                            "",
                        )
                    } else {
                        check(
                            "irq-pins",
                            Status::Warn,
                            format!("irq-pin has not run here: {off} interrupt(s) are not where it would put them"),
                            "topo-tune irq-pin",
                        )
                    });
                }
                Err(e) => out.push(check("irq-pins", Status::Fail, e.to_string(), "shrink reserved_cpus")),
            }
        }
    }

    let ib = irqbalance::status(fs);
    out.push(match (ib.running, ib.bans_mlx5) {
        (false, _) => check("irqbalance", Status::Pass, "irqbalance is not running", ""),
        (true, true) => check(
            "irqbalance",
            Status::Pass,
            format!("irqbalance runs and leaves mlx5 alone ({})", ib.config),
            "",
        ),
        (true, false) => check(
            "irqbalance",
            Status::Warn,
            "irqbalance is running and will move pinned mlx5 interrupts again",
            "topo-tune irq-pin --irqbalance ban",
        ),
    });

    let degraded: Vec<&crate::model::Note> = snap.notes.iter().filter(|n| n.code == "pcie-degraded").collect();
    out.push(if degraded.is_empty() {
        check(
            "pcie-link",
            Status::Pass,
            "every GPU and RDMA NIC link runs at its maximum",
            "",
        )
    } else {
        let worst = if degraded.iter().any(|n| n.level == NoteLevel::Warn) {
            Status::Fail
        } else {
            Status::Warn
        };
        check(
            "pcie-link",
            worst,
            degraded
                .iter()
                .map(|n| n.message.clone())
                .collect::<Vec<_>>()
                .join("; "),
            "reseat the card or check the slot/riser and BIOS link settings",
        )
    });

    // GPU and its nearest RDMA NIC on one NUMA node.
    let m = path_matrix(snap);
    let gpus: Vec<usize> = (0..m.devices.len())
        .filter(|&i| m.devices[i].label.starts_with("GPU"))
        .collect();
    let nics: Vec<usize> = (0..m.devices.len())
        .filter(|&i| m.devices[i].label.starts_with("NIC"))
        .collect();
    if gpus.is_empty() || nics.is_empty() {
        out.push(check(
            "gpu-nic-numa",
            Status::Skip,
            "no GPU with an RDMA NIC on this node",
            "",
        ));
    } else {
        let far: Vec<String> = gpus
            .iter()
            .filter_map(|&g| {
                let best = nics.iter().map(|&n| m.classes[g][n]).min()?;
                (best == PathClass::Sys).then(|| m.devices[g].label.clone())
            })
            .collect();
        out.push(if far.is_empty() {
            check(
                "gpu-nic-numa",
                Status::Pass,
                "every GPU has an RDMA NIC on its NUMA node",
                "",
            )
        } else {
            check(
                "gpu-nic-numa",
                Status::Warn,
                format!(
                    "{} reach their nearest RDMA NIC only across sockets (SYS)",
                    far.join(", ")
                ),
                "move NICs or GPUs so each GPU has a NIC on its socket",
            )
        });
    }

    out.push(match snap.notes.iter().find(|n| n.code == "numa-unknown") {
        Some(n) => check(
            "numa-known",
            Status::Warn,
            n.message.clone(),
            "topo-tune init writes an NCCL topology file that places them",
        ),
        None => check("numa-known", Status::Pass, "every GPU and NIC has a NUMA node", ""),
    });

    out.push(check(
        "acs",
        Status::Skip,
        "ACS control lives in PCIe config space that sysfs does not show to non-root readers",
        "as root: lspci -vvv | grep -i ACSCtl (SrcValid+ on switch ports between GPU and NIC forces P2P through the root complex)",
    ));

    out.push(
        match (
            fs.read(crate::apply::writer::MANIFEST),
            fs.read(crate::apply::writer::NCCL_CONF),
        ) {
            (None, _) => check(
                "nccl-config",
                Status::Skip,
                "topo-tune has not written NCCL files here",
                "topo-tune init",
            ),
            (Some(m), conf) => {
                let owned: Option<String> = serde_json::from_str::<crate::apply::writer::Manifest>(&m)
                    .ok()
                    .and_then(|m| m.owned.get(crate::apply::writer::NCCL_CONF).cloned());
                let now = conf.map(|c| {
                    use sha2::Digest;
                    sha2::Sha256::digest(c.as_bytes())
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<String>()
                });
                if owned.is_some() && owned == now {
                    check(
                        "nccl-config",
                        Status::Pass,
                        "/etc/nccl.conf is what topo-tune last wrote",
                        "",
                    )
                } else {
                    check(
                        "nccl-config",
                        Status::Warn,
                        "/etc/nccl.conf changed since topo-tune wrote it (or was removed)",
                        "topo-tune init --check --diff",
                    )
                }
            }
        },
    );
    out
}
