//! What `irq-pin` changed, remembered before it changes it, and put back by `irq-pin
//! --restore`: each interrupt's `smp_affinity_list` as the kernel printed it before
//! topo-tune first moved it, and irqbalance's config before topo-tune first banned mlx5 in
//! it. The record keeps the first value seen (a second pin does not overwrite the original
//! with topo-tune's own); a restore leaves it in place, so a second restore changes nothing.

use super::irqbalance;
use super::system::System;
use super::{IrqError, IrqPin, IrqPlan, PinAction};
use crate::apply::tree::Tree;
use crate::model::files::{IRQBALANCE_CONFIGS, IRQ_BEFORE, IRQ_STATE, IRQ_UDEV_RULE, IRQ_UNIT, IRQ_UNIT_NAME};
use crate::model::{CpuList, IrqClass, NodeSnapshot};
use crate::probe::fsroot::FsRoot;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const VERSION: u32 = 1;
/// The most the record may hold: a few hundred interrupts per node in practice.
const RECORD_LIMIT: u64 = 4 << 20;
/// The most interrupts it may name (the kernel's NR_IRQS tops out in the tens of thousands).
const MAX_IRQS: usize = 65_536;
/// An affinity list as the kernel prints it is short; a NIC or vector name is too.
const MAX_FIELD: usize = 4096;

/// The record: `/etc/topo-tune/irq-pin.before.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Before {
    pub(crate) version: u32,
    /// IRQ → what it was before topo-tune first moved it (an IRQ listed twice is refused:
    /// JSON's last-one-wins would obey whichever came second).
    #[serde(deserialize_with = "unique_irqs")]
    pub(crate) irqs: BTreeMap<u32, BeforeIrq>,
    /// irqbalance's config before topo-tune first banned mlx5 in it (absent: never touched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) irqbalance: Option<IrqbalanceBefore>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BeforeIrq {
    pub(crate) nic: String,
    /// Its action name in /proc/interrupts (`mlx5_comp3@pci:0000:17:00.0`): with `pci`, the
    /// interrupt's identity. A driver reload gives its number to another device; a restore
    /// writes only where both still hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    /// The NIC's PCI function, whose `msi_irqs/` lists the interrupt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pci: Option<String>,
    pub(crate) class: IrqClass,
    /// `smp_affinity_list` byte for byte as read (`0-191\n`).
    pub(crate) affinity_list: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IrqbalanceBefore {
    /// One of irqbalance's config paths.
    pub(crate) config: String,
    /// Its text; `None`: the file did not exist.
    pub(crate) text: Option<String>,
}

fn bad(tree: &Tree, why: impl std::fmt::Display) -> IrqError {
    IrqError::Io {
        what: format!("{}: {why}; nothing was changed", tree.show(IRQ_BEFORE)),
        source: std::io::ErrorKind::InvalidData.into(),
    }
}

/// `irqs` with every IRQ once.
fn unique_irqs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<u32, BeforeIrq>, D::Error> {
    struct Irqs;
    impl<'de> serde::de::Visitor<'de> for Irqs {
        type Value = BTreeMap<u32, BeforeIrq>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("IRQ numbers, each once")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((irq, entry)) = m.next_entry::<u32, BeforeIrq>()? {
                if out.insert(irq, entry).is_some() {
                    return Err(serde::de::Error::custom(format!("IRQ {irq} is listed twice")));
                }
            }
            Ok(out)
        }
    }
    d.deserialize_map(Irqs)
}

/// The record, read bounded and checked (a record that is not topo-tune's is refused, never
/// obeyed); `None` when there is none. Like a rollout record, it is obeyed only when root
/// (or the user running, for a tree of one's own) owns it and nobody else may write it.
pub(crate) fn load(tree: &Tree) -> Result<Option<Before>, IrqError> {
    if let Some((uid, mode)) = tree.owner_mode(IRQ_BEFORE)? {
        let me = rustix::process::geteuid().as_raw();
        if uid != 0 && uid != me {
            return Err(bad(
                tree,
                format!("owned by uid {uid}, not by root: a record is obeyed as root wrote it"),
            ));
        }
        if mode & 0o022 != 0 {
            return Err(bad(
                tree,
                format!(
                    "writable by group or others (mode {:04o}): a record anyone could write is not obeyed (chmod go-w)",
                    mode & 0o7777
                ),
            ));
        }
    }
    let Some(text) = tree.read_text(IRQ_BEFORE, RECORD_LIMIT)? else {
        return Ok(None);
    };
    let before: Before = serde_json::from_str(&text).map_err(|e| bad(tree, e))?;
    check(&before).map_err(|why| bad(tree, why))?;
    Ok(Some(before))
}

/// Why a record is not one topo-tune wrote.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadRecord(String);

fn check(b: &Before) -> Result<(), BadRecord> {
    let no = |why: String| Err(BadRecord(why));
    if b.version != VERSION {
        return no(format!(
            "version {} is not {VERSION}, the one this topo-tune writes",
            b.version
        ));
    }
    if b.irqs.len() > MAX_IRQS {
        return no(format!("{} interrupts, more than {MAX_IRQS}", b.irqs.len()));
    }
    let plain = |s: &str| s.len() <= MAX_FIELD && !s.chars().any(|c| c.is_control() && c != '\n');
    for (irq, i) in &b.irqs {
        if !plain(&i.nic) || !i.name.as_deref().is_none_or(plain) {
            return no(format!("IRQ {irq}: a NIC or vector name that is not plain text"));
        }
        if i.pci
            .as_deref()
            .is_some_and(|p| p.parse::<crate::model::Bdf>().is_err())
        {
            return no(format!("IRQ {irq}: {:?} is not a PCI address", i.pci));
        }
        let list = i.affinity_list.trim();
        if !plain(&i.affinity_list) || CpuList::parse(list).map_or(true, |l| l.is_empty()) {
            return no(format!("IRQ {irq}: {:?} is not a CPU list", i.affinity_list));
        }
    }
    if let Some(ib) = &b.irqbalance {
        if !IRQBALANCE_CONFIGS.contains(&ib.config.as_str()) {
            return no(format!(
                "irqbalance.config {:?} is not one of irqbalance's config files ({})",
                ib.config,
                IRQBALANCE_CONFIGS.join(", ")
            ));
        }
        if ib
            .text
            .as_ref()
            .is_some_and(|t| t.len() as u64 > irqbalance::CONFIG_LIMIT)
        {
            return no("irqbalance.text is larger than an irqbalance config may be".into());
        }
    }
    Ok(())
}

/// Before anything moves: each interrupt the plan moves, as it is now, unless the record
/// already holds it; and irqbalance's config when it is about to be banned (`ban`) and the
/// record does not hold it yet. Written through the safe writer, only when it grows.
pub(crate) fn remember(fs: &FsRoot, snap: &NodeSnapshot, plan: &IrqPlan, ban: Option<&str>) -> Result<(), IrqError> {
    let tree = Tree::open(fs.root())?;
    let mut before = load(&tree)?.unwrap_or(Before {
        version: VERSION,
        ..Before::default()
    });
    let pci_of = |nic: &str| {
        snap.nics
            .iter()
            .find(|n| n.name == nic)
            .and_then(|n| n.pci.as_ref())
            .map(|p| p.bdf.to_string())
    };
    // A record of an older topo-tune has the action name but no PCI function: the same name
    // on the same number now is the same interrupt, and its NIC is known (the writer writes
    // only when this changes the record).
    for pin in &plan.pins {
        if let Some(old) = before.irqs.get_mut(&pin.irq) {
            if old.pci.is_none() && old.name.is_some() && old.name == pin.name {
                old.pci = pci_of(&pin.nic);
            }
        }
    }
    for pin in plan.pins.iter().filter(|p| p.action == PinAction::Set) {
        if before.irqs.contains_key(&pin.irq) {
            continue;
        }
        let Some(now) = fs.read(&affinity_path(pin.irq)) else {
            continue;
        };
        before.irqs.insert(
            pin.irq,
            BeforeIrq {
                nic: pin.nic.clone(),
                name: pin.name.clone(),
                pci: pci_of(&pin.nic),
                class: pin.class,
                affinity_list: now,
            },
        );
    }
    if let (Some(config), None) = (ban, &before.irqbalance) {
        before.irqbalance = Some(IrqbalanceBefore {
            config: config.to_string(),
            text: tree.read_text(config, irqbalance::CONFIG_LIMIT)?,
        });
    }
    if before.irqs.is_empty() && before.irqbalance.is_none() {
        return Ok(());
    }
    let text = serde_json::to_string_pretty(&before).map_err(|e| IrqError::Io {
        what: format!("serialising {IRQ_BEFORE}"),
        source: e.into(),
    })? + "\n";
    tree.write(IRQ_BEFORE, text.as_bytes(), 0o644)?;
    Ok(())
}

fn affinity_path(irq: u32) -> String {
    format!("/proc/irq/{irq}/smp_affinity_list")
}

/// What a restore did (or, in a dry run, would do).
pub(crate) struct Restored {
    pub(crate) plan: IrqPlan,
    pub(crate) notes: Vec<String>,
    pub(crate) changed: bool,
    pub(crate) msg: String,
}

/// Put back what the record holds: each interrupt's affinity (read back to check), irqbalance's
/// config (and restart it), and take away the boot unit and the pins' memory, which would
/// otherwise pin again at boot and have `doctor` call the restored interrupts undone.
pub(crate) fn restore(fs: &FsRoot, dry_run: bool, sys: &dyn System) -> Result<Restored, IrqError> {
    let tree = Tree::open(fs.root())?;
    let Some(before) = load(&tree)? else {
        return Ok(Restored {
            plan: IrqPlan {
                reserved: CpuList::default(),
                pins: Vec::new(),
                notes: Vec::new(),
            },
            notes: Vec::new(),
            changed: false,
            msg: format!(
                "nothing to restore: {} records no interrupt irq-pin moved here",
                tree.show(IRQ_BEFORE)
            ),
        });
    };
    let names = fs
        .read("/proc/interrupts")
        .and_then(|t| crate::probe::procfs::Interrupts::parse(&t).ok());
    let mut pins: Vec<IrqPin> = before
        .irqs
        .iter()
        .map(|(irq, b)| match not_the_same(fs, names.as_ref(), *irq, b) {
            Some(why) => left(*irq, b, why),
            None => planned(fs, *irq, b),
        })
        .collect();
    if !dry_run && !sys.is_root() && pins.iter().any(|p| p.action == PinAction::Set) {
        return Err(IrqError::NotRoot);
    }
    let mut notes = Vec::new();
    let mut changed = false;
    if !dry_run {
        for (pin, b) in pins.iter_mut().zip(before.irqs.values()) {
            put_back(fs, pin, b);
        }
        changed |= pins.iter().any(|p| p.action == PinAction::Set);
    }
    if let Some(ib) = &before.irqbalance {
        changed |= restore_irqbalance(&tree, ib, dry_run, sys, &mut notes)?;
    }
    if !dry_run {
        changed |= forget(&tree, sys, &mut notes)?;
    }
    let msg = restore_summary(&pins, dry_run);
    Ok(Restored {
        plan: IrqPlan {
            reserved: CpuList::default(),
            pins,
            notes: Vec::new(),
        },
        notes,
        changed,
        msg,
    })
}

/// Why the interrupt numbered `irq` now is not the one recorded: another action name in
/// /proc/interrupts (a driver reload gave the number to an NVMe queue), no longer an MSI vector
/// of the recorded NIC's PCI function, or no identity to hold it to (a record of an older
/// topo-tune, or one made by hand: IRQ 1 is no NIC's). `None`: the same interrupt.
fn not_the_same(
    fs: &FsRoot,
    names: Option<&crate::probe::procfs::Interrupts>,
    irq: u32,
    b: &BeforeIrq,
) -> Option<String> {
    let (Some(name), Some(pci)) = (&b.name, &b.pci) else {
        return Some("the record gives no action name and PCI function to know it by".into());
    };
    let Some(names) = names else {
        return Some("/proc/interrupts cannot be read: which device has the number now is unknown".into());
    };
    let now = names.rows.get(&irq).and_then(|r| r.name.as_deref());
    if now != Some(name.as_str()) {
        return Some(format!("now {}", now.unwrap_or("nameless")));
    }
    if !fs.exists(&format!("/sys/bus/pci/devices/{pci}/msi_irqs/{irq}")) {
        return Some(format!("no longer an MSI vector of {pci}"));
    }
    None
}

/// An interrupt the restore does not touch, and why.
fn left(irq: u32, b: &BeforeIrq, why: String) -> IrqPin {
    IrqPin {
        nic: b.nic.clone(),
        irq,
        name: b.name.clone(),
        class: b.class,
        // Whatever the number now carries is not the recorded interrupt's affinity.
        current: None,
        target: CpuList::parse(b.affinity_list.trim()).ok(),
        action: PinAction::Leave,
        reason: format!("left: {why}"),
    }
}

/// One interrupt's row: `Set` when it is not where the record says, `Keep` when it is,
/// `Leave` when the interrupt is gone (a driver reload renumbers them).
fn planned(fs: &FsRoot, irq: u32, b: &BeforeIrq) -> IrqPin {
    let was = CpuList::parse(b.affinity_list.trim()).ok();
    let now = fs.read(&affinity_path(irq));
    let current = now.as_deref().and_then(|t| CpuList::parse(t.trim()).ok());
    let (action, reason) = match &now {
        None => (
            PinAction::Leave,
            format!("IRQ {irq} is gone (the driver was reloaded?): nothing to put back"),
        ),
        Some(_) if current == was => (PinAction::Keep, "as recorded before irq-pin moved it".into()),
        Some(_) => (
            PinAction::Set,
            format!("back to {} as before irq-pin moved it", b.affinity_list.trim()),
        ),
    };
    IrqPin {
        nic: b.nic.clone(),
        irq,
        name: b.name.clone(),
        class: b.class,
        current,
        target: was,
        action,
        reason,
    }
}

/// Write the recorded bytes back and read them again.
fn put_back(fs: &FsRoot, pin: &mut IrqPin, b: &BeforeIrq) {
    if pin.action != PinAction::Set {
        return;
    }
    let path = affinity_path(pin.irq);
    if let Err(e) = fs.write_existing(&path, &b.affinity_list) {
        pin.action = if super::is_unsupported_error(&e) {
            PinAction::Unsupported
        } else {
            PinAction::Failed
        };
        pin.reason = format!("writing {}: {e}", fs.path(&path).display());
        return;
    }
    let back = fs.read(&path).and_then(|t| CpuList::parse(t.trim()).ok());
    if back != pin.target {
        pin.action = PinAction::Failed;
        pin.reason = format!(
            "wrote {}, the kernel kept {}",
            b.affinity_list.trim(),
            back.map_or("?".into(), |l| l.to_string())
        );
    } else {
        pin.current = back;
    }
}

fn restore_irqbalance(
    tree: &Tree,
    ib: &IrqbalanceBefore,
    dry_run: bool,
    sys: &dyn System,
    notes: &mut Vec<String>,
) -> Result<bool, IrqError> {
    let now = tree.read_text(&ib.config, irqbalance::CONFIG_LIMIT)?;
    if now == ib.text {
        return Ok(false);
    }
    if dry_run {
        notes.push(format!(
            "irqbalance: {} would be put back as it was before irq-pin banned mlx5",
            ib.config
        ));
        return Ok(false);
    }
    match &ib.text {
        Some(text) => tree.write(&ib.config, text.as_bytes(), 0o644)?,
        None => tree.remove(&ib.config)?,
    };
    tree.remove(&format!("{}.topo-tune.bak", ib.config))?;
    let restart = super::system::restart_irqbalance(sys);
    notes.push(format!(
        "irqbalance: {} put back as it was before irq-pin banned mlx5; {restart}",
        ib.config
    ));
    Ok(true)
}

/// The pins' memory and the boot unit go: nothing pins again at boot, and `doctor` no
/// longer holds the interrupts to topo-tune's pins.
fn forget(tree: &Tree, sys: &dyn System, notes: &mut Vec<String>) -> Result<bool, IrqError> {
    let mut changed = tree.remove(IRQ_STATE)?;
    if tree.read(IRQ_UNIT, 1 << 20)?.is_some() {
        if sys.systemctl(&["disable", IRQ_UNIT_NAME]) == Some(false) {
            notes.push(format!(
                "disabling {IRQ_UNIT_NAME} FAILED: run `systemctl disable {IRQ_UNIT_NAME}`"
            ));
        }
        tree.remove(IRQ_UNIT)?;
        tree.remove(IRQ_UDEV_RULE)?;
        sys.systemctl(&["daemon-reload"]);
        notes.push(format!(
            "removed {IRQ_UNIT_NAME} and its udev rule: nothing pins again at boot"
        ));
        changed = true;
    }
    Ok(changed)
}

fn restore_summary(pins: &[IrqPin], dry_run: bool) -> String {
    let count = |a: PinAction| pins.iter().filter(|p| p.action == a).count();
    let (set, keep) = (count(PinAction::Set), count(PinAction::Keep));
    let left = pins
        .iter()
        .filter(|p| p.action == PinAction::Leave && p.reason.starts_with("left: "))
        .count();
    let gone = count(PinAction::Leave) - left;
    let left = format!("{left} left (another interrupt has the number now)");
    if dry_run {
        return format!("dry run: restore: {set} to put back, {keep} already as recorded, {left}, {gone} gone");
    }
    let failed = count(PinAction::Failed) + count(PinAction::Unsupported);
    format!("restore: {set} put back, {keep} already as recorded, {left}, {gone} gone, {failed} failed")
}
