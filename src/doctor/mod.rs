//! `topo-tune doctor`: every fault a node can show without running traffic that makes NCCL
//! silently slower — interrupts, PCIe, NUMA, GPUDirect RDMA, RDMA ports, NVLink, the NVSwitch
//! and multi-node NVLink fabric, settings that turn a fast path off, process limits, ACS and
//! the IOMMU — each one registered check with a status, its evidence and the fix. Checks read
//! `/sys`, `/proc`, `/etc` and `/dev` under the node's root (`--fsroot` for a tree) and the
//! driver's facts through the snapshot; none raises an error: a file it cannot use is that
//! check's `skip` or finding, never a crash.

pub(crate) mod answer;
pub(crate) mod conf;
pub(crate) mod consistency;
mod disablers;
mod drift;
mod fabric;
mod facts;
mod finding;
mod gdr;
mod gpu;
mod ib;
mod irq;
mod limits;
mod numa;
mod pcie;
mod tuner;

pub(crate) use finding::{Check, Finding, Status};

use crate::model::snapshot::{IrqClass, NodeSnapshot};
use crate::model::{CpuList, NcclVersion};
use crate::probe::fsroot::FsRoot;
use facts::Facts;
use serde::{Deserialize, Serialize};

/// What `doctor` is asked on a node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct DoctorRequest {
    pub(crate) reserved: CpuList,
    /// The NCCL jobs use, where the node's loader finds none (NCCL inside a Python wheel):
    /// `--nccl-version`, or cluster.yaml's `nccl_version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nccl_version: Option<NcclVersion>,
}

/// One registered check: its id (the table's and the JSON's `check`), what it looks at, what
/// a failing one means as the cause of a slow node (for `diagnose`), and the function that
/// looks. The function returns at most one finding and never names its check.
pub(crate) struct CheckDef {
    pub(crate) id: &'static str,
    /// Where its cause comes among causes, 0 most telling: a node slow for several reasons is
    /// named by the most telling.
    rank: usize,
    pub(crate) title: &'static str,
    pub(crate) cause: &'static str,
    run: fn(&Facts) -> Option<Finding>,
}

const fn def(
    id: &'static str,
    rank: usize,
    title: &'static str,
    cause: &'static str,
    run: fn(&Facts) -> Option<Finding>,
) -> CheckDef {
    CheckDef {
        id,
        rank,
        title,
        cause,
        run,
    }
}

/// Every check, in the order of the table.
/// The ids of every check, in table order (what a node's answer may hold).
pub(crate) fn check_ids() -> Vec<&'static str> {
    CHECKS.iter().map(|c| c.id).collect()
}

pub(crate) const CHECKS: &[CheckDef] = &[
    def(
        "gpu-xid",
        0,
        "no Xid error since boot",
        "a GPU that logged a hardware Xid",
        gpu::gpu_xid,
    ),
    def(
        "gpu-memory",
        1,
        "no uncorrectable ECC error, no memory repair pending",
        "GPU memory with uncorrectable errors or a repair pending",
        gpu::gpu_memory,
    ),
    def(
        "gpu-clocks",
        2,
        "no thermal, power or hardware clock slowdown",
        "a GPU held down by a thermal, power or hardware slowdown",
        gpu::gpu_clocks,
    ),
    def(
        "mlx5-irq-placement",
        10,
        "where NIC completion interrupts are aimed",
        "NIC interrupts piled on few CPUs",
        irq::irq_placement,
    ),
    def(
        "mlx5-irq-load",
        11,
        "NIC interrupt load since boot",
        "NIC interrupt load on one CPU",
        irq::irq_load,
    ),
    def(
        "irq-pins",
        12,
        "irq-pin's pins still in place",
        "NIC interrupts not where they were pinned",
        irq::irq_pins,
    ),
    def(
        "irqbalance",
        13,
        "irqbalance leaves NIC interrupts alone",
        "irqbalance moving NIC interrupts",
        irq::irqbalance,
    ),
    def(
        "pcie-link",
        9,
        "PCIe links at full width and speed",
        "a degraded PCIe link",
        pcie::pcie_link,
    ),
    def(
        "gpu-nic-numa",
        14,
        "each GPU has an RDMA NIC on its socket",
        "GPUs far from their NIC",
        numa::gpu_nic_numa,
    ),
    def(
        "numa-known",
        17,
        "NUMA nodes known",
        "NUMA nodes unknown",
        numa::numa_known,
    ),
    def("gdr", 3, "GPUDirect RDMA", "GPUDirect RDMA off", gdr::gdr),
    def(
        "ib-ports",
        4,
        "RDMA ports up, at full rate, with a RoCE v2 GID",
        "an RDMA port down or downtrained",
        ib::ib_ports,
    ),
    def("nvlink-links", 5, "NVLinks up", "NVLinks down", fabric::nvlink_links),
    def(
        "fabric",
        6,
        "NVSwitch and multi-node NVLink fabric ready",
        "the NVLink fabric not ready",
        fabric::fabric,
    ),
    def(
        "nccl-disablers",
        7,
        "no setting turns a fast path off",
        "a setting turns a fast path off",
        disablers::nccl_disablers,
    ),
    def(
        "limits",
        16,
        "memlock and stack limits",
        "process limits RDMA needs",
        limits::limits,
    ),
    def(
        "acs",
        8,
        "ACS does not redirect GPU–NIC traffic",
        "ACS redirects GPU–NIC traffic through the root complex",
        pcie::acs,
    ),
    def(
        "iommu",
        15,
        "no IOMMU translation on the GPU–NIC path",
        "IOMMU translation on the GPU–NIC path",
        pcie::iommu,
    ),
    def(
        "nccl-config",
        18,
        "/etc/nccl.conf as topo-tune wrote it",
        "NCCL's config changed by hand",
        drift::nccl_config,
    ),
    def(
        "nccl-tuner",
        19,
        "the tuner plugin NCCL is told to load, and its rules",
        "a tuner plugin or rules file NCCL cannot use",
        tuner::nccl_tuner,
    ),
    def(
        consistency::CHECK,
        20,
        "the same NCCL, driver, CUDA, kernel and NIC firmware as its class",
        "another NCCL, driver, CUDA, kernel or NIC firmware than its class",
        consistency::on_one_node,
    ),
];

/// Every check by id and what it looks at, in table order (`doctor --help`).
pub(crate) fn checks_help() -> String {
    let width = CHECKS.iter().map(|c| c.id.len()).max().unwrap_or(0);
    let mut out = String::from("Checks, in the order of the table (docs/doctor.md has each in full):\n");
    for c in CHECKS {
        out.push_str(&format!("  {:width$}  {}\n", c.id, c.title));
    }
    out.push_str(
        "\nExit codes: 0 nothing failed (warnings allowed); 5 a check failed; 4 some nodes could not be\nchecked, 8 none could (a node only on paper is skipped, neither).\n",
    );
    out
}

/// A check's cause phrase and its rank among causes (unknown checks last).
pub(crate) fn cause(check: &str) -> (usize, &'static str) {
    CHECKS
        .iter()
        .find(|c| c.id == check)
        .map_or((CHECKS.len(), "a failing check"), |c| (c.rank, c.cause))
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
        settings: conf::nccl_settings(fs),
        vm: facts::is_vm(fs),
    };
    CHECKS
        .iter()
        .filter_map(|c| (c.run)(&facts).map(|f| Check::of(c.id, f)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_has_one_id_a_title_and_a_ranked_cause() {
        let mut ids: Vec<&str> = CHECKS.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), CHECKS.len(), "a check id registered twice");
        let mut ranks: Vec<usize> = CHECKS.iter().map(|c| c.rank).collect();
        ranks.sort_unstable();
        assert_eq!(
            ranks,
            (0..CHECKS.len()).collect::<Vec<_>>(),
            "each cause has its own rank"
        );
        for c in CHECKS {
            assert!(
                !c.title.is_empty() && !c.cause.is_empty(),
                "{} lacks a title or cause",
                c.id
            );
        }
        assert!(
            cause("gdr").0 < cause("mlx5-irq-load").0,
            "GPUDirect RDMA is named first"
        );
        assert_eq!(cause("no-such-check"), (CHECKS.len(), "a failing check"));
    }

    #[test]
    fn the_schema_and_the_docs_name_every_check() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/schema/doctor.schema.json")).unwrap();
        let text = schema.to_string();
        let listed: Vec<&str> = CHECKS.iter().map(|c| c.id).collect();
        let want = format!("\"check\":{{\"enum\":{}}}", serde_json::to_string(&listed).unwrap());
        assert!(text.contains(&want), "doctor.schema.json's check enum is not {want}");
        let doc = include_str!("../../docs/doctor.md");
        for c in CHECKS {
            let heading = format!("### `{}` — {}\n", c.id, c.title);
            assert!(doc.contains(&heading), "docs/doctor.md has no section {heading:?}");
        }
    }
}
