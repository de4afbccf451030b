//! doctor's checks of interrupts, PCIe links, NUMA and topo-tune's own NCCL file: where mlx5
//! completion work lands, whether pins hold, irqbalance, degraded links, GPU–NIC distance,
//! unknown NUMA nodes, drift of `/etc/nccl.conf`.

use super::{check, Check, Facts, Status, SKEW_FACTOR};
use crate::digest::sha256_hex;
use crate::graph::paths::path_matrix;
use crate::irq::{irqbalance, is_managed, plan, read_cpu_topology, PinAction};
use crate::model::files::{MANIFEST, NCCL_CONF};
use crate::model::snapshot::NoteLevel;
use crate::model::CpuList;
use crate::model::PathClass;
use crate::probe::procfs::Interrupts;
use std::collections::BTreeMap;

/// CPUs local to some mlx5 NIC: where completion work may fairly go.
fn eligible_cpus(f: &Facts) -> CpuList {
    let mut eligible = CpuList::new();
    for n in f.snap.nics.iter().filter(|n| crate::irq::is_mlx5(n)) {
        if let Some(p) = &n.pci {
            eligible = eligible.union(&p.cpu_affinity);
        }
    }
    eligible
}

/// (total, busiest CPU, its count, fair share) of where completion vectors are aimed now.
fn placement_skew(f: &Facts) -> (usize, u32, usize, f64) {
    let mut per_cpu: BTreeMap<u32, usize> = BTreeMap::new();
    for (_, i) in &f.completion {
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
    let fair = (total as f64 / eligible_cpus(f).len().max(1) as f64).max(1.0);
    let (busiest, most) = per_cpu
        .iter()
        .max_by_key(|(_, c)| **c)
        .map(|(c, n)| (*c, *n))
        .unwrap_or((0, 0));
    (total, busiest, most, fair)
}

fn placement_is_skewed(f: &Facts) -> bool {
    let (_, _, most, fair) = placement_skew(f);
    most as f64 > SKEW_FACTOR * fair
}

/// Placement now: where each completion vector is aimed (effective target when single).
pub(super) fn irq_placement(f: &Facts) -> Option<Check> {
    if f.completion.is_empty() {
        return Some(check(
            "mlx5-irq-placement",
            Status::Skip,
            "no mlx5 completion interrupts on this node",
            "",
        ));
    }
    let (total, busiest, most, fair) = placement_skew(f);
    Some(if placement_is_skewed(f) {
        check(
            "mlx5-irq-placement",
            Status::Fail,
            format!("{most} of {total} mlx5 completion interrupts target CPU {busiest} (fair share {fair:.1})"),
            "topo-tune irq-pin",
        )
    } else {
        check(
            "mlx5-irq-placement",
            Status::Pass,
            format!("{total} completion interrupts, at most {most} per CPU"),
            "",
        )
    })
}

/// Load since boot, from /proc/interrupts: evidence, not state (counters never reset).
pub(super) fn irq_load(f: &Facts) -> Option<Check> {
    if f.completion.is_empty() {
        return None;
    }
    let ints = f.fs.read("/proc/interrupts").and_then(|t| Interrupts::parse(&t).ok())?;
    let mut load: BTreeMap<u32, u64> = BTreeMap::new();
    for (_, i) in &f.completion {
        if let Some(row) = ints.rows.get(&i.irq) {
            for (k, c) in row.per_cpu.iter().enumerate() {
                *load.entry(ints.cpus[k]).or_default() += c;
            }
        }
    }
    let sum: u64 = load.values().sum();
    let (cpu, top) = load.iter().max_by_key(|(_, c)| **c)?;
    let share = *top as f64 / sum.max(1) as f64;
    let mean = sum as f64 / eligible_cpus(f).len().max(1) as f64;
    if sum < 1000 || (*top as f64) <= SKEW_FACTOR * mean {
        return Some(check(
            "mlx5-irq-load",
            Status::Pass,
            format!("busiest CPU {cpu} took {:.0}% of {sum} interrupts", share * 100.0),
            "",
        ));
    }
    let (status, fix) = if placement_is_skewed(f) {
        (Status::Fail, "topo-tune irq-pin")
    } else {
        (
            Status::Warn,
            "placement is spread now; the counters since boot still show the old skew: re-check under load",
        )
    };
    Some(check(
        "mlx5-irq-load",
        status,
        format!(
            "{:.0}% of mlx5 completion interrupts since boot ran on CPU {cpu}",
            share * 100.0
        ),
        fix,
    ))
}

/// Pins: those irq-pin recorded, checked one by one; else what it would do now.
pub(super) fn irq_pins(f: &Facts) -> Option<Check> {
    let current: BTreeMap<u32, Option<CpuList>> = f
        .snap
        .nics
        .iter()
        .flat_map(|n| n.irqs.iter().map(|i| (i.irq, i.affinity.clone())))
        .collect();
    let Some(state) = crate::irq::PinState::load(f.fs) else {
        return Some(pins_never_made(f));
    };
    let undone: Vec<u32> = state
        .pins
        .iter()
        .filter(|(irq, t)| current.get(irq).is_some_and(|c| c.as_ref() != Some(t)))
        .map(|(irq, _)| *irq)
        .collect();
    let gone = state.pins.keys().filter(|irq| !current.contains_key(irq)).count();
    Some(if let Some(first) = undone.first() {
        check(
            "irq-pins",
            Status::Fail,
            format!(
                "{} of {} pinned interrupts moved since irq-pin (e.g. IRQ {first}): something undoes the pins",
                undone.len(),
                state.pins.len(),
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
    })
}

fn pins_never_made(f: &Facts) -> Check {
    let topo = match read_cpu_topology(f.fs, f.snap) {
        Ok(t) => t,
        Err(e) => {
            return check(
                "irq-pins",
                Status::Warn,
                e.to_string(),
                "check /sys/devices/system/cpu/online",
            )
        }
    };
    if let Err(e) = crate::irq::check_reserved(&topo, f.reserved) {
        return check(
            "irq-pins",
            Status::Fail,
            e.to_string(),
            "give --reserve-cpus (or reserved_cpus) CPUs this machine has",
        );
    }
    match plan(f.snap, &topo, f.reserved, false, &|irq| is_managed(f.fs, irq)) {
        Ok(p) if p.pins.is_empty() => check("irq-pins", Status::Skip, "no mlx5 interrupts to pin", ""),
        Ok(p) => {
            let off = p.pins.iter().filter(|x| x.action == PinAction::Set).count();
            if off == 0 {
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
            }
        }
        Err(e) => check("irq-pins", Status::Fail, e.to_string(), "shrink reserved_cpus"),
    }
}

pub(super) fn irqbalance_check(f: &Facts) -> Option<Check> {
    let ib = irqbalance::status(f.fs);
    Some(match (ib.running, ib.bans_mlx5) {
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
    })
}

pub(super) fn pcie_link(f: &Facts) -> Option<Check> {
    let degraded: Vec<&crate::model::Note> = f.snap.notes.iter().filter(|n| n.code == "pcie-degraded").collect();
    if degraded.is_empty() {
        return Some(check(
            "pcie-link",
            Status::Pass,
            "every GPU and RDMA NIC link runs at its maximum",
            "",
        ));
    }
    let worst = if degraded.iter().any(|n| n.level == NoteLevel::Warn) {
        Status::Fail
    } else {
        Status::Warn
    };
    Some(check(
        "pcie-link",
        worst,
        degraded
            .iter()
            .map(|n| n.message.clone())
            .collect::<Vec<_>>()
            .join("; "),
        "reseat the card or check the slot/riser and BIOS link settings",
    ))
}

/// Each GPU and its nearest RDMA NIC on one NUMA node.
pub(super) fn gpu_nic_numa(f: &Facts) -> Option<Check> {
    let m = path_matrix(f.snap);
    let gpus: Vec<usize> = (0..m.devices.len())
        .filter(|&i| m.devices[i].label.starts_with("GPU"))
        .collect();
    let nics: Vec<usize> = (0..m.devices.len())
        .filter(|&i| m.devices[i].label.starts_with("NIC"))
        .collect();
    if gpus.is_empty() || nics.is_empty() {
        return Some(check(
            "gpu-nic-numa",
            Status::Skip,
            "no GPU with an RDMA NIC on this node",
            "",
        ));
    }
    let far: Vec<String> = gpus
        .iter()
        .filter_map(|&g| {
            let best = nics.iter().map(|&n| m.classes[g][n]).min()?;
            (best == PathClass::Sys).then(|| m.devices[g].label.clone())
        })
        .collect();
    Some(if far.is_empty() {
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
    })
}

pub(super) fn numa_known(f: &Facts) -> Option<Check> {
    Some(match f.snap.notes.iter().find(|n| n.code == "numa-unknown") {
        Some(n) => check(
            "numa-known",
            Status::Warn,
            n.message.clone(),
            "numa_node -1 means the firmware (ACPI _PXM) or the hypervisor does not say: ask for a BIOS/VM setting that exposes it; NCCL then guesses from the PCI path, and topo-tune init does not write a topology file for this",
        ),
        None => check("numa-known", Status::Pass, "every GPU and NIC has a NUMA node", ""),
    })
}

/// Drift: is `/etc/nccl.conf` still what topo-tune last wrote?
pub(super) fn nccl_config(f: &Facts) -> Option<Check> {
    let Some(manifest) = f.fs.read(MANIFEST) else {
        return Some(check(
            "nccl-config",
            Status::Skip,
            "topo-tune has not written NCCL files here",
            "topo-tune init",
        ));
    };
    let owned: Option<String> = serde_json::from_str::<crate::apply::writer::Manifest>(&manifest)
        .ok()
        .and_then(|m| m.owned.get(NCCL_CONF).cloned());
    let now = f.fs.read(NCCL_CONF).map(|c| sha256_hex(c.as_bytes()));
    Some(if owned.is_some() && owned == now {
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
    })
}
