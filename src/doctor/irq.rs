//! doctor's checks of NIC interrupts: where mlx5 completion work is aimed and where it ran,
//! whether irq-pin's pins hold, and whether irqbalance leaves them alone.

use super::facts::{Facts, SKEW_FACTOR};
use super::finding::{Finding, Status};
use crate::irq::{irqbalance, is_managed, plan, read_cpu_topology, PinAction};
use crate::model::CpuList;
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
pub(super) fn irq_placement(f: &Facts) -> Option<Finding> {
    if f.completion.is_empty() {
        return Some(Finding::skip("no mlx5 completion interrupts on this node"));
    }
    let (total, busiest, most, fair) = placement_skew(f);
    Some(if placement_is_skewed(f) {
        Finding::fail(
            format!("{most} of {total} mlx5 completion interrupts target CPU {busiest} (fair share {fair:.1})"),
            "topo-tune irq-pin",
        )
    } else {
        Finding::pass(format!("{total} completion interrupts, at most {most} per CPU"))
    })
}

/// Load since boot, from /proc/interrupts: evidence, not state (counters never reset).
pub(super) fn irq_load(f: &Facts) -> Option<Finding> {
    if f.completion.is_empty() {
        return None;
    }
    // A row that says why, never a row that vanishes: an unreadable /proc/interrupts is
    // something to know at 3 a.m.
    let Some(text) = f.fs.read("/proc/interrupts") else {
        return Some(Finding::warn(
            "/proc/interrupts cannot be read: the completion interrupts' load is unknown",
            "run doctor where /proc is readable (not in a container that masks it)",
        ));
    };
    let ints = match Interrupts::parse(&text) {
        Ok(ints) => ints,
        Err(e) => {
            return Some(Finding::warn(
                format!("/proc/interrupts:{e}: the completion interrupts' load is unknown"),
                "run doctor where /proc is readable (not in a container that masks it)",
            ))
        }
    };
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
        return Some(Finding::pass(format!(
            "busiest CPU {cpu} took {:.0}% of {sum} interrupts",
            share * 100.0
        )));
    }
    let (status, fix) = if placement_is_skewed(f) {
        (Status::Fail, "topo-tune irq-pin")
    } else {
        (
            Status::Warn,
            "placement is spread now; the counters since boot still show the old skew: re-check under load",
        )
    };
    Some(
        Finding::new(
            status,
            format!(
                "{:.0}% of mlx5 completion interrupts since boot ran on CPU {cpu}",
                share * 100.0
            ),
        )
        .fix(fix),
    )
}

/// Pins: those irq-pin recorded, checked one by one; else what it would do now.
pub(super) fn irq_pins(f: &Facts) -> Option<Finding> {
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
        Finding::fail(
            format!(
                "{} of {} pinned interrupts moved since irq-pin (e.g. IRQ {first}): something undoes the pins",
                undone.len(),
                state.pins.len(),
            ),
            "topo-tune irq-pin --irqbalance ban (and check tuned/other daemons)",
        )
    } else if gone > 0 {
        Finding::warn(
            format!("{gone} pinned interrupt(s) no longer exist (driver reload?): new ones are unpinned"),
            "topo-tune irq-pin --install re-pins on reload and boot",
        )
    } else {
        Finding::pass(format!(
            "all {} interrupts irq-pin pinned are still in place",
            state.pins.len()
        ))
    })
}

fn pins_never_made(f: &Facts) -> Finding {
    let topo = match read_cpu_topology(f.fs, f.snap) {
        Ok(t) => t,
        Err(e) => return Finding::warn(e.to_string(), "check /sys/devices/system/cpu/online"),
    };
    if let Err(e) = crate::irq::check_reserved(&topo, f.reserved) {
        return Finding::fail(
            e.to_string(),
            "give --reserve-cpus (or reserved_cpus) CPUs this machine has",
        );
    }
    match plan(f.snap, &topo, f.reserved, false, &|irq| is_managed(f.fs, irq)) {
        Ok(p) if p.pins.is_empty() => Finding::skip("no mlx5 interrupts to pin"),
        Ok(p) => {
            let off = p.pins.iter().filter(|x| x.action == PinAction::Set).count();
            if off == 0 {
                Finding::pass("every mlx5 completion interrupt is where irq-pin puts it")
            } else {
                Finding::warn(
                    format!("irq-pin has not run here: {off} interrupt(s) are not where it would put them"),
                    "topo-tune irq-pin",
                )
            }
        }
        Err(e) => Finding::fail(e.to_string(), "shrink reserved_cpus"),
    }
}

pub(super) fn irqbalance(f: &Facts) -> Option<Finding> {
    let ib = irqbalance::status(f.fs);
    Some(match (ib.running, ib.bans_mlx5) {
        (false, _) => Finding::pass("irqbalance is not running"),
        (true, true) => Finding::pass(format!("irqbalance runs and leaves mlx5 alone ({})", ib.config)),
        (true, false) => Finding::warn(
            "irqbalance is running and will move pinned mlx5 interrupts again",
            "topo-tune irq-pin --irqbalance ban",
        ),
    })
}
