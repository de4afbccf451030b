//! `topo-tune doctor`: every fault a node can show without running traffic that makes NCCL
//! silently slower — interrupts, PCIe, NUMA, GPUDirect RDMA, RDMA ports, NVLink, the NVSwitch
//! and multi-node NVLink fabric, settings that turn a fast path off, process limits, ACS and
//! the IOMMU — each one registered check with a status, its evidence and the fix. Checks read
//! `/sys`, `/proc`, `/etc` and `/dev` under the node's root (`--fsroot` for a tree) and the
//! driver's facts through the snapshot; none raises an error: a file it cannot use is that
//! check's `skip` or finding, never a crash.

mod disablers;
mod fabric;
mod gdr;
mod ib;
mod irq;
mod limits;
mod pcie;

use crate::model::snapshot::{IrqClass, NodeSnapshot};
use crate::model::{CpuList, NcclVersion, Nic, PathClass};
use crate::probe::fsroot::FsRoot;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Pass,
    Skip,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Check {
    pub(crate) check: String,
    pub(crate) status: Status,
    pub(crate) detail: String,
    pub(crate) fix: String,
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
pub(crate) const SKEW_FACTOR: f64 = 3.0;

/// What `doctor` is asked on a node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct DoctorRequest {
    pub(crate) reserved: CpuList,
    /// The NCCL jobs use, where the node's loader finds none (NCCL inside a Python wheel):
    /// `--nccl-version`, or cluster.yaml's `nccl_version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nccl_version: Option<NcclVersion>,
}

/// What every check looks at.
pub(crate) struct Facts<'a> {
    pub(crate) fs: &'a FsRoot,
    pub(crate) snap: &'a NodeSnapshot,
    pub(crate) reserved: &'a CpuList,
    /// The node's NCCL: what its loader finds, else what the request states.
    nccl: Option<NcclVersion>,
    /// Every mlx5 completion vector: its NIC and the interrupt.
    completion: Vec<(&'a str, &'a crate::model::Irq)>,
    /// The path classes between GPUs and RDMA NICs (`graph::paths::path_classes`).
    classes: Vec<Vec<PathClass>>,
    /// Every `NCCL_*` line of NCCL's config and environment files, and the files that exist
    /// but could not be read — read once for the checks that judge them (`gdr`,
    /// `nccl-disablers`).
    settings: (Vec<disablers::Found>, Vec<String>),
    /// A virtual machine (the CPU's `hypervisor` flag), where ACS and the IOMMU are not the
    /// guest's.
    vm: bool,
}

/// One check: at most one row of the table.
pub(crate) type CheckFn = fn(&Facts) -> Option<Check>;

/// Every check, in the order of the table.
pub(crate) const CHECKS: &[(&str, CheckFn)] = &[
    ("mlx5-irq-placement", irq::irq_placement),
    ("mlx5-irq-load", irq::irq_load),
    ("irq-pins", irq::irq_pins),
    ("irqbalance", irq::irqbalance_check),
    ("pcie-link", irq::pcie_link),
    ("gpu-nic-numa", irq::gpu_nic_numa),
    ("numa-known", irq::numa_known),
    ("gdr", gdr::gdr),
    ("ib-ports", ib::ib_ports),
    ("nvlink-links", fabric::nvlink_links),
    ("fabric", fabric::fabric),
    ("nccl-disablers", disablers::nccl_disablers),
    ("limits", limits::limits),
    ("acs", pcie::acs),
    ("iommu", pcie::iommu),
    ("nccl-config", irq::nccl_config),
];

/// What a failing check means as the cause of a slow node, for `diagnose`'s verdict, most
/// telling first: a node slow for several reasons is named by the first.
pub(crate) const CAUSES: &[(&str, &str)] = &[
    ("gdr", "GPUDirect RDMA off"),
    ("ib-ports", "an RDMA port down or downtrained"),
    ("nvlink-links", "NVLinks down"),
    ("fabric", "the NVLink fabric not ready"),
    ("nccl-disablers", "a setting turns a fast path off"),
    ("acs", "ACS redirects GPU–NIC traffic through the root complex"),
    ("pcie-link", "a degraded PCIe link"),
    ("mlx5-irq-placement", "NIC interrupts piled on few CPUs"),
    ("mlx5-irq-load", "NIC interrupt load on one CPU"),
    ("irq-pins", "NIC interrupts not where they were pinned"),
    ("irqbalance", "irqbalance moving NIC interrupts"),
    ("gpu-nic-numa", "GPUs far from their NIC"),
    ("iommu", "IOMMU translation on the GPU–NIC path"),
    ("limits", "process limits RDMA needs"),
    ("numa-known", "NUMA nodes unknown"),
    ("nccl-config", "NCCL's config changed by hand"),
];

/// A check's cause phrase and its rank among causes (unknown checks last).
pub(crate) fn cause(check: &str) -> (usize, &'static str) {
    CAUSES
        .iter()
        .position(|(c, _)| *c == check)
        .map_or((CAUSES.len(), "a failing check"), |i| (i, CAUSES[i].1))
}

pub(crate) fn run(fs: &FsRoot, snap: &NodeSnapshot, req: &DoctorRequest) -> Vec<Check> {
    let completion = snap
        .nics
        .iter()
        .flat_map(|n| {
            n.irqs
                .iter()
                .filter(|i| i.class == IrqClass::Completion)
                .map(move |i| (n.name.as_str(), i))
        })
        .collect();
    let facts = Facts {
        fs,
        snap,
        reserved: &req.reserved,
        nccl: snap.nccl_version.or(req.nccl_version),
        completion,
        classes: crate::graph::paths::path_classes(snap),
        settings: disablers::nccl_settings(fs),
        vm: is_vm(fs),
    };
    CHECKS.iter().filter_map(|(_, check)| check(&facts)).collect()
}

/// How far from a GPU an RDMA NIC may sit to count as the GPU's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Within PXB: where NCCL uses GPUDirect RDMA by default (`NCCL_NET_GDR_LEVEL`).
    Gdr,
    /// Within PXB, or each GPU's nearest if farther: the NICs NCCL sends GPU traffic on,
    /// whatever state their ports are in.
    Traffic,
}

/// The RDMA NICs within `reach` of some GPU, in the node's order.
fn gpu_nics<'a>(f: &Facts<'a>, reach: Reach) -> Vec<&'a Nic> {
    let gpus = f.snap.gpus.len();
    let nics: Vec<&Nic> = f.snap.matrix_nics().collect();
    let class = |g: usize, n: usize| f.classes.get(g).and_then(|row| row.get(gpus + n)).copied();
    let limit: Vec<Option<PathClass>> = (0..gpus)
        .map(|g| {
            let nearest = (0..nics.len()).filter_map(|n| class(g, n)).min()?;
            match reach {
                Reach::Gdr => Some(PathClass::Pxb),
                Reach::Traffic => Some(nearest.max(PathClass::Pxb)),
            }
        })
        .collect();
    (0..nics.len())
        .filter(|&n| (0..gpus).any(|g| matches!((class(g, n), limit[g]), (Some(c), Some(l)) if c <= l)))
        .map(|n| nics[n])
        .collect()
}

/// The first three of a list, and how many more.
fn few(items: &[String]) -> String {
    match items.len() {
        0..=3 => items.join(", "),
        n => format!("{}, and {} more", items[..3].join(", "), n - 3),
    }
}

/// A configuration file's text: `None` when absent; one that exists but cannot be read (a
/// FIFO, a directory, over 16 MiB, a link out of the tree) is named in `unreadable` with why,
/// so that the check says what it could not see instead of passing on it.
fn read_config(fs: &FsRoot, path: &str, unreadable: &mut Vec<String>) -> Option<String> {
    match fs.read_required(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            unreadable.push(format!("{path}: {e}"));
            None
        }
    }
}

/// Whether the machine is a virtual machine (the `hypervisor` CPU flag the kernel sets for a
/// guest): what is the hypervisor's to set (ACS, the IOMMU) is then skipped, said so.
fn is_vm(fs: &FsRoot) -> bool {
    fs.read("/proc/cpuinfo").is_some_and(|c| {
        c.lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == "hypervisor"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_has_a_cause_and_one_row() {
        for (id, _) in CHECKS {
            assert!(CAUSES.iter().any(|(c, _)| c == id), "{id} has no cause phrase");
        }
        assert_eq!(CHECKS.len(), CAUSES.len());
        assert!(
            cause("gdr").0 < cause("mlx5-irq-load").0,
            "GPUDirect RDMA is named first"
        );
    }

    #[test]
    fn the_schema_and_the_docs_name_every_check() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/schema/doctor.schema.json")).unwrap();
        let text = schema.to_string();
        let listed: Vec<&str> = CHECKS.iter().map(|(id, _)| *id).collect();
        let want = format!("\"check\":{{\"enum\":{}}}", serde_json::to_string(&listed).unwrap());
        assert!(text.contains(&want), "doctor.schema.json's check enum is not {want}");
        let doc = include_str!("../../docs/doctor.md");
        for id in listed {
            assert!(
                doc.contains(&format!("### `{id}`")),
                "docs/doctor.md has no section for {id}"
            );
        }
    }
}
