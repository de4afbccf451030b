//! mlx5 NIC interrupts: discover, plan, apply, verify (research/irq.md).
//!
//! Completion vectors go to CPUs local to the NIC (its NUMA node; `local_cpulist` when the
//! node is unknown), never to reserved training CPUs or their hyper-thread siblings, one IRQ
//! per physical core, round-robin when there are more IRQs than cores. Control vectors stay
//! where they are unless asked. The plan is deterministic: the same machine and options give
//! the same plan. Everything reads and writes through an [`FsRoot`] (`/` or `--fsroot`).

pub(crate) mod irqbalance;
pub(crate) mod pin;
pub(crate) mod restore;
pub(crate) mod system;

use crate::model::snapshot::{IrqClass, Nic, NodeSnapshot};
use crate::model::CpuList;
use crate::probe::fsroot::FsRoot;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Which CPUs share a physical core.
#[derive(Debug, Clone, Default)]
pub(crate) struct CpuTopology {
    pub(crate) online: CpuList,
    /// CPU → the lowest-numbered thread of its core.
    pub(crate) core_of: BTreeMap<u32, u32>,
    /// CPU → all threads of its core.
    pub(crate) siblings: BTreeMap<u32, CpuList>,
}

/// The CPUs that exist and which threads share a core. `online` must read as a CPU list
/// (garbage, or ids beyond any machine, stop irq-pin rather than drop the SMT-sibling rule);
/// a tree without it (a hand-built `--fsroot`) falls back to the snapshot's CPUs.
pub(crate) fn read_cpu_topology(fs: &FsRoot, snap: &NodeSnapshot) -> Result<CpuTopology, IrqError> {
    const ONLINE: &str = "/sys/devices/system/cpu/online";
    let online = match fs.read_required(ONLINE) {
        Ok(text) => CpuList::parse(&text).map_err(|e| IrqError::BadCpus {
            what: fs.path(ONLINE).display().to_string(),
            reason: e.to_string(),
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => snap.cpu.cpus.clone(),
        Err(e) => {
            return Err(IrqError::BadCpus {
                what: fs.path(ONLINE).display().to_string(),
                reason: e.to_string(),
            })
        }
    };
    let mut topo = CpuTopology {
        online: online.clone(),
        ..CpuTopology::default()
    };
    for cpu in online.iter() {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let sib = fs
            .read(&format!("{base}/core_cpus_list"))
            .or_else(|| fs.read(&format!("{base}/thread_siblings_list")))
            .and_then(|s| CpuList::parse(&s).ok())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| CpuList::from_ids([cpu]));
        topo.core_of.insert(cpu, sib.iter().next().unwrap_or(cpu));
        topo.siblings.insert(cpu, sib);
    }
    Ok(topo)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PinAction {
    /// Will be (or was) written.
    Set,
    /// Already where the plan puts it.
    Keep,
    /// The kernel does not let user space move it (managed IRQ).
    Unsupported,
    /// A control vector, left alone.
    Leave,
    /// The write failed.
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IrqPin {
    pub(crate) nic: String,
    pub(crate) irq: u32,
    pub(crate) name: Option<String>,
    pub(crate) class: IrqClass,
    pub(crate) current: Option<CpuList>,
    pub(crate) target: Option<CpuList>,
    pub(crate) action: PinAction,
    pub(crate) reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IrqPlan {
    pub(crate) reserved: CpuList,
    pub(crate) pins: Vec<IrqPin>,
    pub(crate) notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum IrqError {
    #[error("{nic}: every CPU local to it ({local}) is reserved for training (with hyper-thread siblings: {blocked}); nowhere local to put its interrupts — shrink the reserved set")]
    NoLocalCpus {
        nic: String,
        local: String,
        blocked: String,
    },
    #[error("moving interrupts needs root (or run with --dry-run to see the plan)")]
    NotRoot,
    #[error(transparent)]
    Probe(#[from] crate::probe::ProbeError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error(transparent)]
    Write(#[from] crate::apply::tree::TreeError),
    #[error("{what}: {reason}: irq-pin cannot tell which CPUs exist, so it moves nothing")]
    BadCpus { what: String, reason: String },
    #[error("refused: the plan would put IRQ {irq} on CPU(s) {cpus}, which are reserved or do not exist (a bug in topo-tune; nothing was moved)")]
    Unsafe { irq: u32, cpus: String },
    #[error("--reserve-cpus {reserved}: CPU(s) {missing} do not exist on this machine (online: {online}); nothing was changed")]
    ReservedOutside {
        reserved: String,
        missing: String,
        online: String,
    },
}

impl crate::exit::Classify for IrqError {
    fn classify(&self) -> crate::exit::Class {
        use crate::exit::{self, Class};
        match self {
            IrqError::NotRoot => {
                Class::new(exit::NO_PERMISSION, "not_root").hint("run as root (sudo), or add --dry-run to see the plan")
            }
            IrqError::Probe(p) => p.classify(),
            IrqError::Io { .. } => Class::new(exit::IO_ERROR, "irq"),
            IrqError::Write(t) => Class::new(t.classify().code, "irq"),
            IrqError::BadCpus { .. } => Class::new(exit::DATA_ERROR, "irq"),
            IrqError::Unsafe { .. } => Class::new(exit::FAILURE, "irq"),
            IrqError::NoLocalCpus { .. } => Class::new(exit::DATA_ERROR, "irq")
                .hint("reserve fewer CPUs (--reserve-cpus or cluster.yaml reserved_cpus)"),
            IrqError::ReservedOutside { .. } => Class::new(exit::USAGE, "irq"),
        }
    }
}

/// The reserved CPUs must exist: a list meant for another machine type is an error, not a
/// reservation of nothing.
pub(crate) fn check_reserved(topo: &CpuTopology, reserved: &CpuList) -> Result<(), IrqError> {
    let missing: Vec<u32> = reserved.iter().filter(|c| !topo.online.contains(*c)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(IrqError::ReservedOutside {
        reserved: reserved.to_string(),
        missing: CpuList::from_ids(missing.iter().copied()).to_string(),
        online: topo.online.to_string(),
    })
}

/// Does the NIC own mlx5 interrupts?
pub(crate) fn is_mlx5(n: &Nic) -> bool {
    n.driver.as_deref() == Some("mlx5_core")
        || n.irqs
            .iter()
            .any(|i| i.name.as_deref().is_some_and(|x| x.starts_with("mlx5_")))
}

/// `managed(irq)`: the kernel refuses user moves (`smp_affinity_list` is 0444 from 6.12).
pub(crate) fn plan(
    snap: &NodeSnapshot,
    topo: &CpuTopology,
    reserved: &CpuList,
    include_control: bool,
    managed: &dyn Fn(u32) -> bool,
) -> Result<IrqPlan, IrqError> {
    let blocked = with_siblings(reserved, topo);
    let mut nics: Vec<&Nic> = snap.nics.iter().filter(|n| is_mlx5(n)).collect();
    nics.sort_by_key(|n| crate::model::natural_key(&n.name));
    let mut notes = Vec::new();
    let mut cursors: HashMap<String, usize> = HashMap::new();
    let mut pins = Vec::new();
    for nic in nics {
        let Some(p) = &nic.pci else { continue };
        let (local, key) = local_cpus(snap, &nic.name, p, &mut notes);
        let candidates: Vec<u32> = local
            .iter()
            .filter(|c| topo.online.is_empty() || topo.online.contains(*c))
            .filter(|c| !blocked.contains(*c))
            .collect();
        let cores = one_thread_per_core(&candidates, topo);
        let mut irqs: Vec<&crate::model::Irq> = nic.irqs.iter().collect();
        irqs.sort_by_key(|i| i.irq);
        if cores.is_empty() && irqs.iter().any(|i| i.class == IrqClass::Completion) {
            return Err(IrqError::NoLocalCpus {
                nic: nic.name.clone(),
                local: local.to_string(),
                blocked: blocked.to_string(),
            });
        }
        for i in irqs {
            let (target, reason) = match i.class {
                IrqClass::Completion => {
                    let cur = cursors.entry(key.clone()).or_insert(0);
                    let cpu = cores[*cur % cores.len()];
                    *cur += 1;
                    (
                        Some(CpuList::from_ids([cpu])),
                        format!(
                            "completion vector: core of CPU {cpu}, local to {} ({key}), not reserved",
                            nic.name
                        ),
                    )
                }
                _ if include_control => (
                    Some(CpuList::from_ids(candidates.iter().copied())),
                    "control vector: the NIC-local, non-reserved CPUs".to_string(),
                ),
                _ => (None, "control vector: left alone".to_string()),
            };
            pins.push(pin(&nic.name, i, target, reason, managed));
        }
    }
    let plan = IrqPlan {
        reserved: reserved.clone(),
        pins,
        notes,
    };
    verify(&plan, topo, &blocked)?;
    Ok(plan)
}

/// The reserved CPUs and their hyperthread siblings: no interrupt goes to either.
fn with_siblings(reserved: &CpuList, topo: &CpuTopology) -> CpuList {
    let mut blocked = reserved.clone();
    for cpu in reserved.iter() {
        if let Some(s) = topo.siblings.get(&cpu) {
            blocked = blocked.union(s);
        }
    }
    blocked
}

/// A NIC's local CPUs (its NUMA node's, else its own `local_cpulist`, said in a note) and the
/// key vectors are spread under (NICs of one NUMA node share the round-robin).
fn local_cpus(
    snap: &NodeSnapshot,
    nic: &str,
    p: &crate::model::PciPlacement,
    notes: &mut Vec<String>,
) -> (CpuList, String) {
    match p.numa_node.and_then(|n| snap.numa_nodes.iter().find(|x| x.id == n)) {
        Some(node) => (node.cpus.clone(), format!("node{}", node.id)),
        None => {
            notes.push(format!(
                "{nic}: NUMA node unknown (numa_node = -1): using its local_cpulist {}",
                p.cpu_affinity
            ));
            (p.cpu_affinity.clone(), format!("cpus{}", p.cpu_affinity))
        }
    }
}

/// One thread per physical core: the lowest candidate of each core.
fn one_thread_per_core(candidates: &[u32], topo: &CpuTopology) -> Vec<u32> {
    let mut per_core: BTreeMap<u32, u32> = BTreeMap::new();
    for c in candidates {
        let core = topo.core_of.get(c).copied().unwrap_or(*c);
        per_core.entry(core).or_insert(*c);
    }
    per_core.values().copied().collect()
}

/// What happens to one interrupt given its target.
fn pin(
    nic: &str,
    i: &crate::model::Irq,
    target: Option<CpuList>,
    reason: String,
    managed: &dyn Fn(u32) -> bool,
) -> IrqPin {
    let action = match &target {
        None => PinAction::Leave,
        Some(_) if managed(i.irq) => PinAction::Unsupported,
        Some(t) if i.affinity.as_ref() == Some(t) => PinAction::Keep,
        Some(_) => PinAction::Set,
    };
    let reason = if action == PinAction::Unsupported {
        "managed by the kernel (smp_affinity_list is read-only): cannot be moved from user space".to_string()
    } else {
        reason
    };
    IrqPin {
        nic: nic.to_string(),
        irq: i.irq,
        name: i.name.clone(),
        class: i.class,
        current: i.affinity.clone(),
        target,
        action,
        reason,
    }
}

/// The one promise, checked on the finished plan whatever the input: no interrupt goes to a
/// reserved CPU, a sibling of one, or a CPU that does not exist.
fn verify(plan: &IrqPlan, topo: &CpuTopology, blocked: &CpuList) -> Result<(), IrqError> {
    for p in plan
        .pins
        .iter()
        .filter(|p| matches!(p.action, PinAction::Set | PinAction::Keep))
    {
        let Some(t) = &p.target else { continue };
        let bad: Vec<u32> = t
            .iter()
            .filter(|c| blocked.contains(*c) || (!topo.online.is_empty() && !topo.online.contains(*c)))
            .collect();
        if !bad.is_empty() {
            return Err(IrqError::Unsafe {
                irq: p.irq,
                cpus: CpuList::from_ids(bad).to_string(),
            });
        }
    }
    Ok(())
}

/// Is the IRQ's affinity file read-only (kernel-managed, 6.12+)?
pub(crate) fn is_managed(fs: &FsRoot, irq: u32) -> bool {
    fs.mode(&format!("/proc/irq/{irq}/smp_affinity_list"))
        .is_some_and(|m| m & 0o222 == 0)
}

/// Errors that mean "the kernel will not let anyone move this IRQ" (EIO before 6.12, EPERM
/// after; tuned and irqbalance treat them the same way).
pub(crate) fn is_unsupported_error(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(code) if code == 5 || code == 1)
}

/// Write every `Set` pin's `smp_affinity_list`, read it back, and record the outcome.
pub(crate) fn apply(fs: &FsRoot, plan: &mut IrqPlan) {
    for pin in plan.pins.iter_mut().filter(|p| p.action == PinAction::Set) {
        let Some(target) = &pin.target else { continue };
        let path = format!("/proc/irq/{}/smp_affinity_list", pin.irq);
        // List syntax, not hex masks: no width or EOVERFLOW pitfalls (docs/irq.md).
        match fs.write_existing(&path, &format!("{target}\n")) {
            Err(e) if is_unsupported_error(&e) => {
                pin.action = PinAction::Unsupported;
                pin.reason = format!("the kernel refused the move ({e}): managed or not balanceable");
            }
            Err(e) => {
                pin.action = PinAction::Failed;
                pin.reason = format!("writing {}: {e}", fs.path(&path).display());
            }
            Ok(()) => {
                let back = fs
                    .read(&format!("/proc/irq/{}/smp_affinity_list", pin.irq))
                    .and_then(|s| CpuList::parse(&s).ok());
                if back.as_ref() != Some(target) {
                    pin.action = PinAction::Failed;
                    pin.reason = format!(
                        "wrote {target}, the kernel kept {}",
                        back.map_or("?".into(), |b| b.to_string())
                    );
                } else {
                    pin.current = back;
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PinState {
    pub(crate) reserved: CpuList,
    pub(crate) include_control: bool,
    /// IRQ → the CPUs it was pinned to.
    pub(crate) pins: BTreeMap<u32, CpuList>,
}

impl PinState {
    pub(crate) fn of(plan: &IrqPlan, include_control: bool) -> PinState {
        PinState {
            reserved: plan.reserved.clone(),
            include_control,
            pins: plan
                .pins
                .iter()
                .filter(|p| matches!(p.action, PinAction::Set | PinAction::Keep))
                .filter_map(|p| Some((p.irq, p.target.clone()?)))
                .collect(),
        }
    }

    pub(crate) fn load(fs: &FsRoot) -> Option<PinState> {
        fs.read(crate::model::files::IRQ_STATE)
            .and_then(|t| serde_json::from_str(&t).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eio_and_eperm_mean_unsupported() {
        assert!(is_unsupported_error(&std::io::Error::from_raw_os_error(5)));
        assert!(is_unsupported_error(&std::io::Error::from_raw_os_error(1)));
        assert!(
            !is_unsupported_error(&std::io::Error::from_raw_os_error(28)),
            "ENOSPC (APIC vectors full) is a failure"
        );
    }
}
